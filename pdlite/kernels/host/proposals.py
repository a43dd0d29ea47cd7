"""Host kernels of the region-proposal and anchor ops (Paddle's CPU semantics): generate_proposals,
generate_proposals_v2, distribute_fpn_proposals, collect_fpn_proposals, anchor_generator,
density_prior_box.

generate_proposals(_v2), per image: scores [A, H, W] and deltas [4A, H, W] taken in (h, w, a)
order; the pre_nms_topN best (all when <= 0); decode against the anchors (widths + 1 with
pixel_offset, log-size deltas capped at log(1000/16)); clip to the image (- 1 with pixel_offset);
drop boxes under max(min_size, 1) (v1: sizes measured in the original image, / im_info[2]) or whose
centre lies outside the image; greedy NMS by score (ties: the later box first, as Paddle's
ascending stable sort popped from the back); the first post_nms_topN. An image with nothing left
gives one all-zero box of score 0 (Paddle's rule). With nms_thresh <= 0 the filtered boxes are
returned in descending score order (Paddle's order there is std::nth_element's, unspecified).
"""
from __future__ import annotations

import math

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.host.extra import ANY, Ins, Outs, present
from pdlite.kernels.host.nms import jaccard
from pdlite.kernels.registry import Kernel, register_kernel

BBOX_CLIP = np.float32(math.log(1000.0 / 16.0))


# --- generate_proposals ---------------------------------------------------------------------------
def _decode(anchors: np.ndarray, deltas: np.ndarray, var: np.ndarray, offset: float) -> np.ndarray:
    """Paddle's proposal BoxCoder (float32 with the C++ double promotions)."""
    f32 = np.float32
    aw = anchors[:, 2] - anchors[:, 0] + f32(offset)
    ah = anchors[:, 3] - anchors[:, 1] + f32(offset)
    acx = (anchors[:, 0] + 0.5 * aw.astype(np.float64)).astype(f32)
    acy = (anchors[:, 1] + 0.5 * ah.astype(np.float64)).astype(f32)
    cx = var[:, 0] * deltas[:, 0] * aw + acx
    cy = var[:, 1] * deltas[:, 1] * ah + acy
    w = np.exp(np.minimum(var[:, 2] * deltas[:, 2], BBOX_CLIP)) * aw
    h = np.exp(np.minimum(var[:, 3] * deltas[:, 3], BBOX_CLIP)) * ah
    return np.stack([cx - w / f32(2), cy - h / f32(2), cx + w / f32(2) - f32(offset), cy + h / f32(2) - f32(offset)],
                    axis=1).astype(f32)


def proposal_nms(boxes: np.ndarray, scores: np.ndarray, thresh: float, eta: float, normalized: bool) -> list[int]:
    """Paddle's funcs::NMS: by score, ties taking the later box first; adaptive threshold with eta."""
    order = np.argsort(scores, kind="stable")[::-1]
    keep: list[int] = []
    t = np.float32(thresh)
    for i in order:
        if keep and not np.all(jaccard(boxes[i], boxes[keep], normalized) <= t):
            continue
        keep.append(int(i))
        if eta < 1 and t > 0.5:
            t = np.float32(t * np.float32(eta))
    return keep


def proposals_one_image(scores: np.ndarray, deltas: np.ndarray, info: np.ndarray, anchors: np.ndarray,
                        var: np.ndarray, a: dict, v1: bool) -> tuple[np.ndarray, np.ndarray]:
    """(rois [R, 4], probs [R, 1]) of one image; scores [K], deltas/anchors/var [K, 4] in (h, w, a) order."""
    pixel_offset = True if v1 else bool(a["pixel_offset"])
    offset = 1.0 if pixel_offset else 0.0
    pre, post = int(a["pre_nms_topN"]), int(a["post_nms_topN"])
    order = np.argsort(-scores, kind="stable")
    if 0 < pre < len(scores):
        order = order[:pre]
    sc = scores[order]
    props = _decode(anchors[order], deltas[order], var[order], offset)
    f32 = np.float32
    im_h, im_w = f32(info[0]), f32(info[1])
    props[:, 0::2] = np.maximum(np.minimum(props[:, 0::2], im_w - f32(offset)), f32(0))
    props[:, 1::2] = np.maximum(np.minimum(props[:, 1::2], im_h - f32(offset)), f32(0))
    min_size = f32(max(float(a["min_size"]), 1.0))
    ws = props[:, 2] - props[:, 0] + f32(offset)
    hs = props[:, 3] - props[:, 1] + f32(offset)
    if pixel_offset:
        x_ctr, y_ctr = props[:, 0] + ws / f32(2), props[:, 1] + hs / f32(2)
        if v1:
            ws = (props[:, 2] - props[:, 0]) / f32(info[2]) + f32(1)
            hs = (props[:, 3] - props[:, 1]) / f32(info[2]) + f32(1)
        keep = (ws >= min_size) & (hs >= min_size) & (x_ctr <= im_w) & (y_ctr <= im_h)
    else:
        keep = (ws >= min_size) & (hs >= min_size)
    if not keep.any():
        return np.zeros((1, 4), scores.dtype), np.zeros((1, 1), scores.dtype)
    props, sc = props[keep], sc[keep]
    if float(a["nms_thresh"]) <= 0:
        return props, sc.reshape(-1, 1)
    sel = proposal_nms(props, sc, float(a["nms_thresh"]), float(a["eta"]), not pixel_offset)
    if 0 < post < len(sel):
        sel = sel[:post]
    return props[sel], sc[sel].reshape(-1, 1)


class GenerateProposals(Kernel):
    """RpnRois [R, 4], RpnRoiProbs [R, 1] over the batch, RpnRoisNum (int32) per image."""

    def run(self, ins: Ins) -> Outs:
        v1 = self.op.type == "generate_proposals"
        scores, deltas = ins["Scores"][0], ins["BboxDeltas"][0]
        info = ins["ImInfo" if v1 else "ImShape"][0]
        anchors = ins["Anchors"][0].reshape(-1, 4)
        var = ins["Variances"][0].reshape(-1, 4)
        n, na, h, w = scores.shape
        if v1 and info.shape[1] < 3:
            raise KernelError(f"generate_proposals: ImInfo must be [N, 3] (height, width, scale), got "
                              f"{list(info.shape)}")
        sc = scores.transpose(0, 2, 3, 1).reshape(n, -1)
        dl = deltas.transpose(0, 2, 3, 1).reshape(n, -1, 4)
        rois, probs, nums = [], [], []
        for i in range(n):
            r, p = proposals_one_image(sc[i], dl[i], info[i], anchors, var, self.attrs, v1)
            rois.append(r)
            probs.append(p)
            nums.append(len(r))
        return present(self.op, {"RpnRois": [np.concatenate(rois).astype(scores.dtype)],
                                 "RpnRoiProbs": [np.concatenate(probs).astype(scores.dtype)],
                                 "RpnRoisNum": [np.array(nums, np.int32)]})


register_kernel("generate_proposals", inputs={"ImInfo": ANY}, outputs={"RpnRoisNum": ANY})(GenerateProposals)
register_kernel("generate_proposals_v2", inputs={"ImShape": ANY}, outputs={"RpnRoisNum": ANY})(GenerateProposals)


# --- FPN distribution -----------------------------------------------------------------------------
@register_kernel("distribute_fpn_proposals", inputs={"RoisNum": ANY},
                 outputs={"RestoreIndex": ANY, "MultiLevelRoIsNum": ANY})
class DistributeFpnProposals(Kernel):
    """Level = clamp(floor(log2(sqrt(area) / refer_scale + 1e-6) + refer_level)); RestoreIndex maps back."""

    def run(self, ins: Ins) -> Outs:
        rois = ins["FpnRois"][0]
        a = self.attrs
        lo, hi = int(a["min_level"]), int(a["max_level"])
        counts = (ins["RoisNum"][0].reshape(-1).astype(np.int64) if ins.get("RoisNum")
                  else np.array([len(rois)], np.int64))
        if counts.sum() != len(rois):
            raise KernelError(f"distribute_fpn_proposals: RoisNum sums to {int(counts.sum())} but FpnRois has "
                              f"{len(rois)} rows")
        scale = np.sqrt(_fpn_area(rois, bool(a["pixel_offset"])))
        dt = rois.dtype.type
        lvl = np.floor(np.log2(scale / dt(int(a["refer_scale"])) + dt(1e-6)) + dt(int(a["refer_level"])))
        lvl = np.clip(lvl.astype(np.int64), lo, hi)
        order = np.argsort(lvl, kind="stable")
        restore = np.empty(len(rois), np.int32)
        restore[order] = np.arange(len(rois), dtype=np.int32)
        image = np.repeat(np.arange(len(counts)), counts)
        multi = [rois[lvl == v] for v in range(lo, hi + 1)]
        nums = [np.bincount(image[lvl == v], minlength=len(counts)).astype(np.int32) for v in range(lo, hi + 1)]
        return present(self.op, {"MultiFpnRois": multi, "RestoreIndex": [restore.reshape(-1, 1)],
                                 "MultiLevelRoIsNum": nums})


def _fpn_area(b: np.ndarray, pixel_offset: bool) -> np.ndarray:
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    if pixel_offset:
        w, h = w + 1, h + 1
    return np.where((b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1]), np.zeros_like(w), w * h)


@register_kernel("collect_fpn_proposals", inputs={"MultiLevelRoIsNum": ANY}, outputs={"RoisNum": ANY})
class CollectFpnProposals(Kernel):
    """The post_nms_topN best ROIs over all levels (by score, stable), then grouped by image (stable)."""

    def run(self, ins: Ins) -> Outs:
        rois = ins["MultiLevelRois"]
        scores = [s.reshape(-1) for s in ins["MultiLevelScores"]]
        nums = ins.get("MultiLevelRoIsNum") or []
        if nums:
            batch = len(nums[0].reshape(-1))
            image = np.concatenate([np.repeat(np.arange(len(c.reshape(-1))), c.reshape(-1)) for c in nums])
        else:
            batch = 1
            image = np.zeros(sum(len(s) for s in scores), np.int64)
        all_rois = np.concatenate([r.reshape(-1, 4) for r in rois])
        all_scores = np.concatenate(scores)
        if len(image) != len(all_scores):
            raise KernelError(f"collect_fpn_proposals: MultiLevelRoIsNum counts {len(image)} ROIs, the levels "
                              f"hold {len(all_scores)}")
        top = min(int(self.attrs["post_nms_topN"]), len(all_scores))
        order = np.argsort(-all_scores, kind="stable")[:top]
        order = order[np.argsort(image[order], kind="stable")]
        per_image = _paddle_rois_num(image[order], batch)
        return present(self.op, {"FpnRois": [all_rois[order]], "RoisNum": [per_image]})


def _paddle_rois_num(images: np.ndarray, batch: int) -> np.ndarray:
    """collect_fpn_proposals' RoisNum as Paddle counts it (a run per change of image id, from image 0)."""
    counts, cur, start = [], 0, 0
    for i, b in enumerate(images):
        if b != cur:
            cur = b
            counts.append(i - start)
            start = i
    counts.append(len(images) - start)
    counts = (counts + [0] * batch)[:batch]
    return np.array(counts, np.int32)


def _c_round(v: float) -> float:
    """C's round(): halves away from zero (NumPy's round goes to even)."""
    return float(np.sign(v) * np.floor(abs(v) + 0.5))


# --- anchors and priors ---------------------------------------------------------------------------
@register_kernel("anchor_generator")
class AnchorGenerator(Kernel):
    """Anchors [H, W, ratios * sizes, 4] (ratio-major) centred at i * stride + offset * (stride - 1)."""

    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        h, w = ins["Input"][0].shape[2:]
        f32 = np.float32
        sw, sh = f32(a["stride"][0]), f32(a["stride"][1])
        off = f32(a["offset"])
        half = []
        for ar in (f32(v) for v in a["aspect_ratios"]):
            for size in (f32(v) for v in a["anchor_sizes"]):
                area_ratio = f32(sw * sh) / ar
                base_w = f32(_c_round(np.sqrt(area_ratio)))
                base_h = f32(_c_round(base_w * ar))
                aw, ah = f32(size / sw) * base_w, f32(size / sh) * base_h
                half.append((0.5 * (float(aw) - 1), 0.5 * (float(ah) - 1)))
        hw = np.array(half, np.float64).reshape(1, 1, -1, 2)
        x_ctr = (np.arange(w, dtype=f32) * sw + off * (sw - f32(1))).astype(np.float64).reshape(1, w, 1)
        y_ctr = (np.arange(h, dtype=f32) * sh + off * (sh - f32(1))).astype(np.float64).reshape(h, 1, 1)
        anchors = np.stack(np.broadcast_arrays(x_ctr - hw[..., 0], y_ctr - hw[..., 1], x_ctr + hw[..., 0],
                                               y_ctr + hw[..., 1]), axis=-1).astype(f32)
        var = np.broadcast_to(np.asarray(a["variances"], f32), anchors.shape).copy()
        return {"Anchors": [anchors], "Variances": [var]}


@register_kernel("density_prior_box", inputs={"Input": ANY, "Image": ANY})
class DensityPriorBox(Kernel):
    """Per cell, size and ratio: density^2 boxes shifted over the cell, normalized and clipped to [0, 1]."""

    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        fh, fw = ins["Input"][0].shape[2:]
        ih, iw = ins["Image"][0].shape[2:]
        step_w, step_h = float(np.float32(a["step_w"])), float(np.float32(a["step_h"]))
        if step_w == 0 or step_h == 0:
            step_w, step_h = float(np.float32(iw / fw)), float(np.float32(ih / fh))
        step_avg = int((step_w + step_h) * 0.5)
        off = float(np.float32(a["offset"]))
        rel = []  # (dx, dy, half w, half h) relative to the cell centre
        for size, density in zip((float(np.float32(v)) for v in a["fixed_sizes"]), (int(d) for d in a["densities"])):
            shift = step_avg // density
            for r in a["fixed_ratios"]:
                sr = float(np.float32(np.sqrt(np.float32(r))))
                bw, bh = float(np.float32(size * sr)), float(np.float32(size / sr))
                base = -step_avg / 2.0 + shift / 2.0
                for di in range(density):
                    for dj in range(density):
                        rel.append((base + dj * shift, base + di * shift, bw / 2.0, bh / 2.0))
        rel_a = np.array(rel, np.float64).reshape(1, 1, -1, 4)
        cx = (np.float32(np.arange(fw) + off) * np.float32(step_w)).astype(np.float64).reshape(1, fw, 1)
        cy = (np.float32(np.arange(fh) + off) * np.float32(step_h)).astype(np.float64).reshape(fh, 1, 1)
        x = (cx + rel_a[..., 0]).astype(np.float32).astype(np.float64)  # center_x_temp is a float
        y = (cy + rel_a[..., 1]).astype(np.float32).astype(np.float64)
        boxes = np.stack(np.broadcast_arrays(
            np.maximum((x - rel_a[..., 2]) / iw, 0.0), np.maximum((y - rel_a[..., 3]) / ih, 0.0),
            np.minimum((x + rel_a[..., 2]) / iw, 1.0), np.minimum((y + rel_a[..., 3]) / ih, 1.0)), axis=-1
        ).astype(np.float32)
        if a["clip"]:
            np.clip(boxes, 0.0, 1.0, out=boxes)
        if a["flatten_to_2d"]:
            boxes = boxes.reshape(-1, 4)
        var = np.broadcast_to(np.asarray(a["variances"], np.float32), boxes.shape).copy()
        return {"Boxes": [boxes], "Variances": [var]}
