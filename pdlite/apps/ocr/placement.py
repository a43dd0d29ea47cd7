"""`OCR(device="auto")` (the `pdlite ocr` default when a device package is installed): where each network runs,
decided once per machine by a short measurement on the first image's real inputs, and cached.

The first image is read on the host, with each network's inputs kept (det's page, cls's and rec's batches of
crops). Each installed candidate device then runs those inputs three times: once to build and compile (with the
CLI's compiled-model cache a later process loads what this one compiled), once again (the inputs' shapes seen:
`seen`), and once with every input one step wider (a new shape, as the next image's page or lines bring:
`new`). A network's cost on a device is seen + new: what the first image's work costs there once its shapes are
known and when they are new (the dynamic-shape devices compile once, `pdlite/nnadapter/dynamic.py`, so a new
shape costs little more; a new page on the host none). Each network goes to its cheapest device, the host unless
a device is more than MARGIN faster. A device whose outputs are far from the host's on the same inputs (det:
text mask, cls/rec: the class per position) is not used.

OpenVINO runs in the app's precision (`OCR(precision=...)`: on a CPU with native bfloat16, OpenVINO's own default
there, bf16; the host stays float32). The decision is cached per network under the user cache
(`~/.cache/pdlite/auto/choices.json`), keyed on the model's content (not its path), the threads, the
candidates, the context properties (the precision among them), this CPU and pdlite's version: a later run starts
on it at once.
"""
from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pdlite.api.auto import HOST, cache_key, load_choice, store_choice

MARGIN = 1.05  # a device must beat the host's cost by this factor (its noise and its first-call costs elsewhere)
WIDER = 32  # a new shape for the measurement: the inputs' last axis (width) this much wider (det's pages step 32)
MASK_THRESH = 0.3  # det's text mask (DB's default binarisation threshold) ...
MASK_AGREE = 0.99  # ... agreeing with the host's on at least this share of pixels
CLASS_AGREE = 0.95  # cls / rec: the same class as the host's on at least this share of positions


def pick(costs: dict[str, float], margin: float = MARGIN) -> str:
    """The device for one network from its measured costs (ms, devices that failed left out): the cheapest, the host
    unless the cheapest beats it by `margin`."""
    if not costs:
        return HOST
    best = min(costs, key=costs.__getitem__)
    if best != HOST and HOST in costs and costs[best] * margin > costs[HOST]:
        return HOST
    return best


def disagreement(got: Sequence[np.ndarray], ref: Sequence[np.ndarray]) -> str | None:
    """Why a device's outputs (one array per call) are too far from the host's on the same inputs, or None. A
    [N, 1, H, W] map (det): its text mask; otherwise (cls [N, K], rec [N, T, C]): the class per position."""
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return f"output shape {list(g.shape)}, the host's {list(r.shape)}"
        if not np.isfinite(g).all():
            return "non-finite outputs"
        if g.ndim == 4 and g.shape[1] == 1:
            share = float(((g > MASK_THRESH) == (r > MASK_THRESH)).mean())
            if share < MASK_AGREE:
                return f"text mask agrees with the host's on {100 * share:.2f}% of pixels (< {100 * MASK_AGREE:g}%)"
        elif g.size:
            share = float((g.argmax(-1) == r.argmax(-1)).mean())
            if share < CLASS_AGREE:
                return f"same class as the host's at {100 * share:.1f}% of positions (< {100 * CLASS_AGREE:g}%)"
    return None


def wider(x: np.ndarray, step: int = WIDER) -> np.ndarray:
    """`x` with its last axis `step` wider (zeros, as the pipeline pads): a shape the device has not seen."""
    pad = [(0, 0)] * (x.ndim - 1) + [(0, step)]
    return np.pad(x, pad)


def ocr_candidates() -> list[str]:
    """The installed devices the OCR app measures besides the host: its own DEVICES (plugins' are not), as they
    are. Not their drivers' variants (`intel_openvino[pinned]`, OpenVINO's threads pinned to cores): measured once
    it won rec here (943 vs 1059 ms on the first image, load ~10) and then ran the timed passes at 1.8x the
    unpinned time (400 vs 217 ms an image) as the load moved; a choice cached for every later run must hold up
    when other work shares the cores."""
    from pdlite.api.auto import installed_devices
    from pdlite.apps.ocr.engine import DEVICES

    return [d for d in installed_devices() if d in DEVICES and d != "auto"]


@functools.lru_cache(maxsize=1)
def _machine_id() -> str:
    """This CPU (architecture, model and SIMD features, as `pdlite doctor` reads them) and whether pdlite's native
    host kernels are loaded (else the NumPy ones, 10-20x slower on these networks), so that a cache shared by
    machines or builds keeps their choices apart. Read once a process."""
    from pdlite.kernels.host import native
    from pdlite.kernels.host.cpu_features import cpu_info

    cpu = cpu_info()
    what = f"{cpu.arch}|{cpu.model}|{','.join(cpu.features)}|native={native.available()}"
    return hashlib.sha256(what.encode()).hexdigest()[:12]


class Placement:
    """The per-network device decision of one OCR pipeline and its clones (shared by them).

    `plan`: {stage: device} once decided (from the cache, or measured after the first image), else None.
    `notify(text)`: progress messages (the CLI prints them on stderr). Tests put their own `timer` and `build` (on the class)
    and candidates (pipeline's `ocr_candidates`) to give each device scripted costs."""

    def __init__(self, candidates: Sequence[str], threads: int) -> None:
        self.candidates = [HOST, *[c for c in candidates if c != HOST]]
        self.threads = threads
        self.plan: dict[str, str] | None = None
        self.costs: dict[str, dict[str, float]] = {}  # stage -> device -> ms (seen + new) on the first image
        self.refused: dict[str, dict[str, str]] = {}  # stage -> device -> why
        self.cached = False
        self.seconds = 0.0  # what the measurement took
        self.reason = ""  # why the plan was not measured (skip)
        self.notify: Callable[[str], None] = lambda text: None
        self._lock = threading.Lock()

    @staticmethod
    def timer(stage: str, device: str, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Run `fn` (one call of the stage's network on `device`): its output and the wall time in ms."""
        t0 = time.perf_counter()
        out = fn()
        return out, (time.perf_counter() - t0) * 1e3

    @staticmethod
    def build(model: Any, device: str) -> Any:
        """The network `model` (an engine.Model) on `device`."""
        return model.on(device)

    def _key(self, model: Any) -> str:
        return cache_key(model.config, {}, self.candidates, f"ocr-placement:machine={_machine_id()}")

    def load(self, models: dict[str, Any]) -> bool:
        """Take the cached decision for these networks when every one has one (then `plan` is set)."""
        plan, costs = {}, {}
        for stage, model in models.items():
            hit = load_choice(model.config, self._key(model))
            if not isinstance(hit, dict) or hit.get("device") not in self.candidates:
                return False
            plan[stage], costs[stage] = hit["device"], dict(hit.get("costs_ms", {}))
        self.plan, self.costs, self.cached = plan, costs, True
        return True

    def skip(self, models: dict[str, Any], why: str) -> None:
        """Leave every network on the host, unmeasured (nothing cached): e.g. `pdlite ocr` on one image, which
        the measurement would slow down more than it could gain."""
        self.plan = {stage: HOST for stage in models}
        self.reason = why

    def measure(self, models: dict[str, Any]) -> dict[str, str]:
        """Decide from the inputs each model kept (`model.kept`, the first image's): time every candidate, pick,
        cache; the plan."""
        with self._lock:
            if self.plan is not None:
                return self.plan
            t0 = time.perf_counter()
            self.notify(f"measuring where {', '.join(models)} run fastest ({', '.join(self.candidates)}) on the "
                        "first image; once per machine, cached")
            plan = {}
            for stage, model in models.items():
                inputs = list(model.kept or [])
                plan[stage] = self._measure_one(stage, model, inputs) if inputs else HOST
                store_choice(model.config, self._key(model), {"device": plan[stage],
                                                              "costs_ms": self.costs.get(stage, {}),
                                                              "refused": self.refused.get(stage, {})})
            self.seconds = time.perf_counter() - t0
            self.plan = plan
            self.notify("placement: " + "; ".join(f"{s} on {d}" for s, d in plan.items())
                        + f" (measured in {self.seconds:.1f} s)")
            return plan

    def _measure_one(self, stage: str, model: Any, inputs: list[np.ndarray]) -> str:
        new_inputs = [wider(x) for x in inputs]
        costs, refused = {}, {}
        ref, seen = self._passes(stage, HOST, lambda x: model(x, keep=False), inputs)
        seen = min(seen, self._passes(stage, HOST, lambda x: model(x, keep=False), inputs)[1])
        try:
            _, new = self._passes(stage, HOST, lambda x: model(x, keep=False), new_inputs)
        except Exception:  # noqa: BLE001 -- a model with a fixed width: priced on the shapes seen alone
            new_inputs, new = [], 0.0
        costs[HOST] = seen + new
        for device in self.candidates[1:]:
            try:
                run = self.build(model, device)
                first, _ = self._passes(stage, device, run, inputs)  # build and compile; the first shapes
                why = disagreement(first, ref)
                if why is not None:
                    refused[device] = why
                    continue
                _, seen_d = self._passes(stage, device, run, inputs)
                _, again = self._passes(stage, device, run, inputs)  # (the lower of two: one sample on a busy machine)
                _, new_d = self._passes(stage, device, run, new_inputs) if new_inputs else (None, 0.0)
                costs[device] = min(seen_d, again) + new_d
            except Exception as e:  # noqa: BLE001 -- a device that cannot run this network is not used for it
                refused[device] = f"{type(e).__name__}: {e}"
        self.costs[stage] = {k: round(v, 3) for k, v in costs.items()}
        if refused:
            self.refused[stage] = refused
        return pick(costs)

    def _passes(self, stage: str, device: str, run: Callable[[np.ndarray], np.ndarray],
                inputs: list[np.ndarray]) -> tuple[list, float]:
        outs, total = [], 0.0
        for x in inputs:
            y, ms = self.timer(stage, device, lambda x=x: run(x))
            outs.append(np.array(y))
            total += ms
        return outs, total

    def describe(self, stage: str) -> str:
        """How the stage's device was chosen, e.g. "auto: measured ms/image intel_openvino 14.2, host 27.9"."""
        if self.reason:
            return f"auto: {self.reason}"
        costs = self.costs.get(stage, {})
        ms = ", ".join(f"{d} {v:.1f}" for d, v in sorted(costs.items(), key=lambda kv: kv[1]))
        refused = "; ".join(f"{d} not used: {why}" for d, why in self.refused.get(stage, {}).items())
        return "auto" + (f": first image ms {ms}" if ms else "") + (f"; {refused}" if refused else "") + (
            " [cached]" if self.cached else "")
