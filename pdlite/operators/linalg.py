"""Linear-algebra and reduction extras: einsum, inverse, kron, trace, diag_v2, logsumexp, cumprod,
frobenius_norm, squared_l2_norm (shapes from Paddle's InferMeta; reductions over every axis without
keepdim give 0-D results, as Paddle 3)."""
from __future__ import annotations

import numpy as np

from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]


@register_op("einsum", inputs=["Operands"], outputs=["Out"], optional_outputs=["InnerCache", "XShape"],
             defaults={"equation": ""})
def _einsum(ctx: ShapeContext) -> Shapes:
    """Out = numpy.einsum(equation, *Operands)."""
    shapes = ctx.shapes("Operands")
    try:
        out = np.einsum(str(ctx.attrs["equation"]), *[np.empty(s, np.float32) for s in shapes]).shape
    except ValueError as e:
        ctx.fail(f"equation {ctx.attrs['equation']!r} does not fit operands {[list(s) for s in shapes]}: {e}")
        raise
    return {"Out": [tuple(out)]}


@register_op("inverse", inputs=["Input"], outputs=["Output"])
def _inverse(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("Input")
    ctx.require(len(x) >= 2 and x[-1] == x[-2], f"Input must be [..., M, M], got {list(x)}")
    return {"Output": [x]}


@register_op("kron", inputs=["X", "Y"])
def _kron(ctx: ShapeContext) -> Shapes:
    x, y = ctx.shape("X"), ctx.shape("Y")
    r = max(len(x), len(y))
    x, y = (1,) * (r - len(x)) + tuple(x), (1,) * (r - len(y)) + tuple(y)
    return {"Out": [tuple(a * b for a, b in zip(x, y))]}


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


@register_op("trace", inputs=["Input"], defaults={"offset": 0, "axis1": 0, "axis2": 1})
def _trace(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("Input")
    a1, a2 = _axis(int(ctx.attrs["axis1"]), len(x)), _axis(int(ctx.attrs["axis2"]), len(x))
    ctx.require(len(x) >= 2 and a1 != a2 and 0 <= a1 < len(x) and 0 <= a2 < len(x),
                f"axis1 {ctx.attrs['axis1']} and axis2 {ctx.attrs['axis2']} must be two axes of Input {list(x)}")
    return {"Out": [tuple(d for i, d in enumerate(x) if i not in (a1, a2))]}


@register_op("diag_v2", inputs=["X"], defaults={"offset": 0, "padding_value": 0.0})
def _diag(ctx: ShapeContext) -> Shapes:
    x, k = ctx.shape("X"), int(ctx.attrs["offset"])
    if len(x) <= 1:
        n = (x[0] if x else 1) + abs(k)
        return {"Out": [(n, n)]}
    ctx.require(len(x) == 2, f"X must be 0-D, 1-D or 2-D, got {list(x)}")
    n = max(0, min(x[0] - max(-k, 0), x[1] - max(k, 0)))
    return {"Out": [(n,)]}


def _reduced(ctx: ShapeContext, axes_key: str, keep_key: str) -> Shapes:
    x = ctx.shape("X")
    axes = [_axis(int(a), len(x)) for a in ctx.attrs[axes_key] or []]
    if ctx.attrs.get("reduce_all") or not axes:
        axes = list(range(len(x)))
    ctx.require(all(0 <= a < max(len(x), 1) for a in axes), f"axes {ctx.attrs[axes_key]} out of range for {list(x)}")
    keep = bool(ctx.attrs[keep_key])
    return {"Out": [tuple(1 if i in axes else d for i, d in enumerate(x)) if keep
                    else tuple(d for i, d in enumerate(x) if i not in axes)]}


@register_op("logsumexp", inputs=["X"], defaults={"axis": [], "keepdim": False, "reduce_all": False})
def _logsumexp(ctx: ShapeContext) -> Shapes:
    """Out = log(sum(exp(X))) over `axis` (all when empty or reduce_all)."""
    return _reduced(ctx, "axis", "keepdim")


@register_op("frobenius_norm", inputs=["X"], defaults={"dim": [], "keep_dim": False, "reduce_all": False})
def _frobenius(ctx: ShapeContext) -> Shapes:
    """Out = sqrt(sum(X^2)) over `dim`."""
    return _reduced(ctx, "dim", "keep_dim")


@register_op("cumprod", inputs=["X"], defaults={"dim": -1, "exclusive": False, "reverse": False})
def _cumprod(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    ctx.require(-max(len(x), 1) <= int(ctx.attrs["dim"]) < max(len(x), 1), f"dim {ctx.attrs['dim']} out of range")
    return {"Out": [x]}


@register_op("squared_l2_norm", inputs=["X"])
def _squared_l2(ctx: ShapeContext) -> Shapes:
    """Out [1] = sum(X^2)."""
    return {"Out": [(1,)]}
