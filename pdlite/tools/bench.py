"""`pdlite bench MODEL`: latency (min / median / max), with per-op profile and precision profile."""
from __future__ import annotations

import argparse
import statistics
import time

from pdlite.api.predictor import create_paddle_predictor
from pdlite.tools.common import (
    add_device_argument,
    add_feed_arguments,
    config_for,
    int_at_least,
    make_feeds,
    parse_named,
    set_device,
)
from pdlite.tools.progress import Progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure latency; --profile per op, --precision-profile per-op statistics")
    add_feed_arguments(p, "input shape of the random data (default: the model's, a dynamic batch 1)")
    p.add_argument("--warmup", type=int_at_least(0), default=3, help="runs before the timed ones")
    p.add_argument("--repeats", "--niter", "-niter", "-r", type=int_at_least(1), default=20,
                   help="timed runs (-niter as benchmark_app, -r as onnxruntime_perf_test)")
    add_device_argument(p)
    p.add_argument("--profile", action="store_true", help="per-op time table")
    p.add_argument("--precision-profile", action="store_true", help="per-op output statistics (NaN/Inf hunt)")
    p.set_defaults(func=main)


def measure(pred, feeds, warmup: int, repeats: int, label: str = "bench") -> list[float]:
    """Latencies in ms of `repeats` runs after `warmup` runs."""
    for k, v in feeds.items():
        pred.get_input_by_name(k).from_numpy(v)
    times = []
    with Progress(warmup + repeats, label) as prog:
        for _ in range(warmup):
            pred.run()
            prog.update()
        for _ in range(repeats):
            t0 = time.perf_counter()
            pred.run()
            times.append((time.perf_counter() - t0) * 1e3)
            prog.update()
    return times


def main(args: argparse.Namespace) -> int:
    cfg = config_for(args.model, args.params)
    cfg.set_threads(args.threads)
    pred = create_paddle_predictor(cfg)
    names = pred.get_input_names()
    feeds = make_feeds(pred, parse_named(args.input, names, "--input"), parse_named(args.shape, names, "--shape"),
                       random=True)
    # per-op profiles are of the host kernels unless a device is asked for explicitly
    device = set_device(cfg, args.device or ("host" if args.profile or args.precision_profile else None), feeds,
                        args.context)
    if device != "host":
        pred = create_paddle_predictor(cfg)
    times = measure(pred, feeds, args.warmup, args.repeats)
    print(f"model: {args.model}  device: {device}  threads: {args.threads}")
    print("inputs: " + ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in feeds.items()))
    print(f"latency over {args.repeats} runs (after {args.warmup} warm-up): min {min(times):.3f} ms  "
          f"median {statistics.median(times):.3f} ms  max {max(times):.3f} ms")
    if args.profile or args.precision_profile:
        from pdlite.runtime.profiler import HookChain, PrecisionProfiler, Profiler

        prof = Profiler() if args.profile else None
        pp = PrecisionProfiler() if args.precision_profile else None
        pred.set_hook(HookChain(prof, pp))
        if prof is not None:
            for _ in range(args.repeats):
                pred.run()
            print(f"\nper-op profile ({args.repeats} runs):")
            print(prof.table())
        if pp is not None:
            pp.stats.clear()
            pred.set_hook(pp)
            pred.run()
            print("\nprecision profile (one run):")
            print(pp.table())
            bad = pp.first_bad()
            print(f"\nfirst NaN/Inf: {bad.op} -> {bad.name}" if bad else "\nno NaN or Inf in any op output")
        pred.set_hook(None)
    return 0
