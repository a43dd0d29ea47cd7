"""Host conv3d kernel (NumPy, float32): im2col over a strided window view, then a grouped matmul.

The padded input's windows come from `sliding_window_view` (strides and dilations as slices of the
view, no copy); they are copied into columns [N, groups, Cin/g * kd*kh*kw, od*oh*ow] one slab of
output depths at a time (at most COLS_FLOATS floats) and reduced by one batched matmul with the
filter [groups, Cout/g, Cin/g * kd*kh*kw]. 1x1x1 unpadded kernels skip the columns. NDHWC inputs
are transposed to NCDHW and back.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pdlite.kernels.host.layout import from_channels_first, to_channels_first
from pdlite.kernels.registry import Kernel, register_kernel
from pdlite.operators.nn3d import Conv3dGeometry, conv3d_geometry

# Floats in one column slab (128 MiB for float32).
COLS_FLOATS = 1 << 25


def conv3d_ncdhw(x: np.ndarray, w: np.ndarray, g: Conv3dGeometry) -> np.ndarray:
    """conv3d of NCDHW x with filter matrix w [groups, Cout/g, Cin/g * kd*kh*kw] -> [N, Cout, od, oh, ow]."""
    n, c = x.shape[:2]
    od, oh, ow = g.out_size
    (kd, kh, kw), (sd, sh, sw), (dd, dh, dw) = g.kernel, g.strides, g.dilations
    p = g.pads
    if (kd, kh, kw) == (1, 1, 1) and not any(p):
        cols = x[:, :, : (od - 1) * sd + 1 : sd, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
        cols = np.asarray(cols, order="C").reshape(n, g.groups, c // g.groups, od * oh * ow)
        return np.matmul(w, cols).reshape(n, g.oc, od, oh, ow)
    # pad (or crop) so that every window lies inside the buffer
    ext = [(k - 1) * d + 1 for k, d in zip(g.kernel, g.dilations)]
    need = [(o - 1) * s + e for o, s, e in zip(g.out_size, g.strides, ext)]
    xp = x
    if any(p):
        xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[1]), (p[2], p[3]), (p[4], p[5])])
    xp = xp[:, :, : need[0], : need[1], : need[2]]
    view = sliding_window_view(xp, ext, axis=(2, 3, 4))[:, :, ::sd, ::sh, ::sw, ::dd, ::dh, ::dw]
    # view: [N, C, od, oh, ow, kd, kh, kw]
    out = np.empty((n, g.oc, od, oh, ow), dtype=x.dtype)
    per_depth = n * c * kd * kh * kw * oh * ow
    step = max(1, min(od, COLS_FLOATS // max(1, per_depth)))
    for d0 in range(0, od, step):
        d1 = min(od, d0 + step)
        cols = np.asarray(view[:, :, d0:d1].transpose(0, 1, 5, 6, 7, 2, 3, 4), order="C")
        cols = cols.reshape(n, g.groups, (c // g.groups) * kd * kh * kw, (d1 - d0) * oh * ow)
        out[:, :, d0:d1] = np.matmul(w, cols).reshape(n, g.oc, d1 - d0, oh, ow)
    return out


@register_kernel("conv3d")
class Conv3d(Kernel):
    """conv3d: Output = conv(Input, Filter) (+ Bias), NCDHW or NDHWC, groups, dilations, SAME/VALID."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._w_src: Any = None
        self._w: np.ndarray | None = None
        self._geo: dict[tuple[tuple[int, ...], tuple[int, ...]], Conv3dGeometry] = {}

    def prepare(self, params: Mapping[str, Any]) -> None:
        w = params.get(self.op.input("Filter"))
        if w is not None:
            self._weights(w)

    def _weights(self, w_src: np.ndarray) -> np.ndarray:
        """[groups, Cout/g, Cin/g * kd*kh*kw], cached per Filter array."""
        if w_src is not self._w_src or self._w is None:
            w = np.asarray(w_src, dtype=np.float32)
            groups = int(self.attrs["groups"] or 1)
            self._w = np.asarray(w.reshape(groups, w.shape[0] // groups, -1), order="C")
            self._w_src = w_src
        return self._w

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w_src = ins["Input"][0], ins["Filter"][0]
        key = (tuple(x.shape), tuple(w_src.shape))
        g = self._geo.get(key)
        if g is None:
            g = self._geo[key] = conv3d_geometry(self.attrs, *key)
        w = self._weights(w_src)
        x = to_channels_first(x, g.channel_last)
        if x.dtype != w.dtype:
            x = x.astype(w.dtype)
        out = conv3d_ncdhw(x, w, g)
        if ins.get("Bias"):
            out += np.asarray(ins["Bias"][0], dtype=out.dtype).reshape(1, -1, 1, 1, 1)
        return {"Output": [from_channels_first(out, g.channel_last)]}
