"""Vision sampling ops: grid_sampler (F.grid_sample), 4-D and 5-D.

Shapes follow Paddle's GridSampleBaseInferMeta: Output [N, C, *Grid.shape[1:-1]].
"""
from __future__ import annotations

from pdlite.operators.registry import Shape, ShapeContext, register_op


@register_op("grid_sampler", inputs=["X", "Grid"], outputs=["Output"],
             defaults={"mode": "bilinear", "padding_mode": "zeros", "align_corners": True})
def _grid_sampler(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Output[n, c, ...] = X sampled at Grid's normalized (x, y[, z]) positions."""
    x, g = ctx.shape("X"), ctx.shape("Grid")
    ctx.require(len(x) in (4, 5) and len(g) == len(x) and g[-1] == len(x) - 2 and g[0] == x[0],
                f"expected X [N, C, H, W] with Grid [N, H', W', 2] (or 5-D with Grid [..., 3]), got {list(x)} "
                f"and {list(g)}")
    ctx.require(ctx.attrs["mode"] in ("bilinear", "nearest"), f"mode must be bilinear or nearest, got "
                                                              f"{ctx.attrs['mode']!r}")
    ctx.require(ctx.attrs["padding_mode"] in ("zeros", "border", "reflection"),
                f"padding_mode must be zeros, border or reflection, got {ctx.attrs['padding_mode']!r}")
    return {"Output": [(x[0], x[1], *g[1:-1])]}
