"""pdlite's NNAdapter overhead: pdlite + a device against the device's runtime called directly.

For each model at batch 1 and 4:
- pdlite + intel_openvino (CxxConfig.set_nnadapter_device_names) against OpenVINO reading the same
  Paddle model itself (`openvino.Core().read_model(<.pdmodel / __model__>)`), compiled with the
  same config (CPU, f32, LATENCY, the same thread count);
- pdlite + onnxruntime against ONNX Runtime running the file `pdlite export-onnx` writes, with the
  same session options.
Calls are interleaved (A B, B A, A B, ...; one call each), after warm-up; the table reports the
medians, the ratio pdlite / direct, and pdlite's own Python time per call (the same predictor call
with the driver's run replaced by returning saved outputs, so only pdlite's work is timed). The pdlite
call is `predictor.run()` on inputs set before (as benchmarks/compare.py times it, and as the direct
calls get their arrays); `--call predict` times `from_numpy` + `run` + `numpy()` instead.

`--devices auto`: a predictor with set_nnadapter_device_names(["auto"]) (its online auto, a cache of its own; warmed
up until it settled) against pdlite on the device it chose: what `auto` costs per call beyond that device.
`--profile N`: cProfile over N pdlite calls of each cell, the functions with the most own time (where a call goes).

    python benchmarks/nnadapter_overhead.py [--models m1,m2] [--threads 2] [--seconds 2] [--devices d1,auto]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor  # noqa: E402
from pdlite.model_parser import load_model  # noqa: E402
from pdlite.nnadapter.export import export_program  # noqa: E402

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "ppocr_cls_v2", "ppocr_det_v4", "resnet18",
          "transformer_encoder"]


def model_dir(name: str) -> Path:
    for root in (REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"):
        if (root / name).is_dir():
            return root / name
    raise SystemExit(f"model {name} not found")


def program_file(d: Path) -> Path:
    for n in ("inference.pdmodel", "__model__"):
        if (d / n).is_file():
            return d / n
    raise SystemExit(f"no legacy program file in {d}")


def feeds_for(d: Path, batch: int) -> dict[str, np.ndarray]:
    b4 = d / "case_b4.npz"
    z = np.load(b4 if batch == 4 and b4.exists() else d / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    return {k: (v if v.shape[0] == batch else np.repeat(v[:1], batch, axis=0)) for k, v in ins.items()}


def pdlite_runner(d: Path, device: str, threads: int, call: str = "run") -> tuple[Callable[[dict], list], object]:
    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_threads(threads)
    if device != "auto":
        cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
    cfg.set_nnadapter_device_names([device])
    cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                         f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads}")
    pred = create_paddle_predictor(cfg)
    inputs = [pred.get_input_by_name(n) for n in pred.get_input_names()]
    outputs = [pred.get_output(i) for i in range(len(pred.get_output_names()))]

    last: list[dict] = []

    def run(feeds: dict) -> list:
        if call == "predict" or not last or last[0] is not feeds:  # "run": inputs set once per feeds dict
            for t in inputs:
                t.from_numpy(feeds[t.name])
            last[:] = [feeds]
        pred.run()
        return [o.numpy() for o in outputs] if call == "predict" else [o.raw() for o in outputs]

    return run, pred


def openvino_runner(d: Path, threads: int, workdir: str) -> Callable[[dict], list]:
    import openvino as ov

    core = ov.Core()
    prog = program_file(d)
    if prog.suffix != ".pdmodel":  # combined-legacy __model__/__params__: the same bytes under .pdmodel names
        link_dir = Path(workdir) / f"{d.name}_pdmodel"
        link_dir.mkdir(exist_ok=True)
        for src, dst in ((prog, "inference.pdmodel"), (d / "__params__", "inference.pdiparams")):
            if not (link_dir / dst).exists():
                os.symlink(src, link_dir / dst)
        prog = link_dir / "inference.pdmodel"
    model = core.read_model(str(prog))
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                                 "PERFORMANCE_HINT": "LATENCY"})
    req = compiled.create_infer_request()
    names = [p.get_any_name() for p in compiled.inputs]

    def run(feeds: dict) -> list:
        return list(req.infer([feeds[n] for n in names], share_inputs=True).to_tuple())

    return run


def onnxruntime_runner(d: Path, threads: int, workdir: str) -> Callable[[dict], list]:
    import onnxruntime as ort

    m = load_model(model_dir=str(d))
    path = os.path.join(workdir, d.name + ".onnx")
    with open(path, "wb") as f:
        f.write(export_program(m.program, m.params, check=False).SerializeToString())
    # the session options pdlite's driver uses (threads, and its pool threads spin at most 300 us once a run ends:
    # with ORT's default the direct session's idle threads would spin through pdlite's calls in this process)
    from pdlite.nnadapter.drivers.onnxruntime import OnnxRuntimeDriver

    so = OnnxRuntimeDriver().session_options({"ONNXRUNTIME_INTRA_OP_NUM_THREADS": str(threads)})
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def run(feeds: dict) -> list:
        return sess.run(None, feeds)

    return run


def interleaved(a: Callable[[], object], b: Callable[[], object], seconds: float, warmup: int = 5,
                min_calls: int = 30) -> tuple[float, float]:
    """Medians (ms) of single calls of a and b, alternating which goes first each round."""
    for _ in range(warmup):
        a(), b()
    ta: list[float] = []
    tb: list[float] = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end or len(ta) < min_calls:
        for f, acc in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t0)
        i += 1
    return 1e3 * statistics.median(ta), 1e3 * statistics.median(tb)


def auto_runner(d: Path, threads: int, call: str, feeds: dict) -> tuple[Callable[[dict], list], object, str]:
    """pdlite's online auto (a predictor on device "auto", a cache of its own), run until it settled; with the
    device it chose."""
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="pdlite_overhead_cache_")
    run, pred = pdlite_runner(d, "auto", threads, call)
    for _ in range(40):  # the host's first calls, the fixed-shape measurement, then the calls on its choice
        run(feeds)
    return run, pred, pred.auto_choice.device  # type: ignore[attr-defined]


def subgraph_kernels(pred: object) -> list:
    """The subgraph kernels a pdlite call may run: the predictor's, and with auto its candidates'."""
    preds = [pred] + list(getattr(getattr(pred, "_auto", None), "preds", {}).values())
    return [getattr(i, "inner", i).kernel for p in preds for i in p.runtime_program.instructions  # type: ignore
            if i.op.type == "subgraph"]


def profile(run: Callable[[dict], list], feeds: dict, calls: int, top: int = 14) -> str:
    """cProfile over `calls` pdlite calls: the functions with the most own time."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        run(feeds)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def python_overhead_us(run: Callable[[dict], list], pred: object, feeds: dict, calls: int = 300) -> float:
    """Median time of a pdlite call whose device work is replaced by returning saved outputs: pdlite's own cost."""
    kernels = [k for k in subgraph_kernels(pred) if k._driver is not None]
    for k in kernels:
        memo: dict[str, list] = {}

        def fake(compiled, inputs, _orig=k._driver.run, _memo=memo):
            if "out" not in _memo:  # the first call runs the device once
                _memo["out"] = _orig(compiled, inputs)
            return list(_memo["out"])

        k._driver.run = fake
    for _ in range(10):
        run(feeds)
    times = []
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            run(feeds)
            times.append(time.perf_counter() - t0)
    finally:
        for k in kernels:
            del k._driver.run
    return 1e6 * statistics.median(times)


def max_rel(a: list, b: list) -> float:
    return max(float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(y))), 1e-30) for x, y in zip(a, b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time per (model, batch, device)")
    ap.add_argument("--devices", default="intel_openvino,onnxruntime")
    ap.add_argument("--call", choices=("run", "predict"), default="run",
                    help="what a pdlite call is: run() on inputs set before, or from_numpy + run + numpy()")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile N pdlite calls of each cell")
    args = ap.parse_args()
    devices = args.devices.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            d = model_dir(name)
            for device in devices:
                for batch in (1, 4):
                    feeds = feeds_for(d, batch)
                    label = device
                    try:
                        if device == "auto":  # against pdlite on the device it chose (built afresh per batch)
                            run, pred, chose = auto_runner(d, args.threads, args.call, feeds)
                            if chose == "host":
                                raise RuntimeError("auto chose the host here (no device to compare with)")
                            direct, direct_pred = pdlite_runner(d, chose, args.threads, args.call)
                            label = f"auto (vs pdlite on {chose}, its choice)"
                        elif batch == 1:
                            run, pred = pdlite_runner(d, device, args.threads, args.call)
                            direct = (openvino_runner(d, args.threads, work) if device == "intel_openvino"
                                      else onnxruntime_runner(d, args.threads, work))
                    except Exception as e:  # report and go on
                        rows.append((name, batch, device, f"n/a ({type(e).__name__}: {str(e)[:60]})", "", "", "",
                                     ""))
                        if device == "auto":
                            continue
                        break  # (the other devices' runners serve both batches)
                    err = max_rel(run(feeds), direct(feeds))
                    ours, theirs = interleaved(lambda f=feeds, r=run: r(f), lambda f=feeds, r=direct: r(f), args.seconds)
                    py_us = python_overhead_us(run, pred, feeds)
                    if device == "auto":
                        py_us_dev = python_overhead_us(direct, direct_pred, feeds)
                        py = f"{py_us:.1f} ({py_us_dev:.1f} on {chose} alone)"
                    else:
                        py = f"{py_us:.1f}"
                    rows.append((name, batch, label, f"{theirs:.3f}", f"{ours:.3f}", f"{ours / theirs:.3f}", py,
                                 f"{err:.1e}"))
                    print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
                    if args.profile:
                        print(f"\n{name} b{batch} {label}: cProfile over {args.profile} calls", file=sys.stderr)
                        print(profile(run, feeds, args.profile), file=sys.stderr, flush=True)
    direct_name = {"intel_openvino": "OpenVINO on .pdmodel", "onnxruntime": "ORT on exported .onnx"}
    print(f"\nthreads={args.threads}, pdlite call: {args.call}, median of interleaved single calls, "
          f"~{args.seconds:g} s per cell\n")
    print("| model | batch | device | direct (ms) | pdlite (ms) | pdlite / direct | pdlite Python per call (us) "
          "| max rel. diff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        dev = f"{r[2]} (vs {direct_name[r[2]]})" if r[2] in direct_name else r[2]
        print(f"| {r[0]} | {r[1]} | {dev} | " + " | ".join(str(x) for x in r[3:]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
