"""Ops the conformance zoo needed that no other module defines: compare and logical ops, index ops
(top_k_v2, argsort, cumsum, flip, roll, index_select, one_hot_v2, gather_nd, scatter, ...), norms
(group_norm, instance_norm, norm, p_norm), padding (pad, pad3d) and channel rearrangements
(pixel_shuffle, pixel_unshuffle, channel_shuffle, maxout, unfold). Shapes follow Paddle's
InferShape/InferMeta functions. rnn lives in pdlite.operators.rnn, the detection ops in
pdlite.operators.detection.
"""
from __future__ import annotations

import math

from pdlite.operators.elementwise import BroadcastError, aligned_shapes
from pdlite.operators.geometry import conv_out_size
from pdlite.operators.registry import Shape, ShapeContext, register_op
from pdlite.operators.tensor import ints

COMPARE_OPS = ("equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal")
LOGICAL_BINARY_OPS = ("logical_and", "logical_or", "logical_xor")
Shapes = dict[str, list[Shape]]


def _axis(ctx: ShapeContext, axis: int, rank: int) -> int:
    ctx.require(-rank <= axis < max(rank, 1), f"axis {axis} is out of range for an input of rank {rank}")
    return axis + rank if axis < 0 else axis


def _broadcast(ctx: ShapeContext) -> Shapes:
    try:
        out = aligned_shapes(ctx.shape("X"), ctx.shape("Y"), int(ctx.attrs.get("axis", -1)))[2]
    except BroadcastError as e:
        ctx.fail(str(e))
        raise
    return {"Out": [out]}


for _t in COMPARE_OPS:
    register_op(_t, inputs=["X", "Y"], defaults={"axis": -1, "force_cpu": False})(_broadcast)
for _t in LOGICAL_BINARY_OPS:
    register_op(_t, inputs=["X", "Y"])(_broadcast)


@register_op("logical_not", inputs=["X"])
@register_op("flip", inputs=["X"], defaults={"axis": []})
@register_op("roll", inputs=["X"], optional_inputs=["ShiftsTensor"], defaults={"shifts": [], "axis": []})
def _same(ctx: ShapeContext) -> Shapes:
    return {"Out": [ctx.shape("X")]}


@register_op("linspace", inputs=["Start", "Stop", "Num"], defaults={"dtype": 5}, value_dependent=True)
def _linspace(ctx: ShapeContext) -> Shapes:
    n = ints(ctx.value("Num"))[0]
    ctx.require(n > 0, f"Num must be > 0, got {n}")
    return {"Out": [(n,)]}


@register_op("expand_as_v2", inputs=["X"], optional_inputs=["Y"], defaults={"target_shape": []})
def _expand_as(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    target = [int(v) for v in ctx.attrs.get("target_shape") or []]
    if ctx.has("Y") and (not target or -1 in target):
        target = list(ctx.shape("Y"))
    ctx.require(len(target) >= len(x), f"target_shape {target} has a lower rank than X {list(x)}")
    lead = len(target) - len(x)
    out = list(target)
    for i, d in enumerate(x):
        t = target[lead + i]
        if t <= 0:
            out[lead + i] = d
        else:
            ctx.require(d in (1, t), f"X dim {i} ({d}) cannot expand to {t}")
    ctx.require(all(d > 0 for d in out[:lead]), f"target_shape {target}: leading dims must be positive")
    return {"Out": [tuple(out)]}


@register_op("index_select", inputs=["X", "Index"], defaults={"dim": 0})
def _index_select(ctx: ShapeContext) -> Shapes:
    x = list(ctx.shape("X"))
    dim = _axis(ctx, int(ctx.attrs["dim"]), len(x))
    idx = ctx.shape("Index")
    ctx.require(len(idx) <= 1 or (len(idx) == 2 and idx[1] == 1), f"Index must be 1-D, got {list(idx)}")
    x[dim] = idx[0] if idx else 1
    return {"Out": [tuple(x)]}


@register_op("argsort", inputs=["X"], outputs=["Out", "Indices"], defaults={"axis": -1, "descending": False,
                                                                            "stable": False})
def _argsort(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    _axis(ctx, int(ctx.attrs["axis"]), len(x))
    return {"Out": [x], "Indices": [x]}


@register_op("top_k_v2", inputs=["X"], outputs=["Out", "Indices"], optional_inputs=["K"],
             defaults={"k": 1, "axis": -1, "largest": True, "sorted": True}, value_dependent=True)
def _top_k(ctx: ShapeContext) -> Shapes:
    x = list(ctx.shape("X"))
    k = ints(ctx.value("K"))[0] if ctx.has("K") else int(ctx.attrs["k"])
    if not x:
        return {"Out": [()], "Indices": [()]}
    axis = _axis(ctx, int(ctx.attrs["axis"]), len(x))
    ctx.require(0 <= k <= x[axis], f"k = {k} must be in [0, {x[axis]}] (the size of axis {axis})")
    x[axis] = k
    return {"Out": [tuple(x)], "Indices": [tuple(x)]}


@register_op("cumsum", inputs=["X"], defaults={"axis": -1, "flatten": False, "exclusive": False, "reverse": False})
def _cumsum(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    if ctx.attrs.get("flatten") or not x:
        return {"Out": [(math.prod(x),)]}
    _axis(ctx, int(ctx.attrs["axis"]), len(x))
    return {"Out": [x]}


@register_op("one_hot_v2", inputs=["X"], optional_inputs=["depth_tensor"],
             defaults={"depth": -1, "dtype": 5, "allow_out_of_range": False}, value_dependent=True)
def _one_hot(ctx: ShapeContext) -> Shapes:
    depth = ints(ctx.value("depth_tensor"))[0] if ctx.has("depth_tensor") else int(ctx.attrs["depth"])
    ctx.require(depth > 0, f"depth must be > 0, got {depth}")
    return {"Out": [(*ctx.shape("X"), depth)]}


def _reduced(ctx: ShapeContext, x: Shape, axis: int, keep: bool) -> Shape:
    a = _axis(ctx, axis, len(x))
    return tuple(1 if i == a else d for i, d in enumerate(x)) if keep else tuple(d for i, d in enumerate(x) if i != a)


@register_op("norm", inputs=["X"], outputs=["Out"], optional_outputs=["Norm"],
             defaults={"axis": -1, "epsilon": 1e-10, "is_test": True})
def _norm(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    return {"Out": [x], "Norm": [_reduced(ctx, x, int(ctx.attrs["axis"]), True)]}


@register_op("p_norm", inputs=["X"], defaults={"porder": 2.0, "axis": -1, "epsilon": 1e-12, "keepdim": False,
                                               "asvector": False})
def _p_norm(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    keep = bool(ctx.attrs["keepdim"])
    if ctx.attrs.get("asvector"):
        return {"Out": [(1,) * len(x) if keep else ()]}
    return {"Out": [_reduced(ctx, x, int(ctx.attrs["axis"]), keep)]}


@register_op("group_norm", inputs=["X"], outputs=["Y"], optional_inputs=["Scale", "Bias"],
             optional_outputs=["Mean", "Variance"], defaults={"epsilon": 1e-5, "groups": 1, "data_layout": "NCHW"})
def _group_norm(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    ctx.require(len(x) >= 2, f"X must have rank >= 2, got {list(x)}")
    g = int(ctx.attrs["groups"])
    c = x[-1] if ctx.attrs.get("data_layout") == "NHWC" else x[1]
    ctx.require(g > 0 and c % g == 0, f"groups ({g}) must divide the channels ({c})")
    return {"Y": [x], "Mean": [(x[0], g)], "Variance": [(x[0], g)]}


@register_op("instance_norm", inputs=["X"], outputs=["Y"], optional_inputs=["Scale", "Bias"],
             optional_outputs=["SavedMean", "SavedVariance"], defaults={"epsilon": 1e-5})
def _instance_norm(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    ctx.require(len(x) >= 2, f"X must have rank >= 2, got {list(x)}")
    return {"Y": [x], "SavedMean": [(x[0] * x[1],)], "SavedVariance": [(x[0] * x[1],)]}


@register_op("pad", inputs=["X"], defaults={"paddings": [], "pad_value": 0.0})
def _pad(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    p = [int(v) for v in ctx.attrs["paddings"]]
    ctx.require(len(p) == 2 * len(x), f"paddings {p} must hold 2 values per dim of X {list(x)}")
    out = tuple(d + p[2 * i] + p[2 * i + 1] for i, d in enumerate(x))
    ctx.require(all(d > 0 for d in out), f"paddings {p} leave an empty output {list(out)}")
    return {"Out": [out]}


def pad3d_paddings(ctx: ShapeContext) -> list[int]:
    """[left, right, top, bottom, front, back]: the Paddings tensor over the attribute."""
    p = ints(ctx.value("Paddings")) if ctx.has("Paddings") else [int(v) for v in ctx.attrs["paddings"]]
    ctx.require(len(p) == 6, f"paddings must have 6 values, got {p}")
    return p


@register_op("pad3d", inputs=["X"], optional_inputs=["Paddings"], value_dependent=True,
             defaults={"paddings": [0] * 6, "mode": "constant", "value": 0.0, "data_format": "NCDHW"})
def _pad3d(ctx: ShapeContext) -> Shapes:
    x = list(ctx.shape("X"))
    ctx.require(len(x) == 5, f"X must be 5-D, got {x}")
    p = pad3d_paddings(ctx)
    d, h, w = (2, 3, 4) if ctx.attrs["data_format"] == "NCDHW" else (1, 2, 3)
    if ctx.attrs["mode"] == "reflect":
        ctx.require(max(p[0], p[1]) < x[w] and max(p[2], p[3]) < x[h] and max(p[4], p[5]) < x[d],
                    f"reflect paddings {p} must be smaller than the padded dims of X {x}")
    x[w] += p[0] + p[1]
    x[h] += p[2] + p[3]
    x[d] += p[4] + p[5]
    return {"Out": [tuple(x)]}


def _nchw(ctx: ShapeContext) -> tuple[int, int, int, int, bool]:
    x = ctx.shape("X")
    ctx.require(len(x) == 4, f"X must be 4-D, got {list(x)}")
    nhwc = ctx.attrs.get("data_format") == "NHWC"
    n, c, h, w = (x[0], x[3], x[1], x[2]) if nhwc else x
    return n, c, h, w, nhwc


def _pack(n: int, c: int, h: int, w: int, nhwc: bool) -> Shapes:
    return {"Out": [(n, h, w, c) if nhwc else (n, c, h, w)]}


@register_op("pixel_shuffle", inputs=["X"], defaults={"upscale_factor": 1, "data_format": "NCHW"})
def _pixel_shuffle(ctx: ShapeContext) -> Shapes:
    n, c, h, w, nhwc = _nchw(ctx)
    r = int(ctx.attrs["upscale_factor"])
    ctx.require(r > 0 and c % (r * r) == 0, f"channels {c} must be divisible by upscale_factor^2 ({r * r})")
    return _pack(n, c // (r * r), h * r, w * r, nhwc)


@register_op("channel_shuffle", inputs=["X"], defaults={"groups": 1, "data_format": "NCHW"})
def _channel_shuffle(ctx: ShapeContext) -> Shapes:
    n, c, h, w, nhwc = _nchw(ctx)
    ctx.require(c % int(ctx.attrs["groups"]) == 0, f"groups {ctx.attrs['groups']} must divide channels {c}")
    return _pack(n, c, h, w, nhwc)


@register_op("maxout", inputs=["X"], defaults={"groups": 1, "axis": 1})
def _maxout(ctx: ShapeContext) -> Shapes:
    x = list(ctx.shape("X"))
    axis = _axis(ctx, int(ctx.attrs["axis"]), len(x))
    g = int(ctx.attrs["groups"])
    ctx.require(g > 0 and x[axis] % g == 0, f"groups {g} must divide dim {axis} ({x[axis]})")
    x[axis] //= g
    return {"Out": [tuple(x)]}


def unfold_geometry(attrs: dict, h: int, w: int) -> tuple[list[int], list[int], list[int], list[int], int, int]:
    """(kernel, strides, paddings [top, left, bottom, right], dilations, out_h, out_w) of an unfold."""
    k = [int(v) for v in attrs["kernel_sizes"]]
    s = [int(v) for v in attrs["strides"]]
    p = [int(v) for v in attrs["paddings"]]
    p = p * 2 if len(p) == 2 else p
    d = [int(v) for v in attrs["dilations"]]
    oh = conv_out_size(h, k[0], d[0], p[0], p[2], s[0])
    ow = conv_out_size(w, k[1], d[1], p[1], p[3], s[1])
    return k, s, p, d, oh, ow


@register_op("unfold", inputs=["X"], outputs=["Y"], defaults={"kernel_sizes": [1, 1], "strides": [1, 1],
                                                               "paddings": [0, 0, 0, 0], "dilations": [1, 1]})
def _unfold(ctx: ShapeContext) -> Shapes:
    n, c, h, w, _ = _nchw(ctx)
    k, _, _, _, oh, ow = unfold_geometry(ctx.attrs, h, w)
    ctx.require(oh > 0 and ow > 0, f"the sliding blocks do not fit in X ({h}x{w})")
    return {"Y": [(n, c * k[0] * k[1], oh * ow)]}


@register_op("meshgrid", inputs=["X"])
def _meshgrid(ctx: ShapeContext) -> Shapes:
    dims = tuple(math.prod(s) for s in ctx.shapes("X"))
    return {"Out": [dims] * ctx.count("X")}


@register_op("broadcast_tensors", inputs=["X"])
def _broadcast_tensors(ctx: ShapeContext) -> Shapes:
    """Out[i]: X[i] broadcast to the shape of all X together (Paddle's BroadcastTensorsInferMeta: dims
    aligned from the right, each axis equal across inputs or 1)."""
    shapes = ctx.shapes("X")
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(1, rank + 1):
        dims = {s[-k] for s in shapes if len(s) >= k} - {1}
        ctx.require(len(dims) <= 1, f"inputs {[list(s) for s in shapes]} do not broadcast (axis {rank - k})")
        out.append(dims.pop() if dims else 1)
    return {"Out": [tuple(out[::-1])] * len(shapes)}


@register_op("size", inputs=["Input"])
def _size(ctx: ShapeContext) -> Shapes:
    return {"Out": [()]}


@register_op("unbind", inputs=["X"], defaults={"axis": 0})
def _unbind(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    a = _axis(ctx, int(ctx.attrs["axis"]), len(x))
    n = len(ctx.op.outputs.get("Out") or [])
    ctx.require(n == x[a], f"{n} outputs for axis {a} of size {x[a]}")
    return {"Out": [x[:a] + x[a + 1:]] * n}


@register_op("pixel_unshuffle", inputs=["X"], defaults={"downscale_factor": 1, "data_format": "NCHW"})
def _pixel_unshuffle(ctx: ShapeContext) -> Shapes:
    n, c, h, w, nhwc = _nchw(ctx)
    r = int(ctx.attrs["downscale_factor"])
    ctx.require(r > 0 and h % r == 0 and w % r == 0, f"H ({h}) and W ({w}) must be divisible by {r}")
    return _pack(n, c * r * r, h // r, w // r, nhwc)


@register_op("gather_nd", inputs=["X", "Index"])
def _gather_nd(ctx: ShapeContext) -> Shapes:
    x, idx = ctx.shape("X"), ctx.shape("Index")
    ctx.require(len(idx) >= 1 and idx[-1] <= len(x), f"Index {list(idx)}: last dim must be <= rank of X {list(x)}")
    return {"Out": [idx[:-1] + x[idx[-1]:]]}


@register_op("scatter", inputs=["X", "Ids", "Updates"], defaults={"overwrite": True})
def _scatter(ctx: ShapeContext) -> Shapes:
    x, ids, up = ctx.shape("X"), ctx.shape("Ids"), ctx.shape("Updates")
    n = ids[0] if ids else 1
    ctx.require(len(up) == len(x) and up[0] == n and up[1:] == x[1:],
                f"Updates {list(up)} must be [len(Ids) = {n}, *X.shape[1:]] for X {list(x)}")
    return {"Out": [x]}


@register_op("take_along_axis", inputs=["Input", "Index"], outputs=["Result"], defaults={"Axis": 0})
def _take_along_axis(ctx: ShapeContext) -> Shapes:
    x, idx = ctx.shape("Input"), ctx.shape("Index")
    ctx.require(len(x) == len(idx), f"Index {list(idx)} must have the rank of Input {list(x)}")
    _axis(ctx, int(ctx.attrs["Axis"]), len(x))
    return {"Result": [idx]}


@register_op("repeat_interleave", inputs=["X"], optional_inputs=["RepeatsTensor"], defaults={"Repeats": 1, "dim": 0},
             value_dependent=True)
def _repeat_interleave(ctx: ShapeContext) -> Shapes:
    x = list(ctx.shape("X"))
    dim = _axis(ctx, int(ctx.attrs["dim"]), len(x))
    if ctx.has("RepeatsTensor"):
        reps = ints(ctx.value("RepeatsTensor"))
        ctx.require(len(reps) in (1, x[dim]), f"RepeatsTensor has {len(reps)} values for a dim of {x[dim]}")
        x[dim] = sum(reps) if len(reps) == x[dim] else x[dim] * reps[0]
    else:
        x[dim] *= int(ctx.attrs["Repeats"])
    return {"Out": [tuple(x)]}
