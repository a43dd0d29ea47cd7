"""Converters of batch_norm (inference statistics) and layer_norm.

batch_norm with running statistics (is_test and not trainable_statistics, or use_global_stats)
is ONNX BatchNormalization: (x - mean) / sqrt(var + eps) * scale + bias per channel (axis 1);
batch-statistics mode stays on the host. layer_norm normalises the axes from begin_norm_axis
on: ONNX LayerNormalization(axis=begin_norm_axis) with Paddle's flat Scale/Bias reshaped to
those axes; its Mean/Variance outputs (shape [prod(dims before the axis)]) are computed with
ReduceMean only when something reads them.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.nn import is_channel_last


def _bn_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    a = op.attrs
    test_mode = bool(a["is_test"]) and not bool(a["trainable_statistics"])
    if not (test_mode or a.get("use_global_stats")):
        return "batch_norm with batch statistics (training mode)"
    if is_channel_last(a["data_layout"]):
        return "data_layout NHWC"
    r = info.rank(op.input("X"))
    if r is not None and r < 2:
        return "X of rank < 2"
    return None


@register_converter("batch_norm", supports=_bn_refusal)
def _batch_norm(ctx: ConvertContext, op: OpDesc) -> None:
    ins = [ctx.input(op, "X")]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        name = op.input(slot)
        assert name is not None
        val = ctx.value(name)
        if val is not None:
            ins.append(ctx.const(val.reshape(-1).astype(ctx.dtype(op.input("X") or ""), copy=False), hint=slot))
        else:
            ins.append(ctx.add("Reshape", [ctx.tensor(name), ctx.ints([-1])]))
    ctx.add("BatchNormalization", ins, [ctx.output(op, "Y")], epsilon=float(op.attrs["epsilon"]))


def _ln_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    xs = info.shape(op.input("X"))
    if xs is None:
        return "layer_norm needs the rank of X"
    axis = int(op.attrs["begin_norm_axis"])
    if not 0 <= axis < len(xs):
        return f"begin_norm_axis {axis} for rank {len(xs)}"
    if any(d < 0 for d in xs[axis:]):
        return "layer_norm needs the normalised dims"
    return None


@register_converter("layer_norm", supports=_ln_refusal)
def _layer_norm(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xs = ctx.shape(x)
    if xs is None:
        raise ConversionError("unknown rank")
    axis = int(op.attrs["begin_norm_axis"])
    norm_shape = [int(d) for d in xs[axis:]]
    dt = ctx.dtype(x)
    params = []
    for slot, default in (("Scale", 1.0), ("Bias", 0.0)):
        name = op.input(slot)
        val = ctx.value(name) if name else None
        if name is None:
            params.append(ctx.const(np.full(norm_shape, default, dtype=dt), hint=slot))
        elif val is not None:
            params.append(ctx.const(val.astype(dt, copy=False).reshape(norm_shape), hint=slot))
        else:
            params.append(ctx.add("Reshape", [ctx.tensor(name), ctx.ints(norm_shape)]))
    eps = float(op.attrs["epsilon"])
    xo = ctx.tensor(x)
    ctx.add("LayerNormalization", [xo, *params], [ctx.output(op, "Y")], axis=axis, epsilon=eps)
    mean_name, var_name = op.output("Mean"), op.output("Variance")
    want_mean = mean_name is not None and ctx.needed(mean_name)
    want_var = var_name is not None and ctx.needed(var_name)
    if not (want_mean or want_var):
        return
    axes = list(range(axis, len(xs)))  # opset 17: ReduceMean takes axes as an attribute
    mean_k = ctx.add("ReduceMean", [xo], axes=axes, keepdims=1)
    if want_mean:
        ctx.add("Reshape", [mean_k, ctx.ints([-1])], [ctx.out(mean_name)])
    if want_var:
        d = ctx.add("Sub", [xo, mean_k])
        var = ctx.add("ReduceMean", [ctx.add("Mul", [d, d])], axes=axes, keepdims=0)
        ctx.add("Reshape", [var, ctx.ints([-1])], [ctx.out(var_name)])


def _channels(info: TensorInfo, op: OpDesc) -> int | None:
    xs = info.shape(op.input("X"))
    return int(xs[1]) if xs is not None and len(xs) >= 2 and xs[1] >= 0 else None


def _instance_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    r = info.rank(op.input("X"))
    if r is None or r < 3:
        return "instance_norm needs X of known rank >= 3"
    if (op.input("Scale") is None or op.input("Bias") is None) and _channels(info, op) is None:
        return "instance_norm without Scale/Bias needs the channel count"
    return None


def _per_channel(ctx: ConvertContext, op: OpDesc, slot: str, default: float, c: int | None) -> str:
    name = op.input(slot)
    dt = ctx.dtype(op.input("X") or "")
    if name is None:
        assert c is not None
        return ctx.const(np.full((c,), default, dtype=dt), hint=slot)
    val = ctx.value(name)
    if val is not None:
        return ctx.const(val.reshape(-1).astype(dt, copy=False), hint=slot)
    return ctx.add("Reshape", [ctx.tensor(name), ctx.ints([-1])])


@register_converter("instance_norm", supports=_instance_refusal)
def _instance_norm(ctx: ConvertContext, op: OpDesc) -> None:
    c = _channels(ctx.info, op)
    ins = [ctx.input(op, "X"), _per_channel(ctx, op, "Scale", 1.0, c), _per_channel(ctx, op, "Bias", 0.0, c)]
    ctx.add("InstanceNormalization", ins, [ctx.output(op, "Y")], epsilon=float(op.attrs["epsilon"]))


def _group_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if is_channel_last(op.attrs["data_layout"]):
        return "group_norm NHWC"
    r = info.rank(op.input("X"))
    if r is None or r < 3 or _channels(info, op) is None:
        return "group_norm needs X of rank >= 3 with a known channel count"
    return None


@register_converter("group_norm", supports=_group_refusal)
def _group_norm(ctx: ConvertContext, op: OpDesc) -> None:
    """(x - mean) / sqrt(var + eps) over each group of C / groups channels, then per-channel scale and bias."""
    x = op.input("X")
    assert x is not None
    xs = ctx.shape(x) or ()
    c, g = int(xs[1]), int(op.attrs["groups"])
    xo = ctx.tensor(x)
    grouped = ctx.add("Reshape", [xo, ctx.ints([0, g, -1])])
    mean = ctx.add("ReduceMean", [grouped], axes=[2], keepdims=1)
    d = ctx.add("Sub", [grouped, mean])
    var = ctx.add("ReduceMean", [ctx.add("Mul", [d, d])], axes=[2], keepdims=1)
    eps = ctx.const(np.asarray(float(op.attrs["epsilon"]), dtype=ctx.dtype(x)))
    y = ctx.add("Div", [d, ctx.add("Sqrt", [ctx.add("Add", [var, eps])])])
    y = ctx.add("Reshape", [y, ctx.add("Shape", [xo])])
    bshape = [1, c] + [1] * (len(xs) - 2)
    for slot, onnx_op in (("Scale", "Mul"), ("Bias", "Add")):
        name = op.input(slot)
        if name is not None:
            val = ctx.value(name)
            p = ctx.const(val.reshape(bshape).astype(ctx.dtype(x), copy=False)) if val is not None else ctx.add(
                "Reshape", [ctx.tensor(name), ctx.ints(bshape)])
            y = ctx.add(onnx_op, [y, p])
    ctx.add("Identity", [y], [ctx.output(op, "Y")])
