"""Host kernels of pdlite.operators.roi (Paddle's CPU kernels): roi_pool, psroi_pool, box_clip.

roi_pool: the ROI rounded to pixels (round(v * scale), ends inclusive, at least 1 x 1), bins
[floor(i * bin), ceil((i + 1) * bin)) offset by the ROI start and clipped to the map; Out = the bin's
max (0 for an empty bin), Argmax its h * W + w (-1 when empty; the first maximum).
psroi_pool: ROI [round(x1) * s, (round(x2) + 1) * s) (at least 0.1 wide), bins [floor, ceil) clipped;
Out[r, c, i, j] = mean of channel (c * ph + i) * pw + j over the bin (0 when empty).
box_clip: x to [0, round(w / scale) - 1], y to [0, round(h / scale) - 1] per image.
"""
from __future__ import annotations

import math

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.host.extra import ANY, Ins, Outs, present
from pdlite.kernels.registry import Kernel, register_kernel


def roi_batch_ids(op_type: str, n_rois: int, batch: int, ins: Ins) -> np.ndarray:
    """The image of each ROI from RoisNum (one image without it)."""
    if not ins.get("RoisNum"):
        if batch != 1:
            raise KernelError(f"{op_type}: X has a batch of {batch} but there is no RoisNum to split the ROIs")
        return np.zeros(n_rois, np.int64)
    counts = ins["RoisNum"][0].reshape(-1).astype(np.int64)
    if len(counts) != batch or counts.sum() != n_rois:
        raise KernelError(f"{op_type}: RoisNum {counts.tolist()} does not split {n_rois} ROIs over {batch} images")
    return np.repeat(np.arange(batch), counts)


def _c_round(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


@register_kernel("roi_pool", inputs={"RoisNum": ANY}, outputs={"Argmax": ANY})
class RoiPool(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, rois = ins["X"][0], ins["ROIs"][0]
        a = self.attrs
        n, c, h, w = x.shape
        ph, pw, scale = int(a["pooled_height"]), int(a["pooled_width"]), float(np.float32(a["spatial_scale"]))
        batch = roi_batch_ids("roi_pool", len(rois), n, ins)
        out = np.zeros((len(rois), c, ph, pw), x.dtype)
        arg = np.full((len(rois), c, ph, pw), -1, np.int64)
        f32 = np.float32
        for r, box in enumerate(rois):
            x1, y1, x2, y2 = (_c_round(float(f32(v) * f32(scale))) for v in box)
            bh, bw = f32(max(y2 - y1 + 1, 1)) / f32(ph), f32(max(x2 - x1 + 1, 1)) / f32(pw)
            img = x[batch[r]]
            for i in range(ph):
                h0 = min(max(int(math.floor(f32(i) * bh)) + y1, 0), h)
                h1 = min(max(int(math.ceil(f32(i + 1) * bh)) + y1, 0), h)
                for j in range(pw):
                    w0 = min(max(int(math.floor(f32(j) * bw)) + x1, 0), w)
                    w1 = min(max(int(math.ceil(f32(j + 1) * bw)) + x1, 0), w)
                    if h1 <= h0 or w1 <= w0:
                        continue
                    win = img[:, h0:h1, w0:w1].reshape(c, -1)
                    k = win.argmax(axis=1)
                    out[r, :, i, j] = win[np.arange(c), k]
                    arg[r, :, i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
        return present(self.op, {"Out": [out], "Argmax": [arg]})


@register_kernel("psroi_pool", inputs={"RoisNum": ANY})
class PsroiPool(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, rois = ins["X"][0], ins["ROIs"][0]
        a = self.attrs
        n, _, h, w = x.shape
        ph, pw, oc = int(a["pooled_height"]), int(a["pooled_width"]), int(a["output_channels"])
        f32 = np.float32
        scale = f32(a["spatial_scale"])
        batch = roi_batch_ids("psroi_pool", len(rois), n, ins)
        out = np.zeros((len(rois), oc, ph, pw), x.dtype)
        for r, box in enumerate(rois):
            x1, y1 = f32(_c_round(float(box[0]))) * scale, f32(_c_round(float(box[1]))) * scale
            x2, y2 = f32(_c_round(float(box[2])) + 1.0) * scale, f32(_c_round(float(box[3])) + 1.0) * scale
            bh, bw = max(y2 - y1, f32(0.1)) / f32(ph), max(x2 - x1, f32(0.1)) / f32(pw)
            for i in range(ph):
                h0 = min(max(int(math.floor(f32(i) * bh + y1)), 0), h)
                h1 = min(max(int(math.ceil(f32(i + 1) * bh + y1)), 0), h)
                for j in range(pw):
                    w0 = min(max(int(math.floor(f32(j) * bw + x1)), 0), w)
                    w1 = min(max(int(math.ceil(f32(j + 1) * bw + x1)), 0), w)
                    if h1 <= h0 or w1 <= w0:
                        continue
                    chans = (np.arange(oc) * ph + i) * pw + j
                    win = x[batch[r], chans, h0:h1, w0:w1]
                    out[r, :, i, j] = win.sum(axis=(1, 2), dtype=x.dtype) / x.dtype.type((h1 - h0) * (w1 - w0))
        return {"Out": [out]}


@register_kernel("box_clip", inputs={"ImInfo": ANY})
class BoxClip(Kernel):
    def run(self, ins: Ins) -> Outs:
        boxes, info = ins["Input"][0], ins["ImInfo"][0]
        out = boxes.copy()
        per_image = [out] if boxes.ndim == 2 else list(out)
        for b, row in zip(per_image, info):
            im_h = np.floor(row[0] / row[2] + row.dtype.type(0.5))  # C round of a positive size
            im_w = np.floor(row[1] / row[2] + row.dtype.type(0.5))
            b[..., 0::2] = np.maximum(np.minimum(b[..., 0::2], im_w - 1), 0)
            b[..., 1::2] = np.maximum(np.minimum(b[..., 1::2], im_h - 1), 0)
        return {"Output": [out]}
