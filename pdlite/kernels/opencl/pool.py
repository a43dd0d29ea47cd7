"""OpenCL pool2d kernel with Paddle's window and divisor rules (see pdlite/kernels/host/pool.py).

One work item per output: its window [o*s - pad, o*s - pad + k) clipped to the input (max ignores
the padding, as -FLT_MAX would); an average divides the window sum by Paddle's divisor map (the host
kernel's `_divisor`: exclusive or not), uploaded once per geometry. Adaptive windows are
[floor(i*H/o), ceil((i+1)*H/o)) and average over their size (adaptive max pools use the ksize /
strides windows: Paddle's quirk, as on the host); global pooling is one window over the map. NHWC runs on the host (`supports`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.kernels.host.pool import _divisor as divisor
from pdlite.kernels.opencl.base import OpenCLKernel, add_source, opencl_kernel
from pdlite.operators.nn import is_channel_last, pool2d_geometry

add_source("pool", r"""
__kernel void pool2d(__global const T* x, __global T* y, __global const float* div, int NC, int H, int W,
                     int OH, int OW, int KH, int KW, int SH, int SW, int PT, int PL, int is_max, int adaptive) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, t = i / OW;
    int oh = t % OH, nc = t / OH;
    int h0, h1, w0, w1;
    if (adaptive) {
        h0 = (oh * H) / OH; h1 = ((oh + 1) * H + OH - 1) / OH;
        w0 = (ow * W) / OW; w1 = ((ow + 1) * W + OW - 1) / OW;
    } else {
        h0 = oh * SH - PT; w0 = ow * SW - PL;
        h1 = min(h0 + KH, H); w1 = min(w0 + KW, W);
        h0 = max(h0, 0); w0 = max(w0, 0);
    }
    int base = nc * H * W;
    float acc = is_max ? -FLT_MAX : 0.0f;
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) {
            float v = LD(x, base + h * W + w);
            acc = is_max ? fmax(acc, v) : acc + v;
        }
    if (!is_max) acc /= adaptive ? (float)((h1 - h0) * (w1 - w0)) : div[oh * OW + ow];
    ST(y, i, acc);
}
""")


@opencl_kernel("pool2d")
class Pool2d(OpenCLKernel):
    """pool2d: max / avg, global, adaptive, ceil_mode, exclusive, SAME/VALID/EXPLICIT (NCHW)."""

    @classmethod
    def supports(cls, op: OpDesc) -> bool:
        return not is_channel_last(op.attrs["data_format"])

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        cache = self.__dict__.setdefault("_cache", {})
        if x.shape not in cache:
            g = pool2d_geometry(self.attrs, x.shape)
            is_max = g.pooling_type == "max"
            adaptive = g.adaptive and not is_max  # Paddle's adaptive max pools use the ksize/strides windows
            div = None if is_max or adaptive else divisor(g).astype(np.float32)
            cache[x.shape] = (g, adaptive, self.dev.upload(div if div is not None else np.ones(1, np.float32)))
        g, adaptive, div = cache[x.shape]
        y = self.empty((g.n, g.c, g.oh, g.ow))
        if y.size:
            self.launch("pool2d", y.size, x, y, div, g.n * g.c, g.h, g.w, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw,
                        g.pads[0], g.pads[2], g.pooling_type == "max", adaptive, local=(64,))
        return {"Out": [y]}
