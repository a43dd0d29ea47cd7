"""OpenVINO's inference precisions on this CPU: f32 (pdlite's default) against bf16 / f16, speed and accuracy.

`INTEL_OPENVINO_INFERENCE_PRECISION_HINT` (docs/nnadapter.md) lets OpenVINO run a fp32 model's layers in bf16 or
f16 where the CPU has them (bf16: AVX-512 BF16, and AMX tiles on Intel Xeons since Sapphire Rapids). For each model
of ../shared/models, one pdlite predictor per precision on intel_openvino, all in this process, timed
interleaved (A B C A B C ..., `--rounds` rounds of `--block` runs each, medians); accuracy over `--samples` inputs
(the case input plus noise): the largest |out - f32 out| / max|f32 out| and, for classifiers, top-1 agreement
with f32 (PP-OCR det: agreement of the text masks, probability > 0.3, and the mean |difference| of the maps).

Usage: python benchmarks/ov_precision.py [--models resnet18 ...] [--precisions f32 bf16 f16] [--threads 1]
Prints a Markdown table (for BENCHMARKS.md). Needs the openvino extra.
"""
from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "models"
CLASSIFIERS = ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "ppocr_cls_v2")
DETECTORS = ("ppocr_det_v4",)
OTHERS = ("transformer_encoder",)


def _cpu() -> str:
    from pdlite.tools.doctor import cpu_info

    model, flags = cpu_info()
    return f"{model} ({platform.machine()}; {' '.join(flags) or 'no flags of interest'})"


def _predictor(model: str, precision: str, threads: int):
    from pdlite.lite import CxxConfig, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(SHARED / model))
    cfg.set_threads(threads)
    cfg.set_nnadapter_device_names(["intel_openvino"])
    cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_PRECISION_HINT={precision};"
                                         f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads}")
    return create_paddle_predictor(cfg)


def _inputs(model: str, n: int) -> list[dict[str, np.ndarray]]:
    case = np.load(SHARED / model / "case.npz")
    feeds = {k[3:]: v for k, v in case.items() if k.startswith("in:")}
    rng = np.random.default_rng(0)
    out = [feeds]
    for _ in range(n - 1):
        out.append({k: (v + rng.normal(0, 0.3, v.shape)).astype(v.dtype) if v.dtype.kind == "f" else v
                    for k, v in feeds.items()})
    return out


def _agreement(model: str, refs: list[np.ndarray], outs: list[np.ndarray]) -> str:
    """Top-1 agreement (classifiers), text-mask agreement and mean |difference| (PP-OCR det), else '-'."""
    if model in DETECTORS:
        mask = np.mean([np.mean((r > 0.3) == (o > 0.3)) for r, o in zip(refs, outs)])
        mean = np.mean([np.mean(np.abs(r - o)) for r, o in zip(refs, outs)])
        return f"mask {100 * mask:.2f}%, mean abs diff {mean:.4f}"
    if model in CLASSIFIERS:
        top1 = np.mean([np.mean(r.reshape(len(r), -1).argmax(1) == o.reshape(len(o), -1).argmax(1))
                        for r, o in zip(refs, outs)])
        return f"top-1 {100 * top1:.1f}%"
    return "-"


def run(model: str, precisions: list[str], threads: int, rounds: int, block: int, samples: int) -> list[str]:
    preds = {p: _predictor(model, p, threads) for p in precisions}
    inputs = _inputs(model, samples)
    outs = {p: [np.asarray(pred.predict(x)[0]) for x in inputs] for p, pred in preds.items()}
    feed = inputs[0]
    for pred in preds.values():
        for _ in range(3):
            pred.predict(feed)
    times: dict[str, list[float]] = {p: [] for p in precisions}
    for _ in range(rounds):
        for p, pred in preds.items():
            t0 = time.perf_counter()
            for _ in range(block):
                pred.predict(feed)
            times[p].append((time.perf_counter() - t0) / block * 1e3)
    base = precisions[0]
    rows = []
    for p in precisions:
        speed = float(np.median(np.array(times[base]) / np.array(times[p])))
        err = max(float(np.max(np.abs(o - r)) / max(float(np.max(np.abs(r))), 1e-12))
                  for o, r in zip(outs[p], outs[base]))
        rows.append(f"| {model} | {p} | {np.median(times[p]):.2f} | {speed:.2f}x | {err:.1e} | "
                    f"{_agreement(model, outs[base], outs[p])} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=[*CLASSIFIERS, *DETECTORS, *OTHERS])
    ap.add_argument("--precisions", nargs="*", default=["f32", "bf16", "f16"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--samples", type=int, default=8)
    args = ap.parse_args()
    if args.precisions[0] != "f32":
        ap.error("the first precision is the reference: give f32 first")
    import openvino

    print(f"CPU: {_cpu()}; openvino {openvino.__version__}; {args.threads} thread(s); medians of {args.rounds} "
          f"interleaved rounds of {args.block} runs; error and agreement against f32 over {args.samples} inputs")
    print("| model | precision | ms | speed-up over f32 | max err / max abs f32 | agreement with f32 |")
    print("|---|---|---|---|---|---|")
    for m in args.models:
        for row in run(m, args.precisions, args.threads, args.rounds, args.block, args.samples):
            print(row, flush=True)


if __name__ == "__main__":
    main()
