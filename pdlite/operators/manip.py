"""Tensor manipulation ops: tril_triu, reverse, unique, set_value, partial_sum, partial_concat.

Shapes follow Paddle's InferMeta / InferShape; `unique`'s sizes depend on the values (the kernel
decides them). set_value's slice rules are Python's (negative starts/ends count from the end,
out-of-range bounds clamp), as Paddle's CheckAndUpdateSliceAttrs.
"""
from __future__ import annotations

from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]


@register_op("tril_triu", inputs=["X"], defaults={"diagonal": 0, "lower": True})
def _tril_triu(ctx: ShapeContext) -> Shapes:
    """Out = X with the elements above (lower) / below (upper) the `diagonal`-th diagonal zeroed."""
    x = ctx.shape("X")
    ctx.require(len(x) >= 2, f"X must have rank >= 2, got {list(x)}")
    return {"Out": [x]}


@register_op("reverse", inputs=["X"], defaults={"axis": []})
def _reverse(ctx: ShapeContext) -> Shapes:
    """Out = X flipped along each of `axis`."""
    x = ctx.shape("X")
    for a in ctx.attrs["axis"]:
        ctx.require(-len(x) <= int(a) < len(x), f"axis {a} out of range for X {list(x)}")
    return {"Out": [x]}


@register_op("unique", inputs=["X"], outputs=["Out"], optional_outputs=["Index", "Indices", "Counts"],
             defaults={"dtype": 3, "return_index": False, "return_inverse": False, "return_counts": False,
                       "axis": [], "is_sorted": False}, value_dependent=True)
def _unique(ctx: ShapeContext) -> Shapes:
    """Out: the distinct values (sorted, or in first-appearance order when not is_sorted); the sizes
    depend on the values."""
    x = ctx.shape("X")
    axis = [int(a) for a in ctx.attrs["axis"]]
    ctx.require(len(axis) <= 1, f"axis must hold at most one axis, got {axis}")
    if axis:
        ctx.require(-len(x) <= axis[0] < len(x), f"axis {axis[0]} out of range for X {list(x)}")
    ctx.require(int(ctx.attrs["dtype"]) in (2, 3), f"dtype must be int32 (2) or int64 (3), got {ctx.attrs['dtype']}")
    ctx.require(bool(ctx.attrs["is_sorted"]) or len(x) <= 1,
                f"X must be 0-D or 1-D when is_sorted is false (Paddle's rule), got {list(x)}")
    return {}


def slice_shape(shape: Shape, axes: list[int], starts: list[int], ends: list[int], steps: list[int]) -> Shape:
    """The shape of x[slices] under Python's slice rules."""
    out = list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        out[a] = len(range(*slice(s, e, st).indices(shape[a])))
    return tuple(out)


def set_value_bounds(ctx: ShapeContext) -> tuple[list[int], list[int], list[int], list[int]]:
    """(axes, starts, ends, steps) of set_value, the tensor lists taking precedence over the attributes."""
    a = ctx.attrs
    axes = [int(v) for v in a["axes"]]

    def pick(slot: str, key: str, fill: int) -> list[int]:
        if ctx.has(slot):
            return [int(ctx.value(slot, i).reshape(-1)[0]) for i in range(ctx.count(slot))]
        vals = [int(v) for v in a.get(key) or []]
        return vals or [fill] * len(axes)

    starts = pick("StartsTensorList", "starts", 0)
    ends = pick("EndsTensorList", "ends", 0)
    steps = pick("StepsTensorList", "steps", 1)
    ctx.require(len(starts) == len(ends) == len(steps) == len(axes),
                f"axes {axes}, starts {starts}, ends {ends}, steps {steps} must have one value per axis")
    ctx.require(all(s != 0 for s in steps), f"steps must not be 0, got {steps}")
    return axes, starts, ends, steps


@register_op("set_value", inputs=["Input"], outputs=["Out"],
             optional_inputs=["ValueTensor", "StartsTensorList", "EndsTensorList", "StepsTensorList"],
             defaults={"axes": [], "starts": [], "ends": [], "steps": [], "decrease_axes": [], "none_axes": [],
                       "shape": [], "dtype": 5}, value_dependent=True)
def _set_value(ctx: ShapeContext) -> Shapes:
    """Out = Input with Input[slices] = value (ValueTensor or the `*values` attribute), broadcast."""
    x = ctx.shape("Input")
    axes = set_value_bounds(ctx)[0]
    ctx.require(all(0 <= a < len(x) for a in axes), f"axes {axes} out of range for Input {list(x)}")
    return {"Out": [x]}


def _partial_geometry(ctx: ShapeContext) -> tuple[int, int, int]:
    """(rows, start, length) shared by partial_sum and partial_concat: inputs [N, D] of one shape."""
    shapes = ctx.shapes("X")
    ctx.require(len(shapes) > 0 and all(len(s) == 2 for s in shapes) and len(set(shapes)) == 1,
                f"X must be 2-D tensors of one shape, got {[list(s) for s in shapes]}")
    n, d = shapes[0]
    start = int(ctx.attrs["start_index"])
    ctx.require(start >= 0 or ctx.op.type == "partial_concat",
                f"start_index must be >= 0 for partial_sum, got {start}")  # Paddle reads out of bounds there
    start = start + d if start < 0 else start
    length = int(ctx.attrs["length"])
    length = d - start if length < 0 else length
    ctx.require(0 <= start and start + length <= d and length > 0,
                f"start_index {ctx.attrs['start_index']} and length {ctx.attrs['length']} do not fit D = {d}")
    return n, start, length


@register_op("partial_sum", inputs=["X"], defaults={"start_index": 0, "length": -1})
def _partial_sum(ctx: ShapeContext) -> Shapes:
    """Out = sum over inputs of X[:, start:start + length]."""
    n, _, length = _partial_geometry(ctx)
    return {"Out": [(n, length)]}


@register_op("partial_concat", inputs=["X"], defaults={"start_index": 0, "length": -1})
def _partial_concat(ctx: ShapeContext) -> Shapes:
    """Out = concat over inputs of X[:, start:start + length] along axis 1."""
    n, _, length = _partial_geometry(ctx)
    return {"Out": [(n, length * ctx.count("X"))]}
