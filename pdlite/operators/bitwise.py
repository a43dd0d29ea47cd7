"""Bitwise ops, float-class predicates and NaN-aware elementwise ops: bitwise_and / or / xor / not,
isnan_v2 / isinf_v2 / isfinite_v2, elementwise_fmax / fmin / heaviside.

Binary ops broadcast NumPy-style; the elementwise_* ones also take Paddle's legacy `axis`.
"""
from __future__ import annotations

import numpy as np

from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]
BITWISE_BINARY = ("bitwise_and", "bitwise_or", "bitwise_xor")
FLOAT_PREDICATES = ("isnan_v2", "isinf_v2", "isfinite_v2")
NAN_AWARE = ("elementwise_fmax", "elementwise_fmin", "elementwise_heaviside")


def _broadcast(ctx: ShapeContext) -> Shapes:
    x, y = ctx.shape("X"), ctx.shape("Y")
    axis = int(ctx.attrs.get("axis", -1))
    if axis != -1 and len(y) < len(x):  # Paddle's legacy axis: Y's dims start at `axis` of X
        y = (1,) * axis + tuple(y) + (1,) * (len(x) - axis - len(y))
    try:
        return {"Out": [tuple(np.broadcast_shapes(tuple(x), tuple(y)))]}
    except ValueError:
        ctx.fail(f"X {list(x)} and Y {list(y)} do not broadcast (axis {axis})")
        raise


for _t in BITWISE_BINARY:
    register_op(_t, inputs=["X", "Y"])(_broadcast)
for _t in NAN_AWARE:
    register_op(_t, inputs=["X", "Y"], defaults={"axis": -1})(_broadcast)


@register_op("bitwise_not", inputs=["X"])
@register_op("isnan_v2", inputs=["X"])
@register_op("isinf_v2", inputs=["X"])
@register_op("isfinite_v2", inputs=["X"])
def _same(ctx: ShapeContext) -> Shapes:
    """Out has X's shape (bool for the predicates)."""
    return {"Out": [ctx.shape("X")]}
