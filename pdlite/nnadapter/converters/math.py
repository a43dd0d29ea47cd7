"""Converters of matmul_v2, bmm, fc, scale (+ fusion_scale_activation), softmax, dropout and lookup tables.

- matmul_v2(trans_x, trans_y): MatMul (NumPy semantics, as Paddle's) after swapping the last two
  dims of a transposed operand of rank >= 2 (a constant one is transposed here). bmm (Paddle: X [B, M, K]
  @ Y [B, K, N], float, both 3-D) is MatMul.
- fc: Out = act(Input flattened at in_num_col_dims @ W + Bias), shape Input.shape[:k] + [N].
- scale: bias_after_scale ? scale * x + bias : scale * (x + bias); float tensors only.
- dropout at inference: "upscale_in_train" is the identity, "downgrade_in_infer" multiplies by
  (1 - dropout_prob).
- lookup_table_v2: Gather(W, Ids, axis 0); rows of `padding_idx` (unless -1) are zeros.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import (
    activation_refusal,
    apply_activation,
    as_scalar,
    convert_fused,
    is_float,
    scalar,
    temp_like,
)
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.fused import base_desc, split_activation


def _swap_last(ctx: ConvertContext, name: str) -> str:
    rank = ctx.rank(name)
    if rank is None:
        raise ConversionError(f"transposing {name!r} needs its rank")
    if rank < 2:
        return ctx.tensor(name)
    val = ctx.value(name)
    if val is not None:
        return ctx.const(np.swapaxes(val, -1, -2), hint="wT")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ctx.add("Transpose", [ctx.tensor(name)], perm=perm)


def _matmul_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    for slot, flag in (("X", "trans_x"), ("Y", "trans_y")):
        if op.attrs.get(flag) and info.rank(op.input(slot)) is None:
            return f"{flag} needs the rank of {slot}"
    if not (is_float(info, op.input("X")) and is_float(info, op.input("Y"))):
        return "integer matmul"
    return None


@register_converter("matmul_v2", supports=_matmul_refusal)
def _matmul_v2(ctx: ConvertContext, op: OpDesc) -> None:
    x, y = op.input("X"), op.input("Y")
    assert x is not None and y is not None
    xo = _swap_last(ctx, x) if op.attrs.get("trans_x") else ctx.tensor(x)
    yo = _swap_last(ctx, y) if op.attrs.get("trans_y") else ctx.tensor(y)
    ctx.add("MatMul", [xo, yo], [ctx.output(op, "Out")])


def _bmm_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if not (is_float(info, op.input("X")) and is_float(info, op.input("Y"))):
        return "integer bmm"
    ranks = {info.rank(op.input("X")), info.rank(op.input("Y"))}
    return None if ranks == {3} else "bmm needs 3-D X and Y of known rank"


@register_converter("bmm", supports=_bmm_refusal)
def _bmm(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("MatMul", [ctx.input(op, "X"), ctx.input(op, "Y")], [ctx.output(op, "Out")])


def _fc_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.attrs.get("padding_weights"):
        return "fc with padding_weights"
    xr = info.rank(op.input("Input"))
    if xr is None:
        return "fc needs the rank of Input"
    k = int(op.attrs["in_num_col_dims"])
    if not 0 < k <= max(xr, 1):
        return f"in_num_col_dims {k} for rank {xr}"
    act, attrs = split_activation(op.attrs, "activation_type")
    return activation_refusal(act, attrs, op, info)


@register_converter("fc", supports=_fc_refusal)
def _fc(ctx: ConvertContext, op: OpDesc) -> None:
    x, w, out = op.input("Input"), op.input("W"), op.output("Out")
    assert x is not None and w is not None and out is not None
    act, attrs = split_activation(op.attrs, "activation_type")
    k = int(op.attrs["in_num_col_dims"])
    rank = ctx.rank(x) or 1
    xo = ctx.tensor(x)
    if k != rank - 1:
        xo = ctx.add("Reshape", [xo, ctx.ints([0] * k + [-1])])
    target = ctx.out(out) if not act else None
    y = ctx.add("MatMul", [xo, ctx.tensor(w)])
    b = op.input("Bias")
    if b is not None:
        val = ctx.value(b)
        bo = ctx.const(val.reshape(-1), hint="bias") if val is not None else ctx.add(
            "Reshape", [ctx.tensor(b), ctx.ints([-1])])
        y = ctx.add("Add", [y, bo])
    if target is not None:
        ctx.add("Identity", [y], [target])
        return
    tmp = temp_like(ctx, out)
    ctx.add("Identity", [y], [ctx.out(tmp)])
    apply_activation(ctx, act, attrs, tmp, out)


def _scale_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if not is_float(info, op.input("X")):
        return "scale on an integer tensor stays on the host"
    st = op.input("ScaleTensor")
    if st is not None and info.rank(st) not in (None, 0, 1):
        return "ScaleTensor of rank > 1"
    return None


@register_converter("scale", supports=_scale_refusal)
def _scale(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    st = op.input("ScaleTensor")
    s = float(op.attrs["scale"])
    bias = float(op.attrs["bias"])
    if st is not None:
        sval = ctx.value(st)
        if sval is not None:
            s_o = scalar(ctx, x, float(np.asarray(sval).reshape(-1)[0]))
        else:
            s_o = ctx.cast(as_scalar(ctx, st), ctx.dtype(x))
    else:
        s_o = None if s == 1.0 else scalar(ctx, x, s)
    b_o = None if bias == 0.0 else scalar(ctx, x, bias)
    out = ctx.output(op, "Out")
    if op.attrs["bias_after_scale"]:
        y = ctx.add("Mul", [xo, s_o]) if s_o else xo
        y = ctx.add("Add", [y, b_o]) if b_o else y
    else:
        y = ctx.add("Add", [xo, b_o]) if b_o else xo
        y = ctx.add("Mul", [y, s_o]) if s_o else y
    ctx.add("Identity", [y], [out])


def _fused_scale_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    act, attrs = split_activation(op.attrs)
    return _scale_refusal(op, info) or activation_refusal(act, attrs, op, info)


@register_converter("fusion_scale_activation", supports=_fused_scale_refusal)
def _fused_scale(ctx: ConvertContext, op: OpDesc) -> None:
    act, attrs = split_activation(op.attrs)
    convert_fused(ctx, base_desc(op, "scale"), "Out", act, attrs)


def _softmax_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return None if is_float(info, op.input("X")) else "softmax of an integer tensor"


@register_converter("softmax", supports=_softmax_refusal)
def _softmax(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Softmax", [ctx.input(op, "X")], [ctx.output(op, "Out")], axis=int(op.attrs["axis"]))


@register_converter("log_softmax", supports=_softmax_refusal)
def _log_softmax(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("LogSoftmax", [ctx.input(op, "X")], [ctx.output(op, "Out")], axis=int(op.attrs["axis"]))


@register_converter("dropout")
def _dropout(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    out = ctx.output(op, "Out")
    if op.attrs["dropout_implementation"] == "upscale_in_train":
        ctx.add("Identity", [xo], [out])
    else:
        ctx.add("Mul", [xo, scalar(ctx, x, 1.0 - float(op.attrs["dropout_prob"]))], [out])


def _lookup(ctx: ConvertContext, op: OpDesc, squeeze_last: bool) -> None:
    ids = ctx.input(op, "Ids")
    if squeeze_last:
        ids = ctx.add("Squeeze", [ids, ctx.ints([-1])])
    w = op.input("W")
    assert w is not None
    pad = op.attrs.get("padding_idx", -1)
    pad = -1 if pad is None else int(pad)
    out = ctx.output(op, "Out")
    if pad == -1:
        ctx.add("Gather", [ctx.tensor(w), ids], [out], axis=0)
        return
    rows = ctx.shape(w)[0] if ctx.shape(w) else -1
    if pad < 0 and rows >= 0:
        pad += rows
    g = ctx.add("Gather", [ctx.tensor(w), ids], axis=0)
    ids_name = op.input("Ids") or ""
    mask = ctx.add("Equal", [ids, ctx.const(np.asarray(pad, dtype=ctx.dtype(ids_name)))])
    mask = ctx.add("Unsqueeze", [mask, ctx.ints([-1])])
    zero = ctx.const(np.zeros((), dtype=ctx.dtype(w)))
    ctx.add("Where", [mask, zero, g], [out])


def _lookup_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    dt = info.dtype(op.input("Ids"))
    if dt is not None and dt.kind not in "iu":
        return f"Ids of dtype {dt}"
    return None


@register_converter("lookup_table_v2", supports=_lookup_refusal)
def _lookup_v2(ctx: ConvertContext, op: OpDesc) -> None:
    _lookup(ctx, op, squeeze_last=False)


@register_converter("lookup_table", supports=_lookup_refusal)
def _lookup_v1(ctx: ConvertContext, op: OpDesc) -> None:
    _lookup(ctx, op, squeeze_last=True)


# -- legacy matmul / mul, reductions, arg max/min, cumsum ------------------------------------------
def _matmul_v1_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    rx, ry = info.rank(op.input("X")), info.rank(op.input("Y"))
    if rx is None or ry is None or rx < 2 or ry < 2:
        return "legacy matmul with operands of rank < 2 (or unknown)"
    if int(op.attrs["head_number"]) != 1:
        return "head_number != 1"
    if not (is_float(info, op.input("X")) and is_float(info, op.input("Y"))):
        return "integer matmul"
    return None


@register_converter("matmul", supports=_matmul_v1_refusal)
def _matmul(ctx: ConvertContext, op: OpDesc) -> None:
    x, y = op.input("X"), op.input("Y")
    assert x is not None and y is not None
    xo = _swap_last(ctx, x) if op.attrs.get("transpose_X") else ctx.tensor(x)
    yo = _swap_last(ctx, y) if op.attrs.get("transpose_Y") else ctx.tensor(y)
    alpha = float(op.attrs["alpha"])
    if alpha == 1.0:
        ctx.add("MatMul", [xo, yo], [ctx.output(op, "Out")])
    else:
        ctx.add("Mul", [ctx.add("MatMul", [xo, yo]), scalar(ctx, x, alpha)], [ctx.output(op, "Out")])


def _mul_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    ys = info.shape(op.input("Y"))
    if ys is None or any(d < 0 for d in ys):
        return "mul needs Y's shape"
    if info.rank(op.input("X")) is None:
        return "mul needs the rank of X"
    return None if is_float(info, op.input("X")) else "integer mul"


@register_converter("mul", supports=_mul_refusal)
def _mul(ctx: ConvertContext, op: OpDesc) -> None:
    x, y = op.input("X"), op.input("Y")
    assert x is not None and y is not None
    xn, yn = int(op.attrs["x_num_col_dims"]), int(op.attrs["y_num_col_dims"])
    ys = [int(d) for d in ctx.shape(y) or ()]
    x2 = ctx.add("Flatten", [ctx.tensor(x)], axis=xn)
    yv = ctx.value(y)
    y2 = ctx.const(yv.reshape(int(np.prod(ys[:yn])), -1), hint="w") if yv is not None else ctx.add(
        "Flatten", [ctx.tensor(y)], axis=yn)
    prod = ctx.add("MatMul", [x2, y2])
    lead = ctx.add("Slice", [ctx.add("Shape", [ctx.tensor(x)]), ctx.ints([0]), ctx.ints([xn])])
    shape = ctx.add("Concat", [lead, ctx.ints(ys[yn:])], axis=0)
    ctx.add("Reshape", [prod, shape], [ctx.output(op, "Out")])


def _sum_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    dts = {info.dtype(n) for n in op.inputs.get("X") or []}
    if len(dts - {None}) > 1:
        return f"inputs of different dtypes {sorted(str(d) for d in dts - {None})}"
    if np.dtype(bool) in dts:
        return "sum of bool tensors stays on the host"
    return None


@register_converter("sum", supports=_sum_refusal)
def _sum(ctx: ConvertContext, op: OpDesc) -> None:
    """add_n: ONNX Sum (float types only), a chain of Add for integer tensors (Add takes int32/int64)."""
    names = list(op.inputs.get("X") or [])
    xs = [ctx.tensor(n) for n in names]
    out = ctx.output(op, "Out")
    if len(xs) == 1:
        ctx.add("Identity", xs, [out])
    elif all(ctx.dtype(n).kind == "f" for n in names):
        ctx.add("Sum", xs, [out])
    else:
        acc = xs[0]
        for i, t in enumerate(xs[1:], 1):
            acc = ctx.add("Add", [acc, t], [out] if i == len(xs) - 1 else None)


REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
          "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}


def _reduce_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if not is_float(info, op.input("X")):
        return "reduction of a non-float tensor stays on the host"
    if int(op.attrs.get("out_dtype", -1)) not in (-1, 5) or int(op.attrs.get("in_dtype", -1)) not in (-1, 5):
        return "reduction with in_dtype/out_dtype"
    return None if info.rank(op.input("X")) is not None else "reduction needs the rank of X"


@register_converter(*REDUCE, "mean", supports=_reduce_refusal)
def _reduce(ctx: ConvertContext, op: OpDesc) -> None:
    from pdlite.operators.math import reduce_axes

    x = op.input("X")
    assert x is not None
    rank = ctx.rank(x) or 0
    axes = list(range(rank)) if op.type == "mean" else list(reduce_axes(op.attrs, rank))
    keep = int(bool(op.attrs.get("keep_dim", False))) if op.type != "mean" else 0
    onnx_type = "ReduceMean" if op.type == "mean" else REDUCE[op.type]
    out = ctx.output(op, "Out")
    if not axes:
        ctx.add("Identity", [ctx.tensor(x)], [out])
    elif onnx_type == "ReduceSum":  # opset 13+: axes is an input
        ctx.add(onnx_type, [ctx.tensor(x), ctx.ints(axes)], [out], keepdims=keep)
    else:
        ctx.add(onnx_type, [ctx.tensor(x)], [out], axes=axes, keepdims=keep)


def _arg_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if int(op.attrs["dtype"]) not in (2, 3, -1):
        return "arg_max/arg_min output dtype other than int32/int64"
    return None if info.rank(op.input("X")) is not None else "needs the rank of X"


@register_converter("arg_max", "arg_min", supports=_arg_refusal)
def _arg(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    keep = int(bool(op.attrs["keepdims"]))
    rank = ctx.rank(x) or 0
    if op.attrs.get("flatten"):
        xo = ctx.add("Reshape", [xo, ctx.ints([-1])])
        axis = 0
    else:
        axis = int(op.attrs["axis"])
    idx = ctx.add("ArgMax" if op.type == "arg_max" else "ArgMin", [xo], axis=axis, keepdims=keep)
    if op.attrs.get("flatten") and keep:
        idx = ctx.add("Reshape", [idx, ctx.ints([1] * rank)])
    if int(op.attrs["dtype"]) == 2:
        idx = ctx.cast(idx, np.int32)
    ctx.add("Identity", [idx], [ctx.output(op, "Out")])


def _top_k_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    k = op.input("K")
    if k is not None and info.value(k) is None:
        return "k is a run-time tensor (ONNX TopK's k is taken as a constant here)"
    return None if info.rank(op.input("X")) else "needs X of known rank >= 1"


@register_converter("top_k_v2", supports=_top_k_refusal)
def _top_k(ctx: ConvertContext, op: OpDesc) -> None:
    """ONNX TopK, always sorted: equal values keep their index order, as the host's stable sort (and Paddle)."""
    kname = op.input("K")
    k = int(np.asarray(ctx.value(kname)).reshape(-1)[0]) if kname is not None else int(op.attrs["k"])
    values, indices = ctx.add("TopK", [ctx.input(op, "X"), ctx.ints([k])], 2, axis=int(op.attrs["axis"]),
                              largest=int(bool(op.attrs["largest"])), sorted=1)
    ctx.add("Identity", [values], [ctx.output(op, "Out")])
    ctx.add("Identity", [indices], [ctx.output(op, "Indices")])


@register_converter("cumsum")
def _cumsum(ctx: ConvertContext, op: OpDesc) -> None:
    xo = ctx.input(op, "X")
    axis = int(op.attrs["axis"])
    if op.attrs.get("flatten"):
        xo = ctx.add("Reshape", [xo, ctx.ints([-1])])
        axis = 0
    ctx.add("CumSum", [xo, ctx.const(np.asarray(axis, dtype=np.int64))], [ctx.output(op, "Out")],
            exclusive=int(bool(op.attrs.get("exclusive"))), reverse=int(bool(op.attrs.get("reverse"))))
