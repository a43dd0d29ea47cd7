"""Per-layer GFLOP/s of the native host kernels on this CPU, beside the paper estimate for ARM cores (issue 39).

Runs typical layers of the shared models (MobileNet's 1x1 convs on the wide form, ResNet18's 3x3 convs on the packed
small form and on Winograd, a transformer's fc, a depthwise 3x3) on the native kernels and on NumPy's BLAS (im2col +
matmul), interleaved, and prints the medians as GFLOP/s, and as a share of the core's peak where the core is known:
per-core FMA peak = FMA pipes x 4 lanes x 2 FLOP x clock (PEAK_FLOP_PER_CYCLE; the clock from cpufreq or --ghz).
Meant for a real ARM board (Raspberry Pi 5, RK3588, Graviton, Apple silicon under Linux); it runs anywhere (on x86
the peak column is left empty). Under qemu-user emulation the times mean nothing.

    python benchmarks/arm_bench.py [--threads 1] [--repeat 20] [--ghz 2.4]

The estimate for a Cortex-A76 it is compared with is in BENCHMARKS.md ("ARM: the NEON tiles on paper").
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from pdlite.kernels.host import cpu_features, native

# FLOP per cycle per core of the FMA pipes on 128-bit vectors (2 FLOP x 4 lanes x pipes)
PEAK_FLOP_PER_CYCLE = {"Cortex-A53": 8, "Cortex-A55": 8, "Cortex-A72": 16, "Cortex-A73": 16, "Cortex-A76": 16,
                       "Cortex-A78": 16, "Neoverse-N1": 16, "Cortex-X1": 32, "Neoverse-V1": 32, "Neoverse-N2": 16,
                       "Neoverse-V2": 32, "Apple M1 Firestorm": 32}

# name, form, (n, c, h, w, m, k, stride, pad) or (m, k, n) for fc
LAYERS = [
    ("mbv2 1x1 24->144 @56x56", "wide", (1, 24, 56, 56, 144, 1, 1, 0)),
    ("mbv2 1x1 144->24 @56x56", "wide", (1, 144, 56, 56, 24, 1, 1, 0)),
    ("mbv1 1x1 512->512 @14x14", "packed", (1, 512, 14, 14, 512, 1, 1, 0)),
    ("resnet18 3x3 256->256 @14x14", "packed", (1, 256, 14, 14, 256, 3, 1, 1)),
    ("resnet18 3x3 512->512 @7x7", "packed", (1, 512, 7, 7, 512, 3, 1, 1)),
    ("resnet18 3x3 128->128 @28x28 (Winograd)", "winograd", (1, 128, 28, 28, 128, 3, 1, 1)),
    ("transformer fc 128x128 @ 128x512", "fc", (128, 128, 512)),
    ("mbv2 depthwise 3x3 144 @56x56", "depthwise", (1, 144, 56, 56, 144, 3, 1, 1)),
]


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _im2col_gemm(x: np.ndarray, w: np.ndarray, s: int, p: int) -> Callable[[], np.ndarray]:
    n, c, h, wd = x.shape
    m, _, k, _ = w.shape
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    w2 = w.reshape(m, -1)

    def run() -> np.ndarray:
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]
        cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * k * k, oh * ow)
        return np.matmul(w2, cols)

    return run


def layer(form: str, dims: tuple[int, ...]) -> tuple[float, Callable[[], object], Callable[[], object]]:
    """(FLOP, the native call, the NumPy/BLAS call) of one layer."""
    if form == "fc":
        m, k, n = dims
        x, w = _rand(m, k), _rand(k, n)
        wp = native.pack_fc_weights(w)
        return 2.0 * m * k * n, lambda: native.packed_fc(x, wp, n, None), lambda: x @ w
    n, c, h, wd, m, k, s, p = dims
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    x = _rand(n, c, h, wd)
    if form == "depthwise":
        w = _rand(c, k * k)
        xs = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))), (k, k), axis=(2, 3))
        wk = w.reshape(1, c, 1, 1, k, k)
        return (2.0 * n * c * oh * ow * k * k,
                lambda: native.depthwise_conv2d(x, w, None, c, oh, ow, (k, k), (s, s), (1, 1), (p, p)),
                lambda: (xs * wk).sum(axis=(4, 5)))
    w = _rand(m, c, k, k)
    flop = 2.0 * n * m * c * k * k * oh * ow
    if form == "winograd":
        u = native.winograd_weights(w, native.winograd_packed(n, oh, ow))
        fn = lambda: native.winograd_conv3x3(x, u, None, oh, ow, (p, p))  # noqa: E731
    else:
        wide = form == "wide"
        wp = native.pack_weights(w, wide)
        fn = lambda: native.packed_conv(x, wp, None, m, oh, ow, (k, k), (s, s), (1, 1), (p, p), native.NO_ACT, wide)  # noqa: E731
    return flop, fn, _im2col_gemm(x, w, s, p)


def _clock_ghz() -> float | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read()) / 1e6
    except (OSError, ValueError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--ghz", type=float, default=None, help="core clock for the peak column (default: cpufreq)")
    args = ap.parse_args()
    if not native.available():
        raise SystemExit(f"the native kernels are not in use: {native.load_note}")
    from threadpoolctl import threadpool_limits

    native.set_num_threads(args.threads)
    native.gemm_available()  # (binds NumPy's BLAS sgemm: Winograd's BLAS products need it)
    info = cpu_features.cpu_info()
    core = info.model.split(" x")[0].split(" + ")[-1]
    ghz = args.ghz or _clock_ghz()
    peak = PEAK_FLOP_PER_CYCLE.get(core, 0) * ghz * args.threads if ghz else 0.0
    print(f"CPU: {info.model}; features: {' '.join(info.features)}; ISA {native.isa()}; {args.threads} thread(s)"
          + (f"; peak {peak:.1f} GFLOP/s ({core} at {ghz:.2f} GHz)" if peak else ""))
    print(f"{'layer':42s} {'native ms':>10s} {'GFLOP/s':>8s} {'BLAS ms':>9s} {'GFLOP/s':>8s} {'% peak':>7s}")
    with threadpool_limits(args.threads, user_api="blas"):
        for name, form, dims in LAYERS:
            flop, nat, ref = layer(form, dims)
            nat(), ref()  # warm-up
            tn, tr = [], []
            for _ in range(args.repeat):  # interleaved
                t = time.perf_counter()
                nat()
                tn.append(time.perf_counter() - t)
                t = time.perf_counter()
                ref()
                tr.append(time.perf_counter() - t)
            mn, mr = statistics.median(tn), statistics.median(tr)
            share = f"{100 * flop / mn / 1e9 / peak:6.0f}%" if peak else "      -"
            print(f"{name:42s} {mn * 1e3:10.3f} {flop / mn / 1e9:8.1f} {mr * 1e3:9.3f} {flop / mr / 1e9:8.1f} {share}")


if __name__ == "__main__":
    main()
