"""`pdlite run MODEL`: run a model once and print each output's name, shape, dtype and statistics."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from pdlite.api.predictor import create_paddle_predictor
from pdlite.errors import InputError
from pdlite.tools.common import (
    add_device_argument,
    add_feed_arguments,
    config_for,
    make_feeds,
    parse_named,
    set_device,
    summary,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a model once and summarise its outputs")
    add_feed_arguments(p, "input shape for --random (default: the model's, a dynamic batch 1)")
    p.add_argument("--random", action="store_true", help="random inputs for inputs not given by --input")
    p.add_argument("--seed", type=int, default=0, help="seed of the --random data")
    add_device_argument(p)
    p.add_argument("--output", "-o", help="write outputs to this .npz")
    p.add_argument("--check", metavar="CASE.npz",
                   help="inputs from CASE.npz (in:NAME) and compare outputs with its out:NAME references")
    p.add_argument("--rtol", type=float, default=1e-4, help="with --check: max|got-ref| <= rtol*max|ref|")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    cfg = config_for(args.model, args.params)
    cfg.set_threads(args.threads)
    t0 = time.perf_counter()
    pred = create_paddle_predictor(cfg)
    t1 = time.perf_counter()
    names = pred.get_input_names()
    inputs = parse_named(args.input, names, "--input")
    try:
        case = np.load(args.check, allow_pickle=False) if args.check else None
    except (OSError, ValueError) as e:
        raise InputError(f"--check: cannot read {args.check!r} as a .npz case: {e}") from None
    if case is not None:
        for n in pred.get_input_names():
            if f"in:{n}" in case and n not in inputs:
                inputs[n] = args.check
    feeds = make_feeds(pred, inputs, parse_named(args.shape, names, "--shape"), args.random, args.seed)
    device = set_device(cfg, args.device, feeds, args.context)
    if device != "host":
        t0 = time.perf_counter()
        pred = create_paddle_predictor(cfg)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    outs = pred.predict(feeds)
    t3 = time.perf_counter()
    print(f"model: {args.model}  device: {device}")
    print(f"predictor created in {1e3 * (t1 - t0):.1f} ms; run in {1e3 * (t3 - t2):.1f} ms")
    for n, v in feeds.items():
        print(f"input  {n}: shape {list(v.shape)} {v.dtype}")
    ok = True
    for n, v in zip(pred.get_output_names(), outs):
        print(f"output {n}: shape {list(v.shape)} {v.dtype}  {summary(v)}")
        if case is not None and f"out:{n}" in case:
            ref = case[f"out:{n}"]
            err = float(np.max(np.abs(v.astype(np.float64) - ref))) if v.shape == ref.shape else float("inf")
            scale = float(np.max(np.abs(ref))) or 1.0
            good = err <= args.rtol * scale
            ok &= good
            print(f"  check vs reference: max|got-ref| = {err:.3g} (limit {args.rtol * scale:.3g}) "
                  f"{'OK' if good else 'MISMATCH'}")
    if args.output:
        np.savez(args.output, **{n: v for n, v in zip(pred.get_output_names(), outs)})
        print(f"outputs written to {args.output}")
    if not ok:
        print("outputs do not match the reference", file=sys.stderr)
        return 1
    return 0
