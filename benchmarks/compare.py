"""pdlite against the peers, on the shared models, in one run: median latency and ratios.

Contenders (each skipped with a note when its package is absent):
  pdlite-host           pdlite, host target (NumPy)
  pdlite-<device>       pdlite + an NNAdapter device (intel_openvino, onnxruntime)
  paddle-inference      Paddle Inference, IR optimisation + oneDNN on (the optimized configuration)
  onnxruntime           ONNX Runtime on the model exported by `pdlite export-onnx`
  openvino              OpenVINO reading the .pdmodel directly

The machine is shared and noisy: contenders are interleaved round-robin (A B C A B C ...) and
each cell is the median of its runs. Ratios are contender / paddle-inference.

    python benchmarks/compare.py [--models a,b] [--batches 1,4] [--threads 1,2] [--repeats 20]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "ppocr_cls_v2", "ppocr_det_v4",
          "transformer_encoder"]


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
    for m, p in (("inference.pdmodel", "inference.pdiparams"), ("__model__", "__params__"), ("model", "params")):
        if (d / m).exists() and (d / p).exists():
            return d / m, d / p
    raise FileNotFoundError(d)


Runner = Callable[[], object]


def make_pdlite(d: Path, feeds, threads: int, device: str | None) -> Runner:
    from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_threads(threads)
    if device:
        cfg.set_nnadapter_device_names([device])
        key = "INTEL_OPENVINO_INFERENCE_NUM_THREADS" if device == "intel_openvino" else "ONNXRUNTIME_INTRA_OP_NUM_THREADS"
        cfg.set_nnadapter_context_properties(f"{key}={threads}")
        cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)])
    pred = create_paddle_predictor(cfg)
    for k, v in feeds.items():
        pred.get_input_by_name(k).from_numpy(v)
    return pred.run


def make_paddle(d: Path, feeds, threads: int) -> Runner:
    import paddle.inference as pi

    m, p = program_files(d)
    cfg = pi.Config(str(m), str(p))
    cfg.disable_gpu()
    cfg.switch_ir_optim(True)
    cfg.enable_mkldnn()
    cfg.set_cpu_math_library_num_threads(threads)
    cfg.disable_glog_info()
    pred = pi.create_predictor(cfg)
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
    m, _ = program_files(d)
    model = core.read_model(str(m))
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"})
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


def bench_cell(runners: dict[str, Runner], warmup: int, repeats: int) -> dict[str, float]:
    for r in runners.values():
        for _ in range(warmup):
            r()
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(repeats):
        for k, r in runners.items():  # interleaved: A B C A B C ...
            t0 = time.perf_counter()
            r()
            times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--devices", default="intel_openvino,onnxruntime", help="pdlite NNAdapter devices to include")
    ap.add_argument("--no-peers", action="store_true", help="pdlite only")
    args = ap.parse_args()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; {versions()}")
    print(f"median ms of {args.repeats} interleaved runs after {args.warmup} warm-ups; ratio = / paddle-inference\n")
    header_done = False
    tmp = Path(tempfile.mkdtemp(prefix="pdlite_cmp_"))
    for name in args.models.split(","):
        d = find_model(name)
        if d is None:
            print(f"| {name} | (model not found) |")
            continue
        onnx_path = None if args.no_peers else export_onnx(d, tmp / f"{name}.onnx")
        for batch in map(int, args.batches.split(",")):
            feeds = feeds_for(d, batch)
            for threads in map(int, args.threads.split(",")):
                makers: dict[str, Callable[[], Runner]] = {"pdlite-host": partial(make_pdlite, d, feeds, threads, None)}
                for dev in filter(None, args.devices.split(",")):
                    makers[f"pdlite-{dev}"] = partial(make_pdlite, d, feeds, threads, dev)
                if not args.no_peers:
                    makers["paddle-inference"] = partial(make_paddle, d, feeds, threads)
                    if onnx_path is not None:
                        makers["onnxruntime"] = partial(make_ort, d, feeds, threads, onnx_path)
                    makers["openvino"] = partial(make_openvino, d, feeds, threads)
                runners: dict[str, Runner] = {}
                for k, mk in makers.items():
                    try:
                        runners[k] = mk()
                    except Exception as e:  # noqa: BLE001 - a contender that cannot run is reported
                        print(f"  ({k} unavailable for {name} b{batch} t{threads}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0][:100]})", file=sys.stderr)
                if not header_done:
                    cols = list(makers)
                    print("| model | batch | threads | " + " | ".join(cols) + " |")
                    print("|---|---|---|" + "---|" * len(cols))
                    header_done = True
                med = bench_cell(runners, args.warmup, args.repeats)
                base = med.get("paddle-inference")
                cells = []
                for k in cols:
                    if k not in med:
                        cells.append("n/a")
                    elif base and k != "paddle-inference":
                        cells.append(f"{med[k]:.2f} ({med[k] / base:.2f}x)")
                    else:
                        cells.append(f"{med[k]:.2f}")
                print(f"| {name} | {batch} | {threads} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
