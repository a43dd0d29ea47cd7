"""Host pool2d and max_pool2d_with_index kernels (NumPy) with Paddle's exact window and divisor rules.

Paddle's CPU Pool2dFunctor (window for output row i, non-adaptive):
    hstart = i*stride - pad_top;  hend = min(hstart + k, H + pad_top)   # pad_top, also at the bottom
    divisor (exclusive=False) = (hend - hstart) * (wend - wstart)         # window clipped to the padding
    hstart, hend = max(hstart, 0), min(hend, H)                           # elements actually read
    divisor (exclusive=True, or adaptive) = (hend - hstart) * (wend - wstart)
The exclusive extents are not clamped at 0: a window wholly in the padding on one axis gives a
negative extent, so its average is -0 (one axis) or 0 (both: the product is positive) or 0/0
(an extent of exactly 0), as in Paddle.
Max starts from -FLT_MAX (so an all-padding window yields -FLT_MAX). Adaptive windows are
[floor(i*H/oh), ceil((i+1)*H/oh)). Quirk kept on purpose: for pooling_type "max" Paddle calls
the functor with adaptive=False, so adaptive max pool2d uses the ksize/strides windows (with
zero paddings) over an output of size ksize.

With the native extension (option `host_native`), float32 windows (and global / evenly dividing
adaptive pools, which are windows too) run in C with the same window and divisor rules.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.types import HOST, PrecisionType
from pdlite.kernels.host import native, native_plans
from pdlite.kernels.host.conv import channel_chunk, flat_taps, from_nchw, to_nchw
from pdlite.kernels.host.native import F32
from pdlite.kernels.registry import Bound, Kernel, TensorType, bound, register_kernel
from pdlite.operators.nn import PoolGeometry, pool2d_geometry
from pdlite.operators.pool import max_pool_with_index_geometry

FLT_MAX = float(np.finfo(np.float32).max)


def _adaptive_bounds(out: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive(x: np.ndarray, oh: int, ow: int, is_max: bool) -> np.ndarray:
    """Adaptive pooling of NCHW x to (oh, ow) (separable: rows first, then columns)."""
    n, c, h, w = x.shape
    if oh == 1 and ow == 1:
        flat = x.reshape(n, c, h * w)
        r = flat.max(axis=2) if is_max else flat.mean(axis=2, dtype=x.dtype)
        return r.reshape(n, c, 1, 1)
    if h % oh == 0 and w % ow == 0:
        v = x.reshape(n, c, oh, h // oh, ow, w // ow)
        return v.max(axis=(3, 5)) if is_max else v.mean(axis=(3, 5), dtype=x.dtype)
    hs, he = _adaptive_bounds(oh, h)
    ws, we = _adaptive_bounds(ow, w)
    red = np.max if is_max else np.sum
    rows = np.stack([red(x[:, :, a:b, :], axis=2) for a, b in zip(hs, he)], axis=2)
    out = np.stack([red(rows[:, :, :, a:b], axis=3) for a, b in zip(ws, we)], axis=3)
    if not is_max:
        out /= np.outer(he - hs, we - ws).astype(x.dtype)
    return out


def _windows(x: np.ndarray, g: PoolGeometry, is_max: bool) -> np.ndarray:
    """Non-adaptive (possibly padded, ceil-mode) pooling of NCHW x."""
    n, c, h, w = x.shape
    oh, ow = g.oh, g.ow
    top, left = g.pads[0], g.pads[2]
    fill = -FLT_MAX if is_max else 0.0
    bufs, taps, wq = flat_taps(x, oh, ow, g.kh, g.kw, g.sh, g.sw, 1, 1, top, left, fill)
    length = oh * wq
    acc = np.empty((n, c, length), dtype=x.dtype)
    op = np.maximum if is_max else np.add
    step = channel_chunk(n, length)
    for c0 in range(0, c, step):
        c1 = min(c, c0 + step)
        a = acc[:, c0:c1]
        for k, (b, off) in enumerate(taps):
            src = bufs[b][:, c0:c1, off : off + length]
            if k == 0:
                np.copyto(a, src)
            else:
                op(a, src, out=a)
    out = acc.reshape(n, c, oh, wq)[:, :, :, :ow]
    if is_max:
        return np.asarray(out, order="C")
    out = out / _divisor(g).astype(x.dtype)
    return out


def _native_pool(x_shape: tuple[int, ...], g: PoolGeometry, is_max: bool, whole: bool) -> native_plans.Plan | None:
    """The pooling in C for C-contiguous float32 NCHW x of shape x_shape, or None where it does not apply (adaptive
    windows of unequal sizes)."""
    n, c, h, w = x_shape
    if whole:
        if h % g.oh or w % g.ow:
            return None
        kh, kw = h // g.oh, w // g.ow  # equal adaptive windows: a plain unpadded pooling, divisor kh*kw
        return native_plans.pool_plan(x_shape, g.oh, g.ow, (kh, kw), (kh, kw), (0, 0), is_max, True)
    return native_plans.pool_plan(x_shape, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw), (g.pads[0], g.pads[2]), is_max,
                            g.exclusive)


def _divisor(g: PoolGeometry) -> np.ndarray:
    """(oh, ow) average-pool divisors following Paddle's CPU functor."""

    def counts(out: int, k: int, s: int, pad: int, size: int) -> np.ndarray:
        start = np.arange(out) * s - pad
        if g.exclusive:
            return np.minimum(start + k, size) - np.maximum(start, 0)
        return np.minimum(start + k, size + pad) - start

    return np.outer(
        counts(g.oh, g.kh, g.sh, g.pads[0], g.h), counts(g.ow, g.kw, g.sw, g.pads[2], g.w)
    )


@register_kernel("pool2d")
class Pool2d(Kernel):
    """pool2d: max / avg, global, adaptive, ceil_mode, exclusive, SAME/VALID/EXPLICIT, NCHW/NHWC."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._geo: dict[tuple[int, ...], PoolGeometry] = {}
        self._native: bool | None = None
        self._plan: tuple[tuple[int, ...], native_plans.Plan] | None = None  # (NCHW input shape, its native call)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        p = self._plan
        if p is not None and p[0] == x.shape and type(x) is np.ndarray and x.dtype == F32 and x.flags.c_contiguous:
            return {"Out": [p[1](x)]}  # the same pooling as last time: its bound native call
        shape = tuple(x.shape)
        g = self._geo.get(shape)
        if g is None:
            g = self._geo[shape] = pool2d_geometry(self.attrs, shape)
        is_max = g.pooling_type == "max"
        x = to_nchw(x, g.channel_last)
        glob = bool(self.attrs["global_pooling"])
        whole = (g.adaptive and not is_max) or (glob and not g.adaptive)  # adaptive windows over the whole input
        if self._native is None:
            self._native = native.use_native(self.context)
        if self._native and x.dtype == np.float32 and x.ndim == 4:
            x = np.asarray(x, order="C")
            plan = _native_pool(x.shape, g, is_max, whole)
            if plan is not None:
                if not g.channel_last and type(x) is np.ndarray:
                    self._plan = (shape, plan)
                return {"Out": [from_nchw(plan(x), g.channel_last)]}
        if whole:
            out = _adaptive(x, g.oh, g.ow, is_max)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):  # empty windows: Paddle's 0/0
                out = _windows(x, g, is_max)
        return {"Out": [from_nchw(out, g.channel_last)]}

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """The bound native call run() keeps for X's shape (Kernel.bind)."""
        x, p = ins["X"][0], self._plan
        if p is not None and p[0] == x.shape and x.dtype == F32 and x.flags.c_contiguous:
            return bound(p[1])
        return None


def _bounds(i: int, size: int, out: int, k: int, s: int, p: int, adaptive: bool) -> tuple[int, int]:
    if adaptive:
        return (i * size) // out, -((-(i + 1) * size) // out)
    start = i * s - p
    return max(start, 0), min(start + k, size)


@register_kernel("max_pool2d_with_index", outputs={"Mask": TensorType(HOST, PrecisionType.INT32)})
class MaxPool2dWithIndex(Kernel):
    """Out = max over each window, Mask = its first argmax as h * W + w (Paddle's MaxPool2dWithIndex)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        n, c, h, w = x.shape
        k, s, p, (oh, ow) = max_pool_with_index_geometry(self.attrs, x.shape)
        adaptive = bool(self.attrs.get("adaptive"))
        out = np.empty((n, c, oh, ow), dtype=x.dtype)
        mask = np.empty((n, c, oh, ow), dtype=np.int32)
        for i in range(oh):
            h0, h1 = _bounds(i, h, oh, k[0], s[0], p[0], adaptive)
            for j in range(ow):
                w0, w1 = _bounds(j, w, ow, k[1], s[1], p[1], adaptive)
                win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
                if win.shape[2] == 0:  # a window wholly in the padding
                    out[:, :, i, j], mask[:, :, i, j] = -FLT_MAX, -1
                    continue
                arg = win.argmax(axis=2)
                out[:, :, i, j] = np.take_along_axis(win, arg[..., None], axis=2)[..., 0]
                mask[:, :, i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
        return {"Out": [out], "Mask": [mask]}
