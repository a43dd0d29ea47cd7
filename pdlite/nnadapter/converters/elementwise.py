"""Converters of the binary elementwise ops and the fused elementwise+activation ops.

Paddle's `axis` broadcasting aligns Y's first dim with X's dim `axis`; ONNX broadcasts like
NumPy (right-aligned), so Y gets trailing unit dims (Unsqueeze, or a reshaped constant) first.
Integer division, modulo and power are left to the host (C++ truncation rules differ between
runtimes). Integer floor division by a constant nonzero Y (Paddle's FloorDivideFunctor: the quotient
rounded towards -inf; Swin's window counts, H // window) is (X - Mod(X, Y)) / Y with ONNX's Python-style
Mod (fmod=0): X - Mod(X, Y) is an exact multiple of Y, so truncating and flooring Div agree.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import (
    activation_refusal,
    broadcast_pair,
    convert_fused,
    elementwise_refusal,
    is_float,
)
from pdlite.nnadapter.registry import register_converter
from pdlite.operators.fused import FUSED_ELEMENTWISE, base_desc, split_activation

ONNX_OF = {
    "elementwise_add": "Add",
    "elementwise_sub": "Sub",
    "elementwise_mul": "Mul",
    "elementwise_div": "Div",
    "elementwise_max": "Max",
    "elementwise_min": "Min",
    "elementwise_pow": "Pow",
}
FLOAT_ONLY = ("elementwise_div", "elementwise_pow")


def _refusal(op: OpDesc, info: TensorInfo) -> str | None:
    base = op.type
    x, y = op.input("X"), op.input("Y")
    if base in FLOAT_ONLY and not (is_float(info, x) and is_float(info, y)):
        return f"{base} on integer tensors stays on the host"
    dx, dy = info.dtype(x), info.dtype(y)
    if dx is not None and dy is not None and dx != dy:
        return f"X ({dx}) and Y ({dy}) have different dtypes"
    if np.dtype(bool) in (dx, dy):  # ONNX Add/Sub/Mul/Max/Min take no tensor(bool)
        return f"{base} on bool tensors stays on the host"
    return elementwise_refusal(op, info)


def _floordiv_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    x, y = op.input("X"), op.input("Y")
    dx, dy = info.dtype(x), info.dtype(y)
    if dx is None or dx != dy or dx.kind not in "iu":
        return "elementwise_floordiv on floats or mixed dtypes stays on the host"
    v = info.value(y or "")
    if v is None or not np.all(np.asarray(v) != 0):
        return "elementwise_floordiv needs a constant nonzero Y (Paddle fails on a zero divisor)"
    return elementwise_refusal(op, info)


@register_converter("elementwise_floordiv", supports=_floordiv_refusal)
def _floordiv(ctx: ConvertContext, op: OpDesc) -> None:
    xo, yo = broadcast_pair(ctx, op)
    exact = ctx.add("Sub", [xo, ctx.add("Mod", [xo, yo], fmod=0)])
    ctx.add("Div", [exact, yo], [ctx.output(op, "Out")])


@register_converter(*ONNX_OF, supports=_refusal)
def _binary(ctx: ConvertContext, op: OpDesc) -> None:
    xo, yo = broadcast_pair(ctx, op)
    ctx.add(ONNX_OF[op.type], [xo, yo], [ctx.output(op, "Out")])


def _fused_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    base = base_desc(op, FUSED_ELEMENTWISE[op.type])
    act, attrs = split_activation(op.attrs)
    return _refusal(base, info) or activation_refusal(act, attrs, base, info)


@register_converter(*FUSED_ELEMENTWISE, supports=_fused_refusal)
def _fused(ctx: ConvertContext, op: OpDesc) -> None:
    act, attrs = split_activation(op.attrs)
    convert_fused(ctx, base_desc(op, FUSED_ELEMENTWISE[op.type]), "Out", act, attrs)


COMPARE = {"equal": "Equal", "less_than": "Less", "less_equal": "LessOrEqual", "greater_than": "Greater",
           "greater_equal": "GreaterOrEqual", "not_equal": "Equal"}


def _compare_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    dx, dy = info.dtype(op.input("X")), info.dtype(op.input("Y"))
    if dx is not None and dy is not None and dx != dy:
        return f"X ({dx}) and Y ({dy}) have different dtypes"
    return elementwise_refusal(op, info)


@register_converter(*COMPARE, supports=_compare_refusal)
def _compare(ctx: ConvertContext, op: OpDesc) -> None:
    xo, yo = broadcast_pair(ctx, op)
    if op.type == "not_equal":
        ctx.add("Not", [ctx.add("Equal", [xo, yo])], [ctx.output(op, "Out")])
    else:
        ctx.add(COMPARE[op.type], [xo, yo], [ctx.output(op, "Out")])


LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "logical_not": "Not"}


@register_converter(*LOGICAL)
def _logical(ctx: ConvertContext, op: OpDesc) -> None:
    ins = []
    for slot in ("X", "Y") if op.type != "logical_not" else ("X",):
        name = op.input(slot)
        assert name is not None
        t = ctx.tensor(name)
        ins.append(t if ctx.dtype(name) == np.bool_ else ctx.cast(t, np.bool_))
    ctx.add(LOGICAL[op.type], ins, [ctx.output(op, "Out")])


@register_converter("where")
def _where(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Where", [ctx.input(op, "Condition"), ctx.input(op, "X"), ctx.input(op, "Y")], [ctx.output(op, "Out")])
