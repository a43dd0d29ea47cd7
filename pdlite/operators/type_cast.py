"""The ops type_target_cast_pass inserts: io_copy (target), calib (precision), layout (layout)."""
from __future__ import annotations

from pdlite.operators.registry import ShapeContext, register_op


@register_op("io_copy", inputs=["Input"], outputs=["Out"])
@register_op("calib", inputs=["Input"], outputs=["Out"])
def _same_shape(ctx: ShapeContext):
    """Copies between targets / converts precision: the shape is unchanged."""
    return {"Out": [ctx.shape("Input")]}


@register_op("layout", inputs=["Input"], outputs=["Out"], defaults={"src": "NCHW", "dst": "NHWC"})
def _layout_shape(ctx: ShapeContext):
    """NCHW <-> NHWC for 4-D tensors."""
    s = ctx.shape("Input")
    ctx.require(len(s) == 4, f"layout expects a 4-D tensor, got shape {list(s)}")
    if ctx.attrs["src"] == "NCHW":
        return {"Out": [(s[0], s[2], s[3], s[1])]}
    return {"Out": [(s[0], s[3], s[1], s[2])]}
