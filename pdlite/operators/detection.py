"""Detection ops: prior_box, density_prior_box, anchor_generator, box_coder, yolo_box, the multiclass NMS
family (multiclass_nms, multiclass_nms2, multiclass_nms3, matrix_nms), generate_proposals(_v2),
distribute_fpn_proposals, collect_fpn_proposals, roi_align and deformable_conv(_v1).

Shapes follow Paddle's InferShape/InferMeta functions; the NMS and proposal ops' row counts depend on
the scores (the kernel decides them, no static shape).
"""
from __future__ import annotations

import math

from pdlite.operators.geometry import conv_out_size
from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]


def expand_aspect_ratios(ratios: list[float], flip: bool) -> list[float]:
    """Paddle's prior_box aspect ratios: 1, then each new ratio (and its inverse with flip)."""
    out = [1.0]
    for r in ratios:
        if any(abs(r - o) < 1e-6 for o in out):
            continue
        out.append(r)
        if flip:
            out.append(1.0 / r)
    return out


@register_op("prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
             defaults={"min_sizes": [], "max_sizes": [], "aspect_ratios": [], "variances": [0.1, 0.1, 0.2, 0.2],
                       "flip": False, "clip": False, "step_w": 0.0, "step_h": 0.0, "offset": 0.5,
                       "min_max_aspect_ratios_order": False})
def _prior_box(ctx: ShapeContext) -> Shapes:
    feat = ctx.shape("Input")
    ctx.require(len(feat) == 4 and len(ctx.shape("Image")) == 4, "Input and Image must be 4-D")
    ars = expand_aspect_ratios([float(v) for v in ctx.attrs["aspect_ratios"]], bool(ctx.attrs["flip"]))
    n = len(ars) * len(ctx.attrs["min_sizes"]) + len(ctx.attrs["max_sizes"] or [])
    shape = (feat[2], feat[3], n, 4)
    return {"Boxes": [shape], "Variances": [shape]}


@register_op("box_coder", inputs=["PriorBox", "TargetBox"], outputs=["OutputBox"], optional_inputs=["PriorBoxVar"],
             defaults={"code_type": "encode_center_size", "box_normalized": True, "axis": 0, "variance": []})
def _box_coder(ctx: ShapeContext) -> Shapes:
    p, t = ctx.shape("PriorBox"), ctx.shape("TargetBox")
    ctx.require(len(p) == 2 and p[1] == 4, f"PriorBox must be [M, 4], got {list(p)}")
    if str(ctx.attrs["code_type"]).lower() == "encode_center_size":
        ctx.require(len(t) == 2 and t[1] == 4, f"TargetBox must be [N, 4] to encode, got {list(t)}")
        return {"OutputBox": [(t[0], p[0], 4)]}
    ctx.require(len(t) == 3 and t[2] == 4, f"TargetBox must be [N, M, 4] to decode, got {list(t)}")
    return {"OutputBox": [t]}


@register_op("yolo_box", inputs=["X", "ImgSize"], outputs=["Boxes", "Scores"],
             defaults={"anchors": [], "class_num": 1, "conf_thresh": 0.01, "downsample_ratio": 32,
                       "clip_bbox": True, "scale_x_y": 1.0, "iou_aware": False, "iou_aware_factor": 0.5})
def _yolo_box(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("X")
    ctx.require(len(x) == 4, f"X must be 4-D, got {list(x)}")
    a = len(ctx.attrs["anchors"]) // 2
    cls = int(ctx.attrs["class_num"])
    want = a * (6 + cls) if ctx.attrs.get("iou_aware") else a * (5 + cls)
    ctx.require(x[1] == want, f"X has {x[1]} channels, expected {want} for {a} anchors and {cls} classes")
    n = a * x[2] * x[3]
    return {"Boxes": [(x[0], n, 4)], "Scores": [(x[0], n, cls)]}


NMS_DEFAULTS = {"background_label": 0, "score_threshold": 0.05, "nms_top_k": -1, "nms_threshold": 0.3,
                "nms_eta": 1.0, "keep_top_k": -1, "normalized": True}
POLY_BOX_SIZES = (4, 8, 16, 24, 32)


def _check_nms_inputs(ctx: ShapeContext) -> None:
    """Scores [N, C, M] with BBoxes [N, M, 4|8|16|24|32], or Scores [M, C] with BBoxes [M, C, 4] (+ RoisNum)."""
    b, s = ctx.shape("BBoxes"), ctx.shape("Scores")
    if len(s) == 3:
        ctx.require(len(b) == 3 and b[2] in POLY_BOX_SIZES and b[1] == s[2] and b[0] == s[0],
                    f"expected BBoxes [N, M, 4|8|16|24|32] with Scores [N, C, M], got {list(b)} and {list(s)}")
    else:
        ctx.require(len(s) == 2 and len(b) == 3 and b[2] == 4 and b[0] == s[0] and b[1] == s[1],
                    f"expected BBoxes [M, C, 4] with Scores [M, C] (or 3-D Scores [N, C, M]), got {list(b)} "
                    f"and {list(s)}")


@register_op("multiclass_nms", inputs=["BBoxes", "Scores"], outputs=["Out"], defaults=NMS_DEFAULTS,
             value_dependent=True)
@register_op("multiclass_nms2", inputs=["BBoxes", "Scores"], outputs=["Out"], optional_outputs=["Index"],
             defaults=NMS_DEFAULTS, value_dependent=True)
@register_op("multiclass_nms3", inputs=["BBoxes", "Scores"], outputs=["Out"], optional_inputs=["RoisNum"],
             optional_outputs=["Index", "NmsRoisNum"], defaults=NMS_DEFAULTS, value_dependent=True)
def _multiclass_nms(ctx: ShapeContext) -> Shapes:
    """The output row count depends on the scores: the kernel decides it (no static shape)."""
    _check_nms_inputs(ctx)
    return {}


@register_op("matrix_nms", inputs=["BBoxes", "Scores"], outputs=["Out", "Index"], optional_outputs=["RoisNum"],
             defaults={"background_label": 0, "score_threshold": 0.05, "post_threshold": 0.0, "nms_top_k": -1,
                       "keep_top_k": -1, "normalized": True, "use_gaussian": False, "gaussian_sigma": 2.0},
             value_dependent=True)
def _matrix_nms(ctx: ShapeContext) -> Shapes:
    """Rows [label, decayed score, box...] by score; the row count depends on the scores."""
    b, s = ctx.shape("BBoxes"), ctx.shape("Scores")
    ctx.require(len(s) == 3 and len(b) == 3 and b[1] == s[2] and b[0] == s[0],
                f"expected BBoxes [N, M, box] and Scores [N, C, M], got {list(b)} and {list(s)}")
    return {}


PROPOSAL_DEFAULTS = {"pre_nms_topN": 6000, "post_nms_topN": 1000, "nms_thresh": 0.5, "min_size": 0.1, "eta": 1.0}


@register_op("generate_proposals", inputs=["Scores", "BboxDeltas", "ImInfo", "Anchors", "Variances"],
             outputs=["RpnRois", "RpnRoiProbs"], optional_outputs=["RpnRoisNum"], defaults=PROPOSAL_DEFAULTS,
             value_dependent=True)
@register_op("generate_proposals_v2", inputs=["Scores", "BboxDeltas", "ImShape", "Anchors", "Variances"],
             outputs=["RpnRois", "RpnRoiProbs"], optional_outputs=["RpnRoisNum"],
             defaults={**PROPOSAL_DEFAULTS, "pixel_offset": True}, value_dependent=True)
def _generate_proposals(ctx: ShapeContext) -> Shapes:
    """Scores [N, A, H, W], BboxDeltas [N, 4A, H, W], anchors/variances [H, W, A, 4]; rows decided by NMS."""
    s, d = ctx.shape("Scores"), ctx.shape("BboxDeltas")
    info = ctx.shape("ImInfo" if ctx.op.type == "generate_proposals" else "ImShape")
    a, v = ctx.shape("Anchors"), ctx.shape("Variances")
    ctx.require(len(s) == 4 and len(d) == 4 and d[0] == s[0] and d[1] == 4 * s[1] and d[2:] == s[2:],
                f"expected Scores [N, A, H, W] and BboxDeltas [N, 4A, H, W], got {list(s)} and {list(d)}")
    n_anchor = s[1] * s[2] * s[3]
    ctx.require(math.prod(a) == 4 * n_anchor and math.prod(v) == 4 * n_anchor,
                f"Anchors {list(a)} and Variances {list(v)} must hold H*W*A = {n_anchor} boxes")
    ctx.require(len(info) == 2 and info[0] == s[0], f"image info must be [N, 2|3], got {list(info)}")
    return {}


@register_op("distribute_fpn_proposals", inputs=["FpnRois"], outputs=["MultiFpnRois", "RestoreIndex"],
             optional_inputs=["RoisNum"], optional_outputs=["MultiLevelRoIsNum"],
             defaults={"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224, "pixel_offset": True},
             value_dependent=True)
def _distribute_fpn_proposals(ctx: ShapeContext) -> Shapes:
    """One output per level in [min_level, max_level]; each level's row count depends on the ROIs."""
    r = ctx.shape("FpnRois")
    ctx.require(len(r) == 2 and r[1] == 4, f"FpnRois must be [R, 4], got {list(r)}")
    levels = int(ctx.attrs["max_level"]) - int(ctx.attrs["min_level"]) + 1
    n_out = len(ctx.op.outputs.get("MultiFpnRois") or [])
    ctx.require(levels >= 1 and n_out == levels, f"MultiFpnRois has {n_out} outputs for {levels} levels")
    return {"RestoreIndex": [(r[0], 1)]}


@register_op("collect_fpn_proposals", inputs=["MultiLevelRois", "MultiLevelScores"], outputs=["FpnRois"],
             optional_inputs=["MultiLevelRoIsNum"], optional_outputs=["RoisNum"], defaults={"post_nms_topN": 100},
             value_dependent=True)
def _collect_fpn_proposals(ctx: ShapeContext) -> Shapes:
    """FpnRois: the post_nms_topN best-scoring ROIs of all levels, grouped by image."""
    ctx.require(ctx.count("MultiLevelRois") == ctx.count("MultiLevelScores"),
                f"{ctx.count('MultiLevelRois')} MultiLevelRois but {ctx.count('MultiLevelScores')} MultiLevelScores")
    ctx.require(int(ctx.attrs["post_nms_topN"]) >= 0, "post_nms_topN must be >= 0")
    return {}


@register_op("anchor_generator", inputs=["Input"], outputs=["Anchors", "Variances"],
             defaults={"anchor_sizes": [64.0, 128.0, 256.0, 512.0], "aspect_ratios": [0.5, 1.0, 2.0],
                       "variances": [0.1, 0.1, 0.2, 0.2], "stride": [16.0, 16.0], "offset": 0.5})
def _anchor_generator(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("Input")
    ctx.require(len(x) == 4, f"Input must be 4-D, got {list(x)}")
    ctx.require(len(ctx.attrs["stride"]) == 2 and len(ctx.attrs["variances"]) == 4,
                "stride needs 2 values and variances 4")
    shape = (x[2], x[3], len(ctx.attrs["aspect_ratios"]) * len(ctx.attrs["anchor_sizes"]), 4)
    return {"Anchors": [shape], "Variances": [shape]}


@register_op("density_prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
             defaults={"variances": [0.1, 0.1, 0.2, 0.2], "clip": False, "flatten_to_2d": False, "fixed_sizes": [],
                       "fixed_ratios": [], "densities": [], "step_w": 0.0, "step_h": 0.0, "offset": 0.5})
def _density_prior_box(ctx: ShapeContext) -> Shapes:
    feat = ctx.shape("Input")
    ctx.require(len(feat) == 4 and len(ctx.shape("Image")) == 4, "Input and Image must be 4-D")
    a = ctx.attrs
    ctx.require(len(a["fixed_sizes"]) == len(a["densities"]),
                f"fixed_sizes ({len(a['fixed_sizes'])}) and densities ({len(a['densities'])}) must match")
    n = sum(len(a["fixed_ratios"]) * int(d) ** 2 for d in a["densities"])
    shape = (feat[2] * feat[3] * n, 4) if a["flatten_to_2d"] else (feat[2], feat[3], n, 4)
    return {"Boxes": [shape], "Variances": [shape]}


@register_op("roi_align", inputs=["X", "ROIs"], optional_inputs=["RoisNum"],
             defaults={"spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1, "sampling_ratio": -1,
                       "aligned": False})
def _roi_align(ctx: ShapeContext) -> Shapes:
    x, rois = ctx.shape("X"), ctx.shape("ROIs")
    ctx.require(len(x) == 4 and len(rois) == 2 and rois[1] == 4, f"expected X [N, C, H, W] and ROIs [R, 4], "
                                                                  f"got {list(x)} and {list(rois)}")
    return {"Out": [(rois[0], x[1], int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"]))]}


def deform_out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return conv_out_size(size, k, d, p, p, s)


@register_op("deformable_conv", inputs=["Input", "Offset", "Filter"], outputs=["Output"], optional_inputs=["Mask"],
             defaults={"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
                       "deformable_groups": 1, "im2col_step": 64}, aliases=["deformable_conv_v1"])
def _deformable_conv(ctx: ShapeContext) -> Shapes:
    x, w, off = ctx.shape("Input"), ctx.shape("Filter"), ctx.shape("Offset")
    a = ctx.attrs
    ctx.require(len(x) == 4 and len(w) == 4 and x[1] == w[1] * int(a["groups"]),
                f"Input {list(x)} and Filter {list(w)} do not match (groups {a['groups']})")
    s, p, d = ([int(v) for v in a[k]] for k in ("strides", "paddings", "dilations"))
    ho, wo = (deform_out_size(x[2 + i], w[2 + i], s[i], p[i], d[i]) for i in range(2))
    want = (x[0], 2 * int(a["deformable_groups"]) * w[2] * w[3], ho, wo)
    ctx.require(tuple(off) == want, f"Offset must be {list(want)}, got {list(off)}")
    return {"Output": [(x[0], w[0], ho, wo)]}


@register_op("nms", inputs=["Boxes"], outputs=["KeepBoxesIdxs"], defaults={"iou_threshold": 1.0},
             value_dependent=True)
def _nms(ctx: ShapeContext) -> Shapes:
    """KeepBoxesIdxs (int64): greedy NMS over Boxes [N, 4] taken in their given order."""
    b = ctx.shape("Boxes")
    ctx.require(len(b) == 2 and b[1] == 4, f"Boxes must be [N, 4], got {list(b)}")
    return {}
