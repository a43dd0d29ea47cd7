"""Streams of changing input shapes on the host and each NNAdapter device: what a new shape costs.

Each stream runs on a fresh predictor: one call at a shape outside the stream (the first call: conversion and
compile, or loading from the model cache), then the 12 shapes of the stream (each new to the device: the
runtime's own per-shape work), then the same 12 again. The issue-37 bar: on every device the new-shape pass
costs at most 1.5x the repeated one. Streams:
- rec: PP-OCRv4 rec (pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer), 12 batches of 6 lines, height 48, 12 widths;
- ernie: tests/fixtures/dynamic/ernie_like (ERNIE-style classifier), batch 1, 12 sequence lengths.
Every device's outputs are checked against the host's for every shape (max |diff| / max |host| printed).
Rounds are interleaved over devices (fresh predictors each round, no model cache), medians reported.

    python benchmarks/nnadapter_shapes.py [--streams rec,ernie] [--devices host,intel_openvino,onnxruntime]
                                          [--threads 2] [--rounds 3] [--cache] [--per-shape]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
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
FIRST = {"rec": 320, "ernie": 32}  # the first call's width / length (not in the stream)


def stream(name: str) -> tuple[Path, list[dict[str, np.ndarray]]]:
    """The model and its feeds: the first call's, then the stream's."""
    rng = np.random.default_rng(0)
    if name == "rec":
        return REC, [{"x": rng.uniform(-1, 1, (6, 3, 48, w)).astype(np.float32)} for w in [FIRST[name], *WIDTHS]]
    return ERNIE, [{"input_ids": rng.integers(1, 400, (1, n)).astype(np.int64),
                    "token_type_ids": np.zeros((1, n), np.int64)} for n in [FIRST[name], *LENGTHS]]


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
    ap.add_argument("--cache", action="store_true", help="a model cache filled before the rounds: the first call "
                    "loads compiled models instead of compiling, as a second `pdlite` process does")
    ap.add_argument("--per-shape", action="store_true", help="the devices declared static-only (Driver."
                    "dynamic_shapes = False): one conversion, compile and host check per new shape, as every "
                    "device did before issue 37")
    args = ap.parse_args(argv)
    if args.per_shape:
        from pdlite.nnadapter.registry import get_driver

        for d in args.devices.split(","):
            if d and d != "host":
                get_driver(d).dynamic_shapes = False
    # no cache: compile every time (the first call is what a process without a cache pays); --cache: a folder
    # filled before the rounds (the first call loads the compiled models, as a second `pdlite` process does)
    os.environ[ENV] = tempfile.mkdtemp(prefix="pdlite-shapes-") if args.cache else ""
    devices = [d for d in args.devices.split(",") if d]
    print("| stream | device | first call (s) | 12 new shapes (s) | same 12 again (s) | new / again | "
          "first call + new / again | builds | max rel diff vs host |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in [s for s in args.streams.split(",") if s]:
        model, feeds = stream(name)
        host_outs = run_stream(predictor(model, "host", args.threads), feeds)[1]
        times: dict[str, list[tuple[float, float, float]]] = {d: [] for d in devices}
        info: dict[str, tuple[str, float]] = {}
        for d in devices if args.cache else ():
            predictor(model, d, args.threads).predict(feeds[0])
        for _ in range(args.rounds):
            for d in devices:
                pred = predictor(model, d, args.threads)
                build, outs0 = run_stream(pred, feeds[:1])
                first, outs = run_stream(pred, feeds[1:])
                again = run_stream(pred, feeds[1:])[0]
                outs = outs0 + outs
                times[d].append((build, first, again))
                rel = max(float(np.max(np.abs(g - h))) / max(float(np.max(np.abs(h))), 1e-30)
                          for o, ho in zip(outs, host_outs) for g, h in zip(o, ho))
                ks = [i.kernel for i in pred.runtime_program.instructions if i.op.type == "subgraph"]
                info[d] = ("/".join(str(k.builds) for k in ks) or "-", rel)
        for d in devices:
            build, first, again = (statistics.median(t[i] for t in times[d]) for i in range(3))
            builds, rel = info[d]
            print(f"| {name} | {d} | {build:.3f} | {first:.3f} | {again:.3f} | {first / again:.2f}x | "
                  f"{(build + first) / again:.2f}x | {builds} | {rel:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
