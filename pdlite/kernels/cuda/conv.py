"""CUDA conv2d / depthwise_conv2d / conv2d_transpose kernels (cuDNN through torch).

Geometry (paddings incl. SAME/VALID, asymmetric pads, output_size / output_padding) comes from
the op definition's helpers. Asymmetric pads are applied with F.pad before a pad-free conv; a
transposed conv whose pads or output size torch cannot express is computed in full and cropped
(zero-extended where the output reaches past the full result). NHWC is permuted to NCHW and back.
Filter and Bias are parameters, uploaded once in the kernel's precision.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from pdlite.kernels.cuda.base import WEIGHT, CudaKernel, cuda_kernel
from pdlite.operators.nn import ConvGeometry, conv2d_geometry, conv2d_transpose_geometry

_SLOTS = {"Filter": WEIGHT, "Bias": WEIGHT}


def to_nchw(x: torch.Tensor, channel_last: bool) -> torch.Tensor:
    return x.permute(0, 3, 1, 2) if channel_last else x


def from_nchw(y: torch.Tensor, channel_last: bool) -> torch.Tensor:
    return y.permute(0, 2, 3, 1).contiguous() if channel_last else y


class _ConvBase(CudaKernel):
    """Shared input handling: geometry per input shape, NHWC, Bias and ResidualData."""

    transpose = False

    def geometry(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvGeometry:
        cache = self.__dict__.setdefault("_geo", {})
        key = (x_shape, w_shape)
        g = cache.get(key)
        if g is None:
            fn = conv2d_transpose_geometry if self.transpose else conv2d_geometry
            g = cache[key] = fn(self.attrs, x_shape, w_shape)
        return g

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w = self.tensor(ins, "Input"), self.tensor(ins, "Filter")
        g = self.geometry(tuple(x.shape), tuple(w.shape))
        bias = self.tensor(ins, "Bias")
        if bias is not None:
            bias = bias.reshape(-1)
        y = self.compute(to_nchw(x, g.channel_last), w, bias, g)
        y = from_nchw(y, g.channel_last)
        res = self.tensor(ins, "ResidualData")
        if res is not None:
            y = y + res
        return {"Output": [y]}

    def compute(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, g: ConvGeometry) -> torch.Tensor:
        raise NotImplementedError


@cuda_kernel(["conv2d", "depthwise_conv2d"], inputs=_SLOTS)
class Conv2d(_ConvBase):
    """Output = conv(Input, Filter) (+ Bias) (+ ResidualData)."""

    def compute(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, g: ConvGeometry) -> torch.Tensor:
        top, bottom, left, right = g.pads
        if top == bottom and left == right:
            pad: tuple[int, int] = (top, left)
        else:
            x = F.pad(x, (left, right, top, bottom))
            pad = (0, 0)
        return F.conv2d(x, w, bias, (g.sh, g.sw), pad, (g.dh, g.dw), g.groups)


@cuda_kernel(["conv2d_transpose", "depthwise_conv2d_transpose"], inputs=_SLOTS)
class Conv2dTranspose(_ConvBase):
    """Output = conv_transpose(Input, Filter) (+ Bias), output size as Paddle's."""

    transpose = True

    def compute(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, g: ConvGeometry) -> torch.Tensor:
        top, bottom, left, right = g.pads
        s, d, k = (g.sh, g.sw), (g.dh, g.dw), (g.kh, g.kw)
        base = [(n - 1) * st - 2 * p + dl * (kk - 1) + 1 for n, st, p, dl, kk in zip((g.h, g.w), s, (top, left), d, k)]
        extra = [g.oh - base[0], g.ow - base[1]]
        if top == bottom and left == right and all(0 <= e < max(st, dl) for e, st, dl in zip(extra, s, d)):
            return F.conv_transpose2d(x, w, bias, s, (top, left), tuple(extra), g.groups, d)
        full = F.conv_transpose2d(x, w, None, s, 0, 0, g.groups, d)
        hf, wf = full.shape[2:]
        if top + g.oh > hf or left + g.ow > wf:
            full = F.pad(full, (0, max(0, left + g.ow - wf), 0, max(0, top + g.oh - hf)))
        y = full[:, :, top:top + g.oh, left:left + g.ow]
        if bias is not None:
            y = y + bias.reshape(1, -1, 1, 1)
        return y
