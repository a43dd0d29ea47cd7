"""Streams of changing input shapes on the host and each NNAdapter device: what a new shape costs.

Each stream runs on a fresh predictor: one call at a shape outside the stream (the first call: conversion and
compile, or loading from the model cache), then the 12 shapes of the stream (each new to the device: the
runtime's own per-shape work), then the same 12 again. The issue-37 bar: on every device the new-shape pass
costs at most 1.5x the repeated one. Streams:
- rec: PP-OCRv4 rec (pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer), 12 batches of 6 lines, height 48, 12 widths;
- ernie: tests/fixtures/dynamic/ernie_like (ERNIE-style classifier), batch 1, 12 sequence lengths.
Every device's outputs are checked against the host's for every shape (max |diff| / max |host| printed).
Rounds are interleaved over devices (fresh predictors each round, no model cache). A round runs `--inner` fresh
predictors one after the other (default 10 for ernie, whose whole stream is a few ms, 1 for rec); every call is
timed, and a pass's time is the sum over its calls of each call's median over all rounds and predictors (robust
to the stalls a shared machine puts into single calls).

Beside pdlite's targets, the runtimes called directly (no pdlite) on the ONNX model pdlite's subgraph kernel
builds for the stream (the same bytes, dynamic dims): `raw-onnxruntime` (an InferenceSession with the driver's
session options), `raw-openvino` (compile_model with OpenVINO's defaults but the thread count and f32, i.e. its
snippets on) and `raw-openvino-nosnippets` (the same with SNIPPETS_MODE=DISABLE, as pdlite compiles models with
dynamic dims by default: INTEL_OPENVINO_SNIPPETS=static). Their "first call" is the compile and first run.

`--fresh-shapes`: each predictor runs shapes no earlier predictor of the process ran (the stream's lengths / widths
plus an offset per predictor: +k for ernie, +8k for rec; one predictor per round unless --inner says). Without it
every predictor after the first finds what the runtime keeps per process for those shapes: OpenVINO's CPU plugin
creates a oneDNN primitive (JIT code) per new shape for a MatMul of two computed inputs (attention) or a
FullyConnected with a fused activation, and oneDNN caches them per process, so only the first predictor paid for
them and the medians did not show it. A user's process meets a new shape once: --fresh-shapes is its cost.

    python benchmarks/nnadapter_shapes.py [--streams rec,ernie] [--devices host,intel_openvino,onnxruntime,raw-...]
                                          [--threads 2] [--rounds 3] [--inner N] [--cache] [--per-shape]
                                          [--properties INTEL_OPENVINO_SNIPPETS=all] [--fresh-shapes]
                                          [--without-rewrite separate_fc_activations]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
INNER = {"rec": 1, "ernie": 10}  # fresh predictors per round (their mean reported) unless --inner says
RAW = ["raw-onnxruntime", "raw-openvino", "raw-openvino-nosnippets"]


MAX_LENGTH = 128  # the ERNIE fixture's position embeddings


def stream(name: str, offset: int = 0) -> tuple[Path, list[dict[str, np.ndarray]]]:
    """The model and its feeds: the first call's, then the stream's (`offset`: --fresh-shapes' k, the stream's
    shapes moved by k (ernie) or 8k (rec))."""
    rng = np.random.default_rng(0)
    if name == "rec":
        return REC, [{"x": rng.uniform(-1, 1, (6, 3, 48, w)).astype(np.float32)}
                     for w in [FIRST[name], *(w + 8 * offset for w in WIDTHS)]]
    lengths = [n + offset for n in LENGTHS]
    if lengths[-1] > MAX_LENGTH:
        raise SystemExit(f"--fresh-shapes: {offset} predictors need ERNIE lengths up to {lengths[-1]}, over its "
                         f"{MAX_LENGTH} positions: fewer --rounds, --inner or --devices")
    return ERNIE, [{"input_ids": rng.integers(1, 400, (1, n)).astype(np.int64),
                    "token_type_ids": np.zeros((1, n), np.int64)} for n in [FIRST[name], *lengths]]


PROPERTIES = ""  # --properties: more context properties for pdlite's devices


def predictor(model: Path, device: str, threads: int):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model))
    cfg.set_threads(threads)
    if device != "host":
        cfg.set_nnadapter_device_names([device])
        cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                             f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads};{PROPERTIES}".rstrip(";"))
    return create_paddle_predictor(cfg)


class Raw:
    """A runtime called directly on an ONNX model (no pdlite): `predict(feeds)` as a predictor's (the outputs
    named `fetch`, in that order)."""

    def __init__(self, kind: str, onnx: bytes, threads: int, fetch: list[str]) -> None:
        if kind == "raw-onnxruntime":
            from pdlite.nnadapter.drivers.onnxruntime import OnnxRuntimeDriver

            drv = OnnxRuntimeDriver()  # its session options (threads, spinning): the session as pdlite builds it
            props = {"ONNXRUNTIME_INTRA_OP_NUM_THREADS": str(threads)}
            sess = drv._ort.InferenceSession(onnx, drv.session_options(props), providers=drv.providers(props))
            self.predict = lambda feeds: sess.run(fetch, feeds)
            return
        import openvino as ov

        cfg = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
        if kind == "raw-openvino-nosnippets":
            cfg["SNIPPETS_MODE"] = "DISABLE"
        core = ov.Core()
        compiled = core.compile_model(core.read_model(onnx), "CPU", cfg)
        req = compiled.create_infer_request()
        ports = [compiled.output(n) for n in fetch]
        self.predict = lambda feeds: [r[p] for r in [req.infer(feeds)] for p in ports]


def subgraph_onnx(model: Path, feeds: dict[str, np.ndarray], threads: int) -> tuple[bytes, list[str]]:
    """The ONNX model (dynamic dims) pdlite's subgraph kernel converts and builds for `feeds` on onnxruntime, and
    the predictor's output names."""
    from pdlite.nnadapter.registry import get_driver

    drv = get_driver("onnxruntime")
    built: list[bytes] = []
    build = drv.build
    drv.build = lambda self, m, props, cache_path=None: (built.append(m), build(self, m, props, cache_path))[1]
    try:
        pred = predictor(model, "onnxruntime", threads)
        pred.predict(feeds)
    finally:
        drv.build = build
    return built[-1], pred.get_output_names()


def run_stream(pred, feeds: list[dict[str, np.ndarray]]) -> tuple[list[float], list[list[np.ndarray]]]:
    """Each call's seconds and outputs."""
    outs, times = [], []
    for f in feeds:
        t0 = time.perf_counter()
        outs.append(pred.predict(f))
        times.append(time.perf_counter() - t0)
    return times, outs


FRESH: list[int] = []  # --fresh-shapes: the predictors made so far (the next one's offset)


def one_round(model: Path, device: str, feeds: list[dict[str, np.ndarray]], threads: int, inner: int,
              onnx: tuple[bytes, list[str]] | None, name: str = "",
              ) -> tuple[list[list[float]], Any, list[list[np.ndarray]], list[dict[str, np.ndarray]]]:
    """Per fresh predictor (`inner` of them), its call times: the first call, the new shapes, the same again;
    the last predictor, its outputs and its feeds (with FRESH, each predictor's feeds from `stream(name, k)`)."""
    runs = []
    for _ in range(inner):
        if FRESH:
            feeds = stream(name, FRESH[0])[1]
            FRESH[0] += 1
        t0 = time.perf_counter()
        pred = (Raw(device, onnx[0], threads, onnx[1]) if device in RAW and onnx  # type: ignore[assignment]
                else predictor(model, device, threads))
        build, outs0 = run_stream(pred, feeds[:1])
        if device in RAW:  # compiling is the raw runtime's first-call cost
            build = [time.perf_counter() - t0]
        first, outs = run_stream(pred, feeds[1:])
        again = run_stream(pred, feeds[1:])[0]
        runs.append(build + first + again)
    return runs, pred, outs0 + outs, feeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="rec,ernie")
    ap.add_argument("--devices", default=",".join(["host", "intel_openvino", "onnxruntime", *RAW]))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inner", type=int, default=0, help="fresh predictors per round, their mean reported "
                    "(default: 10 for ernie, 1 for rec)")
    ap.add_argument("--cache", action="store_true", help="a model cache filled before the rounds: the first call "
                    "loads compiled models instead of compiling, as a second `pdlite` process does")
    ap.add_argument("--per-shape", action="store_true", help="the devices declared static-only (Driver."
                    "dynamic_shapes = False): one conversion, compile and host check per new shape, as every "
                    "device did before issue 37")
    ap.add_argument("--fresh-shapes", action="store_true", help="each predictor runs shapes no earlier one ran "
                    "in this process (the stream moved by an offset; one predictor per round unless --inner): "
                    "what a process pays at a shape it never met (runtimes' per-process caches cold)")
    ap.add_argument("--without-rewrite", default="", help="device rewrites of the converted model left out "
                    "(convert.DEVICE_REWRITES, by function name, comma-separated; e.g. separate_fc_activations: OpenVINO's "
                    "GELUs and Relus fused into their FullyConnected, as before)")
    ap.add_argument("--properties", default="", help="more context properties for pdlite's devices, "
                    "KEY=VALUE;... (e.g. INTEL_OPENVINO_SNIPPETS=all: OpenVINO's snippets in the models for all "
                    "shapes too, as before)")
    args = ap.parse_args(argv)
    global PROPERTIES
    PROPERTIES = args.properties
    if args.without_rewrite:
        from pdlite.nnadapter.convert import DEVICE_REWRITES

        drop = set(args.without_rewrite.split(","))
        for dev, rewrites in DEVICE_REWRITES.items():
            DEVICE_REWRITES[dev] = tuple(r for r in rewrites if r.__name__ not in drop)
    if args.fresh_shapes:
        FRESH.append(1)  # offset 0 is the host reference's and the raw rows' ONNX model's
    if args.per_shape:
        from pdlite.nnadapter.registry import get_driver

        for d in args.devices.split(","):
            if d and d != "host" and d not in RAW:
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
        times: dict[str, list[list[float]]] = {d: [] for d in devices}  # per predictor, its call times
        info: dict[str, tuple[str, float]] = {}
        for d in devices if args.cache else ():
            if d not in RAW:
                predictor(model, d, args.threads).predict(feeds[0])
        onnx = subgraph_onnx(model, feeds[0], args.threads) if set(devices) & set(RAW) else None
        inner = args.inner or (1 if args.fresh_shapes else INNER[name])
        for _ in range(args.rounds):
            for d in devices:
                runs, pred, outs, ran = one_round(model, d, feeds, args.threads, inner, onnx, name)
                times[d] += runs
                if ran is not feeds:  # --fresh-shapes: the host's outputs for these shapes
                    host_outs = run_stream(predictor(model, "host", args.threads), ran)[1]
                rel = max(float(np.max(np.abs(g - h))) / max(float(np.max(np.abs(h))), 1e-30)
                          for o, ho in zip(outs, host_outs) for g, h in zip(o, ho))
                ks = [] if d in RAW else [i.kernel for i in pred.runtime_program.instructions
                                          if i.op.type == "subgraph"]
                info[d] = ("/".join(str(k.builds) for k in ks) or "-", rel)
        for d in devices:
            med = [statistics.median(t[i] for t in times[d]) for i in range(len(feeds) * 2 - 1)]
            build, first, again = med[0], sum(med[1:len(feeds)]), sum(med[len(feeds):])
            builds, rel = info[d]
            print(f"| {name} | {d} | {build:.3f} | {first:.4f} | {again:.4f} | {first / again:.2f}x | "
                  f"{(build + first) / again:.2f}x | {builds} | {rel:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
