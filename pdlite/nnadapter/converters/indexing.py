"""Converters of gathering, tiling, flipping, striding, unstacking, padding and pixel shuffling.

- gather / index_select = Gather(axis); gather_nd = GatherND (int64 indices).
- tile(repeat_times): X gains leading unit dims when repeat_times is longer, repeat_times gains
  leading 1s when shorter; expand_v2(shape): -1 keeps a dim, which is ONNX Expand's broadcasting
  with 1 in that place (a shape tensor known only at run time: Where(shape == -1, 1, shape)).
- flip = Slice with step -1 on each axis; strided_slice = Slice with steps (+ Squeeze of
  decrease_axis).
- pad (every dim, [before0, after0, ...]) and pad3d (NCDHW, [left, right, top, bottom, front, back];
  constant / reflect / replicate) = ONNX Pad; circular padding is refused (opset 17 has none).
- pixel_shuffle (NCHW) = DepthToSpace(mode CRD): out[n, c, h*r+i, w*r+j] = in[n, c*r*r + i*r + j, h, w].
"""
from __future__ import annotations

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import as_int64, int64_vector, scalar
from pdlite.nnadapter.registry import ConversionError, register_converter

INT64_MAX = np.iinfo(np.int64).max


def _const_list(info: TensorInfo, op: OpDesc, slots: tuple[str, ...]) -> str | None:
    """Reason when one of the value-carrying input slots is not a constant."""
    for slot in slots:
        for n in op.inputs.get(slot) or []:
            if info.value(n) is None:
                return f"non-constant {slot} input"
    return None


def _values(ctx: ConvertContext, op: OpDesc, tensor_slot: str, list_slot: str, attr: str) -> list[int]:
    t = op.input(tensor_slot) if tensor_slot else None
    if t is not None:
        return [int(v) for v in np.asarray(ctx.value(t)).reshape(-1)]
    names = op.inputs.get(list_slot) or [] if list_slot else []
    if names:
        return [int(np.asarray(ctx.value(n)).reshape(-1)[0]) for n in names]
    return [int(v) for v in op.attrs.get(attr) or []]


def _gather_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return _const_list(info, op, ("Axis",))


@register_converter("gather", supports=_gather_refusal)
def _gather(ctx: ConvertContext, op: OpDesc) -> None:
    axis = _values(ctx, op, "Axis", "", "axis") if op.input("Axis") else [int(op.attrs["axis"])]
    ctx.add("Gather", [ctx.input(op, "X"), ctx.input(op, "Index")], [ctx.output(op, "Out")], axis=axis[0])


@register_converter("index_select")
def _index_select(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Gather", [ctx.input(op, "X"), ctx.input(op, "Index")], [ctx.output(op, "Out")],
            axis=int(op.attrs["dim"]))


def _gather_nd_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    """ONNX GatherND needs 1 <= Index.shape[-1]; Paddle's empty index (last dim 0) stays on the host."""
    shape = info.shape(op.input("Index") or "")
    if not shape or shape[-1] < 1:
        return "gather_nd needs a known, non-empty last dim of Index"
    return None


@register_converter("gather_nd", supports=_gather_nd_refusal)
def _gather_nd(ctx: ConvertContext, op: OpDesc) -> None:
    idx_name = op.input("Index")
    assert idx_name is not None
    idx = ctx.tensor(idx_name)
    if ctx.dtype(idx_name) != np.int64:
        idx = ctx.cast(idx, np.int64)
    ctx.add("GatherND", [ctx.input(op, "X"), idx], [ctx.output(op, "Out")])


def _tile_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return _const_list(info, op, ("RepeatTimes", "repeat_times_tensor")) or (
        None if info.rank(op.input("X")) is not None else "tile needs the rank of X")


@register_converter("tile", supports=_tile_refusal)
def _tile(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    reps = _values(ctx, op, "RepeatTimes", "repeat_times_tensor", "repeat_times")
    rank = ctx.rank(x) or 0
    xo = ctx.tensor(x)
    if len(reps) > rank:
        xo = ctx.add("Unsqueeze", [xo, ctx.ints(range(len(reps) - rank))])
    reps = [1] * (rank - len(reps)) + reps
    ctx.add("Tile", [xo, ctx.ints(reps)], [ctx.output(op, "Out")])


@register_converter("expand_v2")
def _expand(ctx: ConvertContext, op: OpDesc) -> None:
    """A shape known only at run time (ViT's class token expanded to the batch): -1 -> 1 with Where."""
    if _const_list(ctx.info, op, ("Shape", "expand_shapes_tensor")) is None:
        shape = _values(ctx, op, "Shape", "expand_shapes_tensor", "shape")
        target = ctx.ints(1 if d == -1 else d for d in shape)
    else:
        s = as_int64(ctx, op.input("Shape")) if op.input("Shape") is not None else int64_vector(
            ctx, op.inputs["expand_shapes_tensor"])
        target = ctx.add("Where", [ctx.add("Equal", [s, ctx.ints([-1])]), ctx.ints([1]), s])
    ctx.add("Expand", [ctx.input(op, "X"), target], [ctx.output(op, "Out")])


@register_converter("expand_as_v2")
def _expand_as(ctx: ConvertContext, op: OpDesc) -> None:
    y = op.input("Y")
    target = ctx.add("Shape", [ctx.tensor(y)]) if y is not None else ctx.ints(
        int(d) for d in op.attrs.get("target_shape") or [])
    ctx.add("Expand", [ctx.input(op, "X"), target], [ctx.output(op, "Out")])


@register_converter("flip")
def _flip(ctx: ConvertContext, op: OpDesc) -> None:
    axes = [int(a) for a in op.attrs.get("axis") or []]
    if not axes:
        ctx.add("Identity", [ctx.input(op, "X")], [ctx.output(op, "Out")])
        return
    n = len(axes)
    ctx.add("Slice", [ctx.input(op, "X"), ctx.ints([-1] * n), ctx.ints([-INT64_MAX] * n), ctx.ints(axes),
                      ctx.ints([-1] * n)], [ctx.output(op, "Out")])


def _strided_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    why = _const_list(info, op, ("StartsTensor", "EndsTensor", "StridesTensor", "StartsTensorList",
                                 "EndsTensorList", "StridesTensorList"))
    return why or (None if info.rank(op.input("Input")) is not None else "needs the rank of Input")


@register_converter("strided_slice", supports=_strided_refusal)
def _strided_slice(ctx: ConvertContext, op: OpDesc) -> None:
    x, out = op.input("Input"), op.output("Out")
    assert x is not None and out is not None
    starts = _values(ctx, op, "StartsTensor", "StartsTensorList", "starts")
    ends = _values(ctx, op, "EndsTensor", "EndsTensorList", "ends")
    strides = _values(ctx, op, "StridesTensor", "StridesTensorList", "strides")
    axes = [int(a) for a in op.attrs.get("axes") or []]
    y = ctx.add("Slice", [ctx.tensor(x), ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(strides)])
    rank = ctx.rank(x) or 1
    dec = sorted({int(d) % rank for d in op.attrs.get("decrease_axis") or []})
    if dec:
        y = ctx.add("Squeeze", [y, ctx.ints(dec)])
    ctx.add("Identity", [y], [ctx.out(out)])


def _unstack_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    xs = info.shape(op.input("X"))
    if xs is None:
        return "needs the shape of X"
    return None


@register_converter("unstack", "unbind", supports=_unstack_refusal)
def _unstack(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    slot = "Y" if op.type == "unstack" else "Out"
    outs = op.outputs.get(slot) or []
    axis = int(op.attrs["axis"]) % max(ctx.rank(x) or 1, 1)
    if len(outs) == 1:
        ctx.add("Squeeze", [ctx.tensor(x), ctx.ints([axis])], [ctx.out(outs[0])])
        return
    parts = ctx.add("Split", [ctx.tensor(x)], len(outs), axis=axis)
    for p, n in zip(parts, outs):
        ctx.add("Squeeze", [p, ctx.ints([axis])], [ctx.out(n)])


@register_converter("pad")
def _pad(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    p = [int(v) for v in op.attrs.get("paddings") or []]
    pads = p[0::2] + p[1::2]
    ctx.add("Pad", [ctx.tensor(x), ctx.ints(pads), scalar(ctx, x, float(op.attrs["pad_value"]))],
            [ctx.output(op, "Out")], mode="constant")


PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def _pad3d_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.attrs["mode"] not in PAD_MODES:
        return f"pad3d mode {op.attrs.get('mode')!r}"
    if op.attrs["data_format"] != "NCDHW":
        return "pad3d data_format NDHWC"
    if info.rank(op.input("X")) not in (None, 5):
        return "pad3d input is not 5-D"
    return _const_list(info, op, ("Paddings",))


@register_converter("pad3d", supports=_pad3d_refusal)
def _pad3d(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    p = _values(ctx, op, "Paddings", "", "paddings")
    if len(p) != 6:
        raise ConversionError(f"pad3d needs 6 paddings, got {p}")
    left, right, top, bottom, front, back = p
    mode = PAD_MODES[op.attrs["mode"]]
    ins = [ctx.tensor(x), ctx.ints([0, 0, front, top, left, 0, 0, back, bottom, right])]
    if mode == "constant":
        ins.append(scalar(ctx, x, float(op.attrs["value"])))
    ctx.add("Pad", ins, [ctx.output(op, "Out")], mode=mode)


def _pixel_shuffle_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return "pixel_shuffle NHWC" if op.attrs["data_format"] != "NCHW" else None


@register_converter("pixel_shuffle", supports=_pixel_shuffle_refusal)
def _pixel_shuffle(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("DepthToSpace", [ctx.input(op, "X")], [ctx.output(op, "Out")],
            blocksize=int(op.attrs["upscale_factor"]), mode="CRD")
