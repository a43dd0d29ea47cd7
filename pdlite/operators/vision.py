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


@register_op("affine_grid", inputs=["Theta"], outputs=["Output"], optional_inputs=["OutputShape"],
             defaults={"output_shape": [], "align_corners": True}, value_dependent=True)
def _affine_grid(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Output [N, H, W, 2] (or [N, D, H, W, 3]): the base grid of output_shape mapped by Theta."""
    theta = ctx.shape("Theta")
    shape = ([int(v) for v in ctx.value("OutputShape").reshape(-1)] if ctx.has("OutputShape")
             else [int(v) for v in ctx.attrs["output_shape"]])
    ctx.require(len(shape) in (4, 5), f"output_shape must be [N, C, H, W] or [N, C, D, H, W], got {shape}")
    nd = len(shape) - 2
    ctx.require(tuple(theta) == (shape[0], nd, nd + 1),
                f"Theta must be [N, {nd}, {nd + 1}] for output_shape {shape}, got {list(theta)}")
    return {"Output": [(shape[0], *shape[2:], nd)]}


@register_op("affine_channel", inputs=["X", "Scale", "Bias"], defaults={"data_layout": "AnyLayout"})
def _affine_channel(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X * Scale[c] + Bias[c] per channel (NHWC when data_layout says so, else NCHW)."""
    x = ctx.shape("X")
    c = x[-1] if ctx.attrs["data_layout"] == "NHWC" else x[1]
    ctx.require(len(x) >= 2 and ctx.shape("Scale") == (c,) and ctx.shape("Bias") == (c,),
                f"Scale and Bias must be [{c}] for X {list(x)}")
    return {"Out": [x]}


@register_op("temporal_shift", inputs=["X"], defaults={"seg_num": 1, "shift_ratio": 0.25, "data_format": "NCHW"})
def _temporal_shift(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: a shift_ratio of the channels from the previous segment, as many from the next, the rest kept."""
    x = ctx.shape("X")
    t = int(ctx.attrs["seg_num"])
    ctx.require(len(x) == 4 and t > 0 and x[0] % t == 0, f"X must be [N * seg_num, ...] 4-D, got {list(x)} (seg_num {t})")
    return {"Out": [x]}


@register_op("lrn", inputs=["X"], outputs=["Out"], optional_outputs=["MidOut"],
             defaults={"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75, "data_format": "AnyLayout"})
def _lrn(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X / (k + alpha * sum of X^2 over n neighbouring channels)^beta; MidOut the denominator base."""
    x = ctx.shape("X")
    ctx.require(len(x) == 4, f"X must be 4-D, got {list(x)}")
    ctx.require(int(ctx.attrs["n"]) > 0 and int(ctx.attrs["n"]) % 2 == 1, f"n must be odd and > 0, got "
                                                                          f"{ctx.attrs['n']}")
    return {"Out": [x], "MidOut": [x]}
