"""Host pool3d kernel (NumPy) with Paddle's CPU Pool3dFunctor window and divisor rules.

Window of output index o along an axis (non-adaptive), with `pad` the axis' "before" padding:
    start = o*stride - pad;  end = min(start + k, size + pad)
    divisor (exclusive=False) = product of (end - start)                # clipped to the padding only
    start, end = max(start, 0), min(end, size)                           # elements actually read
    divisor (exclusive=True) = product of (end - start)
Extents are not clamped at 0 (a window wholly in the padding gives Paddle's -0 / 0 / 0/0 averages).
Max starts from -FLT_MAX. Adaptive avg windows are [floor(o*size/out), ceil((o+1)*size/out)), divisor
their size. Quirk kept on purpose: for pooling_type "max" Paddle calls the functor with
adaptive=False, so adaptive max pool3d uses the ksize/strides windows (paddings zeroed) over an
output of size ksize. NDHWC inputs are transposed to NCDHW and back.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pdlite.core.types import HOST, PrecisionType
from pdlite.kernels.host.layout import from_channels_first, to_channels_first
from pdlite.kernels.host.pool import _bounds
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.operators.nn3d import Pool3dGeometry, pool3d_geometry
from pdlite.operators.pool import max_pool3d_with_index_geometry

FLT_MAX = float(np.finfo(np.float32).max)
# Windows with more taps than this are reduced over a strided window view instead of tap by tap.
MAX_TAP_LOOP = 32


def _padded(x: np.ndarray, g: Pool3dGeometry, fill: float) -> np.ndarray:
    """x inside a `fill` buffer with the "before" pads and enough room after for every window."""
    before = g.pads[0::2]
    after = [max(0, (o - 1) * s + k - b - size)
             for o, s, k, b, size in zip(g.out_size, g.strides, g.kernel, before, g.in_size)]
    if not any(before) and not any(after):
        return x
    shape = (*x.shape[:2], *(b + size + a for b, size, a in zip(before, g.in_size, after)))
    buf = np.full(shape, fill, dtype=x.dtype)
    d, h, w = g.in_size
    buf[:, :, before[0] : before[0] + d, before[1] : before[1] + h, before[2] : before[2] + w] = x
    return buf


def _divisor(g: Pool3dGeometry) -> np.ndarray:
    """[od, oh, ow] average-pool divisors following Paddle's CPU functor."""

    def counts(out: int, k: int, s: int, pad: int, size: int) -> np.ndarray:
        start = np.arange(out) * s - pad
        if g.exclusive:
            return np.minimum(start + k, size) - np.maximum(start, 0)
        return np.minimum(start + k, size + pad) - start

    cd, ch, cw = (counts(o, k, s, p, size) for o, k, s, p, size in
                  zip(g.out_size, g.kernel, g.strides, g.pads[0::2], g.in_size))
    return cd[:, None, None] * ch[None, :, None] * cw[None, None, :]


def _windows(x: np.ndarray, g: Pool3dGeometry, is_max: bool) -> np.ndarray:
    """Max or sum over each (non-adaptive) window of NCDHW x."""
    xp = _padded(x, g, -FLT_MAX if is_max else 0.0)
    (od, oh, ow), (sd, sh, sw), k = g.out_size, g.strides, g.kernel
    if k[0] * k[1] * k[2] > MAX_TAP_LOOP:
        need = [(o - 1) * s + kk for o, s, kk in zip(g.out_size, g.strides, k)]
        view = sliding_window_view(xp[:, :, : need[0], : need[1], : need[2]], k, axis=(2, 3, 4))
        view = view[:, :, ::sd, ::sh, ::sw]
        return view.max(axis=(5, 6, 7)) if is_max else view.sum(axis=(5, 6, 7), dtype=x.dtype)
    acc: np.ndarray | None = None
    for i, j, m in itertools.product(range(k[0]), range(k[1]), range(k[2])):
        tap = xp[:, :, i : i + (od - 1) * sd + 1 : sd, j : j + (oh - 1) * sh + 1 : sh, m : m + (ow - 1) * sw + 1 : sw]
        if acc is None:
            acc = tap.copy()
        elif is_max:
            np.maximum(acc, tap, out=acc)
        else:
            acc += tap
    assert acc is not None
    return acc


def _adaptive_avg(x: np.ndarray, out_size: tuple[int, int, int]) -> np.ndarray:
    """Adaptive average pooling of NCDHW x (separable sums over each axis, then one division)."""
    acc, extents = x, []
    for axis, out in zip((2, 3, 4), out_size):
        size = x.shape[axis]
        i = np.arange(out)
        starts, ends = (i * size) // out, -((-(i + 1) * size) // out)
        acc = np.stack([acc.take(range(a, b), axis=axis).sum(axis=axis, dtype=x.dtype)
                        for a, b in zip(starts, ends)], axis=axis)
        extents.append(ends - starts)
    div = extents[0][:, None, None] * extents[1][None, :, None] * extents[2][None, None, :]
    return acc / div.astype(x.dtype)


@register_kernel("pool3d")
class Pool3d(Kernel):
    """pool3d: max / avg, global, adaptive, ceil_mode, exclusive, SAME/VALID/EXPLICIT, NCDHW/NDHWC."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._geo: dict[tuple[int, ...], Pool3dGeometry] = {}

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        shape = tuple(x.shape)
        g = self._geo.get(shape)
        if g is None:
            g = self._geo[shape] = pool3d_geometry(self.attrs, shape)
        is_max = g.pooling_type == "max"
        x = to_channels_first(x, g.channel_last)
        if g.adaptive and not is_max:
            out = _adaptive_avg(x, g.out_size)
        elif is_max:
            out = _windows(x, g, True)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):  # empty windows: Paddle's 0/0
                out = _windows(x, g, False) / _divisor(g).astype(x.dtype)
        return {"Out": [from_channels_first(np.asarray(out, order="C"), g.channel_last)]}


@register_kernel("max_pool3d_with_index", outputs={"Mask": TensorType(HOST, PrecisionType.INT32)})
class MaxPool3dWithIndex(Kernel):
    """Out = max over each window, Mask = its first argmax as (d * H + h) * W + w (MaxPool3dWithIndex)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        n, c, *dhw = x.shape
        k, s, p, out_size = max_pool3d_with_index_geometry(self.attrs, x.shape)
        adaptive = bool(self.attrs.get("adaptive"))
        out = np.empty((n, c, *out_size), dtype=x.dtype)
        mask = np.empty((n, c, *out_size), dtype=np.int32)
        for pos in itertools.product(*(range(o) for o in out_size)):
            b = [_bounds(pos[i], dhw[i], out_size[i], k[i], s[i], p[i], adaptive) for i in range(3)]
            win = x[:, :, b[0][0]:b[0][1], b[1][0]:b[1][1], b[2][0]:b[2][1]]
            ext = win.shape[2:]
            win = win.reshape(n, c, -1)
            if win.shape[2] == 0:  # a window wholly in the padding
                out[(slice(None), slice(None), *pos)], mask[(slice(None), slice(None), *pos)] = -FLT_MAX, -1
                continue
            arg = win.argmax(axis=2)
            out[(slice(None), slice(None), *pos)] = np.take_along_axis(win, arg[..., None], axis=2)[..., 0]
            dd, rem = np.divmod(arg, ext[1] * ext[2])
            hh, ww = np.divmod(rem, ext[2])
            mask[(slice(None), slice(None), *pos)] = ((b[0][0] + dd) * dhw[1] + b[1][0] + hh) * dhw[2] + b[2][0] + ww
        return {"Out": [out], "Mask": [mask]}
