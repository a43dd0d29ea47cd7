"""Host kernels of affine_grid, affine_channel, temporal_shift and lrn (Paddle's CPU semantics).

affine_grid: base coordinates linspace(-1, 1, S) (scaled by (S - 1) / S without align_corners),
(x, y[, z], 1) @ Theta^T. temporal_shift: channels [0, C * r) read segment t - 1, [C * r, 2C * r)
segment t + 1 (0 outside), the rest segment t. lrn: mid = k + alpha * sum of x^2 over channels
[c - (n - 1) / 2, c - (n - 1) / 2 + n), Out = x * mid^-beta.
"""
from __future__ import annotations

import numpy as np

from pdlite.kernels.host.extra import ANY, Ins, Outs, present
from pdlite.kernels.registry import Kernel, register_kernel


def _base(size: int, align: bool, dtype: np.dtype) -> np.ndarray:
    v = np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(size)
    if not align:
        v = v * (size - 1) / size
    return v.astype(dtype)


@register_kernel("affine_grid", inputs={"OutputShape": ANY})
class AffineGrid(Kernel):
    def run(self, ins: Ins) -> Outs:
        theta = ins["Theta"][0]
        shape = ([int(v) for v in np.asarray(ins["OutputShape"][0]).reshape(-1)] if ins.get("OutputShape")
                 else [int(v) for v in self.attrs["output_shape"]])
        align = bool(self.attrs["align_corners"])
        spatial = shape[2:]
        axes = [_base(s, align, theta.dtype) for s in spatial]  # D?, H, W
        mesh = np.meshgrid(*axes, indexing="ij")
        coords = [*mesh[::-1], np.ones_like(mesh[0])]  # x, y[, z], 1
        base = np.stack(coords, axis=-1)  # [*S, nd + 1]
        out = np.einsum("...k,njk->n...j", base, theta)
        return {"Output": [np.asarray(out.astype(theta.dtype), order="C")]}


@register_kernel("affine_channel")
class AffineChannel(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, scale, bias = ins["X"][0], ins["Scale"][0], ins["Bias"][0]
        shape = [1] * x.ndim
        axis = x.ndim - 1 if self.attrs["data_layout"] == "NHWC" else 1
        shape[axis] = -1
        return {"Out": [x * scale.reshape(shape) + bias.reshape(shape)]}


@register_kernel("temporal_shift")
class TemporalShift(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        t = int(self.attrs["seg_num"])
        nhwc = self.attrs["data_format"] == "NHWC"
        xc = np.moveaxis(x, 3, 1) if nhwc else x
        nt, c = xc.shape[:2]
        ratio = np.float32(self.attrs["shift_ratio"])
        c1, c2 = int(np.float32(c) * ratio), int(np.float32(c) * 2 * ratio)
        v = xc.reshape(nt // t, t, *xc.shape[1:])
        out = np.zeros_like(v)
        out[:, 1:, :c1] = v[:, :-1, :c1]
        out[:, :-1, c1:c2] = v[:, 1:, c1:c2]
        out[:, :, c2:] = v[:, :, c2:]
        out = out.reshape(xc.shape)
        return {"Out": [np.asarray(np.moveaxis(out, 1, 3), order="C") if nhwc else out]}


@register_kernel("lrn")
class Lrn(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = self.attrs
        nhwc = a["data_format"] == "NHWC"
        xc = np.moveaxis(x, 3, 1) if nhwc else x
        n, c = int(a["n"]), xc.shape[1]
        pre = (n - 1) // 2
        sq = xc * xc
        padded = np.zeros((xc.shape[0], c + n) + xc.shape[2:], x.dtype)
        padded[:, pre:pre + c] = sq
        window = sum(padded[:, m:m + c] for m in range(n))
        mid = x.dtype.type(a["k"]) + x.dtype.type(a["alpha"]) * window
        out = xc * np.power(mid, x.dtype.type(-a["beta"]))
        if nhwc:
            out, mid = np.moveaxis(out, 1, 3), np.moveaxis(mid, 1, 3)
        return present(self.op, {"Out": [np.asarray(out, order="C")], "MidOut": [np.asarray(mid, order="C")]})
