"""Converters of nearest_interp(_v2) and bilinear_interp(_v2), NCHW, with Paddle's index arithmetic.

nearest, align_corners=False, a scale that is a power of two (ratio = 1 / scale exactly):
    ONNX Resize(scales=[1, 1, sh, sw], coordinate_transformation_mode="asymmetric",
    nearest_mode="floor"): src = floor(dst / scale), which is Paddle's int(ratio * dst). This form
    needs no input size (dynamic exports).
Otherwise, with a known input size, nearest becomes two Gathers with Paddle's own source
indices (`pdlite.kernels.host.interp.nearest_index`), which is exact for every ratio, and bilinear
becomes Gathers of the two neighbours and their float32 weights (`linear_weights`).
"""
from __future__ import annotations

import math

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.nn import InterpGeometry, interp_geometry, is_channel_last

NEAREST = ("nearest_interp_v2", "nearest_interp")
BILINEAR = ("bilinear_interp_v2", "bilinear_interp")


def _pow2(v: float) -> bool:
    return v > 0 and math.frexp(v)[0] == 0.5


def _attr_scale(op: OpDesc) -> tuple[float, float]:
    sc = op.attrs.get("scale")
    if isinstance(sc, (list, tuple)):
        if len(sc) > 1:
            return float(sc[0]), float(sc[1])
        if len(sc) == 1:
            return float(sc[0]), float(sc[0])
        return -1.0, -1.0
    return (float(sc), float(sc)) if sc is not None else (-1.0, -1.0)


def _size_inputs(op: OpDesc) -> list[str]:
    return [n for slot in ("OutSize", "SizeTensor", "Scale") for n in op.inputs.get(slot) or []]


def _scale_resize_ok(op: OpDesc) -> bool:
    """True when Resize with power-of-two scales reproduces Paddle exactly (no size inputs)."""
    if op.type not in NEAREST or op.attrs.get("align_corners", True) or _size_inputs(op):
        return False
    sh, sw = _attr_scale(op)
    return _pow2(sh) and _pow2(sw)


def _geometry(op: OpDesc, info: TensorInfo) -> InterpGeometry | None:
    xs = info.shape(op.input("X"))
    if xs is None or len(xs) != 4 or xs[2] < 0 or xs[3] < 0:
        return None
    vals = {n: info.value(n) for n in _size_inputs(op)}
    if any(v is None for v in vals.values()):
        return None
    st = [info.value(n) for n in op.inputs.get("SizeTensor") or []]
    osz = info.value(op.input("OutSize")) if op.input("OutSize") else None
    sc = info.value(op.input("Scale")) if op.input("Scale") else None
    return interp_geometry(op.type, op.attrs, (int(xs[2]), int(xs[3])), st or None, osz, sc)


def _refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if is_channel_last(op.attrs["data_layout"]):
        return "data_layout NHWC"
    if info.rank(op.input("X")) not in (None, 4):
        return "input is not 4-D"
    if _scale_resize_ok(op):
        return None
    try:
        g = _geometry(op, info)
    except Exception as e:
        return f"bad geometry: {e}"
    if g is None:
        return "needs the input size and constant size/scale inputs"
    return None


def _index(ctx: ConvertContext, idx: np.ndarray) -> str:
    return ctx.const(np.asarray(idx, dtype=np.int64), hint="idx")


@register_converter(*NEAREST, supports=_refusal)
def _nearest(ctx: ConvertContext, op: OpDesc) -> None:
    from pdlite.kernels.host.interp import nearest_index, source_ratio

    xo, out = ctx.input(op, "X"), ctx.output(op, "Out")
    if _scale_resize_ok(op):
        sh, sw = _attr_scale(op)
        scales = ctx.const(np.asarray([1.0, 1.0, sh, sw], dtype=np.float32), hint="scales")
        ctx.add("Resize", [xo, "", scales], [out], mode="nearest", coordinate_transformation_mode="asymmetric",
                nearest_mode="floor")
        return
    g = _geometry(op, ctx.info)
    if g is None:
        raise ConversionError("unknown geometry")
    xs = ctx.shape(op.input("X") or "") or ()
    h, w = int(xs[2]), int(xs[3])
    if (g.out_h, g.out_w) == (h, w):
        ctx.add("Identity", [xo], [out])
        return
    ac = bool(op.attrs["align_corners"])
    ih = nearest_index(source_ratio(h, g.out_h, g.scale_h, ac), g.out_h, h, ac)
    iw = nearest_index(source_ratio(w, g.out_w, g.scale_w, ac), g.out_w, w, ac)
    rows = ctx.add("Gather", [xo, _index(ctx, ih)], axis=2)
    ctx.add("Gather", [rows, _index(ctx, iw)], [out], axis=3)


@register_converter(*BILINEAR, supports=_refusal)
def _bilinear(ctx: ConvertContext, op: OpDesc) -> None:
    from pdlite.kernels.host.interp import linear_weights, source_ratio

    x = op.input("X")
    assert x is not None
    xo, out = ctx.tensor(x), ctx.output(op, "Out")
    g = _geometry(op, ctx.info)
    if g is None:
        raise ConversionError("unknown geometry")
    xs = ctx.shape(x) or ()
    h, w = int(xs[2]), int(xs[3])
    if (g.out_h, g.out_w) == (h, w):
        ctx.add("Identity", [xo], [out])
        return
    ac = bool(op.attrs["align_corners"])
    align_flag = int(op.attrs["align_mode"]) == 0 and not ac
    dt = ctx.dtype(x)

    def along(t: str, size: int, out_size: int, scale: float, axis: int) -> str:
        i0, i1, d = linear_weights(source_ratio(size, out_size, scale, ac), out_size, size, align_flag)
        shape = [1, 1, 1, 1]
        shape[axis] = out_size
        a = ctx.add("Gather", [t, _index(ctx, i0)], axis=axis)
        b = ctx.add("Gather", [t, _index(ctx, i1)], axis=axis)
        wd = ctx.const(d.astype(dt).reshape(shape), hint="w")
        wo = ctx.const((np.ones_like(d) - d).astype(dt).reshape(shape), hint="w")
        return ctx.add("Add", [ctx.add("Mul", [a, wo]), ctx.add("Mul", [b, wd])])

    rows = along(xo, h, g.out_h, g.scale_h, 2)
    ctx.add("Identity", [along(rows, w, g.out_w, g.scale_w, 3)], [out])
