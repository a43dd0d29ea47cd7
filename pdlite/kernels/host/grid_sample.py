"""Host grid_sampler kernel (Paddle's CPU GridSampleKernel, 4-D and 5-D).

Grid coordinates in [-1, 1] are unnormalized per axis of size S:
    align_corners: (g + 1) * (S - 1) / 2;  else (g + 1) * S / 2 - 0.5
then padded: border clips to [0, S - 1]; reflection reflects over [0, S - 1] (align_corners) or
over [-0.5, S - 0.5] and clips. bilinear: the 2^d corner values (0 outside [0, S - 1]) weighted by
the distances; nearest: the value at the rounded position (halves to even, as Eigen's vectorised
round in Paddle's kernel: x.5 exactly, e.g. 96.5 -> 96 and -0.5 -> 0; the bounds are checked after
rounding, in 4-D and 5-D alike), 0 outside.
All in the input dtype, as Paddle's Eigen code.
"""
from __future__ import annotations

import numpy as np

from pdlite.kernels.host.extra import Ins, Outs
from pdlite.kernels.registry import Kernel, register_kernel


def _unnormalize_pad(g: np.ndarray, size: int, align: bool, padding: str) -> np.ndarray:
    dt = g.dtype.type
    m = size - 1
    if align:
        g = (g + dt(1)) * dt(m * 0.5)
    else:
        g = (g + dt(1)) * dt((m + 1) * 0.5) - dt(0.5)
    if padding == "border":
        g = np.minimum(np.maximum(g, dt(0)), dt(m))
    elif padding == "reflection":
        if align:
            if m == 0:
                return np.zeros_like(g)
            span = dt(m * 2)
            a = np.abs(g)
            extra = a - np.floor(a / span) * span
            g = np.minimum(extra, span - extra)
        else:
            span = dt((m + 1) * 2)
            a = np.abs(g + dt(0.5))
            extra = a - np.floor(a / span) * span
            g = np.minimum(extra, span - extra) - dt(0.5)
            g = np.minimum(np.maximum(g, dt(0)), dt(m))
    return g


def _round(v: np.ndarray) -> np.ndarray:
    """Paddle's Eigen `.round()` on CPU: halves to even (checked on Paddle 3.3.1 at every x.5 position)."""
    return np.rint(v)


def _gather(x: np.ndarray, coords: list[np.ndarray]) -> np.ndarray:
    """x [N, C, *S] at integer float coords (each [N, *O]; x first) -> [N, C, *O], 0 out of bounds."""
    spatial = x.shape[2:][::-1]  # (W, H[, D]) to match coords (x, y[, z])
    ok = np.ones(coords[0].shape, bool)
    idx = []
    for c, s in zip(coords, spatial):
        ok &= (c >= 0) & (c <= s - 1)
        idx.append(np.clip(np.nan_to_num(c), 0, s - 1).astype(np.int64))
    n = x.shape[0]
    b = np.arange(n).reshape((n,) + (1,) * (coords[0].ndim - 1))
    vals = x[(b, slice(None), *idx[::-1])]  # [N, *O, C]
    vals = np.moveaxis(vals, -1, 1)
    return np.where(ok[:, None], vals, np.zeros((), x.dtype))


@register_kernel("grid_sampler")
class GridSampler(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, grid = ins["X"][0], ins["Grid"][0].astype(ins["X"][0].dtype, copy=False)
        a = self.attrs
        align, padding, mode = bool(a["align_corners"]), str(a["padding_mode"]), str(a["mode"])
        sizes = x.shape[2:][::-1]
        coords = [_unnormalize_pad(grid[..., i], sizes[i], align, padding) for i in range(len(sizes))]
        if mode == "nearest":
            return {"Output": [_gather(x, [_round(c) for c in coords])]}
        dt = x.dtype.type
        lo = [np.floor(c) for c in coords]
        out = np.zeros(x.shape[:2] + coords[0].shape[1:], x.dtype)
        for corner in np.ndindex(*(2,) * len(coords)):
            pos, weight = [], None
            for k, bit in enumerate(corner):
                p = lo[k] + dt(bit)
                w = (coords[k] - lo[k]) if bit else (lo[k] + dt(1) - coords[k])
                pos.append(p)
                weight = w if weight is None else weight * w
            out += _gather(x, pos) * weight[:, None]
        return {"Output": [out]}
