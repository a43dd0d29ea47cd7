"""pdlite's OpenCL target: accuracy against case.npz and latency, host vs OpenCL (fp32, fp16) vs the CUDA target.

    python benchmarks/opencl_bench.py [--models a,b] [--repeats 5] [--opencl-device P:D] [--models-root DIR]

For every model found (tests/fixtures/models, ../shared/models, --models-root), each configuration is
built once and run on the model's case.npz input:
- host: places [X86 FP32] (the native host kernels);
- opencl fp32: [OpenCL FP32, Host FP32]; opencl fp16: [OpenCL FP16, OpenCL FP32, Host FP32] (half storage);
- cuda: [CUDA FP32, Host FP32] on the GPU torch sees, else on torch's CPU device (said in the column), when
  torch is installed.
Each cell: median latency (ms) of `repeats` timed runs after one warm-up (the first run compiles the
OpenCL kernels: reported separately as "first"), and the error max|got - ref| / max|ref| against Paddle's
reference. The configurations run one after another, each alone (not interleaved run by run): their
thread pools (pdlite's native pool, PoCL's workers, torch's OpenMP threads) keep spinning for a while after
a run and would slow whichever runs next on a small machine. On PoCL (a CPU OpenCL device) the OpenCL
latencies are correctness-only figures: PoCL runs the kernels on the same CPU cores as the host target,
with none of its tuned kernels. The device line says which OpenCL device ran.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_pir", "resnet18", "ppocr_cls_v2",
          "ppocr_det_v4", "transformer_encoder"]


def find_model(name: str, extra: list[str]) -> Path | None:
    for root in [*map(Path, extra), REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"]:
        if (root / name).is_dir():
            return root / name
    return None


def case(d: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    z = np.load(d / "case.npz")
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            {k[4:]: z[k] for k in z.files if k.startswith("out:")})


def configs(opencl_device: str | None) -> dict[str, tuple[list, dict[str, Any]]]:
    from pdlite.lite import Place, PrecisionType, TargetType

    host = Place(TargetType.Host, PrecisionType.FP32)
    ocl = {"opencl_device": opencl_device} if opencl_device else {}
    out = {"host": ([Place(TargetType.X86, PrecisionType.FP32)], {}),
           "opencl fp32": ([Place(TargetType.OpenCL, PrecisionType.FP32), host], ocl),
           "opencl fp16": ([Place(TargetType.OpenCL, PrecisionType.FP16), Place(TargetType.OpenCL, PrecisionType.FP32),
                            host], ocl)}
    if importlib.util.find_spec("torch") is not None:
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
        out[f"cuda ({dev})"] = ([Place(TargetType.CUDA, PrecisionType.FP32), host], {"cuda_device": dev})
    return out


def build(d: Path, places: list, options: dict[str, Any]):
    from pdlite.lite import CxxConfig, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_valid_places(places)
    cfg.set_threads(2)
    for k, v in options.items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


def rel_err(got: list[np.ndarray], ref: dict[str, np.ndarray]) -> float:
    return max(float(np.max(np.abs(g.astype(np.float64) - r)) / max(float(np.max(np.abs(r))), 1e-30))
               for g, r in zip(got, ref.values()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--opencl-device", default=None)
    ap.add_argument("--models-root", action="append", default=[])
    args = ap.parse_args()
    from pdlite.kernels.opencl.device import find_device

    _, _, dev = find_device(args.opencl_device)
    print(f"OpenCL device: {dev.name.strip()} ({dev.platform.name}, {dev.version})")
    cfgs = configs(args.opencl_device)
    names = list(cfgs)
    print("| model | " + " | ".join(f"{n} ms (first) / err" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for name in args.models.split(","):
        d = find_model(name, args.models_root)
        if d is None:
            print(f"| {name} | (not found) |")
            continue
        ins, outs = case(d)
        first, errs = {}, {}
        times: dict[str, list[float]] = {n: [] for n in names}
        for n, (places, opts) in cfgs.items():
            pred = build(d, places, opts)
            time.sleep(0.5)  # the previous configuration's threads back to sleep
            t = time.perf_counter()
            errs[n] = rel_err(pred.predict(ins), outs)
            first[n] = (time.perf_counter() - t) * 1e3
            for _ in range(args.repeats):
                t = time.perf_counter()
                pred.predict(ins)
                times[n].append((time.perf_counter() - t) * 1e3)
            del pred
        cells = [f"{statistics.median(times[n]):.1f} ({first[n]:.0f}) / {errs[n]:.1e}" for n in names]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
