"""The optional native host kernels (`native_src/*.c`, one extension `_native`), with typed wrappers.

`available()` says whether the C extension was built (setup.py builds it when a compiler
exists; pdlite works without it, on its NumPy kernels). The host kernels call these wrappers
only when `use_native(context)` holds: the extension is there and the config option
`host_native` is not False (`config.set_option("host_native", False)` forces the NumPy path,
which stays the reference; `set_default_enabled(False)` makes False the process default, e.g.
to run a test suite on the NumPy kernels: `pytest --host-numpy`). Inputs must be C-contiguous float32
arrays; the wrappers check that, and the C side checks every buffer's size against the shapes.

Activations fused natively: relu, relu6, leaky_relu, hard_swish, hard_sigmoid and gelu (erf form)
(`ACTIVATIONS`); the C code follows the operation order of pdlite/kernels/host/activation.py (hard_sigmoid's
x * slope + offset may round once, as an FMA, instead of twice; gelu's erf and exp are the same polynomials
evaluated in float32 with FMAs, within a few ulp of the NumPy kernel). `layer_norm` and `softmax` run per row.

GEMMs (`conv_gemm`, `winograd_conv3x3`) call the cblas_sgemm of the OpenBLAS NumPy ships (found
with ctypes, checked once against np.matmul), one single-threaded call per block on the native
thread pool, with bias and activation applied to each block while it is in cache.
`gemm_available()` is False when that entry point is not found; the conv kernel then uses np.matmul.
`packed_conv` needs no BLAS: weights packed once (`pack_weights`), its own register-tiled kernel (fast with
AVX-512, AVX2 and NEON; `packed_gemm_fast()`). The `*_plan` functions bind one conv's call for one input shape (the conv
kernel keeps it).

Threads: `set_num_threads` (called by pdlite/runtime/threads.py for `set_threads`; NumPy's OpenBLAS
is found by pdlite/kernels/host/blas.py). Environment:
PDLITE_NATIVE_SPIN_US (how long idle pool threads poll for work, default 200),
PDLITE_NATIVE_ISA=baseline|avx2|avxvnni|avx512 on x86-64, baseline on aarch64 (force an instruction-set version, for
tests; aarch64's default is neon; avxvnni: AVX2 with the int8 kernels on AVX-VNNI, as CPUs with it and no AVX-512 run).
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from pdlite.kernels.host import native_build
from pdlite.kernels.host.native_build import build_failure, source_files  # noqa: F401 - part of this module's API

_ext = native_build.load_extension()
load_note = native_build.load_note  # why the extension is not in use, or where it came from (`pdlite doctor`)

F32 = np.dtype(np.float32)
_FALSE = (False, 0, "0", "false", "False", "off", "no")
DEFAULT_ON = True  # the `host_native` default when the config does not say


def set_default_enabled(on: bool) -> None:
    """The process-wide default of the `host_native` option (the config option still wins)."""
    global DEFAULT_ON
    DEFAULT_ON = bool(on)
NO_PARAMS = (0.0, 0.0, 0.0)

# activation op type -> (code in native_src/common.h, attached attrs -> the three float parameters)
ACTIVATIONS: dict[str, tuple[int, Any]] = {
    "relu": (1, lambda a: NO_PARAMS),
    "relu6": (2, lambda a: (float(a["threshold"]), 0.0, 0.0)),
    "leaky_relu": (3, lambda a: (float(a["alpha"]), 0.0, 0.0)),
    "hard_swish": (4, lambda a: (float(a["offset"]), float(a["threshold"]), float(a["scale"]))),
    "hard_sigmoid": (5, lambda a: (float(a["slope"]), float(a["offset"]), 0.0)),
    "gelu": (6, lambda a: NO_PARAMS),  # the exact (erf) form only: `activation` refuses approximate=True
}

Act = tuple[int, tuple[float, float, float]]
NO_ACT: Act = (0, NO_PARAMS)


def available() -> bool:
    """True when the native extension is built and importable."""
    return _ext is not None


# cblas_sgemm symbols of NumPy's OpenBLAS builds: (name, 64-bit integer interface)
_SGEMM_SYMBOLS = (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True), ("scipy_cblas_sgemm", False),
                  ("cblas_sgemm", False))
_gemm_state: bool | None = None


def gemm_available() -> bool:
    """True when conv_gemm can run (the extension and NumPy's cblas_sgemm, checked once)."""
    global _gemm_state
    if _gemm_state is None:
        _gemm_state = _init_sgemm()
    return _gemm_state


def _init_sgemm() -> bool:
    if _ext is None:
        return False
    import ctypes

    from pdlite.kernels.host import blas

    lib = blas.library()
    if lib is None:
        return False
    for name, ilp64 in _SGEMM_SYMBOLS:
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        _ext.set_sgemm(int(ctypes.cast(fn, ctypes.c_void_p).value or 0), ilp64)
        rng = np.random.default_rng(0)
        w = rng.standard_normal((2, 5, 7), dtype=np.float32)
        x = rng.standard_normal((3, 2, 7, 11), dtype=np.float32)
        out = np.empty((3, 2, 5, 11), dtype=F32)
        _ext.conv_gemm(w, x, None, out, (3, 2, 5, 7, 11), 0, NO_PARAMS)
        if np.allclose(out, np.matmul(w, x), rtol=1e-5, atol=1e-5):
            return True
        _ext.set_sgemm(0, True)
    return False


def use_native(context: Any) -> bool:
    """Whether kernels running under `context` (a KernelContext) should use the native kernels."""
    if _ext is None:
        return False
    opt = context.option("host_native", DEFAULT_ON) if context is not None else DEFAULT_ON
    return opt not in _FALSE


def activation(act: str, attrs: Mapping[str, Any]) -> Act | None:
    """The native (code, params) of an activation op type with its attributes (defaults attached, as
    `split_activation` gives them); None if not native."""
    if not act:
        return NO_ACT
    spec = ACTIVATIONS.get(act)
    if spec is None or (act == "gelu" and attrs.get("approximate", False)):
        return None
    return spec[0], spec[1](attrs)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Threads per native kernel call, the caller included (at most the CPUs this process may use:
    the pool's workers poll for work briefly, which only pays with a CPU each)."""
    if _ext is not None:
        _ext.set_num_threads(max(1, min(int(n), _cpus())))


def get_num_threads() -> int | None:
    return int(_ext.get_num_threads()) if _ext is not None else None


def set_pool_threads(n: int) -> None:
    """set_num_threads for a count known to be valid (1, or what get_num_threads returned), without its CPU count
    look-up: the runtime switches the pool between one thread and its count around small instructions."""
    if _ext is not None:
        _ext.set_num_threads(n)


def isa() -> str | None:
    """The instruction set the native kernels run with (baseline, avx2, avx512 on x86-64; neon, baseline on aarch64);
    None without the extension."""
    return str(_ext.isa()) if _ext is not None else None


def build_info() -> dict[str, Any]:
    """What `pdlite doctor` reports: whether the extension is in use, from where, its ISA and its GEMM."""
    return {"available": available(), "where": load_note, "isa": isa(),
            "gemm": "NumPy's OpenBLAS cblas_sgemm" if gemm_available() else "np.matmul",
            "source_hash": getattr(_ext, "SOURCE_HASH", None)}


def _f32(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype != F32 or not a.flags.c_contiguous:
        raise ValueError(f"native {what}: expected a C-contiguous float32 array, got {a.dtype} "
                         f"(contiguous={a.flags.c_contiguous})")
    return a


# Outputs of at least this many floats (256 KiB) start on a 64-byte boundary (empty_aligned). NumPy's arrays start
# 16-byte aligned, so each 16-float vector store of a row the kernels write, and each load of it by the next op,
# spanned two cache lines. One Xeon (Emerald Rapids) core: MobileNet's stem conv 0.89x the time with its output
# aligned; whole models (processes alternated, 1 thread): MobileNetV1 batch 4 0.97x, MobileNetV2 batch 1 (2
# threads) 0.975x. Smaller outputs keep np.empty (the offset's lookup and slice, ~0.8 us, would cost more than
# it saves on their short ops).
ALIGN_MIN_FLOATS = 1 << 16


def empty_aligned(shape: tuple[int, ...], min_floats: int = ALIGN_MIN_FLOATS) -> np.ndarray:
    """An uninitialised C-contiguous float32 array of `shape`, starting on a 64-byte boundary when it holds at least
    `min_floats` floats (a view into a slightly larger allocation)."""
    size = math.prod(shape)
    if size < min_floats or _ext is None:
        return np.empty(shape, dtype=F32)
    buf = np.empty(size + 15, dtype=F32)
    off = _ext.align_offset(buf)
    return buf[off:off + size].reshape(shape)


def allocator(shape: tuple[int, ...], min_floats: int = ALIGN_MIN_FLOATS) -> Callable[[], np.ndarray]:
    """A call returning empty_aligned(shape, min_floats), its size test made once (the bound calls' outputs)."""
    size = math.prod(shape)
    if size < min_floats or _ext is None:
        return partial(np.empty, shape, F32)
    n, offset = size + 15, _ext.align_offset

    def alloc() -> np.ndarray:
        buf = np.empty(n, dtype=F32)
        off = offset(buf)
        return buf[off:off + size].reshape(shape)

    return alloc


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous float32 copy of `a` starting on a 64-byte boundary: packed weights, which the register tiles
    load as whole vectors (NumPy's 16-byte-aligned arrays split each load over two cache lines)."""
    out = empty_aligned(np.shape(a), 0)
    out[...] = a
    return out


def _geo(x_shape: tuple[int, ...], m: int, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
         dilations: tuple[int, int], pads: tuple[int, int]) -> tuple[int, ...]:
    """(N, C, H, W, M, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL): the geometry tuple the native depthwise and packed
    convs parse."""
    return (*x_shape, m, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1],
            pads[0], pads[1])


def _wino_geo(x_shape: tuple[int, ...], oc: int, oh: int, ow: int, pads: tuple[int, int]) -> tuple[int, ...]:
    """(N, C, H, W, OC, OH, OW, PT, PL): the geometry tuple the native Winograd conv parses."""
    return (*x_shape, oc, oh, ow, pads[0], pads[1])


def _into(fn: Callable[..., Any], shape: tuple[int, ...], x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
          *rest: Any) -> np.ndarray:
    """fn(x, w, bias, out, *rest) into a new float32 `out` of `shape` (empty_aligned), returned: a native conv call
    (native_plans.py binds the same calls once per input shape)."""
    out = empty_aligned(shape)
    fn(x, w, bias, out, *rest)
    return out


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, oc: int, oh: int, ow: int,
                     kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
                     pads: tuple[int, int], act: Act = NO_ACT) -> np.ndarray:
    """Depthwise conv of NCHW x with w (OC, kh*kw) (OC = C * multiplier; output channel o reads input
    channel o // multiplier), bias (OC,) or None, top/left `pads`; returns act(conv + bias), (N, OC, oh, ow)."""
    assert _ext is not None
    n, c, h, wd = x.shape
    out = empty_aligned((n, oc, oh, ow))
    _ext.depthwise_conv2d(_f32(x, "depthwise_conv2d"), _f32(w, "depthwise_conv2d"),
                          None if bias is None else _f32(bias, "depthwise_conv2d"), out,
                          _geo(x.shape, oc, oh, ow, kernel, strides, dilations, pads), act[0], act[1])
    return out


def conv_gemm(w: np.ndarray, cols: np.ndarray, bias: np.ndarray | None, act: Act = NO_ACT) -> np.ndarray:
    """out[n, g] = act(w[g] @ cols[n, g] + bias[g]) for w (G, M, K) and cols (N, G*K, L): returns (N, G*M, L)."""
    assert _ext is not None
    g, m, k = w.shape
    n, gk, length = cols.shape
    out = empty_aligned((n, g * m, length))
    _ext.conv_gemm(_f32(w, "conv_gemm"), _f32(cols, "conv_gemm"), None if bias is None else _f32(bias, "conv_gemm"),
                   out, (n, g, m, k, length), act[0], act[1])
    return out


def fc_gemm(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, act: Act = NO_ACT) -> np.ndarray:
    """act(x @ w + bias) for x (M, K), w (K, N), bias (N,) or None, on the native pool: returns (M, N)."""
    assert _ext is not None
    m, k = x.shape
    n = w.shape[1]
    out = empty_aligned((m, n))
    _ext.conv_gemm(_f32(x, "fc_gemm"), _f32(w, "fc_gemm"), None if bias is None else _f32(bias, "fc_gemm"), out,
                   (1, 1, m, k, n), act[0], act[1], None, True)
    return out


def conv2d_gemm(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, oh: int, ow: int, kernel: tuple[int, int],
                strides: tuple[int, int], dilations: tuple[int, int], pads: tuple[int, int],
                act: Act = NO_ACT) -> np.ndarray:
    """Grouped conv of NCHW x with w (G, M, C/G*kh*kw) as GEMMs whose blocks gather their own im2col
    columns (no full column matrix): act(conv + bias), (N, G*M, oh*ow). `pads` = (top, left)."""
    assert _ext is not None
    g, m, k = w.shape
    n, c, h, wd = x.shape
    out = empty_aligned((n, g * m, oh * ow))
    _ext.conv_gemm(_f32(w, "conv2d_gemm"), _f32(x, "conv2d_gemm"),
                   None if bias is None else _f32(bias, "conv2d_gemm"), out, (n, g, m, k, oh * ow), act[0], act[1],
                   (c, h, wd, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1],
                    pads[0], pads[1]))
    return out


# Winograd F(2x2, 3x3): U = G g G^T per (oc, c), the 3x3 filter g into the 4x4 transform domain
_WINO_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


class WinogradWeights(NamedTuple):
    """A filter transformed for winograd_conv3x3: `u` (16, OC, C), or with `packed` each of the 16 (OC, C) as
    pack_weights packs an (OC, C, 1, 1) filter (the products then run on packed_conv's register tiles)."""
    u: np.ndarray
    oc: int
    packed: bool


WINO_PACKED_TILES = 128  # tile columns per pass at most for the Winograd products on packed_conv's tiles


def winograd_pass_tiles(n: int, oh: int, ow: int) -> int:
    """The tile columns of winograd_conv3x3's widest pass over a batch of n (native_src/winograd.c's split:
    small images side by side up to 256 tiles, large ones in bands of about 256)."""
    assert _ext is not None
    return int(_ext.winograd_pass_tiles(n, oh, ow))


def winograd_packed(n: int, oh: int, ow: int) -> bool:
    """Whether the Winograd products of this shape run on packed_conv's register tiles rather than the BLAS:
    AVX-512 and narrow passes (at most WINO_PACKED_TILES tile columns), where a BLAS vectorised along the
    columns wastes its tiles. Measured on one Xeon (Emerald Rapids) core, alone, the BLAS NumPy ships against
    them: 256x256 on 14x14 batch 1 (49 columns) 0.72x the time, 512x512 on 7x7 batch 4 (64) 0.80x; on 196
    columns and more 1.2x-1.7x (kept on the BLAS)."""
    return packed_gemm_fast() and winograd_pass_tiles(n, oh, ow) <= WINO_PACKED_TILES


def winograd_weights(w: np.ndarray, packed: bool = False) -> WinogradWeights:
    """The transformed weights of a (OC, C, 3, 3) filter (computed in float64); `packed` lays each position out
    for packed_conv's register tiles instead of the BLAS (see winograd_packed)."""
    oc, c = w.shape[0], w.shape[1]
    u = np.einsum("ik,ockl,jl->ijoc", _WINO_G, np.asarray(w, dtype=np.float64), _WINO_G)
    u = np.asarray(u.reshape(16, oc, c), dtype=F32, order="C")
    if packed:
        u = np.concatenate([pack_weights(u[p].reshape(oc, c, 1, 1)) for p in range(16)])
    return WinogradWeights(aligned_copy(u), oc, bool(packed))


def winograd_conv3x3(x: np.ndarray, u: WinogradWeights, bias: np.ndarray | None, oh: int, ow: int,
                     pads: tuple[int, int], act: Act = NO_ACT) -> np.ndarray:
    """3x3 stride-1 conv of NCHW x by Winograd F(2x2, 3x3) with `u` from winograd_weights; `pads` = (top, left)
    (the bottom / right padding follows from oh, ow). Returns act(conv + bias), (N, OC, oh, ow)."""
    assert _ext is not None
    return _into(_ext.winograd_conv3x3, (x.shape[0], u.oc, oh, ow), _f32(x, "winograd_conv3x3"), _f32(u.u, "winograd"),
                 None if bias is None else _f32(bias, "winograd"), _wino_geo(x.shape, u.oc, oh, ow, pads), act[0],
                 act[1], u.packed)


PACK_ROWS = 64  # output channels per panel of packed weights (native_src/packed_gemm.c PK_MR)


# the instruction sets whose packed-GEMM register tiles are tuned (the forms chosen by packed_gemm_fast): AVX-512's
# tiles of 16-float vectors, AVX2's and NEON's sub-tiles of them (native_src/avx2.h, neon.h: the same products in the
# same order). AVX2 was left out while its tiles made MobileNetV2 2.9x slower than im2col + OpenBLAS: not the tiles
# (~105 GFLOP/s on one Zen 5 core, ~90% of its AVX2 peak) but the AVX-512 tiles' 16-float vector epilogue, which GCC
# compiles to scalar code in the AVX2 clones (avx2.h pw_rows_out; BENCHMARKS.md "AVX2 + FMA").
PACKED_FAST_ISAS = ("avx512", "avx2", "neon")


def packed_gemm_fast() -> bool:
    """Whether packed_conv runs its fast form here (AVX-512: its register tile is 28 vectors of 16 floats; AVX2 and
    NEON: the same tile as sub-tiles that fit their 16 and 32 registers); on the x86 baseline (SSE) it is correct but
    slower than the BLAS path."""
    return _ext is not None and isa() in PACKED_FAST_ISAS


def pack_weights(w: np.ndarray, wide: bool = False) -> np.ndarray:
    """A conv filter (M, C, KH, KW) packed for packed_conv: rows padded with zeros to a multiple of 16, in panels
    of 64 rows (the last one 16..64), each laid out (K, rows) with K = KH*KW*C tap-major (kernel tap, then input
    channel: a tile skips the kernel rows that fall in the padding); `wide` (its form for large maps): to a
    multiple of 8, in panels of 8 rows, K in the filter's order (C, KH, KW)."""
    if w.ndim != 4:
        raise ValueError(f"pack_weights: expected a conv filter (M, C, KH, KW), got shape {w.shape}")
    m = w.shape[0]
    w = w.reshape(m, -1) if wide else w.transpose(0, 2, 3, 1).reshape(m, -1)
    align, panel = (8, 8) if wide else (16, PACK_ROWS)
    mp = -(-m // align) * align
    wp = np.zeros((mp, w.shape[1]), dtype=F32)
    wp[:m] = w
    return aligned_copy(np.concatenate([wp[p:p + panel].T.ravel() for p in range(0, mp, panel)]))


FC_TILE = 48  # W's columns per tile of packed fc weights (native_src/packed_gemm.c PW_NR)


def pack_fc_weights(w: np.ndarray) -> np.ndarray:
    """fc weights (K, N) packed for packed_fc: tiles of 48 columns (zeros past N), each laid out (K, 48)."""
    if w.ndim != 2:
        raise ValueError(f"pack_fc_weights: expected fc weights (K, N), got shape {w.shape}")
    k, n = w.shape
    wp = np.zeros((k, -(-n // FC_TILE) * FC_TILE), dtype=F32)
    wp[:, :n] = w
    return aligned_copy(wp.reshape(k, -1, FC_TILE).transpose(1, 0, 2)).ravel()  # (ravel: a view of the copy)


def packed_fc(x: np.ndarray, wp: np.ndarray, n: int, bias: np.ndarray | None, act: Act = NO_ACT) -> np.ndarray:
    """act(x @ w + bias) for C-contiguous float32 x (M, K), w (K, n) packed by pack_fc_weights, bias (n,) or None,
    on the native pool with the packed conv's register tiles (fast with AVX-512: packed_gemm_fast)."""
    assert _ext is not None
    m, k = x.shape
    out = empty_aligned((m, n))
    _ext.packed_fc(_f32(x, "packed_fc"), _f32(wp, "packed_fc"), None if bias is None else _f32(bias, "packed_fc"),
                   out, (m, k, n), act[0], act[1])
    return out


GEMV_MAX_ROWS = 4  # rows of x up to which packed_gemv (W streamed once per row) beats the GEMM forms


def packed_gemv(x: np.ndarray, wp: np.ndarray, n: int, bias: np.ndarray | None, act: Act = NO_ACT) -> np.ndarray:
    """packed_fc's act(x @ w + bias), the same bits, for x (M, K) of a few rows (GEMV_MAX_ROWS: the batch-1 fc, a
    squeeze-and-excitation's 1x1 convs on 1x1 maps) as matrix-vector products over the packed weights
    (native_src/gemv.c: full-width loads of each W tile, streamed once per row; fast on every ISA)."""
    assert _ext is not None
    m, k = x.shape
    out = np.empty((m, n), dtype=F32)
    _ext.packed_gemv(_f32(x, "packed_gemv"), _f32(wp, "packed_gemv"),
                     None if bias is None else _f32(bias, "packed_gemv"), out, (m, k, n), act[0], act[1])
    return out


def packed_conv(x: np.ndarray, wp: np.ndarray, bias: np.ndarray | None, m: int, oh: int, ow: int,
                kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
                pads: tuple[int, int], act: Act = NO_ACT, wide: bool = False) -> np.ndarray:
    """Conv (one group) of NCHW x with weights packed by pack_weights(.., wide) from (M, C, kh, kw), by the native
    kernel with its own register tiles: act(conv + bias), (N, M, oh, ow). `pads` = (top, left)."""
    assert _ext is not None
    return _into(_ext.packed_conv, (x.shape[0], m, oh, ow), _f32(x, "packed_conv"), _f32(wp, "packed_conv"),
                 None if bias is None else _f32(bias, "packed_conv"),
                 _geo(x.shape, m, oh, ow, kernel, strides, dilations, pads), act[0], act[1], wide)


DIRECT_OCB = 16  # output channels per block of direct_conv's packed weights (native_src/direct_conv.c DC_OCB)


def direct_conv_applies(oc: int, c: int, kh: int, kw: int, sw: int) -> bool:
    """Whether direct_conv takes a one-group conv of c input and oc output channels, a kh x kw window and stride sw
    along the width: few input channels (a stem's 3), whole blocks of 16 output channels (else their accumulators
    go partly to waste: 20 outputs measured 1.6x slower than the im2col GEMM), stride 1 or 2, AVX-512 (its 16
    accumulators of 16 floats; its AVX2 tiles, 8 columns x 8 channels, are the same sums but no faster than the
    wide packed form there: one Zen 5 core, MobileNetV3's stem 0.143 against 0.154 ms, MobileNet's 3x3 / 2 to 32
    channels 0.275 / 0.250, ResNet18's 7x7 / 2 2.49 / 2.38). Measured on this form's targets, one Xeon (Emerald
    Rapids) core, against the im2col GEMM / packed wide form: MobileNetV3's 3x3 / 2 stem to 16 channels 0.66x (batch 1) and 0.49x (batch
    4), ResNet18's 7x7 / 2 to 64 0.81x, MobileNet's 3x3 / 2 to 32 0.85x-0.88x."""
    return (_ext is not None and isa() == "avx512" and c <= 4 and c * kh * kw <= 256 and oc % DIRECT_OCB == 0
            and sw in (1, 2))


def direct_conv_weights(w: np.ndarray) -> np.ndarray:
    """(OC, C, KH, KW) weights packed for direct_conv: [oc block][c][kh][kw][16]."""
    assert _ext is not None
    oc, c, kh, kw = w.shape
    out = empty_aligned((-(-oc // DIRECT_OCB), c * kh * kw, DIRECT_OCB), 0)
    _ext.direct_conv_pack(_f32(w, "direct_conv"), out, (oc, c, kh, kw))
    return out


ADD_ACT_MIN = 16384  # floats: below, NumPy's add (one thread) costs no more than the native call


def add_act_applies(x: Any, y: Any) -> bool:
    """Whether add_act takes x + y: both C-contiguous float32 arrays of one shape, at least ADD_ACT_MIN floats."""
    return (type(x) is np.ndarray and type(y) is np.ndarray and x.dtype == F32 and y.dtype == F32
            and x.shape == y.shape and x.size >= ADD_ACT_MIN and x.flags.c_contiguous and y.flags.c_contiguous)


def add_act_or_none(x: Any, y: Any, context: Any, act: Act = NO_ACT) -> np.ndarray | None:
    """act(x + y) by add_act where it applies and `context` runs native kernels (the plain and the fused
    elementwise add kernels), else None (the caller's NumPy path)."""
    if add_act_applies(x, y) and use_native(context):
        return add_act(x, y, act)
    return None


def add_act(x: np.ndarray, y: np.ndarray, act: Act = NO_ACT) -> np.ndarray:
    """act(x + y) into a new array, on the native pool (the same float32 sums as NumPy's add, then the
    activation as bias_act applies it): for x, y where add_act_applies."""
    assert _ext is not None
    out = empty_aligned(x.shape)
    _ext.add_act(x, y, out, x.size, act[0], act[1])
    return out


def gate_operands(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(map, gates) where x * y is a map of at least ADD_ACT_MIN floats times per-row gates: both C-contiguous
    float32 arrays of one rank, the gates' shape the map's leading dims then 1s (squeeze-and-excitation's (N, C, H, W)
    * (N, C, 1, 1), either order); else None."""
    if not (type(x) is np.ndarray and type(y) is np.ndarray and x.dtype == F32 and y.dtype == F32
            and x.ndim == y.ndim >= 2 and x.flags.c_contiguous and y.flags.c_contiguous):
        return None
    big, small = (x, y) if x.size >= y.size else (y, x)
    if big.size < ADD_ACT_MIN or small.size == big.size:
        return None
    k = small.ndim
    while k > 0 and small.shape[k - 1] == 1:
        k -= 1
    if k == 0 or small.shape[:k] != big.shape[:k]:
        return None
    return big, small


def mul_gates_or_none(x: Any, y: Any, context: Any) -> np.ndarray | None:
    """x * y by mul_rows (on the native pool; the float32 products NumPy gives) where gate_operands applies and
    `context` runs native kernels, else None (the caller's NumPy path)."""
    ops = gate_operands(x, y)
    if ops is None or not use_native(context):
        return None
    big, small = ops
    out = empty_aligned(big.shape)
    _ext.mul_rows(big, small, out, (small.size, big.size // small.size))
    return out


def bias_act(out: np.ndarray, bias: np.ndarray | None, act: Act = NO_ACT) -> np.ndarray:
    """In place on (N, C, ...) `out`: out = act(out + bias[c]); returns out."""
    assert _ext is not None
    n, c = out.shape[:2]
    inner = out.size // max(1, n * c)
    _ext.bias_act(_f32(out, "bias_act"), None if bias is None else _f32(bias, "bias_act"), (n, c, inner),
                  act[0], act[1])
    return out


def im2col(x: np.ndarray, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
           dilations: tuple[int, int], pads: tuple[int, int]) -> np.ndarray:
    """Columns (N, C*kh*kw, oh*ow) of NCHW x; `pads` = (top, left); outside the image reads 0."""
    assert _ext is not None
    n, c, h, w = x.shape
    cols = np.empty((n, c * kernel[0] * kernel[1], oh * ow), dtype=F32)
    _ext.im2col(_f32(x, "im2col"), cols, (n, c, h, w, oh, ow, kernel[0], kernel[1], strides[0], strides[1],
                                          dilations[0], dilations[1], pads[0], pads[1]))
    return cols


def pool2d(x: np.ndarray, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
           pads: tuple[int, int], is_max: bool, exclusive: bool) -> np.ndarray:
    """Max / avg pooling of NCHW x with Paddle's windows and divisors (see pool.py); `pads` = (top, left)."""
    assert _ext is not None
    out = empty_aligned((*x.shape[:2], oh, ow))
    _ext.pool2d(_f32(x, "pool2d"), out, pool_geo(x.shape, oh, ow, kernel, strides, pads), int(is_max), int(exclusive))
    return out


def pool_geo(x_shape: tuple[int, ...], oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
             pads: tuple[int, int]) -> tuple[int, ...]:
    """(N * C, H, W, OH, OW, KH, KW, SH, SW, PT, PL): the geometry tuple the native pool2d parses."""
    n, c, h, w = x_shape
    return (n * c, h, w, oh, ow, kernel[0], kernel[1], strides[0], strides[1], pads[0], pads[1])


def layer_norm(x: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None, eps: float,
               stats: bool, residual: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Per row of the (rows, cols) matrix x (of x + residual, skip_layernorm's sum: one rounded add as
    elementwise_add's): (x - mean) / sqrt(var + eps) * scale + bias; returns y and, when `stats`, the rows' mean and
    variance."""
    assert _ext is not None
    rows, cols = x.shape
    y = empty_aligned((rows, cols))
    mean = np.empty(rows, dtype=F32) if stats else None
    var = np.empty(rows, dtype=F32) if stats else None
    _ext.layer_norm(_f32(x, "layer_norm"), None if scale is None else _f32(scale, "layer_norm"),
                    None if bias is None else _f32(bias, "layer_norm"), y, mean, var, (rows, cols), float(eps),
                    None if residual is None else _f32(residual, "layer_norm"))
    return y, mean, var


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of C-contiguous float32 x (any rank >= 1); NaN propagates as in NumPy."""
    assert _ext is not None
    y = empty_aligned(x.shape)
    cols = x.shape[-1]
    _ext.softmax(_f32(x, "softmax"), y, (x.size // max(cols, 1), cols))
    return y


def attention(x: np.ndarray, heads: int, alpha: float = 1.0) -> np.ndarray:
    """Per head h, softmax(alpha * q_h k_h^T) v_h of C-contiguous float32 x (B, S, 3 * heads * D) (q, k, v side by
    side, head h at columns h*D of each third) -> (B, S, heads * D) (native_src/norm_softmax.c at_task)."""
    assert _ext is not None
    b, s, c = x.shape
    d = c // (3 * heads)
    out = empty_aligned((b, s, heads * d))
    _ext.attention(_f32(x, "attention"), out, (b, s, heads, d), float(alpha))
    return out
