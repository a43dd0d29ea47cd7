"""Converters of nearest_interp(_v2), bilinear_interp(_v2), linear_interp_v2 and grid_sampler, with Paddle's
index arithmetic.

nearest, align_corners=False, a scale that is a power of two (ratio = 1 / scale exactly):
    ONNX Resize(scales=[1, 1, sh, sw], coordinate_transformation_mode="asymmetric",
    nearest_mode="floor"): src = floor(dst / scale), which is Paddle's int(ratio * dst). This form
    needs no input size (dynamic exports).
Otherwise, with a known input size, nearest becomes two Gathers with Paddle's own source
indices (`pdlite.kernels.host.interp.nearest_index`), which is exact for every ratio, and bilinear
becomes Gathers of the two neighbours and their float32 weights (`linear_weights`).
bilinear_interp_v2 whose sizes are only known at run time (a dynamic input, the output size from a
tensor: PP-LiteSeg's `F.interpolate(x, paddle.shape(y)[2:])`), with no scale:
    ONNX Resize(sizes=[N, C, out_h, out_w], mode="linear") with Paddle's source ratio in / out:
    align_corners -> "align_corners" (src = dst * (in - 1) / (out - 1)), align_mode 1 -> "asymmetric"
    (src = dst * in / out), align_mode 0 -> "pytorch_half_pixel" (src = (dst + 0.5) * in / out - 0.5,
    clamped at 0 as Paddle clamps it; Resize clamps the source coordinate to [0, in - 1]; an output of
    size 1 reads source 0, as Paddle's ratio 0 for out == 1 does, where "half_pixel" would read the
    centre). The ratio is computed in float32 by both, so the weights agree to rounding.
linear_interp_v2 (NCW, one axis; PP-MobileSeg's axial position embeddings resized to a run-time length):
    with a known input width and constant sizes, Gathers of the two neighbours and their weights as
    bilinear; with the size known only at run time, the 4-D Resize above on [N, C, 1, W] (H stays 1),
    except that align_mode 0 is "half_pixel": Paddle's 1-D kernel keeps the ratio in / out for a single
    output (only the 2-D kernel zeroes it).
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
LINEAR = "linear_interp_v2"


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


def _geometry(op: OpDesc, info: TensorInfo, rank: int = 4) -> InterpGeometry | None:
    """The resize geometry of a rank-`rank` NC... input (4: 2-D interps, 3: linear_interp_v2), or None when the
    input size or a size/scale input is not known."""
    xs = info.shape(op.input("X"))
    if xs is None or len(xs) != rank or any(d < 0 for d in xs[2:]):
        return None
    vals = {n: info.value(n) for n in _size_inputs(op)}
    if any(v is None for v in vals.values()):
        return None
    st = [info.value(n) for n in op.inputs.get("SizeTensor") or []]
    osz = info.value(op.input("OutSize")) if op.input("OutSize") else None
    sc = info.value(op.input("Scale")) if op.input("Scale") else None
    return interp_geometry(op.type, op.attrs, tuple(int(d) for d in xs[2:]), st or None, osz, sc)


def _dynamic_bilinear_ok(op: OpDesc) -> bool:
    """True when Resize(sizes=...) reproduces a bilinear_interp_v2 whose sizes are known only at run time:
    the output size from SizeTensor, OutSize or out_h / out_w, and the source ratio in / out (no Scale
    input and no positive scale attribute, which Paddle would use for the ratio instead)."""
    if op.type != "bilinear_interp_v2" or op.inputs.get("Scale"):
        return False
    if op.inputs.get("SizeTensor"):
        return len(op.inputs["SizeTensor"]) == 2
    sh, sw = _attr_scale(op)
    if sh > 0 or sw > 0:
        return False
    return bool(op.inputs.get("OutSize")) or (int(op.attrs["out_h"]) > 0 and int(op.attrs["out_w"]) > 0)


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
    if g is None and not _dynamic_bilinear_ok(op):
        return "needs the input size and constant size/scale inputs"
    return None


def _dynamic_bilinear(ctx: ConvertContext, op: OpDesc, xo: str, out: str) -> None:
    """Resize to sizes computed in the graph: [N, C] of the input, then the output size as int64."""
    if op.inputs.get("SizeTensor"):
        hw = ctx.add("Concat", [ctx.cast(ctx.tensor(n), np.int64) for n in op.inputs["SizeTensor"]], axis=0)
    elif op.inputs.get("OutSize"):
        hw = ctx.cast(ctx.input(op, "OutSize"), np.int64)
    else:
        hw = ctx.ints([int(op.attrs["out_h"]), int(op.attrs["out_w"])])
    nc = ctx.add("Slice", [ctx.add("Shape", [xo]), ctx.ints([0]), ctx.ints([2])])
    sizes = ctx.add("Concat", [nc, hw], axis=0)
    if op.attrs["align_corners"]:
        mode = "align_corners"
    else:
        mode = "asymmetric" if int(op.attrs["align_mode"]) == 1 else "pytorch_half_pixel"
    ctx.add("Resize", [xo, "", "", sizes], [out], mode="linear", coordinate_transformation_mode=mode)


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
    if g is None and _dynamic_bilinear_ok(op):
        _dynamic_bilinear(ctx, op, xo, out)
        return
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


def _linear_dynamic_ok(op: OpDesc) -> bool:
    """The run-time-size form of linear_interp_v2: the width from SizeTensor, OutSize or out_w, ratio in / out."""
    if op.inputs.get("Scale"):
        return False
    if op.inputs.get("SizeTensor"):
        return len(op.inputs["SizeTensor"]) == 1
    if _attr_scale(op)[0] > 0:
        return False
    return bool(op.inputs.get("OutSize")) or int(op.attrs["out_w"]) > 0


def _linear_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if is_channel_last(op.attrs["data_layout"]):
        return "data_layout NWC"
    if info.rank(op.input("X")) != 3:
        return "linear_interp_v2 needs a 3-D input of known rank"
    try:
        g = _geometry(op, info, rank=3)
    except Exception as e:
        return f"bad geometry: {e}"
    if g is None and not _linear_dynamic_ok(op):
        return "needs the input size and constant size/scale inputs"
    return None


@register_converter(LINEAR, supports=_linear_refusal)
def _linear(ctx: ConvertContext, op: OpDesc) -> None:
    from pdlite.kernels.host.interp import linear_weights, source_ratio

    x = op.input("X")
    assert x is not None
    xo, out = ctx.tensor(x), ctx.output(op, "Out")
    ac = bool(op.attrs["align_corners"])
    g = _geometry(op, ctx.info, rank=3)
    if g is None:
        if not _linear_dynamic_ok(op):
            raise ConversionError("unknown geometry")
        if op.inputs.get("SizeTensor"):
            w = ctx.cast(ctx.add("Reshape", [ctx.tensor(op.inputs["SizeTensor"][0]), ctx.ints([1])]), np.int64)
        elif op.inputs.get("OutSize"):
            w = ctx.add("Slice", [ctx.cast(ctx.input(op, "OutSize"), np.int64), ctx.ints([-1]), ctx.ints([2**62])])
        else:
            w = ctx.ints([int(op.attrs["out_w"])])
        x4 = ctx.add("Unsqueeze", [xo, ctx.ints([2])])
        nc = ctx.add("Slice", [ctx.add("Shape", [x4]), ctx.ints([0]), ctx.ints([3])])
        sizes = ctx.add("Concat", [nc, w], axis=0)
        mode = "align_corners" if ac else "asymmetric" if int(op.attrs["align_mode"]) == 1 else "half_pixel"
        y = ctx.add("Resize", [x4, "", "", sizes], mode="linear", coordinate_transformation_mode=mode)
        ctx.add("Squeeze", [y, ctx.ints([2])], [out])
        return
    width = int((ctx.shape(x) or ())[2])
    if g.out_w == width:
        ctx.add("Identity", [xo], [out])
        return
    flag = int(op.attrs["align_mode"]) == 0 and not ac
    i0, i1, d = linear_weights(source_ratio(width, g.out_w, g.scale_w, ac, zero_single=False), g.out_w, width, flag)
    dt = ctx.dtype(x)
    a = ctx.add("Gather", [xo, _index(ctx, i0)], axis=2)
    b = ctx.add("Gather", [xo, _index(ctx, i1)], axis=2)
    wd = ctx.const(d.astype(dt).reshape(1, 1, -1), hint="w")
    wo = ctx.const((np.ones_like(d) - d).astype(dt).reshape(1, 1, -1), hint="w")
    ctx.add("Add", [ctx.add("Mul", [a, wo]), ctx.add("Mul", [b, wd])], [out])


def _grid_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return None if info.rank(op.input("X")) == 4 else "only 4-D grid_sampler converts (ONNX GridSample, opset 16)"


@register_converter("grid_sampler", supports=_grid_refusal)
def _grid_sampler(ctx: ConvertContext, op: OpDesc) -> None:
    """ONNX GridSample has Paddle's arithmetic: the same unnormalization per align_corners, the same zeros /
    border / reflection padding, bilinear corner weights, nearest rounding halves to even."""
    ctx.add("GridSample", [ctx.input(op, "X"), ctx.input(op, "Grid")], [ctx.output(op, "Output")],
            mode=str(op.attrs["mode"]), padding_mode=str(op.attrs["padding_mode"]),
            align_corners=int(bool(op.attrs["align_corners"])))
