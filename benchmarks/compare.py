"""pdlite against the peers, on the shared models, in one run: median latency and ratios.

Contenders (each skipped with a note when its package is absent):
  pdlite-host           pdlite, host target (NumPy)
  pdlite-<device>       pdlite + an NNAdapter device (intel_openvino, onnxruntime)
  pdlite-auto           pdlite's `auto` device: the fastest of host and the devices, measured on this input
                        (`choose_device`, what `pdlite run/bench --device auto` use; its measured predictor runs)
  pdlite-<device>+pin   the same with OpenVINO's threads pinned to cores (INTEL_OPENVINO_CPU_PINNING=on, OpenVINO's
                        own LATENCY default; pdlite's is off): pdlite-intel_openvino+pin, pdlite-auto+pin
  pdlite-auto-online    a predictor with set_nnadapter_device_names(["auto"]), as an API user gets it: the same
                        measurement after its first calls (a cache of the worker's own), then every call through
                        the online auto (pdlite/api/auto_online.py: settled calls, one in 8 timed)
  paddle-inference      Paddle Inference, IR optimisation + oneDNN on (the optimized configuration)
  onnxruntime           ONNX Runtime on the model exported by `pdlite export-onnx`
  openvino              OpenVINO reading the .pdmodel directly (fp32: INFERENCE_PRECISION_HINT f32)

The machine is shared and noisy, and engines disturb each other when they share a process (Paddle's
OpenMP threads keep spinning for ~200 ms after each run and take a core from whoever runs next). So each
contender runs in its own worker process (`--procs` of them), and the parent interleaves them in blocks (A B C,
B C A, ...: the order rotates each round; `--block` timed runs each after `--block-warmup` untimed ones, and
with `--block-ms` more until that much time has passed, a short pause between blocks); each cell is the median
of all its timed runs.

Ratios are paired by round: the median over rounds of (the contender's median in that round / the reference's
median in the same round), the reference being paddle-inference (in the cells; `--ref`) or the best peer (the peer with
the lowest median; "auto / best peer"). The machine's speed changes over a run (a 2-vCPU VM measured 1.5x
slower at 2 threads for tens of seconds at a time, for every engine); a round's blocks are seconds apart and
share the phase, so a paired ratio cancels it where a ratio of whole-cell medians credits it to whichever
contender's blocks it hit. `--plain-ratios`: ratios of the cells' medians instead.

    python benchmarks/compare.py [--models a,b] [--batches 1,4] [--threads 1,2] [--rounds 4] [--block 3]

pdlite on ONNX Runtime against ONNX Runtime alone, several processes each (a small model's time moves 10-20%
from one process of the same engine to the next):

    python benchmarks/compare.py --devices onnxruntime --peers onnxruntime --ref onnxruntime --no-host --procs 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "ppocr_cls_v2", "ppocr_det_v4",
          "transformer_encoder"]


MAX_BLOCK_RUNS = 200


def find_model(name: str) -> Path | None:
    for root in (REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"):
        if (root / name).is_dir():
            return root / name
    return None


def feeds_for(d: Path, batch: int) -> dict[str, np.ndarray]:
    z = np.load(d / "case.npz")
    out = {}
    for k in z.files:
        if k.startswith("in:"):
            a = z[k]
            out[k[3:]] = np.ascontiguousarray(np.repeat(a, batch, axis=0)) if batch != a.shape[0] else a
    return out


def program_files(d: Path) -> tuple[Path, Path]:
    for m, p in (("inference.pdmodel", "inference.pdiparams"), ("inference.json", "inference.pdiparams"),
                 ("__model__", "__params__"), ("model", "params")):
        if (d / m).exists() and (d / p).exists():
            return d / m, d / p
    raise FileNotFoundError(d)


def paddle_predictor(d: Path, threads: int):
    """Paddle Inference on the CPU as its users run it: IR optimisation and oneDNN on, `threads` math threads."""
    import paddle.inference as pi

    m, p = program_files(d)
    cfg = pi.Config(str(m), str(p))
    cfg.disable_gpu()
    cfg.switch_ir_optim(True)
    cfg.enable_mkldnn()
    cfg.set_cpu_math_library_num_threads(threads)
    cfg.disable_glog_info()
    return pi.create_predictor(cfg)


Runner = Callable[[], object]
NOTES: list[str] = []  # in a worker: what to tell the parent with `ready` (auto's choice)
NATIVE_ENV = "PDLITE_BENCH_NATIVE"  # "1": the parent runs the native host kernels, so must every pdlite worker


PIN = "+pin"  # a pdlite device contender's suffix: OpenVINO's threads pinned to cores (INTEL_OPENVINO_CPU_PINNING=on)


def make_pdlite(d: Path, feeds, threads: int, device: str | None) -> Runner:
    from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_threads(threads)
    if device:
        pin = device.endswith(PIN)
        device = device[:-len(PIN)] if pin else device
        cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                             f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads}"
                                             + (";INTEL_OPENVINO_CPU_PINNING=on" if pin else ""))
    if device == "auto-online":  # a predictor's own auto, every call through it
        import tempfile as _tf

        os.environ["XDG_CACHE_HOME"] = _tf.mkdtemp(prefix="pdlite_cmp_cache_")  # measured here, not an old choice
        cfg.set_nnadapter_device_names(["auto"])
        pred = create_paddle_predictor(cfg)
        for k, v in feeds.items():
            pred.get_input_by_name(k).from_numpy(v)
        for _ in range(20):  # the first calls: the host, then the fixed-shape measurement; then settled
            pred.run()
        text = " ".join(pred.auto_choice.describe().split())
        NOTES.append(f"{d.name} b{len(next(iter(feeds.values())))} t{threads} (online): {text}")
        return pred.run
    if device == "auto":  # what a user gets by default: measured on this input, the fastest kept
        from pdlite.api.auto import choose_device

        choice = choose_device(cfg, feeds, create_paddle_predictor, candidates=["host", "intel_openvino", "onnxruntime"],
                               use_cache=False, keep=True)
        text = " ".join(choice.describe().split())  # one line, no tabs (it travels in the `ready` line)
        text += " (measured ms: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(choice.medians_ms.items())) + ")"
        NOTES.append(f"{d.name} b{len(next(iter(feeds.values())))} t{threads}: {text}")
        pred = choice.predictor  # the measured instance, as the API's auto keeps it
        for k, v in feeds.items():
            pred.get_input_by_name(k).from_numpy(v)
        return pred.run
    if device:
        cfg.set_nnadapter_device_names([device])
        cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)])
    pred = create_paddle_predictor(cfg)
    for k, v in feeds.items():
        pred.get_input_by_name(k).from_numpy(v)
    return pred.run


def make_paddle(d: Path, feeds, threads: int) -> Runner:
    pred = paddle_predictor(d, threads)
    for k, v in feeds.items():
        h = pred.get_input_handle(k)
        h.reshape(v.shape)
        h.copy_from_cpu(v)
    return pred.run


def make_ort(d: Path, feeds, threads: int, onnx_path: Path) -> Runner:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return lambda: sess.run(names, feeds)


def make_openvino(d: Path, feeds, threads: int) -> Runner:
    import openvino as ov

    core = ov.Core()
    m, p = program_files(d)
    if m.suffix != ".pdmodel":  # OpenVINO's Paddle reader goes by the .pdmodel name: link the same bytes
        link = Path(tempfile.mkdtemp(prefix="pdlite_ov_"))
        (link / "inference.pdmodel").symlink_to(m.resolve())
        (link / "inference.pdiparams").symlink_to(p.resolve())
        m = link / "inference.pdmodel"
    model = core.read_model(str(m))
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    # fp32 like every other contender: on CPUs with AVX512-BF16 (or AMX) OpenVINO's default is bf16 inference,
    # about 2x faster and less exact (pdlite offers it: INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16)
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()
    return lambda: req.infer(feeds)


def export_onnx(d: Path, out: Path) -> Path | None:
    """The model as one ONNX file, written by pdlite's exporter (`pdlite export-onnx`)."""
    try:
        from pdlite.model_parser import load_model
        from pdlite.nnadapter.export import export_program
    except ImportError:
        return None
    try:
        m = load_model(model_dir=str(d))
        out.write_bytes(export_program(m.program, m.params, name=d.name).SerializeToString())
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        print(f"  (export-onnx failed for {d.name}: {e})", file=sys.stderr)
        return None
    return out


def paired_ratio(per_round: dict[str, list[float | None]], k: str, ref: str) -> float | None:
    """Median over rounds of per_round[k][r] / per_round[ref][r] (rounds where both ran); None without any."""
    pairs = [a / b for a, b in zip(per_round.get(k, []), per_round.get(ref, [])) if a is not None and b]
    return statistics.median(pairs) if pairs else None


def cell_ratio(med: dict[str, float], per_round: dict[str, list[float | None]], k: str, ref: str,
               plain: bool = False) -> float | None:
    """k / ref for a cell: paired by round (`paired_ratio`), or of the medians with `plain`."""
    if k not in med or not med.get(ref):
        return None
    return med[k] / med[ref] if plain else paired_ratio(per_round, k, ref)


def bench_cell(workers: dict[str, list[subprocess.Popen]], rounds: int, block: int, pause: float,
               block_warmup: int = 1, block_ms: float = 0.0,
               per_round: dict[str, list[float | None]] | None = None) -> dict[str, float]:
    """Interleave the workers in blocks, the order rotated each round (A B C, B C A, ...); each block starts
    with `block_warmup` untimed runs (after the pause a runtime's sleeping threads and cold caches would
    otherwise land on the first timed run, a cost that differs between runtimes), then times `block` runs, and
    more until `block_ms` have passed (sub-millisecond models get enough samples for a stable median). A
    contender with several worker processes runs a block in each of them per round. The median latency of each
    contender; `per_round`, when given, gets each contender's median of each round (for paired ratios)."""
    times: dict[str, list[float]] = {k: [] for k in workers}
    names = list(workers)
    for r in range(rounds):
        this_round: dict[str, list[float]] = {k: [] for k in workers}
        for k in names[r % len(names):] + names[:r % len(names)]:
            for w in workers[k]:
                assert w.stdin is not None and w.stdout is not None
                w.stdin.write(f"{block} {block_warmup} {block_ms}\n")
                w.stdin.flush()
                got = json.loads(w.stdout.readline())
                times[k] += got
                this_round[k] += got
                time.sleep(pause)
        if per_round is not None:
            for k, v in this_round.items():
                per_round.setdefault(k, []).append(statistics.median(v) if v else None)
    return {k: statistics.median(v) for k, v in times.items() if v}


def start_worker(kind: str, d: Path, batch: int, threads: int, warmup: int, onnx_path: Path | None,
                 notes: list[str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "--worker", kind, str(d), str(batch), str(threads), str(warmup),
           str(onnx_path or "")]
    w = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert w.stdout is not None
    line = w.stdout.readline().rstrip("\n")
    ready, _, note = line.partition("\t")
    if note and notes is not None:
        notes.append(note)
    if ready != "ready":
        err = (w.stderr.read() if w.stderr else "").strip().splitlines()
        w.kill()
        raise RuntimeError(err[-1] if err else f"worker {kind} exited")
    return w


def worker_main(kind: str, d: str, batch: str, threads: str, warmup: str, onnx: str) -> int:
    """A worker process: build one contender, say `ready`, then run N times per line read, reply with the times."""
    path, b, t = Path(d), int(batch), int(threads)
    feeds = feeds_for(path, b)
    if kind.startswith("pdlite-"):
        from pdlite.kernels.host import native
        if os.environ.get(NATIVE_ENV) == "1" and not native.available():
            raise SystemExit(f"{kind}: the native host kernels the run started with are not in use in this worker "
                             f"({native.load_note}); was pdlite/kernels/host/native_src/ edited during the run?")
    if kind == "pdlite-host":
        run = make_pdlite(path, feeds, t, None)
    elif kind.startswith("pdlite-"):
        run = make_pdlite(path, feeds, t, kind[len("pdlite-"):])
    elif kind == "paddle-inference":
        run = make_paddle(path, feeds, t)
    elif kind == "onnxruntime":
        run = make_ort(path, feeds, t, Path(onnx))
    elif kind == "openvino":
        run = make_openvino(path, feeds, t)
    else:
        raise SystemExit(f"unknown contender {kind}")
    for _ in range(int(warmup)):
        run()
    print("\t".join(["ready"] + NOTES), flush=True)
    for line in sys.stdin:
        fields = line.split()
        n, untimed, min_ms = int(fields[0]), int(fields[1]), float(fields[2])
        for _ in range(untimed):
            run()
        out: list[float] = []
        while len(out) < n or (sum(out) < min_ms and len(out) < MAX_BLOCK_RUNS):
            t0 = time.perf_counter()
            run()
            out.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps(out), flush=True)
    return 0


def versions() -> str:
    out = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    for mod in ("paddle", "onnxruntime", "openvino"):
        try:
            m = __import__(mod)
            out.append(f"{mod} {getattr(m, '__version__', '?')}")
        except ImportError:
            pass
    import pdlite

    out.append(f"pdlite {pdlite.__version__}")
    return ", ".join(out)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main(*sys.argv[2:8])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=6,
                    help="untimed runs per worker before the first block (pdlite on OpenVINO compiles a static model "
                         "for a signature in its 4th run, and that model's first runs are slower)")
    ap.add_argument("--rounds", type=int, default=6, help="blocks per contender")
    ap.add_argument("--block", type=int, default=5, help="runs per block")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between blocks")
    ap.add_argument("--plain-ratios", action="store_true",
                    help="ratios of the cells' medians (default: paired by round, see the module docstring)")
    ap.add_argument("--block-warmup", type=int, default=1, help="untimed runs at the start of each block")
    ap.add_argument("--block-ms", type=float, default=0.0,
                    help=f"time more runs in a block until this many ms have passed (at most {MAX_BLOCK_RUNS} runs)")
    ap.add_argument("--procs", type=int, default=1,
                    help="worker processes per contender (a block in each per round): the same engine moves "
                         "15-30%% between processes on small models, and more processes average that out")
    ap.add_argument("--devices", default="intel_openvino,onnxruntime,auto,auto-online",
                    help="pdlite NNAdapter devices to include (auto: pdlite's measured choice, the CLI default; "
                         "auto-online: a predictor's own auto, every call through it; none: the host target only)")
    ap.add_argument("--no-peers", action="store_true", help="pdlite only")
    ap.add_argument("--peers", default="paddle-inference,onnxruntime,openvino",
                    help="the peers to include (e.g. onnxruntime alone, to set pdlite-onnxruntime against it)")
    ap.add_argument("--no-host", action="store_true", help="leave pdlite-host out")
    ap.add_argument("--ref", default="paddle-inference", help="the contender the cells' ratios are to")
    args = ap.parse_args()
    from pdlite.tools.doctor import cpu_info

    cpu, flags = cpu_info()
    print(f"machine: {cpu}, {os.cpu_count()} CPUs (flags: {' '.join(flags) or 'none of interest'}); {versions()}")
    from pdlite.kernels.host import native
    print(f"pdlite native host kernels: {'in use' if native.available() else 'NOT in use'}, {native.load_note}"
          + (f", ISA {native.isa()}" if native.available() else ""))
    # the workers check they load the same kind of host kernels (native_src/ edited during a run: a stale build, the
    # NumPy kernels timed silently)
    os.environ[NATIVE_ENV] = "1" if native.available() else "0"
    more = f" (or more, to fill {args.block_ms:g} ms)" if args.block_ms else ""
    print(f"median ms of {args.rounds} x {args.block}{more} runs per contender and process ({args.procs} process(es) "
          f"per contender), interleaved in blocks (each after {args.block_warmup} untimed), after {args.warmup} "
          f"warm-ups; ratio = / {args.ref}, "
          + ("of the medians\n" if args.plain_ratios else "median over rounds of the same round's ratio\n"))
    header_done = False
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="pdlite_cmp_"))
    for name in args.models.split(","):
        d = find_model(name)
        if d is None:
            print(f"| {name} | (model not found) |")
            continue
        onnx_path = None if args.no_peers else export_onnx(d, tmp / f"{name}.onnx")
        for batch in map(int, args.batches.split(",")):
            for threads in map(int, args.threads.split(",")):
                makers = ([] if args.no_host else ["pdlite-host"]) + [
                    f"pdlite-{dev}" for dev in filter(None, args.devices.split(",")) if dev != "none"]
                if not args.no_peers:
                    makers += [k for k in filter(None, args.peers.split(","))
                               if k != "onnxruntime" or onnx_path is not None]
                workers: dict[str, list[subprocess.Popen]] = {}
                for k in makers:
                    try:
                        for _ in range(args.procs):
                            workers.setdefault(k, []).append(
                                start_worker(k, d, batch, threads, args.warmup, onnx_path, notes))
                    except Exception as e:  # noqa: BLE001 - a contender that cannot run is reported
                        for w in workers.pop(k, []):
                            w.kill()
                        print(f"  ({k} unavailable for {name} b{batch} t{threads}: {str(e)[:120]})", file=sys.stderr)
                if not header_done:
                    cols = list(makers)
                    autos = [k for k in cols if k.startswith("pdlite-auto")]
                    print("| model | batch | threads | " + " | ".join(cols + [f"{k[len('pdlite-'):]} / best peer"
                                                                        for k in autos]) + " |")
                    print("|---|---|---|" + "---|" * (len(cols) + len(autos)))
                    header_done = True
                per_round: dict[str, list[float | None]] = {}
                try:
                    med = bench_cell(workers, args.rounds, args.block, args.pause, args.block_warmup, args.block_ms,
                                     per_round)
                finally:
                    for ws in workers.values():
                        for w in ws:
                            w.kill()
                cells = []
                for k in cols:
                    r = cell_ratio(med, per_round, k, args.ref, args.plain_ratios) if k != args.ref else None
                    if k not in med:
                        cells.append("n/a")
                    elif r is not None:
                        cells.append(f"{med[k]:.2f} ({r:.2f}x)")
                    else:
                        cells.append(f"{med[k]:.2f}")
                peers = [k for k in ("paddle-inference", "onnxruntime", "openvino") if k in med]
                best = min(peers, key=lambda k: med[k]) if peers else None
                vs = []
                for k in autos:
                    r = cell_ratio(med, per_round, k, best, args.plain_ratios) if best else None
                    vs.append(f"{r:.2f}x" if r is not None else "n/a")
                print(f"| {name} | {batch} | {threads} | " + " | ".join(cells + vs) + " |", flush=True)
    for note in notes:
        print(f"\npdlite-auto, {note}", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
