"""Tensor-creation, dtype and indexing ops: shape, shape64, assign_value, fill_constant (+ _batch_size_like, fill_any_like),
cast, assign, share_data, range, expand_v2/expand, tile, gather, where, where_index.

Output dtypes follow Paddle: `shape` gives int32, fill_constant the attribute's VarType, cast
`out_dtype`, where_index int64. The helpers are shared with the host kernels.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType, numpy_dtype
from pdlite.operators.registry import Shape, ShapeContext, register_op
from pdlite.operators.tensor import ShapeError, Values, _fail_on_shape_error, ctx_values, from_inputs, ints, norm_axis


@register_op("shape", inputs=["Input"], outputs=["Out"])
@register_op("shape64", inputs=["Input"], outputs=["Out"])
def _shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: Input's shape as a 1-D tensor (shape: int32; shape64, Paddle 3's pd_op.shape64: int64)."""
    return {"Out": [(len(ctx.shape("Input")),)]}


# --- assign_value ----------------------------------------------------------------------------
VALUE_KEYS = ("values", "fp32_values", "int32_values", "int64_values", "bool_values", "fp64_values")


def assign_values(attrs: dict) -> list:
    """The values of an assign_value op: the first non-empty `*values` attribute."""
    for key in VALUE_KEYS:
        v = attrs.get(key)
        if v is not None and len(v):
            return list(v)
    return []


@register_op("assign_value", outputs=["Out"], defaults={"shape": [], "dtype": 5})
def _assign_value(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = the constant tensor of attribute `shape` (VarType `dtype`) filled with the `*values`
    attribute (`fp32_values`, `int32_values`, `int64_values`, `bool_values` up to Paddle 2.5,
    `values` from 2.6)."""
    shape = tuple(int(d) for d in ctx.attrs.get("shape", []))
    n = len(assign_values(ctx.attrs))
    ctx.require(all(d >= 0 for d in shape), f"shape {list(shape)} has a negative dim")
    ctx.require(math.prod(shape) == n, f"shape {list(shape)} needs {math.prod(shape)} values, the op has {n}")
    return {"Out": [shape]}


# --- fill_constant ---------------------------------------------------------------------------
def fill_value(attrs: dict, dtype: np.dtype) -> Any:
    """fill_constant's value: `str_value` when set (exact for int64, 'inf'/'-inf'/'nan'), else `value`."""
    s = str(attrs.get("str_value") or "").strip()
    if not s:
        return attrs.get("value", 0.0)
    if s in ("inf", "-inf", "nan"):
        return float(s)
    if dtype.kind in "iu":
        try:
            return int(s)
        except ValueError:
            return int(float(s))
    if dtype.kind == "b":
        return s.lower() in ("true", "1") or (s.lower() not in ("false", "0") and float(s) != 0)
    return float(s)


def fill_shape(attrs: dict, values: Values) -> list[int]:
    """fill_constant's shape: the ShapeTensor over the ShapeTensorList over the `shape` attribute."""
    shape = from_inputs(attrs, values, "shape", "ShapeTensor", "ShapeTensorList")
    if any(d < 0 for d in shape):
        raise ShapeError(f"shape {shape} has a negative dim")
    return shape


def attr_dtype(attrs: dict, key: str = "dtype", default: int = VarType.FP32) -> np.dtype:
    v = attrs.get(key, default)
    return numpy_dtype(default if v is None or int(v) < 0 else int(v), key)


@register_op(
    "fill_constant",
    optional_inputs=["ValueTensor", "ShapeTensor", "ShapeTensorList"],
    outputs=["Out"],
    defaults={"shape": [], "value": 0.0, "str_value": "", "dtype": int(VarType.FP32), "force_cpu": False},
    value_dependent=True,
)
@_fail_on_shape_error
def _fill_constant(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: a tensor of `shape` (ShapeTensor / ShapeTensorList override) filled with the value, of `dtype`."""
    return {"Out": [tuple(fill_shape(ctx.attrs, ctx_values(ctx, "ShapeTensor", "ShapeTensorList")))]}


def batch_size_like_shape(attrs: dict, in_shape: Sequence[int]) -> tuple[int, ...]:
    shape = [int(d) for d in attrs["shape"]]
    i, o = int(attrs["input_dim_idx"]), int(attrs["output_dim_idx"])
    if not (0 <= i < len(in_shape) and 0 <= o < len(shape)):
        raise ShapeError(f"input_dim_idx {i} / output_dim_idx {o} out of range for {list(in_shape)} / {shape}")
    shape[o] = in_shape[i]
    return tuple(shape)


@register_op(
    "fill_constant_batch_size_like",
    inputs=["Input"],
    outputs=["Out"],
    defaults={
        "shape": [],
        "value": 0.0,
        "str_value": "",
        "dtype": int(VarType.FP32),
        "input_dim_idx": 0,
        "output_dim_idx": 0,
        "force_cpu": False,
    },
)
@_fail_on_shape_error
def _fill_bsl(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: `shape` with dim output_dim_idx taken from Input's dim input_dim_idx, filled with the value."""
    return {"Out": [batch_size_like_shape(ctx.attrs, ctx.shape("Input"))]}


def _like_x(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out has X's shape."""
    return {"Out": [ctx.shape("X")]}


register_op("fill_any_like", inputs=["X"], outputs=["Out"], defaults={"value": 0.0, "dtype": -1})(_like_x)
register_op("fill_zeros_like", inputs=["X"], outputs=["Out"])(_like_x)
_CAST_DEFAULTS = {"in_dtype": int(VarType.FP32), "out_dtype": int(VarType.FP32)}
register_op("cast", inputs=["X"], outputs=["Out"], defaults=_CAST_DEFAULTS)(_like_x)
register_op("assign", inputs=["X"], outputs=["Out"])(_like_x)
register_op("share_data", inputs=["X"], outputs=["Out"])(_like_x)


# --- range -----------------------------------------------------------------------------------
def range_size(start: float, end: float, step: float, integral: bool) -> int:
    """Paddle's GetSize: ceil(|end - start| / |step|)."""
    if step == 0:
        raise ShapeError("range: step must not be 0")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise ShapeError(f"range: step {step} moves away from end ({start} -> {end})")
    if integral:
        return int((abs(int(end) - int(start)) + abs(int(step)) - 1) // abs(int(step)))
    return int(math.ceil(abs((end - start) / step)))  # in the tensors' float dtype, as Paddle


def range_args(values: Values) -> tuple[Any, Any, Any, bool]:
    """(start, end, step) as NumPy scalars of Start's dtype, and whether it is an integer dtype."""
    dt = np.asarray(values["Start"][0]).dtype
    vals = [dt.type(np.asarray(values[s][0]).reshape(-1)[0]) for s in ("Start", "End", "Step")]
    return (*vals, dt.kind in "iu")


@register_op("range", inputs=["Start", "End", "Step"], outputs=["Out"], value_dependent=True)
@_fail_on_shape_error
def _range(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: start, start + step, ... before end (1-element Start/End/Step tensors)."""
    start, end, step, integral = range_args(ctx_values(ctx, "Start", "End", "Step"))
    return {"Out": [(range_size(start, end, step, integral),)]}


# --- expand / tile ---------------------------------------------------------------------------
def expand_shape(x: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """expand_v2: X broadcast to `target` (-1 keeps X's dim; new leading dims must be > 0)."""
    target = [int(d) for d in target]
    if len(target) < len(x):
        raise ShapeError(f"expand shape {target} has fewer dims than X {list(x)}")
    diff = len(target) - len(x)
    xs = [1] * diff + list(x)
    out = []
    for i, (d, t) in enumerate(zip(xs, target)):
        if i < diff:
            if t <= 0:
                raise ShapeError(f"expand shape {target}: new dim {i} must be positive")
            out.append(t)
        elif t == -1:
            out.append(d)
        elif d != 1 and d != t:
            raise ShapeError(f"cannot expand X {list(x)} to {target}: dim {i} is {d}, not 1 or {t}")
        else:
            out.append(t)
    return tuple(out)


def expand_target(attrs: dict, values: Values) -> list[int]:
    return from_inputs(attrs, values, "shape", "Shape", "expand_shapes_tensor")


@register_op(
    "expand_v2",
    inputs=["X"],
    optional_inputs=["Shape", "expand_shapes_tensor"],
    outputs=["Out"],
    defaults={"shape": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _expand_v2(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X broadcast to `shape` (Shape / expand_shapes_tensor override)."""
    target = expand_target(ctx.attrs, ctx_values(ctx, "Shape", "expand_shapes_tensor"))
    return {"Out": [expand_shape(ctx.shape("X"), target)]}


def tile_shape(x: Sequence[int], reps: Sequence[int]) -> tuple[int, ...]:
    """np.tile's shape: X and the repeats left-padded with 1s to the same length."""
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeat times {list(reps)} must not be negative")
    n = max(len(x), len(reps))
    xs = [1] * (n - len(x)) + list(x)
    rs = [1] * (n - len(reps)) + list(reps)
    return tuple(d * r for d, r in zip(xs, rs))


def tile_repeats(attrs: dict, values: Values, attr: str = "repeat_times") -> list[int]:
    if attr == "expand_times":
        return from_inputs(attrs, values, attr, "ExpandTimes", "expand_times_tensor")
    return from_inputs(attrs, values, attr, "RepeatTimes", "repeat_times_tensor")


@register_op(
    "tile",
    inputs=["X"],
    optional_inputs=["RepeatTimes", "repeat_times_tensor"],
    outputs=["Out"],
    defaults={"repeat_times": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _tile(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X repeated `repeat_times` times per dim (RepeatTimes / repeat_times_tensor override)."""
    reps = tile_repeats(ctx.attrs, ctx_values(ctx, "RepeatTimes", "repeat_times_tensor"))
    return {"Out": [tile_shape(ctx.shape("X"), reps)]}


@register_op(
    "expand",
    inputs=["X"],
    optional_inputs=["ExpandTimes", "expand_times_tensor"],
    outputs=["Out"],
    defaults={"expand_times": []},
    value_dependent=True,
)
@_fail_on_shape_error
def _expand_v1(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X tiled `expand_times` times per dim (the legacy expand op; same rank as X)."""
    x = ctx.shape("X")
    reps = tile_repeats(ctx.attrs, ctx_values(ctx, "ExpandTimes", "expand_times_tensor"), "expand_times")
    if len(reps) != len(x):
        raise ShapeError(f"expand_times {reps} must have one entry per dim of X {list(x)}")
    return {"Out": [tile_shape(x, reps)]}


# --- gather / where --------------------------------------------------------------------------
def gather_axis(attrs: dict, values: Values, rank: int) -> int:
    axis = ints(values["Axis"][0])[0] if values.get("Axis") else int(attrs.get("axis", 0))
    return norm_axis(axis, rank)


def gather_shape(x: Sequence[int], index: Sequence[int], axis: int) -> tuple[int, ...]:
    """X's shape with dim `axis` replaced by the index count (removed for a 0-D index)."""
    if len(index) == 2 and index[1] != 1 or len(index) > 2:
        raise ShapeError(f"Index must be 0-D, 1-D or [N, 1], got {list(index)}")
    if len(index) == 0:
        return (*x[:axis], *x[axis + 1 :])
    return (*x[:axis], index[0], *x[axis + 1 :])


@register_op(
    "gather", inputs=["X", "Index"], optional_inputs=["Axis"], outputs=["Out"], defaults={"axis": 0}, value_dependent=True
)
@_fail_on_shape_error
def _gather(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: the slices of X at Index along `axis` (Axis tensor overrides)."""
    x = ctx.shape("X")
    axis = gather_axis(ctx.attrs, ctx_values(ctx, "Axis"), len(x))
    return {"Out": [gather_shape(x, ctx.shape("Index"), axis)]}


@register_op("where", inputs=["Condition", "X", "Y"], outputs=["Out"])
@_fail_on_shape_error
def _where(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X where Condition else Y, broadcast together."""
    try:
        return {"Out": [tuple(np.broadcast_shapes(ctx.shape("Condition"), ctx.shape("X"), ctx.shape("Y")))]}
    except ValueError as e:
        raise ShapeError(str(e)) from None


@register_op("where_index", inputs=["Condition"], outputs=["Out"], value_dependent=True)
def _where_index(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: int64 [N, rank] coordinates of the true (non-zero) elements of Condition."""
    cond = ctx.value("Condition")
    return {"Out": [(int(np.count_nonzero(cond)), cond.ndim)]}


# --- eye -------------------------------------------------------------------------------------
def eye_shape(attrs: dict) -> tuple[int, int]:
    """(rows, columns) of eye: num_columns -1 means square."""
    rows = int(attrs["num_rows"])
    cols = int(attrs["num_columns"])
    return rows, rows if cols < 0 else cols


@register_op("eye", outputs=["Out"], defaults={"num_rows": 1, "num_columns": -1, "dtype": int(VarType.FP32)})
def _eye(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: the [num_rows, num_columns] identity of VarType `dtype`."""
    rows, cols = eye_shape(ctx.attrs)
    ctx.require(rows >= 0 and cols >= 0, f"num_rows {rows} and num_columns {cols} must be >= 0")
    return {"Out": [(rows, cols)]}
