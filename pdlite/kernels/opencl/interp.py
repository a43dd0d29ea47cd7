"""OpenCL nearest / bilinear interpolation kernels (v1 and v2 ops) with Paddle's index arithmetic.

The source indices (and bilinear weights) are computed by the host kernel's functions
(`nearest_index`, `linear_weights`: Paddle's float32 ratios and rounding) once per geometry and
uploaded; the kernels gather (nearest) or blend the four neighbours (bilinear) per output. The
size inputs (OutSize, SizeTensor, Scale) are read on the host. NHWC runs on the host (`supports`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.program import OpDesc
from pdlite.kernels.host.interp import linear_weights, nearest_index, source_ratio
from pdlite.kernels.opencl.base import HOST_ANY, OpenCLKernel, add_source, opencl_kernel
from pdlite.operators.nn import InterpGeometry, interp_geometry, is_channel_last

_SIZE_INPUTS = {"OutSize": HOST_ANY, "SizeTensor": HOST_ANY, "Scale": HOST_ANY}

add_source("interp", r"""
__kernel void interp_nearest(__global const T* x, __global T* y, __global const int* iy, __global const int* ix,
                             int NC, int H, int W, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, t = i / OW, oh = t % OH, nc = t / OH;
    ST(y, i, LD(x, (nc * H + iy[oh]) * W + ix[ow]));
}
__kernel void interp_bilinear(__global const T* x, __global T* y, __global const int* y0, __global const int* y1,
                              __global const float* dy, __global const int* x0, __global const int* x1,
                              __global const float* dx, int NC, int H, int W, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, t = i / OW, oh = t % OH, nc = t / OH;
    int base = nc * H * W;
    float fy = dy[oh], fx = dx[ow];
    float top = LD(x, base + y0[oh] * W + x0[ow]) * (1.0f - fx) + LD(x, base + y0[oh] * W + x1[ow]) * fx;
    float bot = LD(x, base + y1[oh] * W + x0[ow]) * (1.0f - fx) + LD(x, base + y1[oh] * W + x1[ow]) * fx;
    ST(y, i, top * (1.0f - fy) + bot * fy);
}
""")


class _Interp(OpenCLKernel):
    """Geometry from attributes / size inputs (read on the host), then the resize kernel in NCHW."""

    kind = ""

    @classmethod
    def supports(cls, op: OpDesc) -> bool:
        return not is_channel_last(op.attrs["data_layout"])

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        n, c, h, w = x.shape
        st = [host_array(v) for v in ins.get("SizeTensor") or []] or None
        osz, sc = ins.get("OutSize"), ins.get("Scale")
        g = interp_geometry(self.op.type, self.attrs, (h, w), st, host_array(osz[0]) if osz else None,
                            host_array(sc[0]) if sc else None)
        cache = self.__dict__.setdefault("_tables", {})
        key = (h, w, g)
        if key not in cache:
            cache[key] = [self.dev.upload(t) for t in self.tables(h, w, g)]
        y = self.empty((n, c, g.out_h, g.out_w))
        if y.size:
            self.launch(f"interp_{self.kind}", y.size, x, y, *cache[key], n * c, h, w, g.out_h, g.out_w, local=(64,))
        return {"Out": [y]}

    def ratios(self, h: int, w: int, g: InterpGeometry) -> tuple[Any, Any, bool]:
        align = bool(self.attrs["align_corners"])
        return source_ratio(h, g.out_h, g.scale_h, align), source_ratio(w, g.out_w, g.scale_w, align), align

    def tables(self, h: int, w: int, g: InterpGeometry) -> list[np.ndarray]:
        raise NotImplementedError


@opencl_kernel(["nearest_interp_v2", "nearest_interp"], inputs=_SIZE_INPUTS)
class NearestInterp(_Interp):
    kind = "nearest"

    def tables(self, h: int, w: int, g: InterpGeometry) -> list[np.ndarray]:
        rh, rw, align = self.ratios(h, w, g)
        return [nearest_index(rh, g.out_h, h, align).astype(np.int32),
                nearest_index(rw, g.out_w, w, align).astype(np.int32)]


@opencl_kernel(["bilinear_interp_v2", "bilinear_interp"], inputs=_SIZE_INPUTS)
class BilinearInterp(_Interp):
    kind = "bilinear"

    def tables(self, h: int, w: int, g: InterpGeometry) -> list[np.ndarray]:
        rh, rw, align = self.ratios(h, w, g)
        flag = int(self.attrs["align_mode"]) == 0 and not align
        y0, y1, dy = linear_weights(rh, g.out_h, h, flag)
        x0, x1, dx = linear_weights(rw, g.out_w, w, flag)
        return [y0.astype(np.int32), y1.astype(np.int32), dy.astype(np.float32), x0.astype(np.int32),
                x1.astype(np.int32), dx.astype(np.float32)]
