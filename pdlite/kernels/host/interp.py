"""Host nearest / bilinear interpolation kernels (v1 and v2 ops), with Paddle's index arithmetic.

Source ratio per axis (only when out > 1, else 0):
    align_corners: (in - 1) / (out - 1);  else 1 / scale if a scale applies, else in / out
(Paddle 3.x runs the v1 ops on the v2 kernels, so v1 also uses 1 / scale; Paddle 2.x's v1
kernels used in / out.)
If the output size equals the input size Paddle copies the input unchanged.
nearest:   src = int(ratio * k + 0.5) if align_corners else int(ratio * k)
bilinear (align_flag = align_mode == 0 and not align_corners):
    y0 = int(ratio * (k + 0.5) - 0.5) if align_flag else int(ratio * k), clamped to >= 0
    y1 = min(y0 + 1, in - 1)
    d  = max(ratio * (k + 0.5) - 0.5, 0) - y0 if align_flag else ratio * k - y0
    out = in[y0] * (1 - d) + in[y1] * d     (separably along H, then W)
Products `ratio * k` are float32 as in the C++ (float * int); `ratio * (k + 0.5)` is double.
The scale is used as the attribute value holds it: a legacy program's float32 `scale` (e.g. 1.7f)
and an exact double 1.7 (dygraph) give different ratios (1/1.7f -> 0.58823526f, 1/1.7 ->
0.5882353f), and so different nearest indices; Paddle behaves the same way on each path.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST
from pdlite.kernels.host.conv import from_nchw, to_nchw
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.operators.nn import InterpGeometry, interp_geometry, is_channel_last, split_nchw

_ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
_SIZE_INPUTS = {"OutSize": _ANY, "SizeTensor": _ANY, "Scale": _ANY}

f32 = np.float32


def source_ratio(in_size: int, out_size: int, scale: float, align_corners: bool) -> np.float32:
    """Paddle's float32 ratio from output to input coordinates along one axis."""
    if out_size <= 1:
        return f32(0.0)
    if align_corners:
        return f32(in_size - 1) / f32(out_size - 1)
    if scale > 0:
        return f32(1.0 / scale)  # double division, then float; scale as the attribute holds it
    return f32(in_size) / f32(out_size)


def nearest_index(ratio: np.float32, out_size: int, in_size: int, align_corners: bool) -> np.ndarray:
    k = np.arange(out_size, dtype=np.float32)
    pos = (ratio * k).astype(np.float64)
    if align_corners:
        pos += 0.5
    return np.minimum(pos.astype(np.int64), in_size - 1)


def linear_weights(
    ratio: np.float32, out_size: int, in_size: int, align_flag: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i0, i1, d): source indices and the float32 weight of i1 (i0 gets 1 - d)."""
    k = np.arange(out_size)
    centre = float(ratio) * (k + 0.5) - 0.5  # double, as in the C++
    lin = ratio * k.astype(np.float32)  # float32 product
    if align_flag:
        i0 = np.trunc(centre).astype(np.int64)
    else:
        i0 = lin.astype(np.int64)
    i0 = np.maximum(i0, 0)
    i1 = np.minimum(i0 + 1, in_size - 1)
    if align_flag:
        d = np.maximum(centre.astype(np.float32), f32(0.0)) - i0.astype(np.float32)
    else:
        d = lin - i0.astype(np.float32)
    return np.minimum(i0, in_size - 1), i1, d.astype(np.float32)


class _Interp(Kernel):
    """Shared geometry handling of the interp kernels (NCHW internally)."""

    def geometry(self, ins: dict[str, list[Any]], in_hw: tuple[int, int]) -> InterpGeometry:
        st = ins.get("SizeTensor") or None
        osz = ins.get("OutSize")
        sc = ins.get("Scale")
        return interp_geometry(
            self.op.type, self.attrs, in_hw, st, osz[0] if osz else None, sc[0] if sc else None
        )

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        cl = is_channel_last(self.attrs.get("data_layout", "NCHW"))
        _, _, h, w = split_nchw(x.shape, cl)
        g = self.geometry(ins, (h, w))
        if (g.out_h, g.out_w) == (h, w):
            return {"Out": [x.copy()]}
        align = bool(self.attrs.get("align_corners", True))
        rh = source_ratio(h, g.out_h, g.scale_h, align)
        rw = source_ratio(w, g.out_w, g.scale_w, align)
        y = self.resize(to_nchw(x, cl), g, rh, rw, align)
        return {"Out": [from_nchw(y, cl)]}

    def resize(self, x: np.ndarray, g: InterpGeometry, rh: np.float32, rw: np.float32, align: bool) -> np.ndarray:
        raise NotImplementedError


@register_kernel("nearest_interp", inputs=_SIZE_INPUTS)
@register_kernel("nearest_interp_v2", inputs=_SIZE_INPUTS)
class NearestInterp(_Interp):
    def resize(self, x: np.ndarray, g: InterpGeometry, rh: np.float32, rw: np.float32, align: bool) -> np.ndarray:
        h, w = x.shape[2:]
        iy = nearest_index(rh, g.out_h, h, align)
        ix = nearest_index(rw, g.out_w, w, align)
        return x[:, :, iy[:, None], ix[None, :]]


@register_kernel("bilinear_interp", inputs=_SIZE_INPUTS)
@register_kernel("bilinear_interp_v2", inputs=_SIZE_INPUTS)
class BilinearInterp(_Interp):
    def resize(self, x: np.ndarray, g: InterpGeometry, rh: np.float32, rw: np.float32, align: bool) -> np.ndarray:
        h, w = x.shape[2:]
        flag = int(self.attrs.get("align_mode", 1)) == 0 and not align
        y0, y1, dy = linear_weights(rh, g.out_h, h, flag)
        x0, x1, dx = linear_weights(rw, g.out_w, w, flag)
        dt = x.dtype
        rows = np.take(x, y0, axis=2) * (1 - dy).astype(dt)[:, None]
        rows += np.take(x, y1, axis=2) * dy.astype(dt)[:, None]
        out = np.take(rows, x0, axis=3) * (1 - dx).astype(dt)
        out += np.take(rows, x1, axis=3) * dx.astype(dt)
        return out

