"""Converters of the quantization ops to ONNX QuantizeLinear / DequantizeLinear, so that the devices
(OpenVINO's low-precision transformations, ONNX Runtime's QDQ fusions) run int8 kernels.

Maths (Paddle, pdlite.kernels.host.quant; s the scale, b = qmax = 127 for int8):
- quantize:   q = clip(round(x * b / s), -b - 1, b)  ==  QuantizeLinear(x, y_scale = 1 / (b * inverse(s)), 0)
  (round_type 1 first clips x to [-s, s], as Paddle does, so -128 never appears);
- dequantize: y = q * s / b                          ==  DequantizeLinear(q, s / b, 0).
A quantize op's float output (integers stored as float32) is also kept as the int8 tensor it came from, and
a dequantize op reading it uses that tensor directly, so the pair becomes Q -> DQ on int8. Weights are
folded into int8 initializers: a dequantize op's constant X (int8, or float holding integers in
[-128, 127]) becomes an int8 initializer read by DequantizeLinear, never a float copy.

Differences from the fp32 simulation, covered by the device tests' tolerances: ONNX rounds ties to even
(round_type 1 rounds them away from zero; only exact .5 products differ) and scales by s / b instead of
(q * s) / b (one float32 rounding). Only 8-bit forms convert (qmax 127 or bit_length 8); others stay
on the host. Paddle ignores ZeroPoint; so do the converters (zero points are 0).
"""
from __future__ import annotations

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.quant import bin_count

F32 = np.float32
_INT8_OF = "_quant_int8_of"  # ConvertContext attribute: Paddle var -> ONNX name of its int8 twin


def _int8_of(ctx: ConvertContext) -> dict[str, str]:
    table = getattr(ctx, _INT8_OF, None)
    if table is None:
        table = {}
        setattr(ctx, _INT8_OF, table)
    return table


def _const_scale(info: TensorInfo, name: str | None) -> np.ndarray | None:
    v = info.value(name) if name else None
    return None if v is None else np.asarray(v, F32).reshape(-1)


def _inverse(s: np.ndarray) -> np.ndarray:
    return np.where(s <= F32(1e-30), F32(1) / (s + F32(1e-6)), F32(1) / np.where(s == 0, F32(1), s)).astype(F32)


def _bins(op: OpDesc) -> int:
    return int(op.attrs["qmax"]) if op.type in ("quantize_linear", "dequantize_linear") else bin_count(
        op.attrs["bit_length"])


def _axis(op: OpDesc) -> int:
    return int(op.attrs["quant_axis"]) if op.type in ("quantize_linear", "dequantize_linear") else -1


def _refusal(scale_slot: str):
    def check(op: OpDesc, info: TensorInfo) -> str | None:
        if op.attrs.get("only_observer"):
            return None
        if _bins(op) != 127:
            return f"only 8-bit quantization converts (bin count {_bins(op)})"
        if _const_scale(info, op.input(scale_slot)) is None:
            return f"{scale_slot} is not a constant"
        return None
    return check


def _scales(ctx: ConvertContext, op: OpDesc, slot: str, x: str) -> tuple[np.ndarray, int | None]:
    """The scale values and the ONNX axis (None: per tensor)."""
    s = _const_scale(ctx.info, op.input(slot))
    assert s is not None
    axis = _axis(op)
    if axis < 0:
        return s[:1].reshape(()), None
    shape = ctx.shape(x)
    if shape is not None and shape[axis] >= 0 and shape[axis] != s.size:
        raise ConversionError(f"{slot} has {s.size} values for {shape[axis]} channels")
    return s, axis


def _broadcast(s: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    if axis is None:
        return s
    shape = [1] * rank
    shape[axis] = s.size
    return s.reshape(shape)


def _quantize(ctx: ConvertContext, op: OpDesc, x: str, slot: str) -> str:
    """The int8 ONNX tensor of Paddle's quantization of var `x`."""
    s, axis = _scales(ctx, op, slot, x)
    b = F32(_bins(op))
    xt = ctx.tensor(x)
    if int(op.attrs["round_type"]) == 1:  # Paddle clips x to [-s, s] first
        rank = ctx.rank(x) or 1
        hi = ctx.const(_broadcast(s, axis, rank).astype(F32), hint="qhi")
        lo = ctx.const(-_broadcast(s, axis, rank).astype(F32), hint="qlo")
        xt = ctx.add("Min", [ctx.add("Max", [xt, lo]), hi])
    y_scale = (F32(1) / (b * _inverse(s))).astype(F32)
    qs = ctx.const(y_scale, hint="qs")
    zp = ctx.const(np.zeros(y_scale.shape, np.int8), hint="zp")
    concat = _producer(ctx, xt, "Concat") if axis is None else None
    if concat is not None:
        # quantize a Concat's inputs and concatenate int8 (the same numbers): OpenVINO's low-precision
        # transformations mis-handle Concat -> QuantizeLinear when a concat input has other quantized readers
        parts = [ctx.add("QuantizeLinear", [i, qs, zp]) for i in concat.input]
        return ctx.add("Concat", parts, axis=next(a.i for a in concat.attribute if a.name == "axis"))
    return ctx.add("QuantizeLinear", [xt, qs, zp], axis=axis)


def _producer(ctx: ConvertContext, onnx_name: str, op_type: str):
    """The node of `op_type` writing `onnx_name`, if the converters just made one."""
    for node in reversed(ctx.nodes):
        if onnx_name in node.output:
            return node if node.op_type == op_type else None
    return None


def _dequantize(ctx: ConvertContext, q8: str, s: np.ndarray, axis: int | None, b: float, out: str) -> None:
    scale = (s / F32(b)).astype(F32)
    zp = ctx.const(np.zeros(scale.shape, np.int8), hint="zp")
    ctx.add("DequantizeLinear", [q8, ctx.const(scale, hint="dqs"), zp], [out], axis=axis)


def _int8_input(ctx: ConvertContext, x: str) -> str | None:
    """An int8 ONNX tensor holding Paddle var `x`'s integers: its quantize op's twin, an int8 input, or an
    int8 initializer made from a constant (the weight fold)."""
    twin = _int8_of(ctx).get(x)
    if twin is not None:
        return twin
    v = ctx.value(x)
    if v is None:
        return ctx.tensor(x) if ctx.dtype(x) == np.int8 else None
    v = np.asarray(v)
    if v.dtype == np.int8:
        return ctx.tensor(x)
    if v.dtype.kind == "f" and v.size and np.all(v == np.round(v)) and v.min() >= -128 and v.max() <= 127:
        return ctx.const(v.astype(np.int8), hint="w8")
    return None


@register_converter("quantize_linear", supports=_refusal("Scale"))
def _quantize_linear(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    if op.attrs["only_observer"]:
        ctx.add("Identity", [ctx.tensor(x)], [ctx.output(op, "Y")])
        return
    q8 = _quantize(ctx, op, x, "Scale")
    y = ctx.output(op, "Y")
    ctx.add("Cast", [q8], [y], to=ctx.onnx_dtype(F32))
    _int8_of(ctx)[op.output("Y") or ""] = q8


@register_converter("dequantize_linear", supports=_refusal("Scale"))
def _dequantize_linear(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    if op.attrs["only_observer"]:
        xt = ctx.tensor(x)
        ctx.add("Identity" if ctx.dtype(x) == F32 else "Cast", [xt], [ctx.output(op, "Y")],
                **({} if ctx.dtype(x) == F32 else {"to": ctx.onnx_dtype(F32)}))
        return
    s, axis = _scales(ctx, op, "Scale", x)
    q8 = _int8_input(ctx, x)
    if q8 is not None:
        _dequantize(ctx, q8, s, axis, _bins(op), ctx.output(op, "Y"))
        return
    # a float X that is not a known int8 value: Y = X * s / b in float
    scale = _broadcast((s / F32(_bins(op))).astype(F32), axis, ctx.rank(x) or 1)
    ctx.add("Mul", [ctx.tensor(x), ctx.const(scale, hint="dqs")], [ctx.output(op, "Y")])


def _fake_quantize(ctx: ConvertContext, op: OpDesc, dequant: bool) -> None:
    x = op.input("X")
    assert x is not None
    q8 = _quantize(ctx, op, x, "InScale")
    out = ctx.output(op, "Out")
    if dequant:
        s, axis = _scales(ctx, op, "InScale", x)
        _dequantize(ctx, q8, s, axis, _bins(op), out)
    else:
        ctx.add("Cast", [q8], [out], to=ctx.onnx_dtype(F32))
        _int8_of(ctx)[op.output("Out") or ""] = q8
    for dst, src in (("OutScale", "InScale"), ("OutAccum", "InAccum"), ("OutState", "InState")):
        if op.output(dst) and op.input(src) and ctx.needed(op.output(dst) or ""):
            ctx.add("Identity", [ctx.input(op, src)], [ctx.output(op, dst)])


@register_converter("fake_quantize_range_abs_max", "fake_quantize_moving_average_abs_max",
                    supports=_refusal("InScale"))
def _fake_quantize_in_scale(ctx: ConvertContext, op: OpDesc) -> None:
    _fake_quantize(ctx, op, dequant=False)


@register_converter("fake_quantize_dequantize_moving_average_abs_max", supports=_refusal("InScale"))
def _fake_quantize_dequantize_in_scale(ctx: ConvertContext, op: OpDesc) -> None:
    _fake_quantize(ctx, op, dequant=True)


def _const_scales_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    slot = "Scales" if op.type == "fake_channel_wise_dequantize_max_abs" else "Scale"
    for i, n in enumerate(op.inputs.get(slot) or []):
        if info.value(n) is None:
            return f"{slot}[{i}] is not a constant"
    return None


@register_converter("fake_dequantize_max_abs", supports=_const_scales_refusal)
def _fake_dequantize_max_abs(ctx: ConvertContext, op: OpDesc) -> None:
    s = np.asarray(ctx.value(op.input("Scale") or ""), F32).reshape(-1)[0]
    k = np.asarray(s / F32(op.attrs["max_range"]), F32)
    ctx.add("Mul", [ctx.input(op, "X"), ctx.const(k, hint="dqs")], [ctx.output(op, "Out")])


@register_converter("fake_channel_wise_dequantize_max_abs", supports=_const_scales_refusal)
def _fake_channel_wise_dequantize_max_abs(ctx: ConvertContext, op: OpDesc) -> None:
    """One scale: X * s[c] / r0 along quant_axis; two: X * s0[c] * s1 / (r0 r1) along x_num_col_dims."""
    x = op.input("X")
    assert x is not None
    scales = [np.asarray(ctx.value(n), F32).reshape(-1) for n in op.inputs["Scales"]]
    bits = [F32(bin_count(b)) for b in op.attrs["quant_bits"]]
    rank = ctx.rank(x)
    if rank is None:
        raise ConversionError("X's rank is unknown")
    if len(scales) == 1:
        k, axis = scales[0] / bits[0], int(op.attrs["quant_axis"])
    else:
        k, axis = scales[0] * scales[1][0] / (bits[0] * bits[1]), int(op.attrs["x_num_col_dims"])
    ctx.add("Mul", [ctx.tensor(x), ctx.const(_broadcast(k.astype(F32), axis, rank), hint="dqs")],
            [ctx.output(op, "Out")])


@register_converter("moving_average_abs_max_scale")
def _observer(ctx: ConvertContext, op: OpDesc) -> None:
    if op.output("Out"):
        ctx.add("Identity", [ctx.input(op, "X")], [ctx.output(op, "Out")])
