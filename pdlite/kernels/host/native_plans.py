"""Bound native calls of the host kernels for one input shape: the conv forms (depthwise, GEMM, rows, direct,
Winograd, packed), pooling, elementwise, fc, softmax and layer norm.

The conv and pool kernels keep one per input shape; the others serve the kernels whose `bind`
(pdlite/kernels/registry.py: the runtime's steady path, pdlite/runtime/steady.py) returns one: the arguments that
follow from the shapes and the output's allocation are fixed once, so a call is the native entry alone. Each makes
the call native.py's wrapper makes (the same entry, the same arguments: the same bits). Inputs are C-contiguous
float32 arrays of the bound shapes (the kernels bind only such, and the steady path keys on shapes and strides).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pdlite.kernels.host import native

Plan = Callable[[np.ndarray], np.ndarray]
Plan2 = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _ext() -> Any:
    ext = native._ext  # the extension these plans call, as native.py's wrappers do
    assert ext is not None
    return ext


def add_act_plan(shape: tuple[int, ...], act: native.Act) -> Plan2:
    """(x, y) -> native.add_act(x, y, act) for arrays of `shape`."""
    fn, alloc, size, (code, params) = _ext().add_act, native.allocator(shape), int(np.prod(shape)), act

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, y, out, size, code, params)
        return out

    return run


def mul_gates_plan(x: np.ndarray, y: np.ndarray) -> Plan2 | None:
    """(x, y) -> x * y as native.mul_gates_or_none computes it for arrays shaped as x and y (None where
    native.gate_operands does not apply)."""
    ops = native.gate_operands(x, y)
    if ops is None:
        return None
    swap = ops[0] is y
    big, small = ops
    fn, alloc, dims = _ext().mul_rows, native.allocator(big.shape), (small.size, big.size // small.size)
    if swap:
        def run_yx(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            out = alloc()
            fn(y, x, out, dims)
            return out

        return run_yx

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, y, out, dims)
        return out

    return run


def fc_plan(form: str, m: int, k: int, n: int, w: np.ndarray, bias: np.ndarray | None,
            act: native.Act) -> Callable[[np.ndarray], np.ndarray]:
    """x (m, k) -> act(x @ W + bias) (m, n) by native.packed_gemv ("gemv"), packed_fc ("packed"; w packed by
    pack_fc_weights for both) or fc_gemm ("gemm", w the (k, n) matrix)."""
    ext = _ext()
    code, params = act
    if form == "gemm":
        gemm, gemm_dims, gemm_alloc = ext.conv_gemm, (1, 1, m, k, n), native.allocator((m, n))

        def run_gemm(x: np.ndarray) -> np.ndarray:
            out = gemm_alloc()
            gemm(x, w, bias, out, gemm_dims, code, params, None, True)
            return out

        return run_gemm
    fn = ext.packed_gemv if form == "gemv" else ext.packed_fc
    alloc = partial(np.empty, (m, n), native.F32) if form == "gemv" else native.allocator((m, n))
    dims = (m, k, n)

    def run(x: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, w, bias, out, dims, code, params)
        return out

    return run


def softmax_plan(shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """x -> native.softmax(x) for x of `shape` (over the last axis)."""
    fn, alloc, cols = _ext().softmax, native.allocator(shape), shape[-1]
    dims = (int(np.prod(shape)) // max(cols, 1), cols)

    def run(x: np.ndarray) -> np.ndarray:
        y = alloc()
        fn(x, y, dims)
        return y

    return run


def layer_norm_plan(rows: int, cols: int, scale: np.ndarray | None, bias: np.ndarray | None, eps: float,
                    stats: bool) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]:
    """x2 (rows, cols) -> native.layer_norm(x2, scale, bias, eps, stats): (y, mean, variance)."""
    fn, alloc, dims, eps = _ext().layer_norm, native.allocator((rows, cols)), (rows, cols), float(eps)
    if not stats:
        def run_y(x2: np.ndarray) -> tuple[np.ndarray, None, None]:
            y = alloc()
            fn(x2, scale, bias, y, None, None, dims, eps)
            return y, None, None

        return run_y
    f32 = native.F32

    def run(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y = alloc()
        mean, var = np.empty(rows, dtype=f32), np.empty(rows, dtype=f32)
        fn(x2, scale, bias, y, mean, var, dims, eps)
        return y, mean, var

    return run


def skip_layer_norm_plan(rows: int, cols: int, scale: np.ndarray | None, bias: np.ndarray | None, eps: float) -> Plan2:
    """(x2, r2) (rows, cols) -> native.layer_norm(x2, scale, bias, eps, False, r2)'s y."""
    fn, alloc, dims, eps = _ext().layer_norm, native.allocator((rows, cols)), (rows, cols), float(eps)

    def run(x2: np.ndarray, r2: np.ndarray) -> np.ndarray:
        y = alloc()
        fn(x2, scale, bias, y, None, None, dims, eps, r2)
        return y

    return run


# --- conv and pool plans: the native call of one conv / pool for one input shape, arguments bound once -------
def _bound(fn: Callable[..., Any], shape: tuple[int, ...], w: np.ndarray, bias: np.ndarray | None,
           *rest: Any, residual: bool = False) -> Plan:
    """x -> fn(x, w, bias, out, *rest) into a new float32 `out` of `shape` (the native conv entries' order; large
    outputs 64-byte aligned: empty_aligned); `residual`: (x, r) -> fn(x, w, bias, out, *rest, r), r (C-contiguous
    float32 of `shape`) added to the output before the activation (fused_conv2d's ResidualData)."""
    alloc = native.allocator(shape)
    if residual:
        def run_res(x: np.ndarray, r: np.ndarray) -> np.ndarray:
            out = alloc()
            fn(x, w, bias, out, *rest, r)
            return out

        return run_res

    def run(x: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, w, bias, out, *rest)
        return out

    return run


def depthwise_plan(w: np.ndarray, bias: np.ndarray | None, x_shape: tuple[int, ...], oc: int, oh: int, ow: int,
                   kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
                   pads: tuple[int, int], act: native.Act) -> Plan:
    """x -> depthwise_conv2d(x, ...) for C-contiguous float32 x of shape x_shape."""
    ext = _ext()
    return _bound(ext.depthwise_conv2d, (x_shape[0], oc, oh, ow), native._f32(w, "depthwise"),
                  None if bias is None else native._f32(bias, "depthwise"),
                  native._geo(x_shape, oc, oh, ow, kernel, strides, dilations, pads), act[0], act[1])


def gemm_plan(w: np.ndarray, bias: np.ndarray | None, x_shape: tuple[int, ...], oh: int, ow: int,
              im2col_args: tuple | None, act: native.Act) -> Plan:
    """x -> act(w @ columns(x) + bias) (N, OC, oh, ow) for w (G, M, K); columns(x) = x itself (a pointwise conv)
    or its im2col (`im2col_args` = (kernel, strides, dilations, pads))."""
    ext = _ext()
    g, m, k = w.shape
    n = x_shape[0]
    length = oh * ow
    dims, shape = (n, g, m, k, length), (n, g * m, oh, ow)
    gemm, i2c, code, params = ext.conv_gemm, ext.im2col, act[0], act[1]
    w, bias = native._f32(w, "conv_gemm"), None if bias is None else native._f32(bias, "conv_gemm")
    alloc = native.allocator(shape)
    if im2col_args is None:
        def run(x: np.ndarray) -> np.ndarray:
            out = alloc()
            gemm(w, x, bias, out, dims, code, params)
            return out

        return run
    kernel, strides, dil, pads = im2col_args
    cols_shape = (n, g * k, length)
    geo = (*x_shape, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dil[0], dil[1], pads[0], pads[1])

    def run_cols(x: np.ndarray) -> np.ndarray:
        cols = np.empty(cols_shape, dtype=native.F32)
        i2c(x, cols, geo)
        out = alloc()
        gemm(w, cols, bias, out, dims, code, params)
        return out

    return run_cols


def rows_plan(w: np.ndarray, bias: np.ndarray | None, n: int, act: native.Act) -> Plan:
    """x -> act(x @ w.T + bias) as (n, M, 1, 1) for x (n, K, 1, 1) and w (M, K): a 1x1 conv of 1x1 maps
    (squeeze-and-excitation's) as one product over the batch: matrix-vector products over packed weights for a few
    images (packed_gemv), else fc_gemm (not a matrix-vector product per image on the BLAS)."""
    ext = _ext()
    b = None if bias is None else native._f32(bias, "rows_plan")
    m, k = w.shape
    shape = (n, m, 1, 1)
    if n <= native.GEMV_MAX_ROWS:
        wp = native.pack_fc_weights(native._f32(w, "rows_plan").T)
        gemv, dims, code, params = ext.packed_gemv, (n, k, m), *act

        def run_gemv(x: np.ndarray) -> np.ndarray:
            out = np.empty(shape, dtype=native.F32)
            gemv(x, wp, b, out, dims, code, params)
            return out

        return run_gemv
    wt = native._f32(w, "rows_plan").T.copy()

    def run(x: np.ndarray) -> np.ndarray:
        return native.fc_gemm(x.reshape(n, -1), wt, b, act).reshape(shape)

    return run


def direct_plan(wp: np.ndarray, bias: np.ndarray | None, x_shape: tuple[int, ...], oc: int, oh: int, ow: int,
                kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
                pads: tuple[int, int], act: native.Act) -> Plan:
    """x -> direct_conv(x, wp, ...) for C-contiguous float32 x of shape x_shape (wp from direct_conv_weights)."""
    ext = _ext()
    return _bound(ext.direct_conv, (x_shape[0], oc, oh, ow), wp,
                  None if bias is None else native._f32(bias, "direct_conv"),
                  native._geo(x_shape, oc, oh, ow, kernel, strides, dilations, pads), act[0], act[1])


def winograd_plan(u: native.WinogradWeights, bias: np.ndarray | None, x_shape: tuple[int, ...], oh: int, ow: int,
                  pads: tuple[int, int], act: native.Act, residual: bool = False) -> Plan:
    """x -> winograd_conv3x3(x, u, bias, ...) for C-contiguous float32 x of shape x_shape ((x, r) -> ... with
    `residual`: r added before the activation)."""
    ext = _ext()
    shape = (x_shape[0], u.oc, oh, ow)
    return _bound(ext.winograd_conv3x3, shape, native._f32(u.u, "winograd"),
                  None if bias is None else native._f32(bias, "winograd"), native._wino_geo(x_shape, u.oc, oh, ow, pads),
                  act[0], act[1], u.packed,
                  residual=residual)


def packed_plan(wp: np.ndarray, bias: np.ndarray | None, x_shape: tuple[int, ...], m: int, oh: int, ow: int,
                kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
                pads: tuple[int, int], act: native.Act, wide: bool = False, residual: bool = False) -> Plan:
    """x -> packed_conv(x, wp, bias, ...) for C-contiguous float32 x of shape x_shape ((x, r) -> ... with
    `residual`: r added before the activation)."""
    ext = _ext()
    return _bound(ext.packed_conv, (x_shape[0], m, oh, ow), native._f32(wp, "packed_conv"),
                  None if bias is None else native._f32(bias, "packed_conv"),
                  native._geo(x_shape, m, oh, ow, kernel, strides, dilations, pads), act[0], act[1], wide,
                  residual=residual)


def pool_plan(x_shape: tuple[int, ...], oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
              pads: tuple[int, int], is_max: bool, exclusive: bool) -> Plan:
    """x -> pool2d(x, ...) for C-contiguous float32 NCHW x of shape x_shape (the pool kernel keeps it per input shape:
    a squeeze-and-excitation's global pool is a few microseconds, its geometry's re-derivation ~1.5 of them)."""
    ext = _ext()
    shape, fn = (*x_shape[:2], oh, ow), ext.pool2d
    geo = native.pool_geo(x_shape, oh, ow, kernel, strides, pads)
    mx, ex, alloc = int(is_max), int(exclusive), native.allocator(shape)

    def run(x: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, out, geo, mx, ex)
        return out

    return run


def attention_plan(shape: tuple[int, int, int], heads: int, alpha: float) -> Plan:
    """x -> native.attention(x, heads, alpha) for x of `shape` (B, S, 3 * heads * D)."""
    b, s, c = shape
    d = c // (3 * heads)
    fn, alloc, dims, alpha = _ext().attention, native.allocator((b, s, heads * d)), (b, s, heads, d), float(alpha)

    def run(x: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, out, dims, alpha)
        return out

    return run
