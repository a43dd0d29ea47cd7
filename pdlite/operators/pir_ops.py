"""Ops that PIR programs need and no other op module defines.

- `shape64` (pd_op.shape64): the shape of `Input` as an int64 1-D tensor (legacy `shape`
  gives int32).
- `max_pool2d_with_index` (legacy op; pd_op.max_pool2d_with_index, F.adaptive_max_pool2d and
  F.max_pool2d(return_mask=True)): max pooling with Paddle's MaxPoolWithIndex windows, which for
  `adaptive=True` are the true adaptive bins [floor(i*H/oh), ceil((i+1)*H/oh)) (pool2d's max
  kernel ignores `adaptive`, so the two are not interchangeable); Mask = argmax as h*W + w.
- `assign_value` (legacy op; what pd_op.full_int_array / pd_op.assign_value become): a constant
  tensor of attribute `shape` and VarType `dtype`, its values in `fp32_values`, `int32_values`,
  `int64_values`, `bool_values` (Paddle <= 2.5) or `values` (Paddle 2.6+).
"""
from __future__ import annotations

import math
from typing import Any

from pdlite.operators.registry import Shape, ShapeContext, register_op

VALUE_KEYS = ("values", "fp32_values", "int32_values", "int64_values", "bool_values", "fp64_values")


@register_op("shape64", inputs=["Input"], outputs=["Out"])
def _shape64(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = shape(Input) as int64, a 1-D tensor of rank(Input) elements."""
    return {"Out": [(len(ctx.shape("Input")),)]}


def assign_values(attrs: dict) -> list:
    """The values of an assign_value op: the first non-empty `*values` attribute."""
    for key in VALUE_KEYS:
        v = attrs.get(key)
        if v is not None and len(v):
            return list(v)
    return []


@register_op("assign_value", outputs=["Out"], defaults={"shape": [], "dtype": 5})
def _assign_value(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = the constant tensor of attribute `shape` filled with the `*values` attribute."""
    shape = tuple(int(d) for d in ctx.attrs.get("shape", []))
    n = len(assign_values(ctx.attrs))
    ctx.require(all(d >= 0 for d in shape), f"shape {list(shape)} has a negative dim")
    ctx.require(math.prod(shape) == n, f"shape {list(shape)} needs {math.prod(shape)} values, the op has {n}")
    return {"Out": [shape]}


def max_pool_with_index_geometry(attrs: dict[str, Any], x_shape: tuple[int, ...]) -> tuple[list[int], list[int],
                                                                                       list[int], list[int]]:
    """(kernel, strides, paddings [top, left], output size) of max_pool2d_with_index (Paddle's infermeta)."""
    h, w = x_shape[2], x_shape[3]
    k = [int(v) for v in attrs.get("ksize", [])]
    s = [int(v) for v in attrs.get("strides", [1, 1])]
    p = [int(v) for v in attrs.get("paddings", [0, 0])]
    if len(p) == 4:
        p = [p[0], p[2]]
    if attrs.get("global_pooling"):
        k, p = [h, w], [0, 0]
    if len(k) != 2 or len(s) != 2 or len(p) != 2:
        raise ValueError(f"ksize {k}, strides {s}, paddings {p} must have 2 values each")
    if attrs.get("adaptive"):
        return k, s, p, list(k)
    ceil = bool(attrs.get("ceil_mode"))
    out = [((n + 2 * pad - kk + (st - 1 if ceil else 0)) // st) + 1 for n, kk, st, pad in zip((h, w), k, s, p)]
    return k, s, p, out


@register_op("max_pool2d_with_index", inputs=["X"], outputs=["Out"], optional_outputs=["Mask"],
             defaults={"strides": [1, 1], "paddings": [0, 0], "global_pooling": False, "adaptive": False,
                       "ceil_mode": False})
def _max_pool_with_index(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out, Mask: max pooling of NCHW X over MaxPoolWithIndex windows (adaptive: output = ksize)."""
    x = ctx.shape("X")
    ctx.require(len(x) == 4, f"X must be 4-D (NCHW), got shape {list(x)}")
    try:
        k, s, _, out = max_pool_with_index_geometry(ctx.attrs, x)
    except ValueError as e:
        ctx.fail(str(e))
    ctx.require(all(v > 0 for v in (*k, *s, *out)), f"ksize {k}, strides {s} give output {out} for input {list(x)}")
    shape = (x[0], x[1], out[0], out[1])
    return {"Out": [shape], "Mask": [shape]}
