"""Host interpolation kernels with Paddle's index arithmetic: the *_interp_v2 ops linear (NCW/NWC),
nearest (4-D and 5-D), bilinear, bicubic (4-D) and trilinear (5-D), and the v1 nearest_interp /
bilinear_interp (Paddle 3.x has no v1 linear, bicubic or trilinear op).

Source ratio per axis:
    align_corners: (in - 1) / (out - 1);  else 1 / scale if a scale applies, else in / out
    out == 1: 0 with align_corners; otherwise 0 for the 2-D methods only (Paddle's 2-D kernel zeroes
    it, its 1-D and 3-D kernels keep in / out or 1 / scale)
(Paddle 3.x runs the v1 ops on the v2 kernels, so v1 also uses 1 / scale; Paddle 2.x's v1
kernels used in / out.)
If the output size equals the input size Paddle copies the input unchanged.
nearest:   src = int(ratio * k + 0.5) if align_corners else int(ratio * k)
bilinear (align_flag = align_mode == 0 and not align_corners):
    y0 = int(ratio * (k + 0.5) - 0.5) if align_flag else int(ratio * k), clamped to >= 0
    y1 = min(y0 + 1, in - 1)
    d  = max(ratio * (k + 0.5) - 0.5, 0) - y0 if align_flag else ratio * k - y0
    out = in[y0] * (1 - d) + in[y1] * d     (separably along H, then W)
linear / trilinear: the bilinear rule along W / along D, H and W.
bicubic (Keys, A = -0.75; float32 coefficients; indices clamped to [0, in - 1]):
    src = ratio * k if align_corners else ratio * (k + 0.5) - 0.5;  i = floor(src), t = src - i
    out = sum_m in[i - 1 + m] * c_m(t), c = (W(t + 1), W(t), W(1 - t), W(2 - t)), along W, then H
Products `ratio * k` are float32 as in the C++ (float * int); `ratio * (k + 0.5)` is double.
The scale is used as the attribute value holds it: a legacy program's float32 `scale` (e.g. 1.7f)
and an exact double 1.7 (dygraph) give different ratios (1/1.7f -> 0.58823526f, 1/1.7 ->
0.5882353f), and so different nearest indices; Paddle behaves the same way on each path.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST
from pdlite.kernels.host.layout import from_channels_first, to_channels_first
from pdlite.kernels.registry import Bound, Kernel, TensorType, bound, register_kernel
from pdlite.operators.nn import InterpGeometry, interp_geometry, is_channel_last

_ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
_SIZE_INPUTS = {"OutSize": _ANY, "SizeTensor": _ANY, "Scale": _ANY}

f32 = np.float32
Resize = Callable[[np.ndarray], np.ndarray]


def source_ratio(
    in_size: int, out_size: int, scale: float, align_corners: bool, zero_single: bool = True
) -> np.float32:
    """Paddle's float32 ratio from output to input coordinates along one axis.

    A single output gives 0 with align_corners, and also without when `zero_single` (the 2-D
    kernels; the 1-D and 3-D ones keep in / out or 1 / scale).
    """
    if out_size <= 1 and (align_corners or zero_single):
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


A = f32(-0.75)  # Keys' cubic convolution constant, as Paddle's


def cubic_weights(
    ratio: np.float32, out_size: int, in_size: int, align_corners: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(idx [out, 4], coeffs [out, 4] float32): Paddle's bicubic taps and weights along one axis."""
    k = np.arange(out_size)
    if align_corners:
        src = ratio * k.astype(np.float32)  # float32 product
    else:
        src = (float(ratio) * (k + 0.5) - 0.5).astype(np.float32)  # double, then float
    i0 = np.floor(src)
    t = (src - i0).astype(np.float32)
    idx = np.clip(i0.astype(np.int64)[:, None] + np.arange(-1, 3), 0, in_size - 1)

    def near(v: np.ndarray) -> np.ndarray:  # |x| <= 1: ((A + 2) x - (A + 3)) x x + 1
        return ((A + f32(2)) * v - (A + f32(3))) * v * v + f32(1)

    def far(v: np.ndarray) -> np.ndarray:  # 1 < |x| < 2: ((A x - 5A) x + 8A) x - 4A
        return ((A * v - f32(5) * A) * v + f32(8) * A) * v - f32(4) * A

    one = f32(1)
    coeffs = np.stack([far(t + one), near(t), near(one - t), far((one - t) + one)], axis=1)
    return idx, coeffs.astype(np.float32)


class _Interp(Kernel):
    """Shared geometry handling of the interp kernels (channel-first internally)."""

    def geometry(self, ins: dict[str, list[Any]], in_sizes: tuple[int, ...]) -> InterpGeometry:
        st = ins.get("SizeTensor") or None
        osz = ins.get("OutSize")
        sc = ins.get("Scale")
        return interp_geometry(
            self.op.type, self.attrs, in_sizes, st, osz[0] if osz else None, sc[0] if sc else None
        )

    def plan(self, ins: dict[str, list[Any]]) -> Resize:
        """x -> Out for inputs of the shapes of `ins` (and its size inputs' values); holds no input."""
        shape = ins["X"][0].shape
        cl = is_channel_last(self.attrs["data_layout"])
        in_sizes = tuple(int(v) for v in (shape[1:-1] if cl else shape[2:]))
        g = self.geometry(ins, in_sizes)
        if g.out == in_sizes:
            return np.ndarray.copy
        align = bool(self.attrs["align_corners"])
        two_d = len(in_sizes) == 2  # Paddle's 2-D kernel zeroes the ratio of a single output
        ratios = [source_ratio(i, o, s, align, two_d) for i, o, s in zip(in_sizes, g.out, g.scales)]
        first = (shape[0], shape[-1], *shape[1:-1]) if cl else shape
        resize = self.resizer(first, g, ratios, align)
        if not cl:
            return resize
        return lambda x: from_channels_first(resize(to_channels_first(x, True)), True)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Out": [self.plan(ins)(ins["X"][0])]}

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        if any(ins.get(s) and s not in fixed for s in _SIZE_INPUTS):  # a size that may change
            return None
        return bound(self.plan(ins))

    def resizer(self, shape: tuple[int, ...], g: InterpGeometry, ratios: list[np.float32], align: bool) -> Resize:
        """x (channel-first, of `shape`) -> the resized array."""
        return lambda x: self.resize(x, g, ratios, align)

    def resize(self, x: np.ndarray, g: InterpGeometry, ratios: list[np.float32], align: bool) -> np.ndarray:
        raise NotImplementedError


@register_kernel("nearest_interp", inputs=_SIZE_INPUTS)
@register_kernel("nearest_interp_v2", inputs=_SIZE_INPUTS)
class NearestInterp(_Interp):
    """Nearest neighbour over H, W (4-D) or D, H, W (5-D)."""

    def resizer(self, shape: tuple[int, ...], g: InterpGeometry, ratios: list[np.float32], align: bool) -> Resize:
        idx = [nearest_index(r, o, i, align) for r, o, i in zip(ratios, g.out, shape[2:])]
        reps = [_whole_repeat(i, n) for i, n in zip(idx, shape[2:])]
        if len(shape) == 4 and all(reps):  # each source pixel repeated rh x rw times (2x, 4x upsampling)
            rh, rw = reps
            return lambda x: upsample(x, rh, rw)
        return lambda x: take_resize(x, idx)


def take_resize(x: np.ndarray, idx: list[np.ndarray]) -> np.ndarray:
    """x[:, :, idx[0]][:, :, :, idx[1]]...: the general nearest resize, one axis at a time (the result stays
    C-contiguous; np.ix_ indexing would not)."""
    out = x
    for axis, i in enumerate(idx, start=2):
        out = np.take(out, i, axis=axis)
    return out


# element itemsize -> (unsigned type of that size, one of twice that size, the factor making (v, v) of v)
_PAIRS = {1: (np.uint8, np.uint16, 0x101), 2: (np.uint16, np.uint32, 0x10001),
          4: (np.uint32, np.uint64, 0x100000001)}


def upsample(x: np.ndarray, rh: int, rw: int) -> np.ndarray:
    """x (N, C, H, W) with each pixel repeated rh x rw times: (N, C, H * rh, W * rw), the bits of x.

    2x along W (det's FPN): each element's bits times 0x1..01 in the unsigned type of twice its size are the
    element twice, written straight into every one of the rh output rows (one ufunc pass; 2-2.5x faster than
    np.repeat then a row copy, and 4-6x faster than one broadcast copy into a (n, c, h, rh, w, rw) view,
    whose inner loop is rw long). Other factors: np.repeat along W, then each row rh times.
    """
    n, c, h, w = x.shape
    out = np.empty((n, c, h * rh, w * rw), x.dtype)
    pair = _PAIRS.get(x.dtype.itemsize) if rw == 2 and x.flags.c_contiguous else None
    if pair is not None:
        half, twice, factor = pair
        np.multiply(x.view(half).reshape(n * c * h, 1, w), twice(factor), out=out.view(twice).reshape(n * c * h, rh, w))
        return out
    rows = np.repeat(x, rw, axis=3) if rw > 1 else x
    out.reshape(n, c, h, rh, w * rw)[...] = rows[:, :, :, None, :]
    return out


def _whole_repeat(idx: np.ndarray, size: int) -> int:
    """r when `idx` is [0]*r + [1]*r + ... + [size-1]*r (nearest upsampling by a whole factor), else 0."""
    if size == 0 or idx.size % size:
        return 0
    r = idx.size // size
    return r if np.array_equal(idx, np.arange(idx.size) // r) else 0


class _Linear(_Interp):
    """Separable linear interpolation along every spatial axis (bilinear: H, W; linear: W; trilinear: D, H, W)."""

    def resizer(self, shape: tuple[int, ...], g: InterpGeometry, ratios: list[np.float32], align: bool) -> Resize:
        flag = int(self.attrs["align_mode"]) == 0 and not align
        taps = []  # per axis: (axis, i0, i1, weight of i0, weight of i1), the weights shaped to broadcast
        for axis, (r, o) in enumerate(zip(ratios, g.out), start=2):
            i0, i1, d = linear_weights(r, o, shape[axis], flag)
            along = [1] * len(shape)
            along[axis] = o
            d = d.reshape(along)
            taps.append((axis, i0, i1, 1 - d, d))

        def run(x: np.ndarray) -> np.ndarray:
            dt = x.dtype
            out = x
            for axis, i0, i1, e, d in taps:
                res = np.take(out, i0, axis=axis) * e.astype(dt)
                res += np.take(out, i1, axis=axis) * d.astype(dt)
                out = res
            return out

        return run


@register_kernel("bilinear_interp", inputs=_SIZE_INPUTS)
@register_kernel("bilinear_interp_v2", inputs=_SIZE_INPUTS)
class BilinearInterp(_Linear):
    pass


@register_kernel("linear_interp_v2", inputs=_SIZE_INPUTS)
@register_kernel("trilinear_interp_v2", inputs=_SIZE_INPUTS)
class LinearInterp(_Linear):
    pass


@register_kernel("bicubic_interp_v2", inputs=_SIZE_INPUTS)
class BicubicInterp(_Interp):
    """Bicubic over H, W: four taps along W per source row, then four along H (Paddle's order)."""

    def resize(self, x: np.ndarray, g: InterpGeometry, ratios: list[np.float32], align: bool) -> np.ndarray:
        h, w = x.shape[2:]
        iy, cy = cubic_weights(ratios[0], g.out[0], h, align)
        ix, cx = cubic_weights(ratios[1], g.out[1], w, align)
        dt = x.dtype
        rows = x[:, :, :, ix[:, 0]] * cx[:, 0].astype(dt)
        for m in range(1, 4):
            rows += x[:, :, :, ix[:, m]] * cx[:, m].astype(dt)
        out = rows[:, :, iy[:, 0], :] * cy[:, 0, None].astype(dt)
        for m in range(1, 4):
            out += rows[:, :, iy[:, m], :] * cy[:, m, None].astype(dt)
        return out
