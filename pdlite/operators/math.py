"""Linear-algebra, normalising and reducing ops: matmul_v2, matmul, mul, softmax, log_softmax,
scale, dropout, reduce_*, mean, sum, lookup_table(_v2), arg_max/arg_min.

Paddle 3 semantics: reducing every dim without keep_dim gives a 0-D tensor (2.x gave [1]), as
do `mean` and matmul / matmul_v2 of two vectors.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pdlite.operators.registry import Shape, ShapeContext, register_op
from pdlite.operators.tensor import ShapeError, _fail_on_shape_error, norm_axis


def _broadcast_batch(a: Sequence[int], b: Sequence[int], what: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ShapeError(f"batch dims {list(a)} and {list(b)} of {what} do not broadcast") from None


def matmul_v2_shape(x: Sequence[int], y: Sequence[int], trans_x: bool, trans_y: bool) -> tuple[int, ...]:
    """numpy.matmul's shape after optional transposes of the last two dims (ignored for 1-D operands)."""
    if not x or not y:
        raise ShapeError(f"matmul operands must have rank >= 1, got {list(x)} and {list(y)}")
    xs = [1, x[0]] if len(x) == 1 else list(x)
    ys = [y[0], 1] if len(y) == 1 else list(y)
    if trans_x and len(x) > 1:
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if trans_y and len(y) > 1:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    if xs[-1] != ys[-2]:
        raise ShapeError(f"X {list(x)} (trans_x={trans_x}) and Y {list(y)} (trans_y={trans_y}) mismatch: K {xs[-1]} != {ys[-2]}")
    out = [*_broadcast_batch(xs[:-2], ys[:-2], "matmul"), xs[-2], ys[-1]]
    if len(y) == 1:
        out.pop(-1)
    if len(x) == 1:
        out.pop(-2 if len(y) > 1 else -1)
    return tuple(out)


@register_op("matmul_v2", inputs=["X", "Y"], outputs=["Out"], defaults={"trans_x": False, "trans_y": False})
@_fail_on_shape_error
def _matmul_v2(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X @ Y with batch broadcasting; a 1-D operand is a vector whose dim is dropped."""
    a = ctx.attrs
    return {"Out": [matmul_v2_shape(ctx.shape("X"), ctx.shape("Y"), bool(a["trans_x"]), bool(a["trans_y"]))]}


def matmul_v1_shapes(
    x: Sequence[int], y: Sequence[int], tx: bool, ty: bool
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Legacy matmul: (X as matrix, Y as matrix, Out shape). A 1-D X is a row [1, K], a 1-D Y a
    column [K, 1]; transposes apply to those; Out drops the vector dims of size 1 (two vectors
    give 0-D in Paddle 3, [1] in 2.x)."""
    xm = (1, x[0]) if len(x) == 1 else tuple(x)
    ym = (y[0], 1) if len(y) == 1 else tuple(y)
    xe = (*xm[:-2], xm[-1], xm[-2]) if tx else xm
    ye = (*ym[:-2], ym[-1], ym[-2]) if ty else ym
    if xe[-1] != ye[-2]:
        raise ShapeError(f"X {list(x)} (transpose_X={tx}) and Y {list(y)} (transpose_Y={ty}) mismatch: {xe[-1]} != {ye[-2]}")
    out = [*_broadcast_batch(xe[:-2], ye[:-2], "matmul"), xe[-2], ye[-1]]
    if len(x) == 1 and out[-2] == 1:
        out.pop(-2)
    if len(y) == 1 and out[-1] == 1:
        out.pop(-1)
    return xm, ym, tuple(out)


@register_op(
    "matmul",
    inputs=["X", "Y"],
    outputs=["Out"],
    defaults={"transpose_X": False, "transpose_Y": False, "alpha": 1.0, "head_number": 1},
)
@_fail_on_shape_error
def _matmul(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = alpha * X @ Y (legacy matmul, transpose_X/transpose_Y)."""
    a = ctx.attrs
    if int(a.get("head_number", 1)) != 1:
        raise ShapeError(f"head_number {a['head_number']} is not supported (only 1)")
    return {"Out": [matmul_v1_shapes(ctx.shape("X"), ctx.shape("Y"), bool(a["transpose_X"]), bool(a["transpose_Y"]))[2]]}


def mul_shapes(x: Sequence[int], y: Sequence[int], xn: int, yn: int) -> tuple[tuple[int, int], tuple[int, int], tuple]:
    """mul: X flattened to [prod(x[:xn]), prod(x[xn:])], Y likewise at yn; Out = x[:xn] + y[yn:]."""
    if not (0 < xn < len(x) + (len(x) == 1) and 0 < yn < len(y) + (len(y) == 1)):
        raise ShapeError(f"x_num_col_dims {xn} / y_num_col_dims {yn} out of range for {list(x)} / {list(y)}")
    xm = (int(np.prod(x[:xn])), int(np.prod(x[xn:])))
    ym = (int(np.prod(y[:yn])), int(np.prod(y[yn:])))
    if xm[1] != ym[0]:
        raise ShapeError(f"X {list(x)} as {list(xm)} and Y {list(y)} as {list(ym)} do not multiply")
    return xm, ym, (*x[:xn], *y[yn:])


@register_op("mul", inputs=["X", "Y"], outputs=["Out"], defaults={"x_num_col_dims": 1, "y_num_col_dims": 1})
@_fail_on_shape_error
def _mul(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), reshaped to x[:xn] + y[yn:]."""
    a = ctx.attrs
    return {"Out": [mul_shapes(ctx.shape("X"), ctx.shape("Y"), int(a["x_num_col_dims"]), int(a["y_num_col_dims"]))[2]]}


@_fail_on_shape_error
def _softmax(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out has X's shape; normalised along `axis`."""
    x = ctx.shape("X")
    if x:
        norm_axis(int(ctx.attrs["axis"]), len(x))
    return {"Out": [x]}


register_op("softmax", inputs=["X"], outputs=["Out"], defaults={"axis": -1})(_softmax)
register_op("log_softmax", inputs=["X"], outputs=["Out"], defaults={"axis": -1})(_softmax)


def _same(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out has X's shape."""
    return {"Out": [ctx.shape("X")]}


register_op(
    "scale",
    inputs=["X"],
    optional_inputs=["ScaleTensor"],
    outputs=["Out"],
    defaults={"scale": 1.0, "bias": 0.0, "bias_after_scale": True},
)(_same)
register_op(
    "dropout",
    inputs=["X"],
    optional_inputs=["Seed"],
    outputs=["Out"],
    optional_outputs=["Mask"],
    defaults={"dropout_prob": 0.5, "is_test": False, "dropout_implementation": "downgrade_in_infer"},
)(_same)


# --- reductions ------------------------------------------------------------------------------
REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_all", "reduce_any")


def reduce_axes(attrs: dict, rank: int) -> tuple[int, ...]:
    """The reduced dims: all of them when reduce_all or `dim` is empty, else `dim` normalised."""
    dims = [int(d) for d in attrs.get("dim") or []]
    if attrs.get("reduce_all") or not dims or rank == 0:
        return tuple(range(rank))
    return tuple(sorted({norm_axis(d, rank, "dim") for d in dims}))


def reduce_shape(x: Sequence[int], axes: Sequence[int], keep_dim: bool) -> tuple[int, ...]:
    if keep_dim:
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


@_fail_on_shape_error
def _reduce(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X reduced over `dim` (all dims: 0-D unless keep_dim)."""
    x = ctx.shape("X")
    return {"Out": [reduce_shape(x, reduce_axes(ctx.attrs, len(x)), bool(ctx.attrs["keep_dim"]))]}


for _t in REDUCE_OPS:
    register_op(
        _t,
        inputs=["X"],
        outputs=["Out"],
        defaults={"dim": [0], "keep_dim": False, "reduce_all": False, "in_dtype": -1, "out_dtype": -1},
    )(_reduce)


@register_op("mean", inputs=["X"], outputs=["Out"])
def _mean(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: the mean of all of X, 0-D."""
    return {"Out": [()]}


@register_op("sum", inputs=["X"], outputs=["Out"])
@_fail_on_shape_error
def _sum(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: the elementwise sum of the X tensors (all of one shape)."""
    shapes = ctx.shapes("X")
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(f"inputs must share one shape, got {[list(s) for s in shapes]}")
    return {"Out": [shapes[0]]}


def arg_shape(x: Sequence[int], axis: int, keepdims: bool, flatten: bool) -> tuple[int, ...]:
    if flatten:
        return (1,) * len(x) if keepdims else ()
    if not x:
        return ()
    a = norm_axis(axis, len(x))
    return (*x[:a], *((1,) if keepdims else ()), *x[a + 1 :])


@_fail_on_shape_error
def _arg(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: indices of the max (min) along `axis` (of the flattened X when `flatten`), int64 or `dtype`."""
    a = ctx.attrs
    return {"Out": [arg_shape(ctx.shape("X"), int(a["axis"]), bool(a["keepdims"]), bool(a["flatten"]))]}


for _t in ("arg_max", "arg_min"):
    register_op(
        _t, inputs=["X"], outputs=["Out"], defaults={"axis": -1, "keepdims": False, "flatten": False, "dtype": 3}
    )(_arg)


# --- embedding -------------------------------------------------------------------------------
@register_op("lookup_table_v2", inputs=["W", "Ids"], outputs=["Out"], defaults={"padding_idx": -1})
@_fail_on_shape_error
def _lookup_v2(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out[..., :] = W[Ids[...]]: Ids.shape + [D]; rows whose id is padding_idx are zeros."""
    w = ctx.shape("W")
    if len(w) != 2:
        raise ShapeError(f"W must be 2-D [vocab, dim], got {list(w)}")
    return {"Out": [(*ctx.shape("Ids"), w[1])]}


@register_op("lookup_table", inputs=["W", "Ids"], outputs=["Out"], defaults={"padding_idx": -1})
@_fail_on_shape_error
def _lookup_v1(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Legacy lookup_table: Ids end with a dim of 1, which Out replaces by W's row size."""
    w, ids = ctx.shape("W"), ctx.shape("Ids")
    if len(w) != 2:
        raise ShapeError(f"W must be 2-D [vocab, dim], got {list(w)}")
    if not ids or ids[-1] != 1:
        raise ShapeError(f"Ids must have a last dim of 1, got {list(ids)}")
    return {"Out": [(*ids[:-1], w[1])]}


@register_op("bmm", inputs=["X", "Y"], outputs=["Out"])
def _bmm(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out[b] = X[b] @ Y[b] for X [B, M, K], Y [B, K, N]."""
    x, y = ctx.shape("X"), ctx.shape("Y")
    ctx.require(len(x) == 3 and len(y) == 3 and x[0] == y[0] and x[2] == y[1],
                f"expected X [B, M, K] and Y [B, K, N], got {list(x)} and {list(y)}")
    return {"Out": [(x[0], x[1], y[2])]}


@register_op("atan2", inputs=["X1", "X2"], outputs=["Out"])
def _atan2(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = atan2(X1, X2) elementwise (float64 for integer inputs, as Paddle)."""
    a, b = ctx.shape("X1"), ctx.shape("X2")
    try:
        return {"Out": [tuple(np.broadcast_shapes(a, b))]}
    except ValueError:
        ctx.fail(f"X1 {list(a)} and X2 {list(b)} do not broadcast")
        raise
