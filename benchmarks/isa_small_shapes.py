"""The host's small-shape forms against what ran those shapes before (issue 39): per kernel call, at each forced ISA.

- matrix-vector products (native.packed_gemv: fc with 1-4 rows, 1x1 convs on 1x1 maps) against the BLAS product
  (native.fc_gemm) and packed fc's 8-row panels, on MobileNetV3-small's batch-1 fc and squeeze-and-excitation shapes;
- the short-map depthwise form (native_src/depthwise_short.c) against the form that takes the conv without it (the
  row-vector forms' switch off: the channel-blocked form at AVX-512, the planar ones at AVX2), on PP-OCR cls's shapes;
- the wide packed form against the BLAS on PP-OCR cls's short-reduction 1x1 convs (2x96 maps; AVX-512 only, where
  Conv2d.packed now gives them the wide form).
One thread, each pair interleaved (A, B, A, B, ...), median over rounds of the mean of `--reps` calls, in us.

    python benchmarks/isa_small_shapes.py [--isas avx2,avx512] [--rounds 15] [--reps 50]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

GEMV = [(1, 576, 1024), (1, 1024, 100), (1, 576, 144), (1, 144, 576)]  # (rows, K, N)
SHORT_DW = [(200, 2, 96, 5, 1), (88, 3, 96, 5, 1), (104, 3, 96, 5, 2), (32, 6, 96, 5, 2)]  # (C, H, W, k, row stride)
POINTWISE = [(32, 200, 2, 96), (104, 32, 2, 96)]  # (C, M, H, W): the BLAS's before, AVX-512 only (conv.py)


def interleaved(fns: list[Callable[[], object]], rounds: int, reps: int) -> list[float]:
    """Each function's median over `rounds` of its mean time (us) over `reps` calls, the functions alternated."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for f, acc in zip(fns, times):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            acc.append((time.perf_counter() - t0) / reps * 1e6)
    return [float(np.median(t)) for t in times]


def call(fn: Callable[..., object], *args: object) -> Callable[[], object]:
    """fn(*args) as a function of nothing (the arguments bound now, not looked up in a loop later)."""
    return lambda: fn(*args)


def depthwise(rows: bool, args: tuple) -> object:
    """native.depthwise_conv2d(*args) with the row-vector forms' switch (the short-map form's too) set to `rows`."""
    from pdlite.kernels.host import _native, native

    before = _native._set_depthwise_rows(rows)
    try:
        return native.depthwise_conv2d(*args)
    finally:
        _native._set_depthwise_rows(before)


def worker(rounds: int, reps: int) -> None:
    from pdlite.kernels.host import blas, native, native_plans

    native.set_num_threads(1)
    blas.set_num_threads(1)
    native.gemm_available()
    rng = np.random.default_rng(0)
    isa = native.isa()
    hs = native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})
    for m, k, n in GEMV:
        x, w, b = (rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n), (n,)))
        wp = native.pack_fc_weights(w)
        new, old, panels = interleaved([call(native.packed_gemv, x, wp, n, b, hs), call(native.fc_gemm, x, w, b, hs),
                                        call(native.packed_fc, x, wp, n, b, hs)], rounds, reps)
        print(f"| {isa} | gemv {m}x{k} @ {k}x{n} | {new:.1f} | BLAS {old:.1f}, packed fc {panels:.1f} | {old / new:.2f}x |")
    for c, h, w, k, s in SHORT_DW:
        x, wt, b = (rng.standard_normal(sh, dtype=np.float32) for sh in ((1, c, h, w), (c, k * k), (c,)))
        oh, p = (h + 2 * (k // 2) - k) // s + 1, k // 2

        args = (x, wt, b, c, oh, w, (k, k), (s, 1), (1, 1), (p, p), native.NO_ACT)
        new, old = interleaved([call(depthwise, True, args), call(depthwise, False, args)], rounds, reps)
        print(f"| {isa} | depthwise {c}ch {k}x{k} / ({s}, 1) on {h}x{w} | {new:.1f} | without it {old:.1f} | "
              f"{old / new:.2f}x |")
    for c, m, h, w in POINTWISE if isa == "avx512" else []:
        x, wt, b = (rng.standard_normal(sh, dtype=np.float32) for sh in ((1, c, h, w), (m, c, 1, 1), (m,)))
        wide = native_plans.packed_plan(native.pack_weights(wt, True), b, x.shape, m, h, w, (1, 1), (1, 1), (1, 1),
                                        (0, 0), native.NO_ACT, True)
        gemm = native_plans.gemm_plan(wt.reshape(1, m, c), b, x.shape, h, w, None, native.NO_ACT)
        new, old = interleaved([call(wide, x), call(gemm, x)], rounds, reps)
        print(f"| {isa} | 1x1 conv {c} -> {m} on {h}x{w}, wide form | {new:.1f} | BLAS {old:.1f} | {old / new:.2f}x |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isas", default="avx2,avx512")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.rounds, args.reps)
        return 0
    print(f"one thread; median over {args.rounds} interleaved rounds of the mean of {args.reps} calls, us")
    print("| ISA | shape | new form us | before us | speed-up |\n|---|---|---|---|---|")
    for isa in args.isas.split(","):
        env = dict(os.environ, PDLITE_NATIVE_ISA=isa)
        out = subprocess.run([sys.executable, __file__, "--worker", "--rounds", str(args.rounds), "--reps",
                              str(args.reps)], env=env, capture_output=True, text=True, check=True)
        print(out.stdout, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
