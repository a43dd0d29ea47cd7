"""Host kernels of the detection ops in pdlite.operators.detection (plain NumPy, Paddle's CPU semantics):
prior_box, box_coder, yolo_box, roi_align, deformable_conv(_v1) (the NMS family: nms.py; proposals and
anchors: proposals.py).
"""
from __future__ import annotations

import itertools

import numpy as np

from pdlite.kernels.host.extra import ANY, Ins, Outs, sigmoid
from pdlite.kernels.registry import Kernel, register_kernel
from pdlite.operators.detection import expand_aspect_ratios


# --- prior_box, box_coder, yolo_box ------------------------------------------------------------
@register_kernel("prior_box", inputs={"Input": ANY, "Image": ANY})
class PriorBox(Kernel):
    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        fh, fw = ins["Input"][0].shape[2:]
        ih, iw = ins["Image"][0].shape[2:]
        sw = float(a["step_w"]) or iw / fw
        sh = float(a["step_h"]) or ih / fh
        ars = expand_aspect_ratios([float(v) for v in a["aspect_ratios"]], bool(a["flip"]))
        maxs = [float(v) for v in a["max_sizes"] or []]
        sizes: list[tuple[float, float]] = []  # half widths/heights of the priors of one cell
        for s, ms in enumerate(float(v) for v in a["min_sizes"]):
            ratio = [(ms * np.sqrt(r) / 2, ms / np.sqrt(r) / 2) for r in ars]
            big = [(np.sqrt(ms * maxs[s]) / 2,) * 2] if maxs else []
            if a["min_max_aspect_ratios_order"]:
                sizes += [ratio[0], *big, *[ratio[i] for i, r in enumerate(ars) if abs(r - 1.0) >= 1e-6]]
            else:
                sizes += [*ratio, *big]
        half = np.array(sizes, np.float32)  # [P, 2]
        cx = ((np.arange(fw, dtype=np.float32) + np.float32(a["offset"])) * np.float32(sw))[None, :, None]
        cy = ((np.arange(fh, dtype=np.float32) + np.float32(a["offset"])) * np.float32(sh))[:, None, None]
        boxes = np.stack(np.broadcast_arrays((cx - half[:, 0]) / np.float32(iw), (cy - half[:, 1]) / np.float32(ih),
                                             (cx + half[:, 0]) / np.float32(iw), (cy + half[:, 1]) / np.float32(ih)),
                         axis=-1).astype(np.float32)
        if a["clip"]:
            np.clip(boxes, 0.0, 1.0, out=boxes)
        var = np.broadcast_to(np.asarray(a["variances"], np.float32), boxes.shape).copy()
        return {"Boxes": [boxes], "Variances": [var]}


@register_kernel("box_coder", inputs={"PriorBoxVar": ANY})
class BoxCoder(Kernel):
    def run(self, ins: Ins) -> Outs:
        pb, tb = ins["PriorBox"][0], ins["TargetBox"][0]
        norm = 0.0 if self.attrs["box_normalized"] else 1.0
        pw = pb[:, 2] - pb[:, 0] + norm
        ph = pb[:, 3] - pb[:, 1] + norm
        pcx, pcy = pb[:, 0] + pw / 2, pb[:, 1] + ph / 2
        if ins.get("PriorBoxVar"):
            var = ins["PriorBoxVar"][0]
        elif self.attrs.get("variance"):
            var = np.broadcast_to(np.asarray(self.attrs["variance"], pb.dtype), pb.shape)
        else:
            var = np.ones_like(pb)
        if str(self.attrs["code_type"]).lower() == "encode_center_size":
            tw = tb[:, 2] - tb[:, 0] + norm
            th = tb[:, 3] - tb[:, 1] + norm
            tcx, tcy = ((tb[:, 0] + tb[:, 2]) / 2)[:, None], ((tb[:, 1] + tb[:, 3]) / 2)[:, None]
            out = np.stack([(tcx - pcx) / pw, (tcy - pcy) / ph, np.log(np.abs(tw[:, None] / pw)),
                            np.log(np.abs(th[:, None] / ph))], axis=-1) / var[None]
            return {"OutputBox": [out.astype(tb.dtype)]}
        axis = int(self.attrs["axis"])
        sel = (slice(None), None) if axis == 1 else (None, slice(None))  # prior per row (axis 1) or column
        v = var[sel]
        cx = v[..., 0] * tb[..., 0] * pw[sel] + pcx[sel]
        cy = v[..., 1] * tb[..., 1] * ph[sel] + pcy[sel]
        w = np.exp(v[..., 2] * tb[..., 2]) * pw[sel]
        h = np.exp(v[..., 3] * tb[..., 3]) * ph[sel]
        out = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - norm, cy + h / 2 - norm], axis=-1)
        return {"OutputBox": [out.astype(tb.dtype)]}


@register_kernel("yolo_box", inputs={"ImgSize": ANY})
class YoloBox(Kernel):
    """Decode a YOLOv3 head: boxes in image pixels, scores = objectness * class probability (0 under conf_thresh)."""

    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        x = ins["X"][0].astype(np.float64)
        img = ins["ImgSize"][0].astype(np.float64)
        n, _, gh, gw = x.shape
        anchors = np.asarray(a["anchors"], np.float64).reshape(-1, 2)
        na, cls = len(anchors), int(a["class_num"])
        scale = float(a["scale_x_y"])
        bias = -0.5 * (scale - 1.0)
        if a["iou_aware"]:
            iou, x = sigmoid(x[:, :na]), x[:, na:]
        p = x.reshape(n, na, 5 + cls, gh, gw)
        conf = sigmoid(p[:, :, 4])
        if a["iou_aware"]:
            f = float(a["iou_aware_factor"])
            conf = conf ** (1.0 - f) * iou ** f
        keep = conf >= float(a["conf_thresh"])
        ih, iw = img[:, 0].reshape(n, 1, 1, 1), img[:, 1].reshape(n, 1, 1, 1)
        ds = int(a["downsample_ratio"])
        cx = (np.arange(gw) + sigmoid(p[:, :, 0]) * scale + bias) * iw / gw
        cy = (np.arange(gh)[:, None] + sigmoid(p[:, :, 1]) * scale + bias) * ih / gh
        bw = np.exp(p[:, :, 2]) * anchors[:, 0].reshape(1, na, 1, 1) * iw / (ds * gw)
        bh = np.exp(p[:, :, 3]) * anchors[:, 1].reshape(1, na, 1, 1) * ih / (ds * gh)
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=-1)
        if a["clip_bbox"]:
            boxes[..., 0] = np.maximum(boxes[..., 0], 0)
            boxes[..., 1] = np.maximum(boxes[..., 1], 0)
            boxes[..., 2] = np.minimum(boxes[..., 2], iw - 1)
            boxes[..., 3] = np.minimum(boxes[..., 3], ih - 1)
        scores = conf[..., None] * sigmoid(np.moveaxis(p[:, :, 5:], 2, -1))
        boxes = np.where(keep[..., None], boxes, 0.0).reshape(n, -1, 4)
        scores = np.where(keep[..., None], scores, 0.0).reshape(n, -1, cls)
        dt = ins["X"][0].dtype
        return {"Boxes": [boxes.astype(dt)], "Scores": [scores.astype(dt)]}


# --- roi_align, deformable_conv -----------------------------------------------------------------
def _bilinear_zero_pad(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """img [..., H, W] sampled at (y, x) [P] with zeros outside (deformable conv's rule) -> [..., P]."""
    h, w = img.shape[-2:]
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    ly, lx = y - y0, x - x0
    inside = (y > -1) & (x > -1) & (y < h) & (x < w)
    out = 0.0
    for dy, dx, wt in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yy, xx = y0 + dy, x0 + dx
        ok = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        out = out + img[..., np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)] * np.where(ok, wt, 0.0)
    return out


@register_kernel("roi_align", inputs={"RoisNum": ANY})
class RoiAlign(Kernel):
    """Average of sampling_ratio^2 (or adaptive) bilinear samples per bin; RoisNum maps ROIs to images."""

    def run(self, ins: Ins) -> Outs:
        x, rois = ins["X"][0], ins["ROIs"][0].astype(np.float64)
        a = self.attrs
        n, c, h, w = x.shape
        ph, pw, ratio = int(a["pooled_height"]), int(a["pooled_width"]), int(a["sampling_ratio"])
        counts = ins["RoisNum"][0].reshape(-1) if ins.get("RoisNum") else np.array([len(rois)])
        batch = np.repeat(np.arange(len(counts)), counts)
        off = 0.5 if a["aligned"] else 0.0
        out = np.zeros((len(rois), c, ph, pw), x.dtype)
        for r, (x0, y0, x1, y1) in enumerate(rois * float(a["spatial_scale"]) - off):
            rw, rh = x1 - x0, y1 - y0
            if not a["aligned"]:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
            gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
            ys = y0 + (np.arange(ph)[:, None] + (np.arange(gh)[None, :] + 0.5) / gh) * (rh / ph)  # [ph, gh]
            xs = x0 + (np.arange(pw)[:, None] + (np.arange(gw)[None, :] + 0.5) / gw) * (rw / pw)  # [pw, gw]
            yy, xx = np.broadcast_arrays(ys[:, None, :, None], xs[None, :, None, :])  # [ph, pw, gh, gw]
            yy, xx = yy.reshape(-1), xx.reshape(-1)
            outside = (yy < -1) | (yy > h) | (xx < -1) | (xx > w)
            yy, xx = np.maximum(yy, 0), np.maximum(xx, 0)
            yl, xl = np.minimum(yy.astype(np.int64), h - 1), np.minimum(xx.astype(np.int64), w - 1)
            yy, xx = np.where(yl >= h - 1, yl, yy), np.where(xl >= w - 1, xl, xx)
            yh, xh = np.minimum(yl + 1, h - 1), np.minimum(xl + 1, w - 1)
            ly, lx = yy - yl, xx - xl
            img = x[batch[r]].astype(np.float64)
            v = (img[:, yl, xl] * (1 - ly) * (1 - lx) + img[:, yl, xh] * (1 - ly) * lx
                 + img[:, yh, xl] * ly * (1 - lx) + img[:, yh, xh] * ly * lx) * ~outside
            out[r] = v.reshape(c, ph, pw, gh * gw).sum(-1) / max(gh * gw, 1)
        return {"Out": [out]}


@register_kernel("deformable_conv_v1")
@register_kernel("deformable_conv", inputs={"Mask": ANY})
class DeformableConv(Kernel):
    """Modulated deformable conv (DCNv2; v1 without Mask): im2col at offset positions, then a grouped GEMM."""

    def run(self, ins: Ins) -> Outs:
        x, off, wt = ins["Input"][0], ins["Offset"][0], ins["Filter"][0]
        mask = ins["Mask"][0] if ins.get("Mask") else None
        a = self.attrs
        (sh, sw), (ph, pw), (dh, dw) = ([int(v) for v in a[k]] for k in ("strides", "paddings", "dilations"))
        n, c, h, w = x.shape
        m, _, kh, kw = wt.shape
        g, dg = int(a["groups"]), int(a["deformable_groups"])
        ho, wo = off.shape[2:]
        base_y = (np.arange(ho) * sh - ph)[:, None]
        base_x = (np.arange(wo) * sw - pw)[None, :]
        cols = np.empty((n, c, kh * kw, ho, wo), np.float64)
        cg = c // dg
        for b, d, k in itertools.product(range(n), range(dg), range(kh * kw)):
            i, j = divmod(k, kw)
            y = base_y + i * dh + off[b, d * 2 * kh * kw + 2 * k]
            xx = base_x + j * dw + off[b, d * 2 * kh * kw + 2 * k + 1]
            v = _bilinear_zero_pad(x[b, d * cg:(d + 1) * cg].astype(np.float64), y.reshape(-1), xx.reshape(-1))
            if mask is not None:
                v = v * mask[b, d * kh * kw + k].reshape(-1)
            cols[b, d * cg:(d + 1) * cg, k] = v.reshape(cg, ho, wo)
        cols = cols.reshape(n, g, (c // g) * kh * kw, ho * wo)
        wg = wt.reshape(g, m // g, -1).astype(np.float64)
        out = np.einsum("gok,ngkp->ngop", wg, cols).reshape(n, m, ho, wo)
        return {"Output": [out.astype(x.dtype)]}
