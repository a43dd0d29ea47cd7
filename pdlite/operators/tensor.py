"""Shape-manipulation and tensor-creation ops: reshape, flatten, transpose, concat, split, slice,
shape, fill_constant, cast, squeeze/unsqueeze, stack, expand, tile, gather, range, where, ...

The pure helpers here (`reshape_shape`, `slice_bounds`, `unsqueeze_shape`, ...) compute Paddle's
output shapes and are shared by the shape inference below and by the kernels. Attributes that
may come from tensor inputs are resolved with Paddle's priority: a single tensor input
(`ShapeTensor` for fill_constant, `Shape` for reshape2, ...) over a list of one-element tensors
over the attribute.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.operators.registry import Shape, ShapeContext, register_op

Values = dict[str, list[Any]]


class ShapeError(ValueError):
    """An attribute/shape combination that Paddle rejects."""


def ints(a: Any) -> list[int]:
    """A tensor's (or list's) values as Python ints."""
    return [int(v) for v in np.asarray(a).reshape(-1)]


def from_inputs(attrs: dict, values: Values, attr: str, tensor: str | None, tensor_list: str | None) -> list[int]:
    """An int-list attribute, overridden by a 1-D tensor input or by a list of one-element tensors."""
    if tensor and values.get(tensor):
        return ints(values[tensor][0])
    if tensor_list and values.get(tensor_list):
        return [ints(t)[0] for t in values[tensor_list]]
    return [int(v) for v in attrs.get(attr) or []]


def ctx_values(ctx: ShapeContext, *slots: str) -> Values:
    """The host values of the given (optional) input slots that are present."""
    return {s: [ctx.value(s, i) for i in range(ctx.count(s))] for s in slots if ctx.has(s)}


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [0, rank), negative counting from the end."""
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis + rank if axis < 0 else axis


def _prod(dims: Sequence[int]) -> int:
    p = 1
    for d in dims:
        p *= int(d)
    return p


def _fail_on_shape_error(fn):
    """Turn ShapeError into ctx.fail (so messages name the op)."""

    def wrapper(ctx: ShapeContext) -> dict[str, list[Shape]]:
        try:
            return fn(ctx)
        except ShapeError as e:
            ctx.fail(str(e))
            raise  # unreachable: ctx.fail raises

    wrapper.__doc__ = fn.__doc__
    return wrapper


def _with_xshape(ctx: ShapeContext, out: Shape, x: Shape) -> dict[str, list[Shape]]:
    res = {"Out": [tuple(out)]}
    if ctx.op.outputs.get("XShape"):
        res["XShape"] = [(0, *x)]
    return res


# --- reshape ---------------------------------------------------------------------------------
def reshape_shape(in_shape: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """Paddle's ValidateShape: 0 copies the input dim at that index, one -1 is inferred."""
    in_shape = tuple(int(d) for d in in_shape)
    out, unk, capacity = [], -1, 1
    for i, d in enumerate(int(v) for v in target):
        if d == -1:
            if unk != -1:
                raise ShapeError(f"only one dimension of the target shape {list(target)} can be -1")
            unk = i
        elif d == 0:
            if i >= len(in_shape):
                raise ShapeError(f"0 at index {i} of shape {list(target)} copies no dim of input {list(in_shape)}")
            d = in_shape[i]
        elif d < 0:
            raise ShapeError(f"target shape {list(target)} has a negative dim other than -1")
        out.append(d)
        if d != -1:
            capacity *= d
    size = _prod(in_shape)
    if unk != -1:
        if capacity == 0 or size % capacity:
            if capacity == 0 and size == 0:
                out[unk] = 0
                return tuple(out)
            raise ShapeError(f"cannot reshape {list(in_shape)} ({size} elements) to {list(target)}")
        out[unk] = size // capacity
    elif capacity != size:
        raise ShapeError(f"cannot reshape {list(in_shape)} ({size} elements) to {list(target)} ({capacity})")
    return tuple(out)


def reshape_target(attrs: dict, values: Values) -> list[int]:
    """reshape's target: the ShapeTensor list over the Shape tensor over the `shape` attribute."""
    if values.get("ShapeTensor"):
        return [ints(t)[0] for t in values["ShapeTensor"]]
    if values.get("Shape"):
        return ints(values["Shape"][0])
    return [int(v) for v in attrs.get("shape") or []]


@register_op(
    "reshape2",
    inputs=["X"],
    optional_inputs=["Shape", "ShapeTensor"],
    outputs=["Out"],
    optional_outputs=["XShape"],
    defaults={"shape": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _reshape2_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X reshaped to `shape` (0 = keep that dim, -1 = inferred); XShape = [0, *X.shape]."""
    x = ctx.shape("X")
    return _with_xshape(ctx, reshape_shape(x, reshape_target(ctx.attrs, ctx_values(ctx, "Shape", "ShapeTensor"))), x)


register_op(
    "reshape",
    inputs=["X"],
    optional_inputs=["Shape", "ShapeTensor"],
    outputs=["Out"],
    defaults={"shape": []},
    value_dependent=True,
)(_reshape2_shape)


# --- flatten ---------------------------------------------------------------------------------
def flatten_range_shape(x: Sequence[int], start: int, stop: int) -> tuple[int, ...]:
    """flatten_contiguous_range: dims start..stop (inclusive, negative allowed) merged into one."""
    if len(x) == 0:
        return (1,)
    s, e = norm_axis(start, len(x), "start_axis"), norm_axis(stop, len(x), "stop_axis")
    if s > e:
        raise ShapeError(f"start_axis {start} must not be after stop_axis {stop} (rank {len(x)})")
    return (*x[:s], _prod(x[s : e + 1]), *x[e + 1 :])


def flatten2_shape(x: Sequence[int], axis: int) -> tuple[int, int]:
    """flatten/flatten2: [prod(x[:axis]), prod(x[axis:])], axis in [0, rank]."""
    if not 0 <= axis <= len(x):
        raise ShapeError(f"axis {axis} must be in [0, {len(x)}]")
    return (_prod(x[:axis]), _prod(x[axis:]))


@register_op(
    "flatten_contiguous_range",
    inputs=["X"],
    outputs=["Out"],
    optional_outputs=["XShape"],
    defaults={"start_axis": 1, "stop_axis": -1},
)
@_fail_on_shape_error
def _flatten_range(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X with dims start_axis..stop_axis merged."""
    x = ctx.shape("X")
    return _with_xshape(ctx, flatten_range_shape(x, int(ctx.attrs["start_axis"]), int(ctx.attrs["stop_axis"])), x)


@_fail_on_shape_error
def _flatten2(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X as a matrix [prod(X.shape[:axis]), prod(X.shape[axis:])]."""
    x = ctx.shape("X")
    return _with_xshape(ctx, flatten2_shape(x, int(ctx.attrs["axis"])), x)


register_op("flatten2", inputs=["X"], outputs=["Out"], optional_outputs=["XShape"], defaults={"axis": 1})(_flatten2)
register_op("flatten", inputs=["X"], outputs=["Out"], defaults={"axis": 1})(_flatten2)


# --- transpose -------------------------------------------------------------------------------
def transpose_perm(axis: Sequence[int], rank: int) -> tuple[int, ...]:
    perm = tuple(norm_axis(int(a), rank) for a in axis)
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"axis {list(axis)} is not a permutation of the {rank} dims")
    return perm


@_fail_on_shape_error
def _transpose(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X with dims permuted by `axis`."""
    x = ctx.shape("X")
    perm = transpose_perm(ctx.attrs["axis"], len(x))
    return _with_xshape(ctx, tuple(x[p] for p in perm), x)


register_op("transpose2", inputs=["X"], outputs=["Out"], optional_outputs=["XShape"], defaults={"axis": []})(
    _transpose
)
register_op("transpose", inputs=["X"], outputs=["Out"], defaults={"axis": []})(_transpose)


# --- concat / split / stack ------------------------------------------------------------------
def concat_axis(attrs: dict, values: Values, rank: int) -> int:
    axis = ints(values["AxisTensor"][0])[0] if values.get("AxisTensor") else int(attrs["axis"])
    return norm_axis(axis, rank)


@register_op(
    "concat", inputs=["X"], optional_inputs=["AxisTensor"], outputs=["Out"], defaults={"axis": 0}, value_dependent=True
)
@_fail_on_shape_error
def _concat(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: the X tensors joined along `axis` (AxisTensor overrides); other dims must agree."""
    shapes = ctx.shapes("X")
    first = shapes[0]
    axis = concat_axis(ctx.attrs, ctx_values(ctx, "AxisTensor"), len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ShapeError(f"inputs {[list(s) for s in shapes]} differ outside axis {axis}")
    return {"Out": [(*first[:axis], sum(s[axis] for s in shapes), *first[axis + 1 :])]}


def split_sizes(dim: int, num: int, sections: Sequence[int]) -> list[int]:
    """The sizes of split's outputs along the axis (`num` equal parts, or `sections` with one -1)."""
    if num > 0:
        if dim % num:
            raise ShapeError(f"dim {dim} cannot be split into {num} equal parts")
        return [dim // num] * num
    sizes = [int(s) for s in sections]
    if sizes.count(-1) > 1:
        raise ShapeError(f"sections {sizes} has more than one -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ShapeError(f"sections {list(sections)} do not add up to dim {dim}")
    return sizes


def split_params(attrs: dict, values: Values, x: Sequence[int]) -> tuple[int, list[int]]:
    axis = ints(values["AxisTensor"][0])[0] if values.get("AxisTensor") else int(attrs["axis"])
    axis = norm_axis(axis, len(x))
    sections = from_inputs(attrs, values, "sections", None, "SectionsTensorList")
    return axis, split_sizes(x[axis], int(attrs["num"]), sections)


@register_op(
    "split",
    inputs=["X"],
    optional_inputs=["AxisTensor", "SectionsTensorList"],
    outputs=["Out"],
    defaults={"axis": 0, "num": 0, "sections": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _split(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X cut along `axis` into `num` equal parts or into `sections` (one may be -1)."""
    x = ctx.shape("X")
    axis, sizes = split_params(ctx.attrs, ctx_values(ctx, "AxisTensor", "SectionsTensorList"), x)
    return {"Out": [(*x[:axis], s, *x[axis + 1 :]) for s in sizes]}


@register_op("stack", inputs=["X"], outputs=["Y"], defaults={"axis": 0})
@_fail_on_shape_error
def _stack(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Y: the X tensors (all of one shape) stacked along a new `axis`."""
    shapes = ctx.shapes("X")
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(f"inputs must share one shape, got {[list(s) for s in shapes]}")
    axis = norm_axis(int(ctx.attrs["axis"]), len(shapes[0]) + 1)
    return {"Y": [(*shapes[0][:axis], len(shapes), *shapes[0][axis:])]}


@register_op("unstack", inputs=["X"], outputs=["Y"], defaults={"axis": 0, "num": 0})
@_fail_on_shape_error
def _unstack(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Y: X split into its slices along `axis` (the axis removed)."""
    x = ctx.shape("X")
    axis = norm_axis(int(ctx.attrs["axis"]), len(x))
    return {"Y": [(*x[:axis], *x[axis + 1 :])] * x[axis]}


# --- slice -----------------------------------------------------------------------------------
def slice_bounds(dim: int, start: int, end: int) -> tuple[int, int]:
    """Paddle's CheckAndUpdateSliceAttrs for step 1: negatives count from the end, then clamp."""
    if dim <= 0:
        return 0, 0
    start = max(start + dim if start < 0 else start, 0)
    end = min(end + dim if end < 0 else end, dim)
    start, end = min(start, dim), max(end, 0)
    return start, max(end, start)  # end < start gives an empty slice


def decrease_dims(shape: Sequence[int], decrease_axis: Sequence[int]) -> tuple[int, ...]:
    """`shape` without the `decrease_axis` dims, which must be 1 (all removed -> 0-D, as Paddle 3)."""
    rank = len(shape)
    drop = {norm_axis(int(a), rank, "decrease_axis") for a in decrease_axis}
    for a in drop:
        if shape[a] != 1:
            raise ShapeError(f"decrease_axis {a} has size {shape[a]}, expected 1")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def slice_params(attrs: dict, values: Values, x: Sequence[int]) -> tuple[list[slice], tuple[int, ...]]:
    """Per-dimension slices of X and the output shape (after decrease_axis)."""
    axes = [norm_axis(int(a), len(x), "axes") for a in attrs["axes"]]
    starts = from_inputs(attrs, values, "starts", "StartsTensor", "StartsTensorList")
    ends = from_inputs(attrs, values, "ends", "EndsTensor", "EndsTensorList")
    if not len(starts) == len(ends) == len(axes):
        raise ShapeError(f"axes {axes}, starts {starts} and ends {ends} must have the same length")
    index = [slice(None)] * len(x)
    shape = list(x)
    for a, s, e in zip(axes, starts, ends):
        s, e = slice_bounds(x[a], s, e)
        index[a] = slice(s, e)
        shape[a] = e - s
    return index, decrease_dims(shape, attrs.get("decrease_axis") or [])


_SLICE_TENSORS = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")


@register_op(
    "slice",
    inputs=["Input"],
    optional_inputs=list(_SLICE_TENSORS),
    outputs=["Out"],
    defaults={"axes": [], "starts": [], "ends": [], "decrease_axis": [], "infer_flags": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _slice(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: Input[starts:ends] on `axes` (clamped like Paddle), `decrease_axis` dims dropped. A tensor-array
    Input (a list) has no shape to infer from: the kernel decides (`slice_array`)."""
    if isinstance(ctx._get("Input", 0), list):
        return {}
    return {"Out": [slice_params(ctx.attrs, ctx_values(ctx, *_SLICE_TENSORS), ctx.shape("Input"))[1]]}


def slice_array(attrs: dict, values: Values, arr: list) -> object:
    """Paddle's slice of a tensor array (SliceArrayKernel / SliceArrayDenseKernel): start = starts[0] (plus
    the array's length when negative, then at least 0); with decrease_axis the element at start, else the
    sub-array up to end = ends[0] (plus the length when negative, at most the length; end > start)."""
    n = len(arr)
    start = from_inputs(attrs, values, "starts", "StartsTensor", "StartsTensorList")[0]
    start = max(start + n if start < 0 else start, 0)
    if attrs.get("decrease_axis"):
        if start >= n:
            raise ShapeError(f"slice of a tensor array of {n}: start {start} is past its end")
        return arr[start]
    end = from_inputs(attrs, values, "ends", "EndsTensor", "EndsTensorList")[0]
    end = min(end + n if end < 0 else end, n)
    if end <= start:
        raise ShapeError(f"slice of a tensor array of {n}: end {end} must be greater than start {start}")
    return list(arr[start:end])


def strided_bounds(start: int, end: int, stride: int) -> slice:
    """One axis of strided_slice. Paddle 3 normalises exactly like Python slicing: negatives count
    from the end, then clamp (so with a negative stride, end=-1 means the last element, and an end
    below -dim reaches index 0)."""
    if stride == 0:
        raise ShapeError("strided_slice: a stride is 0")
    return slice(start, end, stride)


_STRIDED_TENSORS = (
    "StartsTensor",
    "EndsTensor",
    "StridesTensor",
    "StartsTensorList",
    "EndsTensorList",
    "StridesTensorList",
)


def strided_slice_params(attrs: dict, values: Values, x: Sequence[int]) -> tuple[list[slice], tuple[int, ...]]:
    axes = [norm_axis(int(a), len(x), "axes") for a in attrs["axes"]]
    starts = from_inputs(attrs, values, "starts", "StartsTensor", "StartsTensorList")
    ends = from_inputs(attrs, values, "ends", "EndsTensor", "EndsTensorList")
    strides = from_inputs(attrs, values, "strides", "StridesTensor", "StridesTensorList")
    if not len(starts) == len(ends) == len(strides) == len(axes):
        raise ShapeError(f"axes {axes}, starts {starts}, ends {ends}, strides {strides} differ in length")
    index = [slice(None)] * len(x)
    shape = list(x)
    for a, s, e, st in zip(axes, starts, ends, strides):
        index[a] = strided_bounds(s, e, st)
        shape[a] = len(range(*index[a].indices(x[a])))
    return index, decrease_dims(shape, attrs.get("decrease_axis") or [])


@register_op(
    "strided_slice",
    inputs=["Input"],
    optional_inputs=list(_STRIDED_TENSORS),
    outputs=["Out"],
    defaults={"axes": [], "starts": [], "ends": [], "strides": [], "decrease_axis": [], "infer_flags": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _strided_slice(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: Input[starts:ends:strides] on `axes`, `decrease_axis` dims dropped."""
    return {"Out": [strided_slice_params(ctx.attrs, ctx_values(ctx, *_STRIDED_TENSORS), ctx.shape("Input"))[1]]}


# --- squeeze / unsqueeze ---------------------------------------------------------------------
def squeeze_shape(x: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """Drop the size-1 dims listed in `axes` (all size-1 dims when empty); listed dims > 1 are kept."""
    if not axes:
        return tuple(d for d in x if d != 1)
    drop = {norm_axis(int(a), len(x)) for a in axes}
    return tuple(d for i, d in enumerate(x) if not (i in drop and d == 1))


def unsqueeze_shape(x: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """Paddle's unsqueeze: axes are inserted one after another, each relative to the rank so far."""
    out_rank = len(x) + len(axes)
    marks = [0] * out_rank
    cur = len(x)
    for a in (int(v) for v in axes):
        if not -(cur + 1) <= a <= cur:
            raise ShapeError(f"unsqueeze axis {a} is out of range for rank {cur}")
        pos = a + cur + 1 if a < 0 else a
        for i in range(cur, pos - 1, -1):  # shift the 1-marks at or after pos right by one
            if marks[i] == 1:
                marks[i + 1], marks[i] = 1, 0
        marks[pos] = 1
        cur += 1
    it = iter(x)
    return tuple(1 if m else next(it) for m in marks)


@_fail_on_shape_error
def _squeeze(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X without the size-1 dims in `axes` (all of them when `axes` is empty)."""
    x = ctx.shape("X")
    return _with_xshape(ctx, squeeze_shape(x, ctx.attrs["axes"]), x)


register_op("squeeze2", inputs=["X"], outputs=["Out"], optional_outputs=["XShape"], defaults={"axes": []})(_squeeze)
register_op("squeeze", inputs=["X"], outputs=["Out"], defaults={"axes": []})(_squeeze)


def unsqueeze_axes(attrs: dict, values: Values) -> list[int]:
    return from_inputs(attrs, values, "axes", "AxesTensor", "AxesTensorList")


@_fail_on_shape_error
def _unsqueeze(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X with size-1 dims inserted at `axes` (AxesTensor / AxesTensorList override)."""
    x = ctx.shape("X")
    axes = unsqueeze_axes(ctx.attrs, ctx_values(ctx, "AxesTensor", "AxesTensorList"))
    return _with_xshape(ctx, unsqueeze_shape(x, axes), x)


for _t, _xs in (("unsqueeze2", ["XShape"]), ("unsqueeze", [])):
    register_op(
        _t,
        inputs=["X"],
        optional_inputs=["AxesTensor", "AxesTensorList"],
        outputs=["Out"],
        optional_outputs=_xs,
        defaults={"axes": []},
        value_dependent=True,
    )(_unsqueeze)
