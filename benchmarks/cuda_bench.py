"""pdlite's CUDA target on a GPU: accuracy against case.npz, and latency / throughput against PyTorch.

    python benchmarks/cuda_bench.py check [--models a,b] [--models-root DIR]
    python benchmarks/cuda_bench.py bench [--models mobilenet_v2,mobilenet_v3_small,resnet18]
                                          [--batches 1,32] [--iters 100] [--no-compile] [--models-root DIR]

check: every legacy model found, places [CUDA FP32] (+ Host fallback), against its case.npz
(max|got - ref| / max|ref|): eager, CUDA-graph replay (second and third run, so the replayed
graph is what is measured), the zero-copy path (torch CUDA tensor in, device outputs), and
places [CUDA FP16, CUDA FP32] (fp16 kernels with calib casts) for the error it costs.

bench: batch 1 and 32 (random 3x224x224 inputs) for pdlite CUDA eager and with graph replay
(host NumPy input and output, the API's contract, copies included; and the zero-copy path with
device tensors), against the same architecture from torchvision (num_classes=100, random
weights) in PyTorch eager (torch.inference_mode) and torch.compile (default mode), on the same
GPU, all in fp32 with TF32 off (pdlite's FP32 places turn it off; torch is set the same way).
Each cell: median of `iters` timed runs after warm-up, each run ended by a device sync;
throughput = batch / median latency.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LEGACY = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined", "ppocr_cls_v2",
          "ppocr_det_v4", "resnet18", "transformer_encoder"]
BENCH = ["mobilenet_v2", "mobilenet_v3_small", "resnet18"]


def find_model(name: str, extra: list[str]) -> Path | None:
    for root in [*map(Path, extra), REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"]:
        if (root / name).is_dir():
            return root / name
    return None


def case(d: Path, name: str = "case.npz") -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    if not (d / name).exists():  # the non-combined re-save shares its twin's case
        d = d.parent / d.name.replace("_noncombined", "")
    z = np.load(d / name)
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            {k[4:]: z[k] for k in z.files if k.startswith("out:")})


DEVICE = "cuda"


def predictor(d: Path, fp16: bool = False, **options: Any):
    from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    places = [Place(TargetType.CUDA, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)]
    if fp16:
        places.insert(0, Place(TargetType.CUDA, PrecisionType.FP16))
    cfg.set_valid_places(places)
    cfg.set_cuda_device(DEVICE)
    for k, v in options.items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


def rel_err(got: Any, ref: np.ndarray) -> float:
    got = got.detach().float().cpu().numpy() if hasattr(got, "detach") else np.asarray(got)
    if got.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(got.astype(np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def check(models: list[str], roots: list[str]) -> None:

    print("| model | eager fp32 | graph fp32 (replay) | zero-copy graph fp32 | graph fp32 case_b4 | graph fp16 |")
    print("|---|---|---|---|---|---|")
    for name in models:
        d = find_model(name, roots)
        if d is None:
            print(f"| {name} | (model not found) |||||")
            continue
        ins, outs = case(d)
        refs = list(outs.values())
        cells = [name]
        for fn in (check_eager, check_graph, check_zero_copy, check_b4, check_fp16):
            try:
                cells.append(fn(d, ins, refs))
            except Exception as e:  # noqa: BLE001 - report and go on with the other cells
                cells.append(f"ERROR {type(e).__name__}: {str(e)[:300]}")
        print("| " + " | ".join(cells) + " |", flush=True)


def err(outs: list[Any], refs: list[np.ndarray]) -> str:
    return f"{max(rel_err(g, r) for g, r in zip(outs, refs)):.2e}"


def check_eager(d: Path, ins: dict[str, np.ndarray], refs: list[np.ndarray]) -> str:
    p = predictor(d)
    insts = p.runtime_program.instructions
    on_cuda = sum(i.kernel_def.key.target.name == "CUDA" for i in insts)
    return f"{err(p.predict(ins), refs)} ({on_cuda}/{len(insts)} ops on CUDA)"


def check_graph(d: Path, ins: dict[str, np.ndarray], refs: list[np.ndarray]) -> str:
    p = predictor(d, cuda_graph=True)
    first = p.predict(ins)
    got = [p.predict(ins) for _ in range(2)][-1]
    prog = p.runtime_program
    how = f"{len(prog.graphs)} graph" if prog.graphs and not prog.disabled else f"NOT captured: {prog.disabled}"
    return f"{err(got, refs)} (first run {err(first, refs)}; {how})"


def check_zero_copy(d: Path, ins: dict[str, np.ndarray], refs: list[np.ndarray]) -> str:
    import torch

    p = predictor(d, cuda_graph=True, cuda_device_outputs=True)
    for _ in range(3):
        for k, v in ins.items():
            p.get_input_by_name(k).from_numpy(torch.from_numpy(v).to(DEVICE))
        p.run()
    outs = [p.get_output(i).raw() for i in range(len(refs))]
    assert all(hasattr(o, "device") for o in outs), "outputs are not device tensors"
    return err(outs, refs)


def check_b4(d: Path, ins: dict[str, np.ndarray], refs: list[np.ndarray]) -> str:
    if not (d / "case_b4.npz").exists():
        return "-"
    ins4, outs4 = case(d, "case_b4.npz")
    p = predictor(d, cuda_graph=True)
    return err([p.predict(ins4) for _ in range(2)][-1], list(outs4.values()))


def check_fp16(d: Path, ins: dict[str, np.ndarray], refs: list[np.ndarray]) -> str:
    p = predictor(d, fp16=True, cuda_graph=True)
    return err([p.predict(ins) for _ in range(2)][-1], refs)


def timed(fn: Callable[[], Any], iters: int, warmup: int = 10) -> float:
    """Median ms of `iters` calls of fn (each followed by a device sync)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def bench(models: list[str], batches: list[int], iters: int, compile_: bool, roots: list[str]) -> None:
    import torch
    import torchvision

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {torch.cuda.get_device_name()}")
    cols = ["pdlite eager", "pdlite graph", "pdlite graph zero-copy", "torch eager", "torch.compile"]
    print("| model | batch | " + " | ".join(f"{c} ms (img/s)" for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for name in models:
        d = find_model(name, roots)
        if d is None:
            print(f"| {name} | (model not found) |")
            continue
        (feed, _), = case(d)[0].items()
        tv = getattr(torchvision.models, name)(num_classes=100).cuda().eval()
        compiled = torch.compile(tv) if compile_ else None
        preds = {"eager": predictor(d), "graph": predictor(d, cuda_graph=True),
                 "zc": predictor(d, cuda_graph=True, cuda_device_outputs=True)}
        for b in batches:
            x = np.random.default_rng(0).standard_normal((b, 3, 224, 224)).astype(np.float32)
            res = bench_batch(preds, feed, x, tv, compiled, iters)
            if "compile_s" in res:
                print(f"  (torch.compile of {name} at batch {b}: {res.pop('compile_s'):.1f} s)", file=sys.stderr)
            cells = [f"{res[c]:.3f} ({b / res[c] * 1e3:.0f})" if c in res else "-" for c in cols]
            print(f"| {name} | {b} | " + " | ".join(cells) + " |", flush=True)


def bench_batch(preds: dict[str, Any], feed: str, x: np.ndarray, tv: Any, compiled: Any, iters: int) -> dict[str, float]:
    """Median ms per contender for one input batch (and torch.compile's first-call seconds)."""
    import torch

    xt = torch.from_numpy(x).cuda()
    zc = preds["zc"]

    def zero_copy() -> None:
        zc.get_input_by_name(feed).from_numpy(xt)
        zc.run()

    res = {
        "pdlite eager": timed(lambda: preds["eager"].predict({feed: x}), iters),
        "pdlite graph": timed(lambda: preds["graph"].predict({feed: x}), iters),
        "pdlite graph zero-copy": timed(zero_copy, iters),
    }
    with torch.inference_mode():
        res["torch eager"] = timed(lambda: tv(xt), iters)
        if compiled is not None:
            t0 = time.perf_counter()
            compiled(xt)
            torch.cuda.synchronize()
            res["compile_s"] = time.perf_counter() - t0
            res["torch.compile"] = timed(lambda: compiled(xt), iters)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["check", "bench"])
    ap.add_argument("--models", default="")
    ap.add_argument("--models-root", action="append", default=[], help="another folder of model directories")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda", help="the CUDA kernels' torch device (cpu: a smoke test of check)")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    if a.mode == "check":
        check(a.models.split(",") if a.models else LEGACY, a.models_root)
    else:
        bench(a.models.split(",") if a.models else BENCH, [int(b) for b in a.batches.split(",")], a.iters,
              not a.no_compile, a.models_root)


if __name__ == "__main__":
    main()
