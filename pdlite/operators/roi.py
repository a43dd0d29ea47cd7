"""ROI pooling and box clipping: roi_pool, psroi_pool, box_clip (Paddle's InferShape)."""
from __future__ import annotations

from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]


def _rois(ctx: ShapeContext) -> tuple[tuple[int, ...], tuple[int, ...]]:
    x, rois = ctx.shape("X"), ctx.shape("ROIs")
    ctx.require(len(x) == 4 and len(rois) == 2 and rois[1] == 4,
                f"expected X [N, C, H, W] and ROIs [R, 4], got {list(x)} and {list(rois)}")
    ctx.require(int(ctx.attrs["pooled_height"]) > 0 and int(ctx.attrs["pooled_width"]) > 0,
                "pooled_height and pooled_width must be > 0")
    return x, rois


@register_op("roi_pool", inputs=["X", "ROIs"], outputs=["Out"], optional_inputs=["RoisNum"],
             optional_outputs=["Argmax"], defaults={"pooled_height": 1, "pooled_width": 1, "spatial_scale": 1.0})
def _roi_pool(ctx: ShapeContext) -> Shapes:
    """Out [R, C, ph, pw]: max over each bin of the ROI (rounded to pixels); Argmax its h * W + w."""
    x, rois = _rois(ctx)
    shape = (rois[0], x[1], int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"]))
    return {"Out": [shape], "Argmax": [shape]}


@register_op("psroi_pool", inputs=["X", "ROIs"], outputs=["Out"], optional_inputs=["RoisNum"],
             defaults={"pooled_height": 1, "pooled_width": 1, "output_channels": 1, "spatial_scale": 1.0})
def _psroi_pool(ctx: ShapeContext) -> Shapes:
    """Out [R, output_channels, ph, pw]: position-sensitive average pooling."""
    x, rois = _rois(ctx)
    a = ctx.attrs
    ph, pw, oc = int(a["pooled_height"]), int(a["pooled_width"]), int(a["output_channels"])
    ctx.require(x[1] == oc * ph * pw, f"X has {x[1]} channels, expected output_channels * ph * pw = {oc * ph * pw}")
    return {"Out": [(rois[0], oc, ph, pw)]}


@register_op("box_clip", inputs=["Input", "ImInfo"], outputs=["Output"])
def _box_clip(ctx: ShapeContext) -> Shapes:
    """Output = Input's boxes clipped to their image (ImInfo rows: height, width, scale)."""
    b, info = ctx.shape("Input"), ctx.shape("ImInfo")
    ctx.require(len(b) >= 2 and b[-1] == 4, f"Input must be [..., 4], got {list(b)}")
    ctx.require(len(info) == 2 and info[1] == 3, f"ImInfo must be [N, 3], got {list(info)}")
    ctx.require(len(b) == 2 or b[0] == info[0], f"Input {list(b)} has a batch dim that ImInfo {list(info)} lacks")
    return {"Output": [b]}
