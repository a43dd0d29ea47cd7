"""Converters of the shape-manipulation ops: reshape2, flatten*, transpose2, (un)squeeze2, slice, shape,
fill_constant, concat, split, stack, cast, assign, roll, set_value, range.

Paddle's reshape `0` (copy the input dim at that index) and `-1` (infer) mean the same in ONNX
Reshape. When an output shape is fully known (the subgraph kernel converts with concrete shapes)
it is used as a constant; otherwise the shape is built from Shape/Slice/Concat so that exported
models keep their dynamic batch. `shape` yields int32 (Paddle's dtype), `slice` clamps like ONNX
Slice and drops `decrease_axis` dims with Squeeze. `roll` (Paddle's out[(i + shift) mod n] = x[i] on each
axis; no axis: on the flattened tensor) is Concat(Slice(x, n - s, n), Slice(x, 0, n - s)) with s = shift mod n,
so the rolled dims (every dim when flattening) and the shifts must be known. `set_value` with unit steps
(Input[s:e] = value on some axes, e.g. PaddleClas ReXNet's `out[:, 0:c] += x`) is rebuilt by data movement
only: on each sliced axis Concat(x[:s], middle, x[e:]), innermost the value broadcast to the slice
(NumPy-aligned to the slice without its decrease_axes, then Expand to Shape(slice)); bounds normalised as
Python slices, so the sliced dims and the bounds must be known; none_axes and other steps stay on the host.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import as_int64, as_scalar, int64_vector
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.creation import assign_values


def _known_shape(ctx: ConvertContext, name: str | None) -> list[int] | None:
    s = ctx.shape(name) if name else None
    return [int(d) for d in s] if s is not None and all(d >= 0 for d in s) else None


def _reshape_to(ctx: ConvertContext, x: str, out: str, spec: str) -> None:
    ctx.add("Reshape", [ctx.tensor(x), spec], [ctx.out(out)])


@register_converter("reshape2", "reshape")
def _reshape(ctx: ConvertContext, op: OpDesc) -> None:
    x, out = op.input("X"), op.output("Out")
    assert x is not None and out is not None
    known = _known_shape(ctx, out)
    if known is not None:
        spec = ctx.ints(known)
    elif op.inputs.get("ShapeTensor"):
        spec = int64_vector(ctx, op.inputs["ShapeTensor"])
    elif op.input("Shape") is not None:
        spec = as_int64(ctx, op.input("Shape"))
    else:
        spec = ctx.ints(int(d) for d in op.attrs.get("shape") or [])
    _reshape_to(ctx, x, out, spec)


def _flatten_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    return None if info.rank(op.input("X")) is not None else "flatten needs the rank of X"


@register_converter("flatten_contiguous_range", supports=_flatten_refusal)
def _flatten_range(ctx: ConvertContext, op: OpDesc) -> None:
    x, out = op.input("X"), op.output("Out")
    assert x is not None and out is not None
    known = _known_shape(ctx, out)
    if known is not None:
        _reshape_to(ctx, x, out, ctx.ints(known))
        return
    xs = ctx.shape(x) or ()
    rank = len(xs)
    if rank == 0:
        _reshape_to(ctx, x, out, ctx.ints([1]))
        return
    start, stop = int(op.attrs["start_axis"]), int(op.attrs["stop_axis"])
    start, stop = start % rank, stop % rank
    tail = [int(d) for d in xs[stop + 1:]]
    if all(d >= 0 for d in tail):
        spec = ctx.ints([0] * start + [-1] + tail)
    else:
        shp = ctx.add("Shape", [ctx.tensor(x)])
        parts = []
        if start:
            parts.append(ctx.add("Slice", [shp, ctx.ints([0]), ctx.ints([start])]))
        parts.append(ctx.ints([-1]))
        parts.append(ctx.add("Slice", [shp, ctx.ints([stop + 1]), ctx.ints([rank])]))
        spec = ctx.add("Concat", parts, axis=0)
    _reshape_to(ctx, x, out, spec)


@register_converter("flatten2", "flatten")
def _flatten(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Flatten", [ctx.input(op, "X")], [ctx.output(op, "Out")], axis=int(op.attrs["axis"]))


@register_converter("transpose2", "transpose")
def _transpose(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Transpose", [ctx.input(op, "X")], [ctx.output(op, "Out")],
            perm=[int(a) for a in op.attrs.get("axis") or []])


def _squeeze_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if info.static(op.output("Out") or ""):
        return None
    xs = info.shape(op.input("X"))
    if xs is None:
        return "squeeze needs X's shape"
    axes = [int(a) % len(xs) for a in op.attrs.get("axes") or []] if xs else []
    dims = [i for i in (axes or range(len(xs)))]
    if any(xs[i] < 0 for i in dims):
        return "squeeze of dims of unknown size"
    return None


@register_converter("squeeze2", "squeeze", supports=_squeeze_refusal)
def _squeeze(ctx: ConvertContext, op: OpDesc) -> None:
    x, out = op.input("X"), op.output("Out")
    assert x is not None and out is not None
    known = _known_shape(ctx, out)
    if known is not None:
        _reshape_to(ctx, x, out, ctx.ints(known))
        return
    xs = ctx.shape(x) or ()
    axes = [int(a) % len(xs) for a in op.attrs.get("axes") or []] if xs else []
    drop = [i for i in (axes or range(len(xs))) if xs[i] == 1]
    if not drop:
        ctx.add("Identity", [ctx.tensor(x)], [ctx.out(out)])
    else:
        ctx.add("Squeeze", [ctx.tensor(x), ctx.ints(sorted(set(drop)))], [ctx.out(out)])


def unsqueeze_positions(rank: int, axes: list[int]) -> list[int]:
    """Where Paddle's unsqueeze puts the new unit dims (its sequential insertion rule)."""
    out_rank = rank + len(axes)
    marks = [0] * (out_rank + 1)
    cur_size = rank
    for axis in axes:
        cur = axis + cur_size + 1 if axis < 0 else axis
        for i in range(cur_size, cur - 1, -1):
            if marks[i] == 1:
                marks[i + 1] = 1
                marks[i] = 0
        marks[cur] = 1
        cur_size += 1
    return [i for i in range(out_rank) if marks[i] == 1]


def _unsqueeze_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.inputs.get("AxesTensor") or op.inputs.get("AxesTensorList"):
        return "unsqueeze with axes tensors"
    return None if info.rank(op.input("X")) is not None else "unsqueeze needs the rank of X"


@register_converter("unsqueeze2", "unsqueeze", supports=_unsqueeze_refusal)
def _unsqueeze(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    pos = unsqueeze_positions(ctx.rank(x) or 0, [int(a) for a in op.attrs.get("axes") or []])
    ctx.add("Unsqueeze", [ctx.tensor(x), ctx.ints(pos)], [ctx.output(op, "Out")])


def _slice_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if info.rank(op.input("Input")) is None:
        return "slice needs the rank of Input"
    return None


@register_converter("slice", supports=_slice_refusal)
def _slice(ctx: ConvertContext, op: OpDesc) -> None:
    x, out = op.input("Input"), op.output("Out")
    assert x is not None and out is not None
    a = op.attrs
    axes = [int(v) for v in a.get("axes") or []]
    if op.input("StartsTensor") is not None:
        starts = as_int64(ctx, op.input("StartsTensor"))
    elif op.inputs.get("StartsTensorList"):
        starts = int64_vector(ctx, op.inputs["StartsTensorList"])
    else:
        starts = ctx.ints(int(v) for v in a.get("starts") or [])
    if op.input("EndsTensor") is not None:
        ends = as_int64(ctx, op.input("EndsTensor"))
    elif op.inputs.get("EndsTensorList"):
        ends = int64_vector(ctx, op.inputs["EndsTensorList"])
    else:
        ends = ctx.ints(int(v) for v in a.get("ends") or [])
    y = ctx.add("Slice", [ctx.tensor(x), starts, ends, ctx.ints(axes)])
    dec = sorted({int(d) % (ctx.rank(x) or 1) for d in a.get("decrease_axis") or []})
    if not dec:
        ctx.add("Identity", [y], [ctx.out(out)])
        return
    rank = ctx.rank(x) or 0
    if len(dec) == rank and ctx.rank(out) == 1:  # Paddle keeps one dim when every dim is dropped
        ctx.add("Reshape", [y, ctx.ints([1])], [ctx.out(out)])
    else:
        ctx.add("Squeeze", [y, ctx.ints(dec)], [ctx.out(out)])


@register_converter("shape", "shape64")
def _shape(ctx: ConvertContext, op: OpDesc) -> None:
    out = op.output("Out")
    assert out is not None
    s = ctx.add("Shape", [ctx.input(op, "Input")])
    want = ctx.dtype(out) if ctx.info.dtype(out) is not None else np.dtype(np.int32)
    if want == np.int64:
        ctx.add("Identity", [s], [ctx.out(out)])
    else:
        ctx.add("Cast", [s], [ctx.out(out)], to=ctx.onnx_dtype(want))


def fill_value(op: OpDesc) -> tuple[np.dtype, float | int | bool]:
    """(dtype, value) of a fill_constant op (str_value wins when set, as in Paddle)."""
    dt = numpy_dtype(int(op.attrs.get("dtype", 5)), "fill_constant")
    sv = str(op.attrs.get("str_value") or "")
    if sv:
        low = sv.strip().lower()
        v: float | int | bool = low == "true" if low in ("true", "false") else float(sv)
    else:
        v = float(op.attrs.get("value", 0.0))
    if dt.kind in "iu":
        v = int(v)
    elif dt.kind == "b":
        v = bool(v)
    return dt, v


def _fill_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.input("ValueTensor") is not None and info.value(op.input("ValueTensor")) is None:
        return "fill_constant with a non-constant ValueTensor"
    return None


@register_converter("fill_constant", supports=_fill_refusal)
def _fill_constant(ctx: ConvertContext, op: OpDesc) -> None:
    dt, v = fill_value(op)
    if op.input("ValueTensor") is not None:
        v = np.asarray(ctx.value(op.input("ValueTensor"))).reshape(-1)[0]
    out = op.output("Out")
    assert out is not None
    known = _known_shape(ctx, out)
    if op.input("ShapeTensor") is not None and known is None:
        spec = as_int64(ctx, op.input("ShapeTensor"))
    elif op.inputs.get("ShapeTensorList") and known is None:
        spec = int64_vector(ctx, op.inputs["ShapeTensorList"])
    else:
        spec = ctx.ints(known if known is not None else [int(d) for d in op.attrs.get("shape") or []])
    value = ctx.onnx.numpy_helper.from_array(np.asarray([v], dtype=dt))
    ctx.add("ConstantOfShape", [spec], [ctx.out(out)], value=value)


def _axis_value(ctx: ConvertContext, op: OpDesc) -> int:
    t = op.input("AxisTensor")
    if t is not None:
        val = ctx.value(t)
        if val is None:
            raise ConversionError("AxisTensor is not a constant")
        return int(np.asarray(val).reshape(-1)[0])
    return int(op.attrs.get("axis", 0))


def _axis_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    t = op.input("AxisTensor")
    return "AxisTensor is not a constant" if t is not None and info.value(t) is None else None


@register_converter("concat", supports=_axis_refusal)
def _concat(ctx: ConvertContext, op: OpDesc) -> None:
    xs = [ctx.tensor(n) for n in op.inputs.get("X") or []]
    ctx.add("Concat", xs, [ctx.output(op, "Out")], axis=_axis_value(ctx, op))


def _split_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.inputs.get("SectionsTensorList"):
        return "split with SectionsTensorList"
    return _axis_refusal(op, info)


@register_converter("split", supports=_split_refusal)
def _split(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    axis = _axis_value(ctx, op)
    outs = op.outputs.get("Out") or []
    sections = [int(s) for s in op.attrs.get("sections") or []]
    ins = [ctx.tensor(x)]
    if sections:
        if -1 in sections:
            xs = ctx.shape(x)
            if xs is None or xs[axis] < 0:
                raise ConversionError("split section -1 needs the split dim's size")
            sections[sections.index(-1)] = int(xs[axis]) - (sum(sections) + 1)
        ins.append(ctx.ints(sections))
    ctx.add("Split", ins, [ctx.out(n) for n in outs], axis=axis)


@register_converter("stack")
def _stack(ctx: ConvertContext, op: OpDesc) -> None:
    names = op.inputs.get("X") or []
    rank = ctx.rank(names[0]) if names else None
    axis = int(op.attrs["axis"])
    if axis < 0:
        if rank is None:
            raise ConversionError("stack with a negative axis needs the inputs' rank")
        axis += rank + 1
    parts = [ctx.add("Unsqueeze", [ctx.tensor(n), ctx.ints([axis])]) for n in names]
    ctx.add("Concat", parts, [ctx.output(op, "Y")], axis=axis)


def _roll_shifts(op: OpDesc, value) -> list[int] | None:
    t = op.input("ShiftsTensor")
    if t is None:
        return [int(v) for v in op.attrs.get("shifts") or []]
    v = value(t)
    return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]


def _roll_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    shifts = _roll_shifts(op, info.value)
    if shifts is None:
        return "roll needs constant shifts (ShiftsTensor is computed at run time)"
    shape = info.shape(op.input("X") or "")
    if shape is None:
        return "roll needs the shape of X"
    axes = [int(a) for a in op.attrs.get("axis") or []]
    dims = [shape[a] for a in axes] if axes else list(shape)
    if any(d < 0 for d in dims):
        return "roll needs the sizes of the rolled dims (every dim when axis is empty)"
    if len(shifts) != max(len(axes), 1):
        return f"roll has {len(shifts)} shifts for {len(axes)} axes"
    return None


@register_converter("roll", supports=_roll_refusal)
def _roll(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    shifts = _roll_shifts(op, ctx.value) or []
    shape = [int(d) for d in ctx.shape(x) or []]
    axes = [int(a) % len(shape) for a in op.attrs.get("axis") or []] if shape else []
    y = ctx.tensor(x)
    if not axes:  # Paddle rolls the flattened tensor and restores the shape
        y = ctx.add("Reshape", [y, ctx.ints([-1])])
        axes, dims = [0], [int(np.prod(shape))]
    else:
        dims = [shape[a] for a in axes]
    for shift, axis, n in zip(shifts, axes, dims):
        s = shift % n if n else 0
        if s:
            tail = ctx.add("Slice", [y, ctx.ints([n - s]), ctx.ints([n]), ctx.ints([axis])])
            head = ctx.add("Slice", [y, ctx.ints([0]), ctx.ints([n - s]), ctx.ints([axis])])
            y = ctx.add("Concat", [tail, head], axis=axis)
    if not op.attrs.get("axis"):
        y = ctx.add("Reshape", [y, ctx.ints(shape)])
    ctx.add("Identity", [y], [ctx.output(op, "Out")])


def _set_value_bounds(op: OpDesc, value) -> tuple[list[int], list[int], list[int]] | None:
    """(starts, ends, steps) of a set_value, None when a bound tensor is not a constant."""
    n = len(op.attrs.get("axes") or [])
    out = []
    for slot, key, fill in (("StartsTensorList", "starts", 0), ("EndsTensorList", "ends", 0),
                            ("StepsTensorList", "steps", 1)):
        names = op.inputs.get(slot) or []
        if names:
            vals = [value(t) for t in names]
            if any(v is None for v in vals):
                return None
            out.append([int(np.asarray(v).reshape(-1)[0]) for v in vals])
        else:
            out.append([int(v) for v in op.attrs.get(key) or []] or [fill] * n)
    return out[0], out[1], out[2]


def _set_value_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    bounds = _set_value_bounds(op, info.value)
    if bounds is None:
        return "set_value needs constant starts / ends / steps"
    axes = [int(a) for a in op.attrs.get("axes") or []]
    if any(st != 1 for st in bounds[2]) or op.attrs.get("none_axes"):
        return "set_value with steps other than 1 or none_axes"
    shape = info.shape(op.input("Input") or "")
    if shape is None or any(shape[a] < 0 for a in axes):
        return "set_value needs the sizes of the sliced dims of Input"
    v = op.input("ValueTensor")
    rank = info.rank(v) if v is not None else len(op.attrs.get("shape") or [1])
    if rank is None or rank > len(shape) - len(op.attrs.get("decrease_axes") or []):
        return "set_value needs a value of known rank that broadcasts to the slice"
    if v is None and not assign_values(op.attrs):
        return "set_value without a value"
    return None


@register_converter("set_value", supports=_set_value_refusal)
def _set_value(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("Input")
    assert x is not None
    shape = [int(d) for d in ctx.shape(x) or []]
    rank = len(shape)
    axes = [int(a) % rank for a in op.attrs.get("axes") or []]
    starts, ends, _ = _set_value_bounds(op, ctx.value) or ([], [], [])
    spans = {a: slice(s, e).indices(shape[a])[:2] for a, s, e in zip(axes, starts, ends)}
    spans = {a: (lo, max(lo, hi)) for a, (lo, hi) in spans.items()}
    dt = ctx.dtype(x)
    v = op.input("ValueTensor")
    if v is not None:
        val = ctx.tensor(v)
        if ctx.dtype(v) != dt:
            val = ctx.cast(val, dt)
        vrank = ctx.rank(v) or 0
    else:
        vshape = [int(d) for d in op.attrs.get("shape") or []]
        vals = np.asarray(assign_values(op.attrs), dtype=dt)
        val = ctx.const(vals.reshape(vshape or [vals.size]), hint="setv")
        vrank = len(vshape) or 1
    decrease = sorted({int(d) % rank for d in op.attrs.get("decrease_axes") or []})
    lead = rank - len(decrease) - vrank  # NumPy alignment to the slice without its decrease_axes
    if lead > 0:
        val = ctx.add("Unsqueeze", [val, ctx.ints(range(lead))])
    if decrease:
        val = ctx.add("Unsqueeze", [val, ctx.ints(decrease)])
    x_t = ctx.tensor(x)
    order = sorted(spans)

    def region(t: str, upto: int) -> str:
        """t restricted to the spans of the first `upto` sliced axes."""
        for a in order[:upto]:
            lo, hi = spans[a]
            t = ctx.add("Slice", [t, ctx.ints([lo]), ctx.ints([hi]), ctx.ints([a])])
        return t

    inner = region(x_t, len(order))
    y = ctx.add("Expand", [val, ctx.add("Shape", [inner])])
    for i in reversed(range(len(order))):  # rebuild outwards: x[:lo], y, x[hi:] along each sliced axis
        a = order[i]
        lo, hi = spans[a]
        outer = region(x_t, i)
        parts = []
        if lo > 0:
            parts.append(ctx.add("Slice", [outer, ctx.ints([0]), ctx.ints([lo]), ctx.ints([a])]))
        parts.append(y)
        if hi < shape[a]:
            parts.append(ctx.add("Slice", [outer, ctx.ints([hi]), ctx.ints([shape[a]]), ctx.ints([a])]))
        y = parts[0] if len(parts) == 1 else ctx.add("Concat", parts, axis=a)
    ctx.add("Identity", [y], [ctx.output(op, "Out")])


@register_converter("cast")
def _cast(ctx: ConvertContext, op: OpDesc) -> None:
    dt = numpy_dtype(int(op.attrs["out_dtype"]), "cast")
    ctx.add("Cast", [ctx.input(op, "X")], [ctx.output(op, "Out")], to=ctx.onnx_dtype(dt))


@register_converter("assign")
def _assign(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Identity", [ctx.input(op, "X")], [ctx.output(op, "Out")])


@register_converter("fill_any_like", "fill_zeros_like")
def _fill_like(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    dt_attr = int(op.attrs.get("dtype", -1))
    dt = ctx.dtype(x) if dt_attr < 0 else numpy_dtype(dt_attr, op.type)
    v = float(op.attrs.get("value", 0.0)) if op.type == "fill_any_like" else 0.0
    value = ctx.onnx.numpy_helper.from_array(np.asarray([v]).astype(dt))
    ctx.add("ConstantOfShape", [ctx.add("Shape", [ctx.tensor(x)])], [ctx.output(op, "Out")], value=value)


@register_converter("fill_constant_batch_size_like")
def _fill_batch_like(ctx: ConvertContext, op: OpDesc) -> None:
    dt, v = fill_value(op)
    shape = [int(d) for d in op.attrs.get("shape") or []]
    i, o = int(op.attrs["input_dim_idx"]), int(op.attrs["output_dim_idx"])
    dim = ctx.add("Slice", [ctx.add("Shape", [ctx.input(op, "Input")]), ctx.ints([i]), ctx.ints([i + 1])])
    parts = ([ctx.ints(shape[:o])] if o else []) + [dim] + ([ctx.ints(shape[o + 1:])] if o + 1 < len(shape) else [])
    spec = ctx.add("Concat", parts, axis=0) if len(parts) > 1 else parts[0]
    value = ctx.onnx.numpy_helper.from_array(np.asarray([v], dtype=dt))
    ctx.add("ConstantOfShape", [spec], [ctx.output(op, "Out")], value=value)


@register_converter("size")
def _size(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Size", [ctx.input(op, "Input")], [ctx.output(op, "Out")])


@register_converter("share_data")
def _share_data(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Identity", [ctx.input(op, "X")], [ctx.output(op, "Out")])


def _range_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    dts = {info.dtype(op.input(s) or "") for s in ("Start", "End", "Step")}
    if None in dts or len(dts) != 1:
        return "range needs Start, End and Step of one known dtype"
    return None


@register_converter("range", supports=_range_refusal)
def _range(ctx: ConvertContext, op: OpDesc) -> None:
    """Paddle's arange over run-time bounds (a length read from a tensor's shape): ONNX Range of the scalars."""
    ins = [as_scalar(ctx, op.input(s) or "") for s in ("Start", "End", "Step")]
    y = ctx.add("Range", ins)
    out = op.output("Out") or ""
    if ctx.info.dtype(out) is not None and ctx.dtype(out) != ctx.dtype(op.input("Start") or ""):
        y = ctx.cast(y, ctx.dtype(out))
    ctx.add("Identity", [y], [ctx.out(out)])
