"""Fuzz pdlite's model loaders: seeded mutations of every model format, run in subprocesses.

    python tools/fuzz_loaders.py -n 10000 --seed 1 --jobs 2             # a campaign, summary table
    python tools/fuzz_loaders.py --seed 1 --format pir --only 1234 --save /tmp/m   # replay one mutation

Formats (seed models are built from the committed fixtures in tests/fixtures): `pdmodel`
(inference.pdmodel + .pdiparams), `combined` (__model__ + __params__), `noncombined` (__model__ +
one LoDTensor file per parameter), `pir` (inference.json + .pdiparams) and `nb` (pdlite's optimized
model). Mutation `i` of format `f` under seed `s` is a pure function of (s, f, i), so any finding is
replayed with `--only i`. Mutations: bit flips, byte replacement, truncation, extension, duplicated or
deleted chunks, inserted bytes; protobuf-aware edits of ProgramDesc / TensorDesc fields (dims, data
types, huge varints, lengths, duplicated or dropped fields); LoDTensor header edits (versions, lod
levels, sizes); JSON-aware edits of PIR programs (changed types, shapes, attributes, value ids, op
names, missing keys, deep nesting); `.nb` header / meta / program edits with the checksums fixed up
(to reach the parser behind them) and plain corruptions (which the checksums must catch). The
mutators live in tools/fuzz_mutations.py. `--stage predictor` also makes the predictor of every
model that loads (analysis, or the `.nb` rebuild) and runs it once on inputs of ones.

Each worker subprocess runs a batch of mutations under an address-space limit (RLIMIT_AS, its size
after imports + --mem-mb) and a per-mutation alarm; the parent kills a silent worker after --timeout
seconds and restarts the batch after the culprit. Outcomes per mutation: `ok` (loaded), `error`
(a pdlite error naming the file), and the failures: `escape` (another exception type), `unnamed`
(a ModelFormatError not naming the file), `silent` (a corrupted `.nb` accepted), `memory`
(MemoryError under the limit), `hang`, `crash` (the worker died). Exit status 1 if any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_mutations import (  # noqa: E402
    dump_json,
    mutate_bytes,
    mutate_json,
    mutate_nb,
    mutate_proto,
    mutate_tensor,
    nb_build,
)

__all__ = ["nb_build"]

FIXTURES = REPO / "tests" / "fixtures"
FORMATS = ("pdmodel", "combined", "noncombined", "pir", "nb")
LEGACY_SEEDS = ("fc_linear", "conv_variants", "lstm_crnn", "embedding", "bert_mask_attention")
PIR_SEEDS = ("conv", "tensor_ops", "transformer")
NB_SEEDS = ("fc_linear", "conv_variants", "bert_mask_attention")
FAILURES = ("escape", "unnamed", "silent", "memory", "hang", "crash")
# ----------------------------------------------------------------------------------- seeds


def build_seeds(out: Path) -> None:
    """Write the seed models of every format under `out/<format>/<name>/`."""
    from pdlite.model_parser import load_model, save_model

    for name in LEGACY_SEEDS:
        src = FIXTURES / "conformance" / name
        model, params = (src / "inference.pdmodel").read_bytes(), (src / "inference.pdiparams").read_bytes()
        for fmt, files in (("pdmodel", ("inference.pdmodel", "inference.pdiparams")),
                           ("combined", ("__model__", "__params__"))):
            d = out / fmt / name
            d.mkdir(parents=True, exist_ok=True)
            (d / files[0]).write_bytes(model)
            (d / files[1]).write_bytes(params)
        m = load_model(src)
        d = out / "noncombined" / name
        d.mkdir(parents=True, exist_ok=True)
        save_model(m.program, m.params, d / "__model__")
    for name in PIR_SEEDS:
        d = out / "pir" / name
        d.mkdir(parents=True, exist_ok=True)
        for f in ("inference.json", "inference.pdiparams"):
            shutil.copyfile(FIXTURES / "pir" / name / f, d / f)
    from pdlite.api import CxxConfig, create_paddle_predictor

    for name in NB_SEEDS:
        d = out / "nb" / name
        d.mkdir(parents=True, exist_ok=True)
        cfg = CxxConfig()
        cfg.set_model_dir(str(FIXTURES / "conformance" / name))
        create_paddle_predictor(cfg).save_optimized_model(str(d / "model"))


def seed_models(seeds: Path, fmt: str) -> list[Path]:
    return sorted(p for p in (seeds / fmt).iterdir() if p.is_dir())


# --------------------------------------------------------------------------------- mutations


def _files(fmt: str, d: Path) -> list[tuple[str, float]]:
    """(file, weight) of the files a mutation of `fmt` may change."""
    if fmt == "nb":
        return [("model.nb", 1.0)]
    if fmt == "pir":
        return [("inference.json", 0.65), ("inference.pdiparams", 0.35)]
    if fmt == "noncombined":
        params = sorted(p.name for p in d.iterdir() if p.name != "__model__")
        return [("__model__", 0.45)] + [(p, 0.55 / len(params)) for p in params]
    names = ("inference.pdmodel", "inference.pdiparams") if fmt == "pdmodel" else ("__model__", "__params__")
    return [(names[0], 0.5), (names[1], 0.5)]


def make_mutation(seed: int, fmt: str, i: int, seeds: Path) -> dict[str, Any]:
    """Mutation `i` of format `fmt`: which seed model, which file, how, and the new bytes."""
    rng = random.Random(f"{seed}/{fmt}/{i}")
    model = rng.choice(seed_models(seeds, fmt))
    files = _files(fmt, model)
    fname = rng.choices([f for f, _ in files], [w for _, w in files])[0]
    data = (model / fname).read_bytes()
    aware = rng.random() < 0.5
    how = "bytes"
    new = data
    try:
        if aware and fmt == "nb":
            how, new = mutate_nb(data, rng)
        elif aware and fname.endswith(".json"):
            how, new = "json", dump_json(mutate_json(json.loads(data), rng))
        elif aware and fname in ("inference.pdmodel", "__model__"):
            how, new = "proto", mutate_proto(data, rng)
        elif aware:
            how, new = "tensor", mutate_tensor(data, rng)
        else:
            how, new = mutate_bytes(data, rng)
    except (ValueError, KeyError, IndexError, TypeError, struct.error):  # the seed did not fit the mutator
        how, new = mutate_bytes(data, rng)
    if new == data:  # never test the seed itself
        how, new = "truncate", data[: rng.randrange(len(data))]
    return {"i": i, "fmt": fmt, "model": model.name, "file": fname, "how": how, "data": new,
            "variant": rng.randrange(3)}


# ----------------------------------------------------------------------------------- loading


class _Hang(BaseException):
    pass


def _load(fmt: str, d: Path, variant: int) -> None:
    """Load the model in `d` the way `variant` says (folder, files, buffers; .nb: read, mmap, buffer)."""
    from pdlite.model_parser import load_model, serialize_program
    from pdlite.model_parser.naive_buffer import load_naive_buffer, load_naive_buffer_bytes

    if fmt == "nb":
        p = d / "model.nb"
        if variant == 2:
            m = load_naive_buffer_bytes(p.read_bytes(), "<nb buffer>")
        else:
            m = load_naive_buffer(p, use_mmap=variant == 1)
        for a in m.params.values():
            a.tobytes()
        m.valid_places()
        return
    model, params = {"pdmodel": ("inference.pdmodel", "inference.pdiparams"), "combined": ("__model__", "__params__"),
                     "pir": ("inference.json", "inference.pdiparams")}.get(fmt, ("__model__", None))
    if variant == 0 or fmt == "noncombined":
        m = load_model(model_dir=d)
    elif variant == 1:
        m = load_model(model_file=d / model, param_file=d / params)
    else:
        m = load_model(model_buffer=(d / model).read_bytes(), param_buffer=(d / params).read_bytes())
    for t in m.params.values():
        t.array.tobytes()
    if fmt != "pir":
        serialize_program(m.program)


def _predict(fmt: str, d: Path) -> None:
    """Stage "predictor": make the predictor a user would (analysis or .nb rebuild) and run it once."""
    import numpy as np

    from pdlite.api import CxxConfig, MobileConfig, create_paddle_predictor

    if fmt == "nb":
        cfg: Any = MobileConfig()
        cfg.set_model_from_file(str(d / "model.nb"))
    else:
        cfg = CxxConfig()
        cfg.set_model_dir(str(d))
    pred = create_paddle_predictor(cfg)
    for n in pred.get_input_names():
        shape, dtype = pred._feed_specs[n]
        shape = [s if 0 < s < 64 else 2 for s in shape]
        if np.prod(shape, dtype=np.float64) > 2**20:  # a mutated static shape: ones where it is free
            shape = [s if k == -1 else 1 for s, k in zip(shape, pred._feed_specs[n][0])]
        if dtype is None or dtype.kind not in "biuf":
            dtype = np.dtype(np.float32)
        pred.get_input_by_name(n).from_numpy(np.ones(shape, dtype))
    pred.run()


def run_one(mut: dict[str, Any], seeds: Path, scratch: Path, per_timeout: float,
            stage: str = "load") -> dict[str, Any]:
    """Write the mutated file into a copy of its seed model, load it (stage "predictor": also make a
    predictor and run it), classify the outcome."""
    from pdlite.errors import ModelFormatError, PdliteError

    d = scratch / mut["fmt"] / mut["model"]
    if not d.is_dir():
        shutil.copytree(seeds / mut["fmt"] / mut["model"], d)
    target = d / mut["file"]
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(mut["data"])
    os.replace(tmp, target)  # a new file: an earlier mmap of the old one stays valid
    rec = {k: mut[k] for k in ("i", "fmt", "model", "file", "how", "variant")}
    signal.setitimer(signal.ITIMER_REAL, per_timeout)
    loaded = False
    try:
        _load(mut["fmt"], d, mut["variant"])
        loaded = True
        if mut["fmt"] == "nb" and not mut["how"].startswith("nb-"):
            rec["out"] = "silent"  # a corrupted .nb must never load
        elif stage == "predictor":
            _predict(mut["fmt"], d)
        rec.setdefault("out", "ok")
    except _Hang:
        rec.update(out="hang", msg=f"no result after {per_timeout} s", where=_where())
    except PdliteError as e:
        rec.update(out="error", cls=type(e).__name__, msg=str(e)[:300], stage="predictor" if loaded else "load")
        if not loaded and isinstance(e, ModelFormatError) and not any(n in str(e) for n in _names(mut, d)):
            rec["out"] = "unnamed"
    except MemoryError:
        rec.update(out="memory", cls="MemoryError", where=_where())
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
        rec.update(out="escape", cls=type(e).__name__, msg=str(e)[:300], where=_where(),
                   stage="predictor" if loaded else "load")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    orig = seeds / mut["fmt"] / mut["model"] / mut["file"]
    tmp.write_bytes(orig.read_bytes())
    os.replace(tmp, target)
    return rec


def _names(mut: dict[str, Any], d: Path) -> list[str]:
    if mut["variant"] == 2 and mut["fmt"] not in ("noncombined",):
        return ["<model buffer>", "<params buffer>", "<PIR model buffer>", "<nb buffer>"]
    return [str(d / mut["file"]), str(d)]


def _where() -> str:
    tb = traceback.extract_tb(sys.exc_info()[2])
    frames = [f for f in tb if "pdlite" in f.filename] or tb
    f = frames[-1]
    return f"{os.path.relpath(f.filename, REPO)}:{f.lineno} ({f.name})"


def _limit_memory(mem_mb: int) -> None:
    """RLIMIT_AS = this process's size now + mem_mb (Linux; elsewhere no limit is set)."""
    import resource

    try:
        with open("/proc/self/statm") as f:
            vsize = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return
    limit = vsize + mem_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def worker(seed: int, fmt: str, start: int, stop: int, seeds: Path, mem_mb: int, per_timeout: float,
           stage: str = "load") -> None:
    """Run mutations [start, stop) of `fmt`, one JSON line each on stdout."""
    import pdlite.api  # noqa: F401 - imports before the memory limit
    import pdlite.model_parser.pir  # noqa: F401

    if stage == "predictor":
        import pdlite.optimizer.analysis  # noqa: F401
        from pdlite.registries import load_registries

        load_registries()

    def alarm(*_: Any) -> None:
        raise _Hang

    signal.signal(signal.SIGALRM, alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    with tempfile.TemporaryDirectory(prefix="pdlite-fuzz-") as scratch:
        _limit_memory(mem_mb)
        sys.stdout.write('{"ready": true}\n')
        for i in range(start, stop):
            mut = make_mutation(seed, fmt, i, seeds)
            rec = run_one(mut, seeds, Path(scratch), per_timeout, stage)
            rec["bytes"] = len(mut["data"])
            sys.stdout.write(json.dumps(rec) + "\n")
            sys.stdout.flush()


# ------------------------------------------------------------------------------------ parent


def _run_batch(seed: int, fmt: str, start: int, stop: int, a: argparse.Namespace, out: list, lock) -> None:
    """Run a batch in worker subprocesses, restarting after a crash or hang (the culprit is recorded)."""
    nxt = start
    while nxt < stop:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(seed), "--format", fmt,
               "--start", str(nxt), "--stop", str(stop), "--seeds-dir", str(a.seeds_dir), "--mem-mb",
               str(a.mem_mb), "--per-timeout", str(a.per_timeout), "--stage", a.stage]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                             preexec_fn=(lambda: os.nice(a.nice)) if a.nice else None)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = b""
        killed = ready = False
        while True:
            if not sel.select(timeout=a.timeout):
                p.kill()
                killed = True
                break
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                rec = json.loads(line)
                if rec.get("ready"):
                    ready = True
                    continue
                with lock:
                    out.append(rec)
                nxt = rec["i"] + 1
        p.wait()
        err = p.stderr.read().decode(errors="replace")[-500:]
        sel.close()
        p.stdout.close()
        p.stderr.close()
        if not ready:
            raise SystemExit(f"a fuzz worker failed to start (exit {p.returncode}): {err}")
        if nxt < stop:  # the worker died or hung on mutation `nxt`
            mut = make_mutation(seed, fmt, nxt, a.seeds_dir)
            rec = {k: mut[k] for k in ("i", "fmt", "model", "file", "how", "variant")}
            rec.update(out="hang" if killed else "crash", bytes=len(mut["data"]),
                       msg=f"worker {'killed after ' + str(a.timeout) + ' s' if killed else 'exit ' + str(p.returncode)}"
                           f": {err.strip()[-300:]}")
            with lock:
                out.append(rec)
            nxt += 1


def campaign(a: argparse.Namespace) -> list[dict[str, Any]]:
    formats = a.format or list(FORMATS)
    per = {f: a.n // len(formats) + (1 if k < a.n % len(formats) else 0) for k, f in enumerate(formats)}
    batches = [(f, s, min(s + a.batch, per[f])) for f in formats for s in range(0, per[f], a.batch)]
    out: list[dict[str, Any]] = []
    lock = threading.Lock()

    def run() -> None:
        while True:
            with lock:
                if not batches:
                    return
                f, s, e = batches.pop(0)
            _run_batch(a.seed, f, s, e, a, out, lock)

    threads = [threading.Thread(target=run) for _ in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out, key=lambda r: (r["fmt"], r["i"]))


def summary(results: list[dict[str, Any]], seconds: float, a: argparse.Namespace) -> str:
    rows = ["| format | mutations | loaded | pdlite error | " + " | ".join(FAILURES) + " |",
            "|---|---|---|---|" + "---|" * len(FAILURES)]
    by = {f: Counter(r["out"] for r in results if r["fmt"] == f) for f in FORMATS}
    total: Counter[str] = Counter(r["out"] for r in results)
    for f in [*FORMATS, "total"]:
        c = total if f == "total" else by[f]
        n = sum(c.values())
        if n:
            rows.append(f"| {f} | {n} | {c['ok']} | {c['error']} | " + " | ".join(str(c[x]) for x in FAILURES) + " |")
    classes = Counter(r.get("cls") for r in results if r["out"] == "error")
    hows = Counter(r["how"] for r in results)
    lines = [f"seed {a.seed}, stage {a.stage}, {len(results)} mutations in {seconds:.1f} s ({a.jobs} workers, "
             f"memory limit +{a.mem_mb} MiB, timeout {a.per_timeout} s per mutation)", "", *rows, "",
             "pdlite errors by class: " + ", ".join(f"{k} {v}" for k, v in classes.most_common()),
             "mutations by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(hows.items()))]
    bad = [r for r in results if r["out"] in FAILURES]
    for r in bad[:40]:
        lines.append(f"FAIL {r['out']} ({r.get('stage', 'load')}): --format {r['fmt']} --only {r['i']} ({r['model']}/{r['file']}, {r['how']}, "
                     f"variant {r['variant']}): {r.get('cls', '')} {r.get('msg', '')[:200]} at {r.get('where', '?')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="mutations in all, split evenly over the formats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", action="append", choices=FORMATS, help="only these formats (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="worker subprocesses at a time")
    ap.add_argument("--batch", type=int, default=250, help="mutations per worker subprocess")
    ap.add_argument("--mem-mb", type=int, default=256, help="address space a worker may add after its imports")
    ap.add_argument("--per-timeout", type=float, default=10.0, help="seconds one mutation may take")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds without output before a worker is killed")
    ap.add_argument("--stage", choices=("load", "predictor"), default="load",
                    help="load: the model loaders; predictor: also make the predictor (analysis) and run it once")
    ap.add_argument("--nice", type=int, default=0, help="run the workers at this niceness")
    ap.add_argument("--seeds-dir", type=Path, help="seed models (built from the fixtures if absent)")
    ap.add_argument("--json", type=Path, help="write every result (one JSON object a line) here")
    ap.add_argument("--only", type=int, help="replay one mutation in this process, with its traceback")
    ap.add_argument("--save", type=Path, help="with --only: also write the mutated model folder here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.seed, a.format[0], a.start, a.stop, a.seeds_dir, a.mem_mb, a.per_timeout, a.stage)
        return 0
    with tempfile.TemporaryDirectory(prefix="pdlite-fuzz-seeds-") as tmp:
        if a.seeds_dir is None or not a.seeds_dir.is_dir():
            a.seeds_dir = a.seeds_dir or Path(tmp)
            build_seeds(a.seeds_dir)
        if a.only is not None:
            return _replay(a)
        t0 = time.time()
        results = campaign(a)
        text = summary(results, time.time() - t0, a)
    print(text)
    if a.json:
        a.json.write_text("".join(json.dumps(r) + "\n" for r in results))
    return 1 if any(r["out"] in FAILURES for r in results) else 0


def _replay(a: argparse.Namespace) -> int:
    fmt = (a.format or ["pdmodel"])[0]
    mut = make_mutation(a.seed, fmt, a.only, a.seeds_dir)
    print(f"mutation {a.only} of {fmt}: {mut['model']}/{mut['file']}, {mut['how']}, variant {mut['variant']}, "
          f"{len(mut['data'])} bytes")
    if a.save:
        shutil.copytree(a.seeds_dir / fmt / mut["model"], a.save, dirs_exist_ok=True)
        (a.save / mut["file"]).write_bytes(mut["data"])
        print(f"written to {a.save}")
    with tempfile.TemporaryDirectory() as scratch:
        d = Path(scratch) / "m"
        shutil.copytree(a.seeds_dir / fmt / mut["model"], d)
        (d / mut["file"]).write_bytes(mut["data"])
        try:
            _load(fmt, d, mut["variant"])
            print("loaded")
            if a.stage == "predictor":
                _predict(fmt, d)
                print("predictor made and run")
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
