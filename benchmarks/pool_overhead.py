"""The native thread pool's cost per dispatch at 2 threads (issue 39): what one parallel job costs beyond its work.

Each call is one job of two items through the pool's `parallel_ranges` (the packed conv's hand-out; native's
`_ranges_trace` test entry): the calling thread's item takes `--item-us` microseconds (a timed spin), the other item
nothing. At 1 thread the caller runs both (2 x item); at 2 threads the worker takes the second item, so the call
takes one item plus the pool's hand-off (waking or signalling the worker, the worker joining, the end barrier) when
the worker joins in time; when it does not (asleep, or its CPU busy), the caller takes that item itself. Per spin
setting (PDLITE_NATIVE_SPIN_US, each in its own process; 0: workers sleep on the condition variable at once), prints
the median call time at 1 and 2 threads, the share of calls the worker joined, and the hand-off:
2-thread time - item - (1-thread time - 2 x item), i.e. beyond what the same call costs at 1 thread. Rounds of 1 and
2 threads alternated; medians over rounds.

    python benchmarks/pool_overhead.py [--item-us 2,10,40] [--spins 200,0] [--rounds 15] [--reps 300]

On a quiet 2-CPU machine the hand-off must be a few microseconds (spinning workers) and the worker must join nearly
every call; with spinning off it shows the wake-up cost of a sleeping worker.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def worker(items_us: list[int], rounds: int, reps: int) -> None:
    """One JSON line: per item time, the median 1- and 2-thread call times (us) and the worker's share of calls."""
    import numpy as np

    from pdlite.kernels.host import native

    ext = native._ext
    out = {}
    for item in items_us:
        t1, t2, joined = [], [], []
        for _ in range(rounds):
            for threads, acc in ((1, t1), (2, t2)):
                native.set_num_threads(threads)
                for _ in range(20):
                    ext._ranges_trace(2, 1, item)
                mine = 0
                t = time.perf_counter()
                for _ in range(reps):
                    mine += ext._ranges_trace(2, 1, item)[1][1]
                acc.append((time.perf_counter() - t) / reps * 1e6)
                if threads == 2:
                    joined.append(1.0 - mine / reps)
        a, b = float(np.median(t1)), float(np.median(t2))
        out[str(item)] = [a, b, float(np.median(joined))]
    print(json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--item-us", default="2,10,40")
    ap.add_argument("--spins", default="200,0", help="PDLITE_NATIVE_SPIN_US settings, one process each")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    items = [int(x) for x in args.item_us.split(",")]
    if args.worker:
        worker(items, args.rounds, args.reps)
        return 0
    from pdlite.tools.doctor import cpu_info

    print(f"CPU: {cpu_info()[0]}; {os.cpu_count()} CPUs; one job of 2 items per call (the caller's item spins "
          f"item us, the other is empty); median of {args.rounds} rounds x {args.reps} calls")
    print("| spin us | item us | 1 thread us | 2 threads us | worker joined | hand-off us |")
    print("|---|---|---|---|---|---|")
    for spin in args.spins.split(","):
        env = dict(os.environ, PDLITE_NATIVE_SPIN_US=spin)
        cmd = [sys.executable, __file__, "--worker", "--item-us", args.item_us, "--rounds", str(args.rounds),
               "--reps", str(args.reps)]
        res = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        for item in items:
            a, b, share = res[str(item)]
            print(f"| {spin} | {item} | {a:.2f} | {b:.2f} | {share:.0%} | {b - item - (a - 2 * item):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
