"""3-D convolution and pooling ops (conv3d, pool3d): attributes, geometry, shape inference.

Paddle's rules, as for the 2-D ops in pdlite.operators.nn but over the axes D, H, W:
- `paddings` has 3 values (symmetric) or 6: [front, back, top, bottom, left, right].
- `padding_algorithm` "SAME": out = ceil(in / stride), pad_sum = max((out - 1) * stride + k - in, 0),
  the smaller half before; for conv3d SAME also resets the dilations to 1. "VALID": all pads 0.
- data_format "NDHWC" is channel-last; "NCDHW" and "AnyLayout" are channel-first.
- conv3d: Filter [Cout, Cin / groups, kd, kh, kw] in either layout;
  out = (in + pad_before + pad_after - (dilation * (k - 1) + 1)) // stride + 1.
- pool3d: global_pooling takes the whole input as kernel; global_pooling or adaptive zero the
  paddings; adaptive output size is `ksize`; otherwise out = (in - k + pads [+ stride - 1 with
  ceil_mode]) / stride + 1 (C++ truncating division).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdlite.operators.geometry import Fail, checked_conv_out_sizes, conv_channels, conv_window, pool_window, spatial
from pdlite.operators.geometry import raiser as _raiser
from pdlite.operators.nn import is_channel_last
from pdlite.operators.registry import Shape, ShapeContext, register_op

Int3 = tuple[int, int, int]


def split_ncdhw(shape: Sequence[int], channel_last: bool) -> tuple[int, int, Int3]:
    """(N, C, (D, H, W)) of a 5-D shape in either layout."""
    if channel_last:
        n, d, h, w, c = shape
    else:
        n, c, d, h, w = shape
    return int(n), int(c), (int(d), int(h), int(w))


def join_ncdhw(n: int, c: int, dhw: Sequence[int], channel_last: bool) -> Shape:
    return (n, *dhw, c) if channel_last else (n, c, *dhw)


def _triple(v: Any, name: str, fail: Fail) -> Int3:
    a, b, c = spatial(v, 3, name, fail)
    return a, b, c


@dataclass(frozen=True)
class Conv3dGeometry:
    """Everything a conv3d kernel needs, layout-independent (NCDHW terms)."""

    n: int
    c: int
    in_size: Int3  # D, H, W
    oc: int
    out_size: Int3
    kernel: Int3
    strides: Int3
    dilations: Int3
    pads: tuple[int, ...]  # front, back, top, bottom, left, right
    groups: int
    channel_last: bool

    @property
    def out_shape(self) -> Shape:
        return join_ncdhw(self.n, self.oc, self.out_size, self.channel_last)


def conv3d_geometry(
    attrs: dict[str, Any], x_shape: Sequence[int], w_shape: Sequence[int], fail: Fail | None = None
) -> Conv3dGeometry:
    """Geometry of conv3d; filter is [Cout, Cin/groups, kd, kh, kw]."""
    fail = fail or _raiser("conv3d")
    if len(x_shape) != 5:
        fail(f"input must be 5-D, got shape {tuple(x_shape)}")
    if len(w_shape) != 5:
        fail(f"filter must be 5-D, got shape {tuple(w_shape)}")
    cl = is_channel_last(attrs["data_format"])
    n, c, dhw = split_ncdhw(x_shape, cl)
    k = (int(w_shape[2]), int(w_shape[3]), int(w_shape[4]))
    ss, dd, p, groups = conv_window(attrs, dhw, k, fail)
    strides, dil, pads = (ss[0], ss[1], ss[2]), (dd[0], dd[1], dd[2]), tuple(p)
    oc = conv_channels(c, w_shape, groups, fail)
    out = checked_conv_out_sizes(dhw, k, dil, pads, strides, fail)
    return Conv3dGeometry(n, c, dhw, oc, (out[0], out[1], out[2]), k, strides, dil, pads, groups, cl)


@dataclass(frozen=True)
class Pool3dGeometry:
    """pool3d after Paddle's attribute rules (NCDHW terms)."""

    n: int
    c: int
    in_size: Int3
    out_size: Int3
    kernel: Int3
    strides: Int3
    pads: tuple[int, ...]  # front, back, top, bottom, left, right (only the "before" pads move windows)
    pooling_type: str
    global_pooling: bool
    adaptive: bool
    exclusive: bool
    channel_last: bool

    @property
    def out_shape(self) -> Shape:
        return join_ncdhw(self.n, self.c, self.out_size, self.channel_last)


def pool3d_geometry(attrs: dict[str, Any], x_shape: Sequence[int], fail: Fail | None = None) -> Pool3dGeometry:
    """Geometry of pool3d (Paddle's UpdateKernelSize / UpdatePadding / PoolOutputSize)."""
    fail = fail or _raiser("pool3d")
    if len(x_shape) != 5:
        fail(f"input must be 5-D, got shape {tuple(x_shape)}")
    cl = is_channel_last(attrs["data_format"])
    n, c, dhw = split_ncdhw(x_shape, cl)
    kk, ss, p, oo = pool_window(attrs, dhw, fail)
    k, strides, out = (kk[0], kk[1], kk[2]), (ss[0], ss[1], ss[2]), (oo[0], oo[1], oo[2])
    pads = tuple(p)
    ptype, glob, adaptive = str(attrs["pooling_type"]), bool(attrs["global_pooling"]), bool(attrs["adaptive"])
    return Pool3dGeometry(n, c, dhw, out, k, strides, pads, ptype, glob, adaptive,
                          bool(attrs["exclusive"]), cl)


# ---------------------------------------------------------------------------------------------
# Op registrations
# ---------------------------------------------------------------------------------------------


@register_op(
    "conv3d",
    inputs=["Input", "Filter"],
    outputs=["Output"],
    optional_inputs=["Bias"],
    defaults={
        "strides": [1, 1, 1],
        "paddings": [0, 0, 0],
        "padding_algorithm": "EXPLICIT",
        "groups": 1,
        "dilations": [1, 1, 1],
        "data_format": "NCDHW",
    },
)
def _conv3d_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """3-D convolution (Bias, when present, is added per output channel)."""
    g = conv3d_geometry(ctx.attrs, ctx.shape("Input"), ctx.shape("Filter"), ctx.fail)
    if ctx.has("Bias"):
        b = ctx.shape("Bias")
        ctx.require(int(np.prod(b)) == g.oc, f"Bias shape {b} does not hold {g.oc} output channels")
    return {"Output": [g.out_shape]}


@register_op(
    "pool3d",
    inputs=["X"],
    outputs=["Out"],
    defaults={
        "global_pooling": False,
        "strides": [1, 1, 1],
        "paddings": [0, 0, 0],
        "exclusive": True,
        "adaptive": False,
        "ceil_mode": False,
        "data_format": "NCDHW",
        "padding_algorithm": "EXPLICIT",
    },
)
def _pool3d_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """3-D max/avg pooling (global, adaptive, ceil_mode, exclusive)."""
    return {"Out": [pool3d_geometry(ctx.attrs, ctx.shape("X"), ctx.fail).out_shape]}
