"""Helpers shared by the converters: scalars of a tensor's dtype, Paddle's broadcasting, fused activations."""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.registry import CONVERTERS, ConversionError
from pdlite.operators.registry import OPS

FLOAT_KINDS = "f"


def scalar(ctx: ConvertContext, like: str, value: float) -> str:
    """A 0-D initializer of Paddle var `like`'s dtype."""
    return ctx.const(np.asarray(value, dtype=ctx.dtype(like)), hint="s")


def as_scalar(ctx: ConvertContext, name: str) -> str:
    """Paddle var `name` (one element: shape [] or [1]) as a 0-D ONNX tensor: a constant becomes a 0-D
    initializer, a 1-element vector a Squeeze. Not Reshape to the empty shape: valid ONNX, but OpenVINO 2024.0's
    ONNX frontend rejects a Reshape whose shape pattern is empty ("The value of scalar shape pattern should be
    equal to 1"), and pdlite[openvino] allows that version."""
    val = ctx.value(name)
    if val is not None:
        return ctx.const(np.asarray(val).reshape(()), hint="s")
    shape = ctx.shape(name)
    if shape is not None and len(shape) == 0:
        return ctx.tensor(name)
    if shape is not None and len(shape) == 1:
        return ctx.add("Squeeze", [ctx.tensor(name), ctx.ints([0])])
    return ctx.add("Reshape", [ctx.tensor(name), ctx.ints([])])


def is_float(info: TensorInfo, name: str | None) -> bool:
    dt = info.dtype(name) if name else None
    return dt is None or dt.kind in FLOAT_KINDS


def pair(v: Any) -> list[int]:
    vals = [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    return vals * 2 if len(vals) == 1 else vals


def paddle_axis(axis: int, rank_big: int, rank_small: int) -> int:
    """Where Paddle aligns the smaller operand's first dim in the bigger one."""
    if axis == -1 or rank_big == rank_small:
        return rank_big - rank_small
    return rank_big - rank_small + axis + 1 if axis < 0 else axis


def elementwise_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    """Why Paddle's `axis` broadcasting of op's X and Y cannot be expressed (None when it can)."""
    axis = int(op.attrs.get("axis", -1))
    rx, ry = info.rank(op.input("X")), info.rank(op.input("Y"))
    if axis == -1 or (rx is not None and rx == ry):
        return None
    if rx is None or ry is None:
        return f"axis={axis} broadcasting needs the ranks of X and Y"
    big, small = (op.input("X"), op.input("Y")) if rx >= ry else (op.input("Y"), op.input("X"))
    nb, ns = max(rx, ry), min(rx, ry)
    ax = paddle_axis(axis, nb, ns)
    if ax < 0 or ax > nb:
        return f"axis {axis} is out of range for ranks {rx} and {ry}"
    if ax + ns > nb:
        s = info.shape(small) or ()
        trimmed = list(s)
        while trimmed and trimmed[-1] == 1 and ax + len(trimmed) > nb:
            trimmed.pop()
        if ax + len(trimmed) > nb:
            return f"Y {list(s)} does not fit into X (rank {nb}) at axis {axis}"
    return None


def broadcast_pair(ctx: ConvertContext, op: OpDesc) -> tuple[str, str]:
    """ONNX names of X and Y reshaped so that NumPy broadcasting gives Paddle's `axis` rule."""
    x, y = op.input("X"), op.input("Y")
    assert x is not None and y is not None
    axis = int(op.attrs.get("axis", -1))
    rx, ry = ctx.rank(x), ctx.rank(y)
    if axis == -1 or rx == ry:
        return ctx.tensor(x), ctx.tensor(y)
    why = elementwise_refusal(op, ctx.info)
    if why or rx is None or ry is None:
        raise ConversionError(why or "unknown ranks")
    x_big = rx >= ry
    big, small = (x, y) if x_big else (y, x)
    nb, ns = max(rx, ry), min(rx, ry)
    ax = paddle_axis(axis, nb, ns)
    s = list(ctx.shape(small) or ())
    keep = ns
    while keep and s[keep - 1] == 1 and ax + keep > nb:
        keep -= 1
    trailing = nb - ax - keep
    val = ctx.value(small)
    if val is not None:  # a constant: reshape it here
        small_o = ctx.const(val.reshape(tuple(val.shape[:keep]) + (1,) * trailing), hint="bcast")
    else:
        small_o = ctx.tensor(small)
        if keep < ns:
            small_o = ctx.add("Squeeze", [small_o, ctx.ints(range(keep, ns))])
        if trailing:
            small_o = ctx.add("Unsqueeze", [small_o, ctx.ints(range(keep, keep + trailing))])
    big_o = ctx.tensor(big)
    return (big_o, small_o) if x_big else (small_o, big_o)


def temp_like(ctx: ConvertContext, name: str) -> str:
    """A new Paddle-level temporary with `name`'s shape and dtype (for fused ops' intermediates)."""
    tmp = ctx.fresh("tmp")
    ctx.info.shapes[tmp] = ctx.info.shapes.get(name)
    if name in ctx.info.dtypes:
        ctx.info.dtypes[tmp] = ctx.info.dtypes[name]
    ctx._needed.add(tmp)  # noqa: SLF001 - same package
    return tmp


def activation_refusal(act_type: str, act_attrs: dict[str, Any], like: OpDesc, info: TensorInfo) -> str | None:
    if not act_type:
        return None
    conv, opdef = CONVERTERS.get(act_type), OPS.get(act_type)
    if conv is None or opdef is None:
        return f"fused activation {act_type!r} has no converter"
    x = like.output_names()[0] if like.output_names() else ""
    act = opdef.attach(OpDesc(act_type, {"X": [x]}, {"Out": [x]}, dict(act_attrs)))
    return conv.refusal(act, info)


def convert_fused(ctx: ConvertContext, base: OpDesc, out_slot: str, act_type: str,
                  act_attrs: dict[str, Any]) -> None:
    """Convert `base` (an attached op desc), then apply activation `act_type` to its `out_slot` output."""
    conv = CONVERTERS.get(base.type)
    if conv is None:
        raise ConversionError(f"base op {base.type} has no converter")
    why = conv.refusal(base, ctx.info)
    if why:
        raise ConversionError(f"base op {base.type}: {why}")
    if not act_type:
        conv.convert(ctx, base)
        return
    out = base.output(out_slot)
    assert out is not None
    tmp = temp_like(ctx, out)
    base = base.copy()
    base.outputs[out_slot] = [tmp]
    conv.convert(ctx, base)
    apply_activation(ctx, act_type, act_attrs, tmp, out, like=base)


def apply_activation(ctx: ConvertContext, act_type: str, act_attrs: dict[str, Any], x: str, out: str,
                     like: OpDesc | None = None) -> None:
    """Convert activation `act_type` (attributes without prefix) from Paddle var `x` into `out`."""
    act = OPS[act_type].attach(OpDesc(act_type, {"X": [x]}, {"Out": [out]}, dict(act_attrs)))
    why = CONVERTERS[act_type].refusal(act, ctx.info) if act_type in CONVERTERS else "no converter"
    if why:
        raise ConversionError(f"fused activation {act_type}: {why}")
    CONVERTERS[act_type].convert(ctx, act)


def int64_vector(ctx: ConvertContext, names: list[str]) -> str:
    """One int64 1-D tensor from a list of 1-element int tensors (constants folded)."""
    vals = [ctx.value(n) for n in names]
    if all(v is not None for v in vals):
        return ctx.ints(int(np.asarray(v).reshape(-1)[0]) for v in vals)
    parts = [ctx.cast(ctx.add("Reshape", [ctx.tensor(n), ctx.ints([-1])]), np.int64) for n in names]
    return parts[0] if len(parts) == 1 else ctx.add("Concat", parts, axis=0)


def as_int64(ctx: ConvertContext, name: str) -> str:
    val = ctx.value(name)
    if val is not None:
        return ctx.ints(np.asarray(val).reshape(-1).tolist())
    t = ctx.add("Reshape", [ctx.tensor(name), ctx.ints([-1])])
    return t if ctx.dtype(name) == np.int64 else ctx.cast(t, np.int64)
