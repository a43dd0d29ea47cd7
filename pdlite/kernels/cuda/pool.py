"""CUDA pool2d kernel with Paddle's window and divisor rules (see pdlite/kernels/host/pool.py).

Global pooling and adaptive average pooling reduce with mean/amax or F.adaptive_avg_pool2d
(torch's adaptive windows [floor(i*H/o), ceil((i+1)*H/o)) are Paddle's). Other windows: the
input is padded explicitly (max: the dtype's lowest value, -FLT_MAX in fp32; avg: 0) to exactly
cover the output that Paddle's geometry gives (ceil_mode included), then pooled without padding;
an average is the window sum divided by Paddle's divisor map (the host kernel's, exclusive or
not), cached per geometry.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from pdlite.kernels.cuda.base import CudaKernel, cuda_kernel, to_torch
from pdlite.kernels.cuda.conv import from_nchw, to_nchw
from pdlite.kernels.host.pool import _divisor as divisor
from pdlite.operators.nn import pool2d_geometry


@cuda_kernel("pool2d")
class Pool2d(CudaKernel):
    """pool2d: max / avg, global, adaptive, ceil_mode, exclusive, SAME/VALID/EXPLICIT, NCHW/NHWC."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        cache = self.__dict__.setdefault("_cache", {})
        shape = tuple(x.shape)
        if shape not in cache:
            cache[shape] = (pool2d_geometry(self.attrs, shape), None)
        g, div = cache[shape]
        is_max = g.pooling_type == "max"
        x = to_nchw(x, g.channel_last)
        glob = bool(self.attrs["global_pooling"])
        if (glob and not g.adaptive) or (g.adaptive and not is_max and (g.oh, g.ow) == (1, 1)):
            out = x.amax(dim=(2, 3), keepdim=True) if is_max else x.mean(dim=(2, 3), keepdim=True)
        elif g.adaptive and not is_max:
            out = F.adaptive_avg_pool2d(x, (g.oh, g.ow))
        else:
            top, left = g.pads[0], g.pads[2]
            bottom = max(0, (g.oh - 1) * g.sh + g.kh - (g.h + top))
            right = max(0, (g.ow - 1) * g.sw + g.kw - (g.w + left))
            if top or left or bottom or right:
                x = F.pad(x, (left, right, top, bottom), value=torch.finfo(x.dtype).min if is_max else 0.0)
            if is_max:
                out = F.max_pool2d(x, (g.kh, g.kw), (g.sh, g.sw))
            else:
                if div is None:
                    div = to_torch(divisor(g).astype(np.float32), x.device, x.dtype)
                    cache[shape] = (g, div)
                out = F.avg_pool2d(x, (g.kh, g.kw), (g.sh, g.sw), divisor_override=1) / div
            out = out[:, :, : g.oh, : g.ow]
        return {"Out": [from_nchw(out, g.channel_last)]}
