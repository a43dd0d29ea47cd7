"""The `auto` device's measurement on one input shape, its cache, and the glue the online `auto` shares.

`choose_device(config, feeds, build)` builds one predictor per candidate (the host target, then every NNAdapter
device whose package imports), checks that each gives the host's outputs (<= 1e-4 * max|host|, else the
candidate is refused, never silently used), times them interleaved for a few rounds and keeps the fastest. It is
the fixed-shape measurement: `pdlite run/bench --device auto` and benchmarks/compare.py use it, and so does a
predictor's auto when its stream starts on one shape. A predictor's `set_nnadapter_device_names(["auto"])` decides
call by call on the workload (pdlite/api/auto_online.py, policy in auto_policy.py): new shapes priced, measured
while shapes change.

Measuring on a busy machine: each round runs every candidate once, in a rotated order, as a short block (a pause,
an untimed run, then timed runs for ~BLOCK_MS); a candidate's score is the leader's median block time times the
median over rounds of its block / the leader's block in the same round. Load that comes and goes (other
processes) then slows the candidates of a round alike and cancels out, where separate medians would credit it to
whoever it hit; a close call between the two best is measured again, longer.

The cache: `<cache dir>/auto/choices.json`, the config's NNAdapter model cache dir when set, else
`$XDG_CACHE_HOME/pdlite` (`~/.cache/pdlite`); keyed on the model's content (a digest of its program and weights
files, so a copy of the folder elsewhere hits it), the kind of workload (fixed: with the input shapes; changing),
threads, candidates and device properties. `apply_device(config, name)` points a config at a device.

Variants: a driver may name settings that `choose_device` also measures (`Driver.auto_variants`, e.g. OpenVINO with
its threads pinned to cores) where the config's context properties leave them unset; a variant is measured and
named as `device[variant]` (`AutoChoice.key`), and `apply_device` takes that name.
"""
from __future__ import annotations

import copy
import gc
import hashlib
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pdlite import __version__
from pdlite.api.config import CxxConfig
from pdlite.core.types import Place, PrecisionType, TargetType
from pdlite.errors import ConfigError, PdliteError
from pdlite.nnadapter.subgraph_kernel import PROMOTE_STREAK
from pdlite.operators.quant import is_quant_op

HOST = "host"
AGREE_REL = 1e-4  # a device must give the host's outputs within this fraction of max|host|
# ... for quantized programs, whose int8 device kernels round otherwise than the host's fp32 simulation (a value
# on a rounding edge lands one quantization step away and moves a few outputs): 99% of elements within 2e-2
QUANT_AGREE_REL = 2e-2
QUANT_AGREE_SHARE = 0.99
SLOW_FACTOR = 20.0  # a candidate this many times slower than the fastest after warm-up is not measured further
PAUSE_S = 0.05  # before each candidate's block (ONNX Runtime's threads spin for a while after a run)
BLOCK_MS = 20.0  # timed runs per block: about this long, ...
BLOCK_RUNS = (2, 25)  # ... and at least / at most this many
CLOSE = 1.25  # the two best within this ratio after the first rounds: measured again, twice as long
SLOW_MARGIN_MS = 1.0  # ... plus this much (sub-millisecond runs are too noisy to judge by one run)
# runs before a candidate is timed (settle): the subgraph kernel's promotion of a hot signature happens in the
# PROMOTE_STREAK-th run in a row, one more shows the model that follows; more (at most WARM_MAX) until the last two
# agree within SETTLED
WARM_RUNS = PROMOTE_STREAK + 1
WARM_MAX = 10
SETTLED = 1.5


@dataclass
class AutoChoice:
    """What `auto` chose, with the times (ms) it measured (paired medians, see the module docstring; for the online
    auto, each candidate's estimated ms per call of the stream) and the candidates it refused (and why)."""

    device: str
    medians_ms: dict[str, float] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    cached: bool = False
    calls: dict[str, int] = field(default_factory=dict)  # online auto: the calls each candidate ran
    variant: str = ""  # a variant of `device` (its driver's auto_variants) that measured fastest, or ""
    # with choose_device(keep=True): the measured predictor of the chosen device (None when the choice came from
    # the cache); the caller takes it over, so the instance that was measured is the one that runs
    predictor: Any = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        """The name it was measured under (`device[variant]` for a variant), what `apply_device` takes."""
        return variant_name(self.device, self.variant) if self.variant else self.device

    def runner_up(self) -> tuple[str, float] | None:
        rest = sorted((t, d) for d, t in self.medians_ms.items() if d != self.key)
        return (rest[0][1], rest[0][0]) if rest else None

    def describe(self) -> str:
        best = self.medians_ms.get(self.key)
        what = "ms per call, estimated" if self.calls else "ms median"  # online (calls counted) or measured
        text = f"auto chose {self.key}" + (f" ({best:.3f} {what})" if best is not None else "")
        ru = self.runner_up()
        if ru is not None:
            text += f"; runner-up {ru[0]} ({ru[1]:.3f} ms)"
        if len(self.calls) > 1:
            text += "; calls: " + ", ".join(f"{d} {n}" for d, n in sorted(self.calls.items(), key=lambda x: -x[1]))
        if self.refused:
            text += "; not used: " + "; ".join(f"{d}: {why}" for d, why in self.refused.items())
        return text + (" [cached]" if self.cached else "")


def installed_devices() -> list[str]:
    """The NNAdapter devices `auto` measures: installed (packages import), built-in or from plugins, and not
    reference evaluators (a driver with `auto_candidate = False`)."""
    from pdlite.nnadapter.registry import DRIVERS
    from pdlite.registries import load_registries

    load_registries()
    return [name for name in sorted(DRIVERS) if DRIVERS[name].available() and DRIVERS[name].auto_candidate]


def variant_name(device: str, variant: str) -> str:
    return f"{device}[{variant}]"


def variant_properties(name: str) -> tuple[str, dict[str, str]]:
    """(device, the context properties of its variant) of a candidate name (`device[variant]`, or a device)."""
    if not name.endswith("]") or "[" not in name:
        return name, {}
    from pdlite.nnadapter.registry import DRIVERS
    from pdlite.registries import load_registries

    device, variant = name[:-1].split("[", 1)
    load_registries()
    variants = getattr(DRIVERS.get(device), "auto_variants", {})
    if variant not in variants:
        raise ConfigError(f"device {name!r}: {device!r} has no variant {variant!r} (known: {sorted(variants)})")
    return device, dict(variants[variant])


def variants_of(config: CxxConfig, devices: list[str]) -> list[str]:
    """The variants (`device[variant]`) of `devices` whose properties the config's context properties leave unset."""
    from pdlite.nnadapter.options import parse_context_properties
    from pdlite.nnadapter.registry import DRIVERS
    from pdlite.registries import load_registries

    load_registries()
    given = parse_context_properties(config.nnadapter_context_properties())
    return [variant_name(d, v) for d in devices if d != HOST and d in DRIVERS
            for v, props in getattr(DRIVERS[d], "auto_variants", {}).items() if not set(props) & set(given)]


def apply_device(config: CxxConfig, device: str) -> None:
    """Point `config` at `device`: "host" (the host target), an NNAdapter device by name, or a variant of one
    (`device[variant]`: the device, with its variant's context properties added)."""
    device, extra = variant_properties(device)
    if extra:
        from pdlite.nnadapter.options import format_context_properties, parse_context_properties

        props = parse_context_properties(config.nnadapter_context_properties())
        config.set_nnadapter_context_properties(format_context_properties({**props, **extra}))
    if device in (HOST, "x86"):
        config.set_nnadapter_device_names([])
        if hasattr(config, "set_valid_places"):  # a paddlelite-style [NNAdapter, Host] list: the host part kept
            places = [p for p in config.valid_places() if p.target != TargetType.NNAdapter]
            config.set_valid_places(places or [Place(TargetType.Host, PrecisionType.FP32)])
        return
    if not hasattr(config, "set_nnadapter_device_names"):
        raise ConfigError(f"device {device!r}: this config cannot use NNAdapter devices")
    config.set_nnadapter_device_names([device])
    config.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)])


def copy_config(config: CxxConfig) -> CxxConfig:
    """A copy whose device settings can change without touching `config` (model buffers and delegate shared)."""
    cfg = copy.copy(config)
    cfg._options = dict(config._options)
    if hasattr(config, "_valid_places"):
        cfg._valid_places = list(config._valid_places)
    return cfg


def cache_file(config: CxxConfig) -> Path:
    base = config.options.get("nnadapter_model_cache_dir") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pdlite")
    return Path(base) / "auto" / "choices.json"


_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime) -> content digest, per process
# the files a model folder's program and weights live in (pdlite/model_parser/loader.py's _load_dir)
MODEL_FILES = ("model", "params", "__model__", "__params__")
MODEL_SUFFIXES = (".pdmodel", ".pdiparams", ".json", ".nb")


def _file_digest(path: str) -> str:
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def _dir_files(folder: Path) -> list[Path]:
    files = sorted(f for f in folder.iterdir() if f.is_file())
    model = [f for f in files if f.name in MODEL_FILES or f.suffix in MODEL_SUFFIXES]
    # one file per parameter (a __model__ without __params__): every file is the model's
    return files if (folder / "__model__").is_file() and not (folder / "__params__").is_file() else model


def model_digest(config: CxxConfig) -> str:
    """A digest of the model's content (program and weights bytes), not of where it lies: a copy of the folder
    elsewhere gives the same digest, an edited file another."""
    h = hashlib.sha256()
    for key, value in sorted(config.model_source().items()):
        if value is None:
            continue
        h.update(key.encode())
        if isinstance(value, (bytes, bytearray, memoryview)):
            h.update(hashlib.sha256(value).digest())
        elif os.path.isdir(value):
            for f in _dir_files(Path(value)):
                h.update(f"{f.name}:".encode() + _file_digest(str(f)).encode())
        elif os.path.isfile(value):
            h.update(_file_digest(value).encode())
    return h.hexdigest()[:20]


def cache_key(config: CxxConfig, feeds: Mapping[str, np.ndarray], candidates: list[str], kind: str = "fixed") -> str:
    """What a choice depends on: the model's content, the kind of workload ("fixed": with the input shapes and
    dtypes; "changing": shapes that change from call to call), the thread count, the candidates, the devices'
    context properties (a precision hint changes a device's speed, a bad value refuses it) and pdlite's version."""
    shapes = ";".join(f"{k}:{list(np.shape(v))}:{np.asarray(v).dtype}" for k, v in sorted(feeds.items()))
    what = f"fixed:{shapes}" if kind == "fixed" else kind
    return (f"{model_digest(config)}|{what}|threads={config.threads()}|{','.join(candidates)}|"
            f"context={config.nnadapter_context_properties()}|{__version__}")


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def load_choice(config: CxxConfig, key: str) -> Any:
    """The cached entry under `key` (None when there is none)."""
    return _load_cache(cache_file(config)).get(key)


def store_choice(config: CxxConfig, key: str, entry: dict[str, Any], path: Path | None = None) -> None:
    """Cache `entry` under `key` (written whole, then renamed: readers never see half a file); `path`: the cache
    file to use instead of the config's (resolved when the writer started: the environment may change by the end)."""
    path = path or cache_file(config)
    data = _load_cache(path)
    data[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only cache costs a re-measurement next time, nothing else
        pass


def agreement(program: Any) -> tuple[float, float]:
    """(relative tolerance, share of elements within it) a device's outputs must meet against the host's."""
    if any(is_quant_op(op.type) for op in program.main.ops):
        return QUANT_AGREE_REL, QUANT_AGREE_SHARE
    return AGREE_REL, 1.0


def outputs_agree(got: list[np.ndarray], ref: list[np.ndarray], rel: float, share: float = 1.0) -> str | None:
    for i, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape:
            return f"output {i} has shape {list(g.shape)}, the host gives {list(r.shape)}"
        if r.size == 0:
            continue
        if np.issubdtype(r.dtype, np.floating):
            scale = float(np.max(np.abs(r))) or 1.0
            diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
            close = float(np.mean(diff <= rel * scale))
            if not close >= share:
                return (f"output {i} differs from the host's by up to {float(diff.max()):.3g}: "
                        f"{100 * close:.2f}% of it within {rel} * {scale:.3g}, {100 * share:g}% needed")
        elif not np.array_equal(g, r):
            return f"output {i} (integers) differs from the host's"
    return None


def _interleave(preds: Mapping[str, Any], blocks: dict[str, list[float]], rounds: int,
                est_ms: Mapping[str, float]) -> None:
    """`rounds` rounds; in each, every candidate runs one block, in an order rotated from round to round: a pause
    (runtimes in one process disturb each other: ONNX Runtime's and OpenMP's worker threads keep spinning for a
    while after a run and slow whoever runs next), one untimed run, then timed runs for about BLOCK_MS. The
    block's median (ms) is appended to `blocks[dev]`, so `blocks[a][r]` and `blocks[b][r]` share round r."""
    order = list(preds)
    lo, hi = BLOCK_RUNS
    for r in range(max(rounds, 1)):
        k = r % len(order)
        for dev in order[k:] + order[:k]:
            pred = preds[dev]
            n = int(min(hi, max(lo, BLOCK_MS / max(est_ms[dev], 1e-3))))
            time.sleep(PAUSE_S)
            pred.run()
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                pred.run()
                times.append((time.perf_counter() - t0) * 1e3)
            blocks[dev].append(statistics.median(times))


def settle(pred: Any) -> float:
    """Run `pred` (inputs set, first call done) until its runs settle; the last runs' fastest (ms). A device's first
    runs after its first call are not its steady state: OpenVINO's first inferences of a model with dynamic dims took
    8-50 ms on PP-OCR cls / MobileNetV3-small (0.3-0.6 ms later), and the subgraph kernel compiles a static model
    for a signature that ran PROMOTE_STREAK times in a row (0.25-0.35 s, in the run that earns it). Timed from the
    second run on, as before, those runs priced OpenVINO at 18 ms on MobileNetV3-small, "over 20x the fastest":
    refused, and auto ran ONNX Runtime, slower there. At least WARM_RUNS runs, more (up to WARM_MAX) until the last
    two are within SETTLED of each other; the faster of those two is the quick estimate."""
    times: list[float] = []
    while len(times) < WARM_MAX:
        t0 = time.perf_counter()
        pred.run()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= WARM_RUNS and max(times[-2:]) <= SETTLED * min(times[-2:]):
            break
    return min(times[-2:])


def paired_scores(blocks: Mapping[str, list[float]]) -> dict[str, float]:
    """Each candidate's time (ms) relative to the leader (lowest median block) round by round: the leader's median
    times the median over rounds of candidate / leader. Rounds are aligned from the end (a candidate measured for
    extra rounds has its extra rounds last)."""
    lead = min(blocks, key=lambda d: statistics.median(blocks[d]))
    base = blocks[lead]
    ref = statistics.median(base)
    out = {}
    for dev, b in blocks.items():
        n = min(len(b), len(base))
        out[dev] = ref * statistics.median([x / y for x, y in zip(b[-n:], base[-n:])])
    return out


def choose_device(config: CxxConfig, feeds: Mapping[str, np.ndarray], build: Callable[[CxxConfig], Any], *,
                  rounds: int = 5, candidates: list[str] | None = None, use_cache: bool = True,
                  keep: bool = False, cache_kind: str = "fixed", variants: bool = True) -> AutoChoice:
    """Measure `candidates` (default: host + installed devices) on `feeds`; the fastest that agrees with host.

    `build(config)` makes a predictor (`pdlite.lite.create_paddle_predictor`): this module sits below the
    predictors, which use it for `set_nnadapter_device_names(["auto"])`. `keep`: hand the chosen device's
    measured predictor back in `AutoChoice.predictor` (the others are released before returning). `variants`:
    the candidates' variants are measured too (`variants_of`; the choice's `variant` says which won)."""
    if not isinstance(config, CxxConfig):
        raise ConfigError("the auto device needs a CxxConfig (a Paddle model); an optimized .nb keeps its device")
    cands = candidates if candidates is not None else [HOST] + installed_devices()
    if HOST not in cands:
        cands = [HOST] + list(cands)
    if variants:
        cands = list(cands) + variants_of(config, cands)
    key = cache_key(config, feeds, cands, cache_kind)
    if use_cache:
        hit = load_choice(config, key)
        if isinstance(hit, dict) and isinstance(hit.get("device"), str):
            cached = AutoChoice(hit["device"], dict(hit.get("medians_ms", {})), dict(hit.get("refused", {})), True,
                                variant=str(hit.get("variant") or ""))
            if cached.key in cands:
                return cached
    preds: dict[str, Any] = {}
    refused: dict[str, str] = {}
    first_ms: dict[str, float] = {}
    host_out: list[np.ndarray] | None = None
    rel, share = AGREE_REL, 1.0
    for dev in cands:
        cfg = copy_config(config)
        try:
            apply_device(cfg, dev)
            pred = build(cfg)
            out = [np.array(o, copy=True) for o in pred.predict(dict(feeds))]  # compiles
            first_ms[dev] = settle(pred)
        except PdliteError as e:
            if dev == HOST:
                raise
            refused[dev] = f"{type(e).__name__}: {e}"
            continue
        if dev == HOST:
            host_out = out
            rel, share = agreement(pred.program)
        else:
            assert host_out is not None
            why = outputs_agree(out, host_out, rel, share)
            if why is not None:
                refused[dev] = why
                continue
        preds[dev] = pred
    lead = min(preds, key=first_ms.__getitem__)
    fastest = first_ms[lead]
    for dev in list(preds):  # not worth measuring: far slower than the best in its first runs
        if dev != lead and first_ms[dev] > SLOW_FACTOR * fastest + SLOW_MARGIN_MS:
            refused[dev] = f"{first_ms[dev]:.1f} ms per run, over {SLOW_FACTOR}x the fastest ({fastest:.1f} ms)"
            del preds[dev]
    blocks: dict[str, list[float]] = {d: [] for d in preds}
    _interleave(preds, blocks, rounds, first_ms)
    scores = paired_scores(blocks)
    lead = min(scores, key=scores.__getitem__)
    close = [d for d in scores if scores[d] <= CLOSE * scores[lead]]
    if len(close) > 1:
        # a close call: more interleaved rounds of just the close ones decide it; the others keep their ratio
        # to the first leader
        ratio = {d: v / scores[lead] for d, v in scores.items()}
        again = {d: blocks[d] for d in close}
        _interleave({d: preds[d] for d in close}, again, 2 * rounds, first_ms)
        scores.update(paired_scores(again))
        scores.update({d: ratio[d] * scores[lead] for d in ratio if d not in again})
    best = min(scores, key=scores.__getitem__)
    device = variant_properties(best)[0]
    variant = best[len(device) + 1:-1] if best != device else ""
    choice = AutoChoice(device, {d: round(v, 4) for d, v in scores.items()}, refused, variant=variant)
    if use_cache:
        store_choice(config, key, {"device": device, "variant": variant, "medians_ms": choice.medians_ms,
                                   "refused": refused})
    if keep:
        choice.predictor = preds[best]
    preds.clear()  # the other candidates' runtimes (and their thread pools) go now, not at some later collection
    gc.collect()
    return choice
