"""Tensor manipulation ops: tril_triu, reverse, unique, set_value, partial_sum, partial_concat,
index_sample, masked_select, crop_tensor, sequence_mask, scatter_nd_add, top_k (v1), lod_reset,
increment, fill_any, label_smooth, shard_index.

Shapes follow Paddle's InferMeta / InferShape; `unique`'s sizes depend on the values (the kernel
decides them). set_value's slice rules are Python's (negative starts/ends count from the end,
out-of-range bounds clamp), as Paddle's CheckAndUpdateSliceAttrs.
"""
from __future__ import annotations

import numpy as np

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


# --- indexing and masking -------------------------------------------------------------------------
@register_op("index_sample", inputs=["X", "Index"])
def _index_sample(ctx: ShapeContext) -> Shapes:
    """Out[n, k] = X[n, Index[n, k]]."""
    x, idx = ctx.shape("X"), ctx.shape("Index")
    ctx.require(len(x) == 2 and len(idx) == 2 and idx[0] == x[0], f"expected X [N, D] and Index [N, K], got "
                                                                     f"{list(x)} and {list(idx)}")
    return {"Out": [idx]}


@register_op("masked_select", inputs=["X", "Mask"], outputs=["Y"], value_dependent=True)
def _masked_select(ctx: ShapeContext) -> Shapes:
    """Y (1-D) = the elements of X where the broadcast Mask is true."""
    try:
        np.broadcast_shapes(ctx.shape("X"), ctx.shape("Mask"))
    except ValueError:
        ctx.fail(f"X {list(ctx.shape('X'))} and Mask {list(ctx.shape('Mask'))} do not broadcast")
    return {}


def crop_bounds(ctx_or_attrs, x: Shape, ins: dict | None = None) -> tuple[list[int], list[int]]:
    """(offsets, sizes) of crop_tensor: tensors first, then attributes; size -1 = up to the end."""

    def get(tensor: str, tensor_list: str, attr: str) -> list[int]:
        if ins is not None:
            if ins.get(tensor):
                return [int(v) for v in np.asarray(ins[tensor][0]).reshape(-1)]
            if ins.get(tensor_list):
                return [int(np.asarray(t).reshape(-1)[0]) for t in ins[tensor_list]]
        return [int(v) for v in ctx_or_attrs.get(attr) or []]

    sizes = get("Shape", "ShapeTensor", "shape")
    offsets = get("Offsets", "OffsetsTensor", "offsets") or [0] * len(x)
    sizes = [x[i] - offsets[i] if s == -1 else s for i, s in enumerate(sizes)]
    return offsets, sizes


@register_op("crop_tensor", inputs=["X"], optional_inputs=["Shape", "ShapeTensor", "Offsets", "OffsetsTensor"],
             defaults={"shape": [], "offsets": []}, value_dependent=True)
def _crop_tensor(ctx: ShapeContext) -> Shapes:
    """Out = X[offsets[i] : offsets[i] + shape[i]] on every axis."""
    x = ctx.shape("X")
    ins = {s: [ctx.value(s, i) for i in range(ctx.count(s))] for s in ("Shape", "ShapeTensor", "Offsets",
                                                                         "OffsetsTensor") if ctx.has(s)}
    offsets, sizes = crop_bounds(ctx.attrs, x, ins)
    ctx.require(len(offsets) == len(sizes) == len(x), f"offsets {offsets} and shape {sizes} need {len(x)} values")
    ctx.require(all(o >= 0 and s > 0 and o + s <= d for o, s, d in zip(offsets, sizes, x)),
                f"crop offsets {offsets} and shape {sizes} do not fit X {list(x)}")
    return {"Out": [tuple(sizes)]}


@register_op("sequence_mask", inputs=["X"], outputs=["Y"], optional_inputs=["MaxLenTensor"],
             defaults={"maxlen": -1, "out_dtype": 3}, value_dependent=True)
def _sequence_mask(ctx: ShapeContext) -> Shapes:
    """Y[..., j] = j < X[...] for j < maxlen (maxlen -1: max(X))."""
    return {}


@register_op("scatter_nd_add", inputs=["X", "Index", "Updates"])
def _scatter_nd_add(ctx: ShapeContext) -> Shapes:
    """Out = X with Updates added at the index tuples of Index (repeats accumulate)."""
    x, idx, up = ctx.shape("X"), ctx.shape("Index"), ctx.shape("Updates")
    ctx.require(len(idx) >= 1 and idx[-1] <= len(x) and tuple(up) == tuple(idx[:-1]) + tuple(x[idx[-1]:]),
                f"Updates {list(up)} must be Index[:-1] + X[Index[-1]:] for X {list(x)}, Index {list(idx)}")
    return {"Out": [x]}


@register_op("top_k", inputs=["X"], outputs=["Out", "Indices"], optional_inputs=["K"], defaults={"k": 1},
             value_dependent=True)
def _top_k_v1(ctx: ShapeContext) -> Shapes:
    """The k largest along the last axis, sorted (the v1 op; K tensor overrides k)."""
    x = ctx.shape("X")
    k = int(ctx.value("K").reshape(-1)[0]) if ctx.has("K") else int(ctx.attrs["k"])
    ctx.require(len(x) >= 1 and 0 < k <= x[-1], f"k {k} must be in [1, {x[-1] if x else 0}] for X {list(x)}")
    return {"Out": [(*x[:-1], k)], "Indices": [(*x[:-1], k)]}


@register_op("lod_reset", inputs=["X"], optional_inputs=["Y"], defaults={"target_lod": [], "append": False})
@register_op("increment", inputs=["X"], defaults={"step": 1.0})
@register_op("fill_any", inputs=["X"], defaults={"value_float": 0.0, "value_int": 0})
@register_op("label_smooth", inputs=["X"], optional_inputs=["PriorDist"], defaults={"epsilon": 0.0})
def _same_shape(ctx: ShapeContext) -> Shapes:
    """Out has X's shape (lod_reset only changes the LoD, which pdlite does not carry)."""
    return {"Out": [ctx.shape("X")]}


@register_op("shard_index", inputs=["X"], defaults={"index_num": 0, "nshards": 1, "shard_id": 0, "ignore_value": -1})
def _shard_index(ctx: ShapeContext) -> Shapes:
    """Out = X - shard_id * shard_size where X falls in this shard, else ignore_value."""
    x = ctx.shape("X")
    ctx.require(len(x) >= 2 and x[-1] == 1, f"X must be [..., 1], got {list(x)}")
    ctx.require(int(ctx.attrs["nshards"]) > 0 and 0 <= int(ctx.attrs["shard_id"]) < int(ctx.attrs["nshards"]),
                f"shard_id {ctx.attrs['shard_id']} must be in [0, nshards {ctx.attrs['nshards']})")
    return {"Out": [x]}


# --- legacy (Paddle 2.x) forms --------------------------------------------------------------------
@register_op("pad2d", inputs=["X"], optional_inputs=["Paddings"], value_dependent=True,
             defaults={"paddings": [0, 0, 0, 0], "mode": "constant", "pad_value": 0.0, "data_format": "NCHW"})
def _pad2d(ctx: ShapeContext) -> Shapes:
    """Out = X padded by [top, bottom, left, right] (constant, reflect or edge)."""
    x = list(ctx.shape("X"))
    p = [int(v) for v in (ctx.value("Paddings").reshape(-1) if ctx.has("Paddings") else ctx.attrs["paddings"])]
    ctx.require(len(x) == 4 and len(p) == 4, f"X must be 4-D and paddings 4 values, got {x} and {p}")
    ctx.require(ctx.attrs["mode"] in ("constant", "reflect", "edge"), f"mode {ctx.attrs['mode']!r} is not "
                                                                        "constant, reflect or edge")
    h, w = (2, 3) if ctx.attrs["data_format"] == "NCHW" else (1, 2)
    if ctx.attrs["mode"] == "reflect":
        ctx.require(max(p[:2]) < x[h] and max(p[2:]) < x[w], f"reflect paddings {p} must be smaller than X {x}")
    x[h] += p[0] + p[1]
    x[w] += p[2] + p[3]
    return {"Out": [tuple(x)]}


@register_op("one_hot", inputs=["X"], optional_inputs=["depth_tensor"],
             defaults={"depth": -1, "dtype": 5, "allow_out_of_range": False}, value_dependent=True)
def _one_hot_v1(ctx: ShapeContext) -> Shapes:
    """Out [..., depth] from X [..., 1] (the v1 op; v2 drops the trailing 1)."""
    x = ctx.shape("X")
    depth = int(ctx.value("depth_tensor").reshape(-1)[0]) if ctx.has("depth_tensor") else int(ctx.attrs["depth"])
    ctx.require(len(x) >= 1 and x[-1] == 1, f"X must be [..., 1], got {list(x)}")
    ctx.require(depth > 0, f"depth must be > 0, got {depth}")
    return {"Out": [(*x[:-1], depth)]}


@register_op("expand_as", inputs=["X", "target_tensor"])
def _expand_as_v1(ctx: ShapeContext) -> Shapes:
    """Out = X tiled to target_tensor's shape (each target dim a multiple of X's; the v1 op)."""
    x, t = ctx.shape("X"), ctx.shape("target_tensor")
    ctx.require(len(x) == len(t) and all(d > 0 and td % d == 0 for d, td in zip(x, t)),
                f"target_tensor {list(t)} must be X {list(x)} times whole numbers per dim")
    return {"Out": [t]}
