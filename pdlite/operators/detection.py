"""Detection ops: prior_box, box_coder, yolo_box, multiclass_nms3, roi_align and deformable_conv(_v1).

Shapes follow Paddle's InferShape/InferMeta functions; multiclass_nms3's row count depends on the scores
(the kernel decides it).
"""
from __future__ import annotations

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


@register_op("multiclass_nms3", inputs=["BBoxes", "Scores"], outputs=["Out"], optional_inputs=["RoisNum"],
             optional_outputs=["Index", "NmsRoisNum"], defaults=NMS_DEFAULTS, value_dependent=True)
def _multiclass_nms3(ctx: ShapeContext) -> Shapes:
    """The output row count depends on the scores: the kernel decides it (no static shape)."""
    b, s = ctx.shape("BBoxes"), ctx.shape("Scores")
    ctx.require(len(s) == 3 and len(b) == 3 and b[2] == 4 and b[1] == s[2] and b[0] == s[0],
                f"expected BBoxes [N, M, 4] and Scores [N, C, M], got {list(b)} and {list(s)}")
    return {}


@register_op("roi_align", inputs=["X", "ROIs"], optional_inputs=["RoisNum"],
             defaults={"spatial_scale": 1.0, "pooled_height": 1, "pooled_width": 1, "sampling_ratio": -1,
                       "aligned": False})
def _roi_align(ctx: ShapeContext) -> Shapes:
    x, rois = ctx.shape("X"), ctx.shape("ROIs")
    ctx.require(len(x) == 4 and len(rois) == 2 and rois[1] == 4, f"expected X [N, C, H, W] and ROIs [R, 4], "
                                                                  f"got {list(x)} and {list(rois)}")
    return {"Out": [(rois[0], x[1], int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"]))]}


def deform_out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


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
