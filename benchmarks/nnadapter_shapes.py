"""Streams of changing input shapes on the host and each NNAdapter device: what a new shape costs.

Each stream is run twice on a fresh predictor: first with every shape new (conversion, compile, each
runtime's own per-shape work), then the same shapes again. The issue-37 bar: on every device the new-shape
pass costs at most 1.5x the repeated one. Streams:
- rec: PP-OCRv4 rec (pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer), 12 batches of 6 lines, height 48, 12 widths;
- ernie: tests/fixtures/dynamic/ernie_like (ERNIE-style classifier), batch 1, 12 sequence lengths.
Every device's outputs are checked against the host's for every shape (max |diff| / max |host| printed).
Rounds are interleaved over devices (fresh predictors each round, no model cache), medians reported.

    python benchmarks/nnadapter_shapes.py [--streams rec,ernie] [--devices host,intel_openvino,onnxruntime]
                                          [--threads 2] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite import CxxConfig, create_paddle_predictor  # noqa: E402
from pdlite.nnadapter.model_cache import ENV  # noqa: E402

REC = REPO / "pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer"
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
WIDTHS = [96, 136, 168, 200, 232, 272, 304, 344, 376, 416, 448, 480]
LENGTHS = [9, 13, 17, 22, 28, 33, 41, 47, 55, 64, 80, 96]


def stream(name: str) -> tuple[Path, list[dict[str, np.ndarray]]]:
    rng = np.random.default_rng(0)
    if name == "rec":
        return REC, [{"x": rng.uniform(-1, 1, (6, 3, 48, w)).astype(np.float32)} for w in WIDTHS]
    return ERNIE, [{"input_ids": rng.integers(1, 400, (1, n)).astype(np.int64),
                    "token_type_ids": np.zeros((1, n), np.int64)} for n in LENGTHS]


def predictor(model: Path, device: str, threads: int):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model))
    cfg.set_threads(threads)
    if device != "host":
        cfg.set_nnadapter_device_names([device])
        cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                             f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads}")
    return create_paddle_predictor(cfg)


def run_stream(pred, feeds: list[dict[str, np.ndarray]]) -> tuple[float, list[list[np.ndarray]]]:
    outs = []
    t0 = time.perf_counter()
    for f in feeds:
        outs.append(pred.predict(f))
    return time.perf_counter() - t0, outs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="rec,ernie")
    ap.add_argument("--devices", default="host,intel_openvino,onnxruntime")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ[ENV] = ""  # compile every time: the first pass is what a new process without a cache pays
    devices = [d for d in args.devices.split(",") if d]
    print("| stream | device | new shapes (s) | same shapes again (s) | new / again | builds | max rel diff vs host |")
    print("|---|---|---|---|---|---|---|")
    for name in [s for s in args.streams.split(",") if s]:
        model, feeds = stream(name)
        host_outs = run_stream(predictor(model, "host", args.threads), feeds)[1]
        times: dict[str, list[tuple[float, float]]] = {d: [] for d in devices}
        info: dict[str, tuple[str, float]] = {}
        for _ in range(args.rounds):
            for d in devices:
                pred = predictor(model, d, args.threads)
                first, outs = run_stream(pred, feeds)
                again = run_stream(pred, feeds)[0]
                times[d].append((first, again))
                rel = max(float(np.max(np.abs(g - h))) / max(float(np.max(np.abs(h))), 1e-30)
                          for o, ho in zip(outs, host_outs) for g, h in zip(o, ho))
                ks = [i.kernel for i in pred.runtime_program.instructions if i.op.type == "subgraph"]
                info[d] = ("/".join(str(k.builds) for k in ks) or "-", rel)
        for d in devices:
            first = statistics.median(t[0] for t in times[d])
            again = statistics.median(t[1] for t in times[d])
            builds, rel = info[d]
            print(f"| {name} | {d} | {first:.3f} | {again:.3f} | {first / again:.2f}x | {builds} | {rel:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
