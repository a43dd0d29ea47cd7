"""Quantization ops: Paddle's QDQ pair (`quantize_linear` / `dequantize_linear`) and the older
`fake_quantize_*` / `fake_channel_wise_*` / `fake_dequantize_*` family, plus `dequantize_abs_max`
and `dequantize_log` (Paddle-Lite's weight formats).

Every op keeps its input's shape (the state outputs OutScale/OutState/OutAccum are 1 element or one
per channel). Attribute defaults are those of Paddle's op makers: the QDQ pair rounds half to even
(`round_type` 0), the fake_* ops half away from zero (`round_type` 1). Paddle ignores `ZeroPoint`
(symmetric quantization only); so does pdlite.

Paddle Inference (the oracle) runs every one of these ops with `is_test` true whatever the program
says (checked on 3.3.1: training-mode state outputs are never written, moving-average ops use InScale),
so the definitions fix `is_test` to true; the training-only state outputs are accepted and left unset.
"""
from __future__ import annotations

import numpy as np

from pdlite.operators.nn import conv2d_geometry
from pdlite.operators.registry import Shape, ShapeContext, register_op

# Paddle 3 quantizes the QDQ pair to [-qmax - 1, qmax] with qmax an attribute (default 127): bit_length is
# not read (checked on 3.3.1: bit_length 4 and 16 give the int8 results).
# the op types that make a program or sub-block a quantized (int8) one: Paddle's QDQ pair, PaddleSlim's fake_* ops,
# and the host int8 passes' merged pair
QUANT_OP_PREFIXES = ("quantize_linear", "dequantize_linear", "quantize_dequantize_linear", "fake_")


def is_quant_op(op_type: str) -> bool:
    """True for a quantize / dequantize op type (QUANT_OP_PREFIXES)."""
    return op_type.startswith(QUANT_OP_PREFIXES)


_QDQ_DEFAULTS = {"quant_axis": 0, "bit_length": 8, "qmin": -128, "qmax": 127, "round_type": 0,
                 "only_observer": False, "moving_rate": 0.9}
_FAKE_DEFAULTS = {"bit_length": 8, "round_type": 1}
_TEST = {"is_test": True}
# ops that turn int8 weights into float: the host folds them into float params, devices keep them int8
INT8_WEIGHT_OPS = frozenset({"dequantize_linear"})


def bin_count(bits: int) -> int:
    """The largest quantized magnitude for `bits` signed bits: 2^(bits-1) - 1 (127 for int8)."""
    return (1 << (int(bits) - 1)) - 1


def _check_axis(ctx: ShapeContext, slot: str = "X") -> None:
    axis = int(ctx.attrs.get("quant_axis", -1))
    rank = len(ctx.shape(slot))
    if axis >= 0:
        ctx.require(axis in (0, 1) and axis < rank,
                    f"quant_axis must be -1 (per tensor), 0 or 1 and within {slot}'s rank {rank}, got {axis}")


def _check_bits(ctx: ShapeContext, attr: str = "bit_length") -> None:
    bits = ctx.attrs.get(attr)
    for b in bits if isinstance(bits, (list, tuple)) else [bits]:
        ctx.require(2 <= int(b) <= 16, f"attribute {attr} must be in [2, 16], got {bits}")


def _check_qmax(ctx: ShapeContext) -> None:
    qmax = int(ctx.attrs["qmax"])
    ctx.require(0 < qmax < 1 << 24, f"attribute qmax must be in [1, 2^24), got {qmax}")


def _scale_outputs(ctx: ShapeContext, out_slot: str, per_channel: bool) -> dict[str, list[Shape]]:
    """Out has X's shape; an abs-max op also writes OutScale (1 value, or one per channel)."""
    x = ctx.shape("X")
    res: dict[str, list[Shape]] = {out_slot: [x]}
    if per_channel and ctx.op.outputs.get("OutScale"):
        res["OutScale"] = [(x[int(ctx.attrs.get("quant_axis", 0))],)]
    elif ctx.op.type.endswith("_abs_max") and ctx.op.outputs.get("OutScale"):
        res["OutScale"] = [(1,)]
    return res


@register_op("quantize_linear", inputs=["X", "Scale"], outputs=["Y"],
             optional_inputs=["ZeroPoint", "InAccum", "InState"],
             optional_outputs=["OutState", "OutAccum", "OutScale"], defaults=_QDQ_DEFAULTS, fixed=_TEST)
def _quantize_linear_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Y = clip(round(X * qmax / Scale), -qmax-1, qmax) (per tensor, or per channel along quant_axis)."""
    _check_axis(ctx)
    _check_qmax(ctx)
    return _qdq_shape(ctx)


@register_op("dequantize_linear", inputs=["X", "Scale"], outputs=["Y"],
             optional_inputs=["ZeroPoint", "InAccum", "InState"],
             optional_outputs=["OutState", "OutAccum", "OutScale"], defaults=_QDQ_DEFAULTS, fixed=_TEST)
def _dequantize_linear_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Y = X * Scale / qmax (per tensor, or per channel along quant_axis); X may be int8 or float."""
    _check_axis(ctx)
    _check_qmax(ctx)
    return _qdq_shape(ctx)


def _qdq_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    x = ctx.shape("X")
    axis = int(ctx.attrs["quant_axis"])
    n = 1
    for d in ctx.shape("Scale"):
        n *= d
    if axis >= 0 and not ctx.attrs["only_observer"]:
        ctx.require(n == x[axis], f"Scale has {n} values but X {list(x)} has {x[axis]} channels on quant_axis {axis}")
    return {"Y": [x]}


@register_op("fake_quantize_abs_max", inputs=["X"], outputs=["Out"], optional_outputs=["OutScale"],
             defaults=_FAKE_DEFAULTS, fixed=_TEST)
def _fq_abs_max_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Scale = max|X|; Out = round(X * bin_cnt / Scale) (integers stored as float)."""
    _check_bits(ctx)
    return _scale_outputs(ctx, "Out", False)


@register_op("fake_quantize_dequantize_abs_max", inputs=["X"], outputs=["Out"], optional_outputs=["OutScale"],
             defaults=_FAKE_DEFAULTS, fixed=_TEST)
def _fqdq_abs_max_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Scale = max|X|; Out = round(X * bin_cnt / Scale) * Scale / bin_cnt."""
    _check_bits(ctx)
    return _scale_outputs(ctx, "Out", False)


@register_op("fake_quantize_range_abs_max", inputs=["X", "InScale"], outputs=["Out"],
             optional_inputs=["Iter"], optional_outputs=["OutScale", "OutScales"],
             defaults={**_FAKE_DEFAULTS, "window_size": 10000}, fixed=_TEST)
def _fq_range_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = round(clip(X) * bin_cnt / InScale) (training would keep a window of scales); OutScale = InScale."""
    _check_bits(ctx)
    return _in_place_state(ctx)


@register_op("fake_quantize_moving_average_abs_max", inputs=["X", "InScale"], outputs=["Out"],
             optional_inputs=["InAccum", "InState"], optional_outputs=["OutScale", "OutState", "OutAccum"],
             defaults={**_FAKE_DEFAULTS, "moving_rate": 0.9}, fixed=_TEST,
             aliases=["fake_quantize_dequantize_moving_average_abs_max"])
def _fq_moving_average_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = the quantized (or quantized and dequantized) X with scale InScale; the state outputs alias
    the state inputs (Paddle's in-place outputs)."""
    _check_bits(ctx)
    return _in_place_state(ctx)


def _in_place_state(ctx: ShapeContext) -> dict[str, list[Shape]]:
    res: dict[str, list[Shape]] = {"Out": [ctx.shape("X")]}
    for out, src in (("OutScale", "InScale"), ("OutAccum", "InAccum"), ("OutState", "InState")):
        if ctx.op.outputs.get(out) and ctx.has(src):
            res[out] = [ctx.shape(src)]
    return res


@register_op("fake_channel_wise_quantize_abs_max", inputs=["X"], outputs=["Out"], optional_outputs=["OutScale"],
             defaults={**_FAKE_DEFAULTS, "quant_axis": 0}, fixed=_TEST, aliases=["fake_channel_wise_quantize_dequantize_abs_max"])
def _fcq_abs_max_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Scale[c] = max|X| over channel c of quant_axis; Out = the quantized (or quantized and dequantized) X."""
    _check_bits(ctx)
    _check_axis(ctx)
    return _scale_outputs(ctx, "Out", True)


@register_op("fake_dequantize_max_abs", inputs=["X", "Scale"], outputs=["Out"], defaults={"max_range": 127.0})
def _fdq_max_abs_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X * Scale / max_range."""
    ctx.require(float(ctx.attrs["max_range"]) != 0.0, "max_range must not be 0")
    return {"Out": [ctx.shape("X")]}


@register_op("fake_channel_wise_dequantize_max_abs", inputs=["X", "Scales"], outputs=["Out"],
             defaults={"quant_bits": [8], "quant_axis": 0, "x_num_col_dims": 1})
def _fcdq_max_abs_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """One scale (weights): Out = X * s[c] / (2^(b0-1)-1) along quant_axis; two scales (an op's output):
    Out = X * s0[c] * s1 / ((2^(b0-1)-1)(2^(b1-1)-1)) along dim x_num_col_dims."""
    n = ctx.count("Scales")
    ctx.require(n in (1, 2), f"Scales must hold 1 or 2 tensors, got {n}")
    bits = list(ctx.attrs["quant_bits"])
    ctx.require(len(bits) >= n, f"quant_bits {bits} must have one entry per scale ({n})")
    _check_bits(ctx, "quant_bits")
    x = ctx.shape("X")
    if n == 1:
        _check_axis(ctx)
        axis = int(ctx.attrs["quant_axis"])
        ch = x[axis]
    else:
        cols = int(ctx.attrs["x_num_col_dims"])
        ctx.require(1 <= cols < len(x), f"x_num_col_dims {cols} out of range for X {list(x)}")
        ch = x[cols]
    got = 1
    for d in ctx.shape("Scales", 0):
        got *= d
    ctx.require(got == ch, f"Scales[0] has {got} values, X {list(x)} has {ch} channels")
    return {"Out": [x]}


@register_op("moving_average_abs_max_scale", inputs=["X"], outputs=[],
             optional_inputs=["InAccum", "InState"], optional_outputs=["Out", "OutScale", "OutState", "OutAccum"],
             defaults={"moving_rate": 0.9}, fixed=_TEST)
def _ma_scale_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X (an observer of max|X| in training)."""
    return {"Out": [ctx.shape("X")]} if ctx.op.outputs.get("Out") else {}


@register_op("dequantize_abs_max", inputs=["X", "Scale"], outputs=["Out"], defaults={"max_range": 127.0})
def _dq_abs_max_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out (float32) = Scale * X / max_range; X int8 (Paddle-Lite's weight format)."""
    ctx.require(float(ctx.attrs["max_range"]) != 0.0, "max_range must not be 0")
    return {"Out": [ctx.shape("X")]}


@register_op("dequantize_log", inputs=["X", "Dict"], outputs=["Out"])
def _dq_log_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out (float32) = Dict[X] for X >= 0, -Dict[X + 128] for X < 0; X int8, Dict 128 floats."""
    ctx.require(ctx.dtype("X").kind == "i", f"X must be an int8 tensor, got {ctx.dtype('X')}")
    return {"Out": [ctx.shape("X")]}


# --- the host's integer ops (made by the optimizer's int8 passes, pdlite/optimizer/passes/quant_int8.py) ----------
# `in_scale`, `round_type`, `qmax`: how the float input is quantized (the quantize_linear the op replaced);
# `WeightScale[m]`: the float value of one step of Filter's output channel m (Filter * WeightScale is the float
# weight the program computed with, batch norm and scales folded in). Output = act(sum(q(Input) * Filter) *
# (in_scale / qmax) * WeightScale + Bias (+ ResidualData)), in float32; the sums are exact integers.
# `out_scale` > 0: the output then passes quantize_linear -> dequantize_linear with that scale and `out_round_type`
# (a QDQ pair whose only input was this op's output, folded in by quant_dequant_fuse_pass).
# `post_ops`: a pointwise chain (kernels/host/quant_native.py's CHAIN_* program) applied to the output after that,
# the per-element ops that followed the conv (quant_pointwise_chain_pass).
# `in_codes` / `code_scale` > 0 (quantized_conv2d, optimizer/passes/quant_codes.py): Input / Output hold int8 codes,
# bytes q + 128 (uint8), of scale in_scale / code_scale (round type code_round_type) instead of floats.
_QOP_DEFAULTS = {"in_scale": 1.0, "round_type": 0, "qmax": 127, "act_type": "", "out_scale": 0.0, "out_round_type": 0}


def _check_int8(ctx: ShapeContext, slot: str, n_out: int) -> None:
    ctx.require(ctx.dtype(slot) == np.int8, f"{slot} must be int8, got {ctx.dtype(slot)}")
    ctx.require(int(np.prod(ctx.shape("WeightScale"))) == n_out,
                f"WeightScale holds {int(np.prod(ctx.shape('WeightScale')))} values, expected {n_out}")
    ctx.require(int(ctx.attrs["qmax"]) == 127, f"attribute qmax must be 127 (int8), got {ctx.attrs['qmax']}")
    ctx.require(float(ctx.attrs["in_scale"]) > 0, f"attribute in_scale must be > 0, got {ctx.attrs['in_scale']}")


@register_op("quantized_conv2d", inputs=["Input", "Filter", "WeightScale"], outputs=["Output"],
             optional_inputs=["Bias", "ResidualData"],
             defaults={**_QOP_DEFAULTS, "strides": [1, 1], "paddings": [0, 0], "padding_algorithm": "EXPLICIT",
                       "groups": 1, "dilations": [1, 1], "data_format": "NCHW", "post_ops": [], "in_codes": False,
                       "code_scale": 0.0, "code_round_type": 0})
def _quantized_conv2d_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """act(int8 conv(quantize(Input), Filter) * scales + Bias (+ ResidualData)): conv2d's output shape."""
    _check_int8(ctx, "Filter", ctx.shape("Filter")[0])
    g = conv2d_geometry(ctx.attrs, ctx.shape("Input"), ctx.shape("Filter"), ctx.fail)
    depthwise = g.groups == ctx.shape("Input")[1] == ctx.shape("Filter")[0] and ctx.shape("Filter")[1] == 1
    ctx.require((g.groups == 1 or depthwise) and not g.channel_last,
                "one group or depthwise (groups = channels, one filter each), NCHW")
    out = tuple(g.out_shape)
    if ctx.has("ResidualData"):
        ctx.require(ctx.shape("ResidualData") == out, f"ResidualData {list(ctx.shape('ResidualData'))} must be {out}")
    return {"Output": [out]}


@register_op("quantized_fc", inputs=["Input", "W", "WeightScale"], outputs=["Out"], optional_inputs=["Bias"],
             defaults={**_QOP_DEFAULTS, "in_num_col_dims": 1})
def _quantized_fc_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """act(int8 quantize(Input) flattened at in_num_col_dims @ W (K, N) * scales + Bias): Input.shape[:k] + [N]."""
    x, w = ctx.shape("Input"), ctx.shape("W")
    k = int(ctx.attrs["in_num_col_dims"])
    ctx.require(len(w) == 2, f"W must be 2-D, got {list(w)}")
    _check_int8(ctx, "W", w[1])
    ctx.require(0 < k < len(x) and int(np.prod(x[k:])) == w[0],
                f"Input {list(x)} flattened at {k} does not match W {list(w)}")
    return {"Out": [tuple(x[:k]) + (w[1],)]}


@register_op("pointwise_chain", inputs=["X"], outputs=["Out"], optional_inputs=["Y"],
             defaults={"post_ops": [], "x_ops": [], "y_ops": []})
def _pointwise_chain_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = the per-element ops of `post_ops` (quant_native's CHAIN_* program) applied to X (N, C, ...), or to
    x_ops(X) + y_ops(Y) for a Y of X's shape: X's shape."""
    x = tuple(ctx.shape("X"))
    ctx.require(len(x) >= 2, f"X must have a channel axis (rank >= 2), got {list(x)}")
    if not ctx.has("Y"):
        return {"Out": [x]}
    y = tuple(ctx.shape("Y"))
    try:
        out = np.broadcast_shapes(x, y)
    except ValueError:
        ctx.fail(f"X {list(x)} and Y {list(y)} do not broadcast")
    ctx.require(len(out) == len(x), f"Y {list(y)} must not add axes to X {list(x)}")
    return {"Out": [tuple(out)]}


@register_op("quantize_dequantize_linear", inputs=["X", "Scale"], outputs=["Y"],
             defaults={"qmax": 127, "round_type": 0})
def _qdq_pair_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Y = dequantize_linear(quantize_linear(X)) with one per-tensor Scale: X's shape (one pass on the host)."""
    _check_qmax(ctx)
    ctx.require(int(np.prod(ctx.shape("Scale"))) == 1, f"Scale must hold 1 value, got {list(ctx.shape('Scale'))}")
    return {"Y": [ctx.shape("X")]}
