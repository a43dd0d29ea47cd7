"""CUDA nearest / bilinear interpolation kernels (v1 and v2 ops) with Paddle's index arithmetic.

The source indices (and bilinear weights) are computed by the host kernel's functions
(`nearest_index`, `linear_weights`: Paddle's float32 ratios and rounding) once per geometry and
uploaded; the resize itself is two index_select gathers (plus the weighted sums for bilinear).
"""
from __future__ import annotations

from typing import Any

import torch

from pdlite.kernels.cuda.base import HOST_ANY, CudaKernel, cuda_kernel, to_numpy, to_torch
from pdlite.kernels.cuda.conv import from_nchw, to_nchw
from pdlite.kernels.host.interp import linear_weights, nearest_index, source_ratio
from pdlite.operators.nn import InterpGeometry, interp_geometry, is_channel_last, split_nchw

_SIZE_INPUTS = {"OutSize": HOST_ANY, "SizeTensor": HOST_ANY, "Scale": HOST_ANY}


class _Interp(CudaKernel):
    """Geometry from attributes / size inputs (read on the host), then `resize` in NCHW."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        cl = is_channel_last(self.attrs["data_layout"])
        _, _, h, w = split_nchw(x.shape, cl)
        st = [to_numpy(v) for v in ins.get("SizeTensor") or []] or None
        osz, sc = ins.get("OutSize"), ins.get("Scale")
        g = interp_geometry(self.op.type, self.attrs, (h, w), st, to_numpy(osz[0]) if osz else None,
                            to_numpy(sc[0]) if sc else None)
        if (g.out_h, g.out_w) == (h, w):
            return {"Out": [x.clone()]}
        cache = self.__dict__.setdefault("_tables", {})
        key = (h, w, g)
        if key not in cache:
            cache[key] = self.tables(h, w, g, x)
        return {"Out": [from_nchw(self.resize(to_nchw(x, cl), *cache[key]), cl)]}

    def ratios(self, h: int, w: int, g: InterpGeometry) -> tuple[Any, Any, bool]:
        align = bool(self.attrs["align_corners"])
        return source_ratio(h, g.out_h, g.scale_h, align), source_ratio(w, g.out_w, g.scale_w, align), align

    def tables(self, h: int, w: int, g: InterpGeometry, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        raise NotImplementedError

    def resize(self, x: torch.Tensor, *tables: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@cuda_kernel(["nearest_interp_v2", "nearest_interp"], inputs=_SIZE_INPUTS)
class NearestInterp(_Interp):
    def tables(self, h: int, w: int, g: InterpGeometry, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rh, rw, align = self.ratios(h, w, g)
        return (to_torch(nearest_index(rh, g.out_h, h, align), x.device),
                to_torch(nearest_index(rw, g.out_w, w, align), x.device))

    def resize(self, x: torch.Tensor, *tables: torch.Tensor) -> torch.Tensor:
        iy, ix = tables
        return x.index_select(2, iy).index_select(3, ix)


@cuda_kernel(["bilinear_interp_v2", "bilinear_interp"], inputs=_SIZE_INPUTS)
class BilinearInterp(_Interp):
    def tables(self, h: int, w: int, g: InterpGeometry, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rh, rw, align = self.ratios(h, w, g)
        flag = int(self.attrs["align_mode"]) == 0 and not align
        y0, y1, dy = linear_weights(rh, g.out_h, h, flag)
        x0, x1, dx = linear_weights(rw, g.out_w, w, flag)
        dev, dt = x.device, x.dtype
        return (to_torch(y0, dev), to_torch(y1, dev), to_torch(dy, dev, dt).reshape(-1, 1),
                to_torch(x0, dev), to_torch(x1, dev), to_torch(dx, dev, dt))

    def resize(self, x: torch.Tensor, *tables: torch.Tensor) -> torch.Tensor:
        y0, y1, dy, x0, x1, dx = tables
        rows = x.index_select(2, y0) * (1 - dy) + x.index_select(2, y1) * dy
        return rows.index_select(3, x0) * (1 - dx) + rows.index_select(3, x1) * dx
