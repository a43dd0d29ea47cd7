"""Convolution, pooling, normalisation and interpolation ops: attributes, geometry, shape inference.
(conv3d / pool3d: pdlite.operators.nn3d.)

The geometry helpers (`conv2d_geometry`, `conv2d_transpose_geometry`, `pool2d_geometry`,
`interp_geometry`) implement Paddle's rules once; the shape functions below and the
kernels on every target call them rather than re-reading attributes.

Paddle rules kept here:
- `paddings` has 2 values [ph, pw] (symmetric) or 4 values [top, bottom, left, right].
- `padding_algorithm` "SAME": out = ceil(in / stride), pad_sum = max((out - 1) * stride + k - in, 0),
  top/left = pad_sum // 2 and the rest at the bottom/right; for convolutions SAME also resets the
  dilations to 1 (the kernel extent used for the pads is the undilated k). "VALID": all pads 0.
- data_format "NHWC" is channel-last; "NCHW" and "AnyLayout" are channel-first.
- pool2d: global_pooling takes the whole spatial extent as kernel; global_pooling or adaptive
  zero the paddings; ceil_mode adds (stride - 1) before the division (no "last window must start
  inside the input" rule); adaptive output size is `ksize`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdlite.operators.geometry import (
    Fail,
    checked_conv_out_sizes,
    conv_channels,
    conv_transpose_out_size,
    conv_window,
    pool_window,
    raiser,
)
from pdlite.operators.registry import Shape, ShapeContext, register_op

_raiser = raiser


def is_channel_last(fmt: str) -> bool:
    """True for NHWC/NDHWC/NWC layouts ("AnyLayout" and "NCHW" are channel-first)."""
    return str(fmt) in ("NHWC", "NDHWC", "NWC")


def split_nchw(shape: Sequence[int], channel_last: bool) -> tuple[int, int, int, int]:
    """(N, C, H, W) of a 4-D shape in either layout."""
    if channel_last:
        n, h, w, c = shape
    else:
        n, c, h, w = shape
    return int(n), int(c), int(h), int(w)


def join_nchw(n: int, c: int, h: int, w: int, channel_last: bool) -> Shape:
    return (n, h, w, c) if channel_last else (n, c, h, w)


@dataclass(frozen=True)
class ConvGeometry:
    """Everything a 2-D (transposed) convolution kernel needs, layout-independent (NCHW terms)."""

    n: int
    c: int
    h: int
    w: int
    oc: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pads: tuple[int, int, int, int]  # top, bottom, left, right
    groups: int
    channel_last: bool

    @property
    def out_shape(self) -> Shape:
        return join_nchw(self.n, self.oc, self.oh, self.ow, self.channel_last)


def _conv_common(
    attrs: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], fail: Fail
) -> tuple[int, int, int, int, int, int, int, int, list[int], int, int, int, bool]:
    if len(x_shape) != 4:
        fail(f"input must be 4-D, got shape {tuple(x_shape)}")
    if len(w_shape) != 4:
        fail(f"filter must be 4-D, got shape {tuple(w_shape)}")
    cl = is_channel_last(attrs["data_format"])
    n, c, h, w = split_nchw(x_shape, cl)
    kh, kw = int(w_shape[2]), int(w_shape[3])
    (sh, sw), (dh, dw), pads, groups = conv_window(attrs, (h, w), (kh, kw), fail)
    return n, c, h, w, kh, kw, sh, sw, pads, dh, dw, groups, cl


def conv2d_geometry(
    attrs: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], fail: Fail | None = None
) -> ConvGeometry:
    """Geometry of conv2d/depthwise_conv2d; filter is [Cout, Cin/groups, kh, kw]."""
    fail = fail or _raiser("conv2d")
    n, c, h, w, kh, kw, sh, sw, pads, dh, dw, groups, cl = _conv_common(attrs, x_shape, w_shape, fail)
    oc = conv_channels(c, w_shape, groups, fail)
    out = checked_conv_out_sizes((h, w), (kh, kw), (dh, dw), pads, (sh, sw), fail)
    return ConvGeometry(n, c, h, w, oc, out[0], out[1], kh, kw, sh, sw, dh, dw, tuple(pads), groups, cl)


def conv2d_transpose_geometry(
    attrs: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], fail: Fail | None = None
) -> ConvGeometry:
    """Geometry of conv2d_transpose; filter is [Cin, Cout/groups, kh, kw].

    out = (in - 1) * stride - pad_before - pad_after + dilation * (k - 1) + 1, then `output_size`
    (which must lie in [out, out + stride)) or `output_padding` (< max(stride, dilation)) if given.
    """
    fail = fail or _raiser("conv2d_transpose")
    n, c, h, w, kh, kw, sh, sw, pads, dh, dw, groups, cl = _conv_common(attrs, x_shape, w_shape, fail)
    if int(w_shape[0]) != c:
        fail(f"input has {c} channels but the filter {tuple(w_shape)} expects {int(w_shape[0])}")
    if c % groups:
        fail(f"input channels {c} are not divisible by groups={groups}")
    oc = int(w_shape[1]) * groups
    output_size = [int(v) for v in attrs.get("output_size") or []]
    output_padding = [int(v) for v in attrs.get("output_padding") or []]
    if output_size and len(output_size) != 2:
        fail(f"output_size must have 2 values, got {output_size}")
    if output_padding and len(output_padding) != 2:
        fail(f"output_padding must have 2 values, got {output_padding}")
    out = []
    dims = ((h, kh, dh, pads[0], pads[1], sh), (w, kw, dw, pads[2], pads[3], sw))
    for i, (size, k, d, p0, p1, s) in enumerate(dims):
        o = conv_transpose_out_size(size, k, d, p0, p1, s)
        if output_size:
            if not o <= output_size[i] < o + s:
                fail(f"output_size[{i}]={output_size[i]} must be in [{o}, {o + s}) for input {tuple(x_shape)}")
            o = output_size[i]
        elif output_padding:
            if not 0 <= output_padding[i] < max(s, d):
                fail(f"output_padding[{i}]={output_padding[i]} must be in [0, max(stride, dilation))")
            o += output_padding[i]
        if o <= 0:
            fail(f"output size {o} <= 0 for input shape {tuple(x_shape)}")
        out.append(o)
    return ConvGeometry(n, c, h, w, oc, out[0], out[1], kh, kw, sh, sw, dh, dw, tuple(pads), groups, cl)


@dataclass(frozen=True)
class PoolGeometry:
    """pool2d after Paddle's attribute rules (NCHW terms)."""

    n: int
    c: int
    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    pads: tuple[int, int, int, int]
    pooling_type: str
    adaptive: bool
    exclusive: bool
    channel_last: bool

    @property
    def out_shape(self) -> Shape:
        return join_nchw(self.n, self.c, self.oh, self.ow, self.channel_last)


def pool2d_geometry(attrs: dict[str, Any], x_shape: Sequence[int], fail: Fail | None = None) -> PoolGeometry:
    """Geometry of pool2d (Paddle's UpdateKernelSize/UpdatePadding/PoolOutputSize)."""
    fail = fail or _raiser("pool2d")
    if len(x_shape) != 4:
        fail(f"input must be 4-D, got shape {tuple(x_shape)}")
    cl = is_channel_last(attrs["data_format"])
    n, c, h, w = split_nchw(x_shape, cl)
    (kh, kw), (sh, sw), pads, (oh, ow) = pool_window(attrs, (h, w), fail)
    ptype, adaptive = str(attrs["pooling_type"]), bool(attrs["adaptive"])
    return PoolGeometry(
        n, c, h, w, oh, ow, kh, kw, sh, sw, tuple(pads), ptype, adaptive,
        bool(attrs["exclusive"]), cl,
    )


INTERP_SIZE_ATTRS = ("out_d", "out_h", "out_w")


@dataclass(frozen=True)
class InterpGeometry:
    """Output size and the per-axis scale that Paddle's interp kernels use for the source ratio.

    `out` and `scales` have one entry per spatial axis: (W,), (H, W) or (D, H, W).
    """

    out: tuple[int, ...]
    scales: tuple[float, ...]  # > 0 when a scale (attribute or Scale input) applies; kernels then use 1/scale

    @property
    def out_h(self) -> int:
        return self.out[-2]

    @property
    def out_w(self) -> int:
        return self.out[-1]

    @property
    def scale_h(self) -> float:
        return self.scales[-2]

    @property
    def scale_w(self) -> float:
        return self.scales[-1]


def interp_geometry(
    op_type: str,
    attrs: dict[str, Any],
    in_sizes: Sequence[int],
    size_tensor: Sequence[Any] | None = None,
    out_size: Any | None = None,
    scale_tensor: Any | None = None,
    fail: Fail | None = None,
) -> InterpGeometry:
    """Output size of the *_interp[_v2] ops over 1-3 spatial axes (`in_sizes`: W, H W or D H W),
    following Paddle's kernel priority.

    SizeTensor (list of 1-element int tensors, one per axis) wins; otherwise the Scale input (else
    the `scale` attribute; one value applies to every axis) gives int(in * scale) and OutSize, when
    present, overrides the size (the kernels still use 1/scale for the source ratio in that case);
    else the out_d/out_h/out_w attributes.
    """
    fail = fail or _raiser(op_type)
    nd = len(in_sizes)
    if not 1 <= nd <= 3:
        fail(f"1 to 3 spatial axes expected, got {nd}")
    names = INTERP_SIZE_ATTRS[3 - nd:]
    out = [int(attrs.get(k, -1)) for k in names]
    scales = [-1.0] * nd
    if size_tensor:
        if len(size_tensor) != nd:
            fail(f"SizeTensor must hold {nd} tensors ({', '.join(names)}), got {len(size_tensor)}")
        out = [int(np.asarray(t).reshape(-1)[0]) for t in size_tensor]
    else:
        if scale_tensor is not None:
            s = [float(v) for v in np.asarray(scale_tensor, dtype=np.float32).reshape(-1)]
            if len(s) != 1 and len(s) < nd:
                fail(f"Scale input must hold 1 or {nd} values, got {s}")
            scales = s[:nd] if len(s) > 1 else s * nd
            if any(v <= 0 for v in scales):
                fail(f"Scale input must be > 0, got {s}")
        else:
            sc = attrs.get("scale")
            vals = [float(v) for v in sc] if isinstance(sc, (list, tuple)) else [] if sc is None else [float(sc)]
            if len(vals) == 1:
                scales = vals * nd
            elif len(vals) >= nd:
                scales = vals[:nd]
            elif vals:
                fail(f"scale must hold 1 or {nd} values, got {vals}")
        if all(v > 0 for v in scales):
            # Paddle 3.x: static_cast<int>(in * scale) with the scale as a double (a legacy program's
            # float32 attribute widened, so int(50 * 1.02f) = 50, not the float32 product's 51)
            out = [int(i * v) for i, v in zip(in_sizes, scales)]
        if out_size is not None:
            o = np.asarray(out_size).reshape(-1)
            if o.size != nd:
                fail(f"OutSize must hold {nd} values, got {o.tolist()}")
            out = [int(v) for v in o]
    if any(v <= 0 for v in out):
        fail(f"output size {tuple(out)} must be positive (input {'x'.join(str(int(v)) for v in in_sizes)})")
    return InterpGeometry(tuple(out), tuple(scales))


# ---------------------------------------------------------------------------------------------
# Op registrations
# ---------------------------------------------------------------------------------------------

_CONV_DEFAULTS = {
    "strides": [1, 1],
    "paddings": [0, 0],
    "padding_algorithm": "EXPLICIT",
    "groups": 1,
    "dilations": [1, 1],
    "data_format": "NCHW",
}


def _bias_check(ctx: ShapeContext, oc: int) -> None:
    if ctx.has("Bias"):
        b = ctx.shape("Bias")
        ctx.require(int(np.prod(b)) == oc, f"Bias shape {b} does not hold {oc} output channels")


@register_op(
    "conv2d",
    inputs=["Input", "Filter"],
    outputs=["Output"],
    optional_inputs=["Bias", "ResidualData"],
    defaults=_CONV_DEFAULTS,
    aliases=["depthwise_conv2d"],
)
def _conv2d_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """2-D convolution (Bias and ResidualData, when present, are added to the output)."""
    g = conv2d_geometry(ctx.attrs, ctx.shape("Input"), ctx.shape("Filter"), ctx.fail)
    _bias_check(ctx, g.oc)
    if ctx.has("ResidualData"):
        ctx.require(ctx.shape("ResidualData") == g.out_shape, "ResidualData must have the output's shape")
    return {"Output": [g.out_shape]}


@register_op(
    "conv2d_transpose",
    inputs=["Input", "Filter"],
    outputs=["Output"],
    optional_inputs=["Bias"],
    defaults={**_CONV_DEFAULTS, "output_padding": [], "output_size": []},
    aliases=["depthwise_conv2d_transpose"],
)
def _conv2d_transpose_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """2-D transposed convolution (gradient of conv2d w.r.t. its input)."""
    g = conv2d_transpose_geometry(ctx.attrs, ctx.shape("Input"), ctx.shape("Filter"), ctx.fail)
    _bias_check(ctx, g.oc)
    return {"Output": [g.out_shape]}


@register_op(
    "pool2d",
    inputs=["X"],
    outputs=["Out"],
    defaults={
        "global_pooling": False,
        "strides": [1, 1],
        "paddings": [0, 0],
        "exclusive": True,
        "adaptive": False,
        "ceil_mode": False,
        "data_format": "NCHW",
        "padding_algorithm": "EXPLICIT",
    },
)
def _pool2d_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """2-D max/avg pooling (global, adaptive, ceil_mode, exclusive)."""
    return {"Out": [pool2d_geometry(ctx.attrs, ctx.shape("X"), ctx.fail).out_shape]}


@register_op(
    "batch_norm",
    inputs=["X", "Scale", "Bias", "Mean", "Variance"],
    outputs=["Y"],
    optional_inputs=["MomentumTensor"],
    optional_outputs=["MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"],
    defaults={
        "epsilon": 1e-5,
        "momentum": 0.9,
        "data_layout": "NCHW",
        "is_test": False,
        "use_global_stats": False,
        "trainable_statistics": False,
    },
)
def _batch_norm_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Batch normalisation over the channel axis (1, or the last for NHWC)."""
    x = ctx.shape("X")
    ctx.require(len(x) >= 2, f"X must have rank >= 2, got shape {x}")
    c = x[-1] if is_channel_last(ctx.attrs.get("data_layout", "NCHW")) else x[1]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        s = ctx.shape(slot)
        ctx.require(int(np.prod(s)) == c, f"{slot} shape {s} does not hold the {c} channels of X {x}")
    res: dict[str, list[Shape]] = {"Y": [x]}
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        if ctx.op.outputs.get(slot):
            res[slot] = [(c,)]
    return res


@register_op(
    "layer_norm",
    inputs=["X"],
    outputs=["Y"],
    optional_inputs=["Scale", "Bias"],
    optional_outputs=["Mean", "Variance"],
    defaults={"epsilon": 1e-5, "begin_norm_axis": 1},
)
def _layer_norm_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Layer normalisation over the axes from begin_norm_axis on; Mean/Variance have shape X[:axis]."""
    x = ctx.shape("X")
    axis = int(ctx.attrs["begin_norm_axis"])
    ctx.require(0 < axis < len(x) or (axis == 0 and len(x) >= 1), f"begin_norm_axis {axis} invalid for X {x}")
    right = int(np.prod(x[axis:]))
    for slot in ("Scale", "Bias"):
        if ctx.has(slot):
            s = ctx.shape(slot)
            ctx.require(int(np.prod(s)) == right, f"{slot} shape {s} must hold {right} values for X {x}")
    res: dict[str, list[Shape]] = {"Y": [x]}
    for slot in ("Mean", "Variance"):
        if ctx.op.outputs.get(slot):
            res[slot] = [tuple(x[:axis])]
    return res


# input ranks each interp method accepts (Paddle dispatches on the rank: 3-D linear, 4-D, 5-D)
INTERP_RANKS = {"linear": (3,), "nearest": (4, 5), "bilinear": (4,), "bicubic": (4,), "trilinear": (5,)}


def interp_geometry_of(ctx: ShapeContext) -> tuple[InterpGeometry, int, int]:
    """Interp geometry from a ShapeContext; also returns (N, C)."""
    x = ctx.shape("X")
    method = ctx.op.type.split("_interp")[0]
    ranks = INTERP_RANKS.get(method, (4,))
    ctx.require(len(x) in ranks, f"{method} interpolation needs a {' or '.join(map(str, ranks))}-D input, "
                                 f"got shape {x}")
    cl = is_channel_last(ctx.attrs.get("data_layout", "NCHW"))
    n, c, spatial = (x[0], x[-1], x[1:-1]) if cl else (x[0], x[1], x[2:])
    size_tensor = [ctx.value("SizeTensor", i) for i in range(ctx.count("SizeTensor"))]
    out_size = ctx.value("OutSize") if ctx.has("OutSize") else None
    scale = ctx.value("Scale") if ctx.has("Scale") else None
    g = interp_geometry(ctx.op.type, ctx.attrs, spatial, size_tensor, out_size, scale, ctx.fail)
    return g, int(n), int(c)


def _interp_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Resize of the spatial axes (linear: W; nearest, bilinear, bicubic: H, W; trilinear, nearest: D, H, W)."""
    g, n, c = interp_geometry_of(ctx)
    cl = is_channel_last(ctx.attrs.get("data_layout", "NCHW"))
    return {"Out": [(n, *g.out, c) if cl else (n, c, *g.out)]}


_INTERP_COMMON = {
    "data_layout": "NCHW",
    "out_d": -1,
    "out_h": -1,
    "out_w": -1,
    "align_corners": True,
    "align_mode": 1,
}
for _method in INTERP_RANKS:
    register_op(
        f"{_method}_interp_v2",
        inputs=["X"],
        outputs=["Out"],
        optional_inputs=["OutSize", "SizeTensor", "Scale"],
        defaults={**_INTERP_COMMON, "scale": [], "interp_method": _method},
        value_dependent=True,
    )(_interp_shape)
# v1 ops (a float `scale`): only nearest and bilinear; Paddle 3.x no longer has linear_interp,
# bicubic_interp or trilinear_interp v1, whose older kernels used in / out ratios
for _method in ("nearest", "bilinear"):
    register_op(
        f"{_method}_interp",
        inputs=["X"],
        outputs=["Out"],
        optional_inputs=["OutSize", "SizeTensor", "Scale"],
        defaults={**_INTERP_COMMON, "scale": 0.0, "interp_method": _method},
        value_dependent=True,
    )(_interp_shape)
