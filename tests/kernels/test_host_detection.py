"""Host detection kernels (prior_box, box_coder, yolo_box, multiclass_nms3, roi_align, deformable_conv)
against literal loops of Paddle's CPU kernels written here; the conformance zoo (det_* models) checks
them against Paddle Inference. Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|); integers exact.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.kernels._checks import check, f32, rand, sig
from tests.kernels._util import run1, run_op


def test_prior_box_literal_loop() -> None:
    feat, image = np.zeros((1, 2, 2, 3), f32), np.zeros((1, 3, 20, 30), f32)
    attrs = {"min_sizes": [4.0, 8.0], "max_sizes": [6.0, 12.0], "aspect_ratios": [2.0], "flip": True,
             "clip": True, "offset": 0.5, "variances": [0.1, 0.1, 0.2, 0.2]}
    for order in (False, True):
        out = run_op("prior_box", {"Input": feat, "Image": image}, {**attrs, "min_max_aspect_ratios_order": order},
                     outs={"Boxes": 1, "Variances": 1})
        ars = [1.0, 2.0, 0.5]
        ref = []
        for h, w in itertools.product(range(2), range(3)):
            cx, cy = (w + 0.5) * 10.0, (h + 0.5) * 10.0
            cell = []
            for s, ms in enumerate(attrs["min_sizes"]):
                rs = [(ms * math.sqrt(r) / 2, ms / math.sqrt(r) / 2) for r in ars]
                big = [(math.sqrt(ms * attrs["max_sizes"][s]) / 2,) * 2]
                cell += [rs[0], *big, *rs[1:]] if order else [*rs, *big]
            ref += [[min(max(v, 0.0), 1.0) for v in ((cx - bw) / 30, (cy - bh) / 20, (cx + bw) / 30, (cy + bh) / 20)]
                    for bw, bh in cell]
        check(out["Boxes"][0], np.array(ref).reshape(2, 3, 8, 4), f"prior_box order={order}")
        check(out["Variances"][0], np.broadcast_to(np.array([0.1, 0.1, 0.2, 0.2]), (2, 3, 8, 4)))


def test_box_coder_decode_and_encode() -> None:
    rng = np.random.default_rng(1)
    prior = np.sort(rng.uniform(0, 1, (3, 2, 2)), axis=1).transpose(0, 2, 1).reshape(3, 4)[:, [0, 2, 1, 3]]
    prior = prior.astype(f32)
    var = [0.1, 0.1, 0.2, 0.2]
    deltas = rand(2, 3, 4)
    got = run_op("box_coder", {"PriorBox": prior, "TargetBox": deltas},
                 {"code_type": "decode_center_size", "variance": var}, outs={"OutputBox": 1})["OutputBox"][0]
    ref = np.empty((2, 3, 4))
    for i, j in itertools.product(range(2), range(3)):
        x0, y0, x1, y1 = (float(v) for v in prior[j])
        pw, ph = x1 - x0, y1 - y0
        cx = var[0] * deltas[i, j, 0] * pw + x0 + pw / 2
        cy = var[1] * deltas[i, j, 1] * ph + y0 + ph / 2
        w, h = math.exp(var[2] * deltas[i, j, 2]) * pw, math.exp(var[3] * deltas[i, j, 3]) * ph
        ref[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    check(got, ref, "box_coder decode")
    gt = np.array([[0.1, 0.2, 0.6, 0.9], [0.3, 0.1, 0.5, 0.4]], f32)
    pvar = np.abs(rand(3, 4)) + 0.1
    enc = run_op("box_coder", {"PriorBox": prior, "TargetBox": gt, "PriorBoxVar": pvar},
                 {"code_type": "encode_center_size", "box_normalized": False}, outs={"OutputBox": 1})["OutputBox"][0]
    ref = np.empty((2, 3, 4))
    for i, j in itertools.product(range(2), range(3)):
        pw, ph = prior[j, 2] - prior[j, 0] + 1, prior[j, 3] - prior[j, 1] + 1
        pcx, pcy = prior[j, 0] + pw / 2, prior[j, 1] + ph / 2
        tw, th = gt[i, 2] - gt[i, 0] + 1, gt[i, 3] - gt[i, 1] + 1
        tcx, tcy = (gt[i, 0] + gt[i, 2]) / 2, (gt[i, 1] + gt[i, 3]) / 2
        ref[i, j] = np.array([(tcx - pcx) / pw, (tcy - pcy) / ph, math.log(tw / pw), math.log(th / ph)]) / pvar[j]
    check(enc, ref, "box_coder encode")


@pytest.mark.parametrize("iou_aware", [False, True])
def test_yolo_box_literal_loop(iou_aware: bool) -> None:
    anchors, cls, ds, thresh = [10, 13, 16, 30], 2, 8, 0.4
    na, gh, gw = 2, 2, 3
    x = rand(1, na * (5 + cls) + (na if iou_aware else 0), gh, gw)
    img = np.array([[40, 50]], np.int32)
    attrs = {"anchors": anchors, "class_num": cls, "conf_thresh": thresh, "downsample_ratio": ds,
             "clip_bbox": True, "scale_x_y": 1.2, "iou_aware": iou_aware, "iou_aware_factor": 0.3}
    out = run_op("yolo_box", {"X": x, "ImgSize": img}, attrs, outs={"Boxes": 1, "Scores": 1})
    boxes, scores = np.zeros((1, na * gh * gw, 4)), np.zeros((1, na * gh * gw, cls))
    off = na if iou_aware else 0
    bias = -0.5 * (1.2 - 1)
    for a, k, j in itertools.product(range(na), range(gh), range(gw)):
        ch = off + a * (5 + cls)
        conf = sig(x[0, ch + 4, k, j])
        if iou_aware:
            conf = conf ** 0.7 * sig(x[0, a, k, j]) ** 0.3
        if conf < thresh:
            continue
        cx = (j + sig(x[0, ch, k, j]) * 1.2 + bias) * 50 / gw
        cy = (k + sig(x[0, ch + 1, k, j]) * 1.2 + bias) * 40 / gh
        w = math.exp(x[0, ch + 2, k, j]) * anchors[2 * a] * 50 / (ds * gw)
        h = math.exp(x[0, ch + 3, k, j]) * anchors[2 * a + 1] * 40 / (ds * gh)
        i = (a * gh + k) * gw + j
        boxes[0, i] = [max(cx - w / 2, 0), max(cy - h / 2, 0), min(cx + w / 2, 49), min(cy + h / 2, 39)]
        scores[0, i] = [conf * sig(x[0, ch + 5 + c, k, j]) for c in range(cls)]
    assert (scores == 0).any() and (scores != 0).any(), "the case should keep some boxes and drop others"
    check(out["Boxes"][0], boxes, "yolo_box boxes")
    check(out["Scores"][0], scores, "yolo_box scores")


def test_multiclass_nms3_hand_case() -> None:
    # class 1: boxes 0 and 1 overlap (IoU 0.81 > 0.5) -> 1 is suppressed; box 2 is apart.
    # class 2: box 3 alone over the threshold. keep_top_k = 3 keeps the three best overall.
    boxes = np.array([[[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 5, 5]]], f32)
    scores = np.array([[[0.9, 0.8, 0.1, 0.2],    # background (label 0): ignored
                        [0.9, 0.85, 0.3, 0.01],
                        [0.02, 0.1, 0.05, 0.7]]], f32)
    attrs = {"background_label": 0, "score_threshold": 0.05, "nms_threshold": 0.5, "keep_top_k": 3,
             "nms_top_k": -1, "normalized": False}
    out = run_op("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, attrs,
                 outs={"Out": 1, "Index": 1, "NmsRoisNum": 1}, check_shapes=False)
    ref = np.array([[1, 0.9, 0, 0, 10, 10], [1, 0.3, 20, 20, 30, 30], [2, 0.7, 0, 0, 5, 5]], f32)
    check(out["Out"][0], ref)
    check(out["Index"][0], np.array([[0], [2], [3]], np.int32))
    check(out["NmsRoisNum"][0], np.array([3], np.int32))
    # a looser threshold keeps box 1 in class 1 too; no keep_top_k: every kept box, grouped by label
    out = run_op("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, {**attrs, "nms_threshold": 0.9,
                                                                          "keep_top_k": -1},
                 outs={"Out": 1, "Index": 1, "NmsRoisNum": 1}, check_shapes=False)
    assert out["Out"][0][:, 0].tolist() == [1, 1, 1, 2, 2]
    check(out["Index"][0].reshape(-1), np.array([0, 1, 2, 3, 1], np.int32))


# --- roi_align / deformable_conv (literal loops of Paddle's CPU kernels) ---------------------------
def _roi_bilinear(img: np.ndarray, y: float, x: float) -> float:
    h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    yh, xh = (yl, xl)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    return ((1 - ly) * (1 - lx) * img[yl, xl] + (1 - ly) * lx * img[yl, xh] + ly * (1 - lx) * img[yh, xl]
            + ly * lx * img[yh, xh])


@pytest.mark.parametrize("aligned,ratio", [(False, -1), (True, 2)])
def test_roi_align(aligned: bool, ratio: int) -> None:
    x = rand(2, 2, 5, 6)
    rois = np.array([[0.5, 1.0, 4.0, 3.5], [1.0, 0.0, 9.0, 7.5], [2.0, 2.0, 2.5, 2.2]], f32)
    attrs = {"spatial_scale": 0.7, "pooled_height": 2, "pooled_width": 3, "sampling_ratio": ratio, "aligned": aligned}
    got = run1("roi_align", {"X": x, "ROIs": rois, "RoisNum": np.array([1, 2], np.int32)}, attrs)
    ref = np.zeros((3, 2, 2, 3))
    off = 0.5 if aligned else 0.0
    for r, b in enumerate([0, 1, 1]):
        x0, y0, x1, y1 = (float(v) * 0.7 - off for v in rois[r])
        rw, rh = (x1 - x0, y1 - y0) if aligned else (max(x1 - x0, 1.0), max(y1 - y0, 1.0))
        gh = ratio if ratio > 0 else math.ceil(rh / 2)
        gw = ratio if ratio > 0 else math.ceil(rw / 3)
        for c, i, j in itertools.product(range(2), range(2), range(3)):
            acc = sum(_roi_bilinear(x[b, c], y0 + i * rh / 2 + (iy + 0.5) * rh / 2 / gh,
                                    x0 + j * rw / 3 + (ix + 0.5) * rw / 3 / gw)
                      for iy in range(gh) for ix in range(gw))
            ref[r, c, i, j] = acc / max(gh * gw, 1)
    check(got, ref, "roi_align")


def _dcn_sample(img: np.ndarray, h: float, w: float) -> float:
    hh, ww = img.shape
    if not (h > -1 and w > -1 and h < hh and w < ww):
        return 0.0
    hl, wl = math.floor(h), math.floor(w)
    lh, lw = h - hl, w - wl
    val = 0.0
    for yy, xx, wt in ((hl, wl, (1 - lh) * (1 - lw)), (hl, wl + 1, (1 - lh) * lw), (hl + 1, wl, lh * (1 - lw)),
                       (hl + 1, wl + 1, lh * lw)):
        if 0 <= yy < hh and 0 <= xx < ww:
            val += wt * img[yy, xx]
    return val


@pytest.mark.parametrize("with_mask,groups,dgroups", [(True, 1, 1), (False, 2, 2)])
def test_deformable_conv(with_mask: bool, groups: int, dgroups: int) -> None:
    x = rand(1, 4, 4, 5)
    wt = rand(2 * groups, 4 // groups, 2, 2, seed=1)
    ho, wo = (4 + 2 - 3) // 2 + 1, (5 + 2 - 3) // 2 + 1  # stride 2, pad 1, dilation 2
    off = rand(1, 2 * dgroups * 4, ho, wo, seed=2)
    ins = {"Input": x, "Offset": off, "Filter": wt}
    mask = np.abs(rand(1, dgroups * 4, ho, wo, seed=3))
    if with_mask:
        ins["Mask"] = mask
    attrs = {"strides": [2, 2], "paddings": [1, 1], "dilations": [2, 2], "groups": groups,
             "deformable_groups": dgroups}
    got = run_op("deformable_conv" if with_mask else "deformable_conv_v1", ins, attrs, outs={"Output": 1})["Output"][0]
    ref = np.zeros((1, 2 * groups, ho, wo))
    cg, og, dcg = 4 // groups, 2, 4 // dgroups
    for m, oy, ox, ci, i, j in itertools.product(range(2 * groups), range(ho), range(wo), range(cg), range(2),
                                                  range(2)):
        c = (m // og) * cg + ci
        d, k = c // dcg, i * 2 + j
        h = oy * 2 - 1 + i * 2 + off[0, d * 8 + 2 * k, oy, ox]
        w = ox * 2 - 1 + j * 2 + off[0, d * 8 + 2 * k + 1, oy, ox]
        v = _dcn_sample(x[0, c], float(h), float(w)) * (mask[0, d * 4 + k, oy, ox] if with_mask else 1.0)
        ref[0, m, oy, ox] += wt[m, ci, i, j] * v
    check(got, ref, "deformable_conv")
