"""Max pooling with index: max_pool2d_with_index (pool2d itself: pdlite.operators.nn).

`max_pool2d_with_index` (legacy op; pd_op.max_pool2d_with_index, F.adaptive_max_pool2d and
F.max_pool2d(return_mask=True)) pools with Paddle's MaxPoolWithIndex windows, which for
`adaptive=True` are the true adaptive bins [floor(i*H/oh), ceil((i+1)*H/oh)) (pool2d's max kernel
ignores `adaptive`, so the two are not interchangeable); Mask = the argmax as h*W + w.
"""
from __future__ import annotations

from typing import Any

from pdlite.operators.geometry import pool_out_sizes
from pdlite.operators.registry import Shape, ShapeContext, register_op


def _with_index_geometry(attrs: dict[str, Any], x_shape: tuple[int, ...], nd: int) -> tuple[list[int], list[int],
                                                                                        list[int], list[int]]:
    """(kernel, strides, paddings before each axis, output size) of max_pool{nd}d_with_index (Paddle's infermeta:
    symmetric pads, the first of each pair when 2*nd are given)."""
    in_size = [int(v) for v in x_shape[2:2 + nd]]
    if attrs.get("ksize") is None:  # a required attribute: no default
        raise ValueError("attribute 'ksize' is required")
    k = [int(v) for v in attrs["ksize"]]
    s = [int(v) for v in attrs["strides"]]
    p = [int(v) for v in attrs["paddings"]]
    if len(p) == 2 * nd:
        p = p[::2]
    if attrs["global_pooling"]:
        k, p = list(in_size), [0] * nd
    if len(k) != nd or len(s) != nd or len(p) != nd:
        raise ValueError(f"ksize {k}, strides {s}, paddings {p} must have {nd} values each")
    if attrs["adaptive"]:
        return k, s, p, list(k)
    out = pool_out_sizes(in_size, k, [v for b in p for v in (b, b)], s, bool(attrs["ceil_mode"]))
    return k, s, p, out


def max_pool_with_index_geometry(attrs: dict[str, Any], x_shape: tuple[int, ...]) -> tuple[list[int], list[int],
                                                                                       list[int], list[int]]:
    """(kernel, strides, paddings [top, left], output size) of max_pool2d_with_index."""
    return _with_index_geometry(attrs, x_shape, 2)


@register_op("max_pool2d_with_index", inputs=["X"], outputs=["Out"], optional_outputs=["Mask"],
             defaults={"strides": [1, 1], "paddings": [0, 0], "global_pooling": False, "adaptive": False,
                       "ceil_mode": False})
def _max_pool_with_index(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out, Mask: max pooling of NCHW X over MaxPoolWithIndex windows (adaptive: output = ksize)."""
    return _with_index_shapes(ctx, 2)


def _with_index_shapes(ctx: ShapeContext, nd: int) -> dict[str, list[Shape]]:
    x = ctx.shape("X")
    ctx.require(len(x) == nd + 2, f"X must be {nd + 2}-D ({'NCHW' if nd == 2 else 'NCDHW'}), got shape {list(x)}")
    try:
        k, s, _, out = _with_index_geometry(ctx.attrs, x, nd)
    except ValueError as e:
        ctx.fail(str(e))
    ctx.require(all(v > 0 for v in (*k, *s, *out)), f"ksize {k}, strides {s} give output {out} for input {list(x)}")
    shape = (x[0], x[1], *out)
    return {"Out": [shape], "Mask": [shape]}


def max_pool3d_with_index_geometry(attrs: dict[str, Any], x_shape: tuple[int, ...]) -> tuple[list[int], list[int],
                                                                                          list[int], list[int]]:
    """(kernel, strides, paddings [front, top, left], output size) of max_pool3d_with_index."""
    return _with_index_geometry(attrs, x_shape, 3)


@register_op("max_pool3d_with_index", inputs=["X"], outputs=["Out"], optional_outputs=["Mask"],
             defaults={"strides": [1, 1, 1], "paddings": [0, 0, 0], "global_pooling": False, "adaptive": False,
                       "ceil_mode": False})
def _max_pool3d_with_index(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out, Mask: 3-D max pooling of NCDHW X; Mask = the argmax as (d * H + h) * W + w."""
    return _with_index_shapes(ctx, 3)
