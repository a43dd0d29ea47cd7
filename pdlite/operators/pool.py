"""Max pooling with index: max_pool2d_with_index (pool2d itself: pdlite.operators.nn).

`max_pool2d_with_index` (legacy op; pd_op.max_pool2d_with_index, F.adaptive_max_pool2d and
F.max_pool2d(return_mask=True)) pools with Paddle's MaxPoolWithIndex windows, which for
`adaptive=True` are the true adaptive bins [floor(i*H/oh), ceil((i+1)*H/oh)) (pool2d's max kernel
ignores `adaptive`, so the two are not interchangeable); Mask = the argmax as h*W + w.
"""
from __future__ import annotations

from typing import Any

from pdlite.operators.registry import Shape, ShapeContext, register_op


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


def max_pool3d_with_index_geometry(attrs: dict[str, Any], x_shape: tuple[int, ...]) -> tuple[list[int], list[int],
                                                                                          list[int], list[int]]:
    """(kernel, strides, paddings [front, top, left], output size) of max_pool3d_with_index (same infermeta)."""
    dhw = list(x_shape[2:5])
    k = [int(v) for v in attrs.get("ksize", [])]
    s = [int(v) for v in attrs.get("strides", [1, 1, 1])]
    p = [int(v) for v in attrs.get("paddings", [0, 0, 0])]
    if len(p) == 6:
        p = [p[0], p[2], p[4]]
    if attrs.get("global_pooling"):
        k, p = list(dhw), [0, 0, 0]
    if len(k) != 3 or len(s) != 3 or len(p) != 3:
        raise ValueError(f"ksize {k}, strides {s}, paddings {p} must have 3 values each")
    if attrs.get("adaptive"):
        return k, s, p, list(k)
    ceil = bool(attrs.get("ceil_mode"))
    out = [((n + 2 * pad - kk + (st - 1 if ceil else 0)) // st) + 1 for n, kk, st, pad in zip(dhw, k, s, p)]
    return k, s, p, out


@register_op("max_pool3d_with_index", inputs=["X"], outputs=["Out"], optional_outputs=["Mask"],
             defaults={"strides": [1, 1, 1], "paddings": [0, 0, 0], "global_pooling": False, "adaptive": False,
                       "ceil_mode": False})
def _max_pool3d_with_index(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out, Mask: 3-D max pooling of NCDHW X; Mask = the argmax as (d * H + h) * W + w."""
    x = ctx.shape("X")
    ctx.require(len(x) == 5, f"X must be 5-D (NCDHW), got shape {list(x)}")
    try:
        k, s, _, out = max_pool3d_with_index_geometry(ctx.attrs, x)
    except ValueError as e:
        ctx.fail(str(e))
    ctx.require(all(v > 0 for v in (*k, *s, *out)), f"ksize {k}, strides {s} give output {out} for input {list(x)}")
    shape = (x[0], x[1], *out)
    return {"Out": [shape], "Mask": [shape]}
