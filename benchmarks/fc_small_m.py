"""packed_fc at batch 1 on the transformer encoder's shapes (32 tokens), 1 thread against 2, interleaved.

packed_gemm.c runs products under FC_PAR_MACS multiply-adds (M * K * N) on the calling thread, larger ones on the
pool. This prints, per shape, the median us of 1 and 2 threads and their ratio: on a quiet machine the threshold is
right when every shape under it shows 2T / 1T >= ~0.9 had it been split (it is not: ~1.00 here) and every shape
above it shows 2T / 1T clearly under 1. Each row also gives the error against float64 (relative to max |ref|).
Force an instruction set with PDLITE_NATIVE_ISA=avx2|avx512.

    python benchmarks/fc_small_m.py [--rounds 7] [--calls 300]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from pdlite.kernels.host import native, native_plans

# (M, K, N): the encoder's qkv, out-projection, ffn up (gelu), ffn down, classifier; then a few around the threshold
SHAPES = [(32, 128, 384), (32, 128, 128), (32, 128, 512), (32, 512, 128), (32, 128, 1000),
          (32, 256, 128), (32, 256, 96), (64, 128, 128)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = []
    for m, k, n in SHAPES:
        w, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        x = rng.standard_normal((m, k)).astype(np.float32)
        run = native_plans.fc_plan("packed", m, k, n, native.pack_fc_weights(w), b, native.NO_ACT)
        ref = x.astype(np.float64) @ w + b
        cases.append(((m, k, n), run, x, float(np.abs(run(x) - ref).max() / np.abs(ref).max())))
    times: dict[tuple, list[float]] = {}
    for r in range(args.rounds):
        for threads in ((1, 2) if r % 2 else (2, 1)):
            native.set_num_threads(threads)
            for shape, run, x, _ in cases:
                for _ in range(args.calls // 6):
                    run(x)
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    run(x)
                times.setdefault((threads, shape), []).append((time.perf_counter() - t0) / args.calls * 1e6)
    print(f"packed_fc, ISA {native.isa()}; median us of {args.rounds} x "
          f"{args.calls} calls, 1 and 2 threads interleaved")
    print("| M x K x N | MACs | 1 thread us | GFLOP/s | 2 threads us | 2T / 1T | err / max|ref| |")
    print("|---|---|---|---|---|---|---|")
    for shape, _, _, err in cases:
        a, b = float(np.median(times[(1, shape)])), float(np.median(times[(2, shape)]))
        macs = int(np.prod(shape))
        print(f"| {'x'.join(map(str, shape))} | {macs / 1e6:.2f} M | {a:.2f} | {2 * macs / a / 1e3:.0f} | {b:.2f} | "
              f"{b / a:.2f} | {err:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
