"""Converters of conv2d, depthwise_conv2d, conv2d_transpose and the optimizer's fused_conv2d.

Paddle paddings [top, bottom, left, right] (or [h, w]) become ONNX pads [top, left, bottom,
right]. SAME pads are computed from the input size when it is known (Paddle's rule: out =
ceil(in / stride), the odd pixel at the end, dilations reset to 1), else ONNX's auto_pad
SAME_UPPER, which is the same rule. Filters keep Paddle's layout, which is ONNX's for both
Conv ([Cout, Cin/g, kh, kw]) and ConvTranspose ([Cin, Cout/g, kh, kw]). conv2d_transpose's
`output_size` becomes ONNX output_padding = output_size - the size without it.
"""
from __future__ import annotations

from typing import Any

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import activation_refusal, convert_fused, pair, temp_like
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.fused import CONV_TYPES, base_desc, split_activation
from pdlite.operators.geometry import conv_transpose_out_size, resolve_padding
from pdlite.operators.nn import is_channel_last

TRANSPOSED = ("conv2d_transpose", "depthwise_conv2d_transpose")


def _refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if is_channel_last(op.attrs["data_format"]):
        return "data_format NHWC"
    if info.rank(op.input("Input")) not in (None, 4):
        return "input is not 4-D"
    w = op.input("Filter")
    if info.rank(w) not in (None, 4):
        return "filter is not 4-D"
    if op.type in TRANSPOSED and op.attrs.get("output_size"):
        xs = info.shape(op.input("Input"))
        if xs is None or any(d < 0 for d in xs[2:]) or not info.static(w):
            return "output_size needs the input's spatial size"
    r = op.input("ResidualData")
    if r is not None and (op.type in TRANSPOSED or info.rank(r) not in (None, 4)):
        return "ResidualData input"
    return None


def _pads(ctx: ConvertContext, op: OpDesc, k_hw: list[int], strides: list[int]) -> dict[str, Any]:
    """ONNX pads / auto_pad (and the dilations Paddle actually uses) of a (transposed) convolution."""
    xs = ctx.shape(op.input("Input") or "")
    a = op.attrs
    p, dil = resolve_padding(a["padding_algorithm"], a["paddings"], xs[2:] if xs is not None else None, strides,
                             k_hw, pair(a["dilations"]), _raise)
    if p is None:  # SAME with an unknown input size: ONNX's SAME_UPPER is Paddle's rule
        return {"auto_pad": "SAME_UPPER", "dilations": list(dil)}
    return {"pads": [p[0], p[2], p[1], p[3]], "dilations": list(dil)}


def _raise(msg: str) -> Any:
    raise ConversionError(msg)


def _kernel_hw(ctx: ConvertContext, op: OpDesc) -> list[int]:
    ws = ctx.shape(op.input("Filter") or "")
    if ws is None or len(ws) != 4 or ws[2] < 0 or ws[3] < 0:
        raise ConversionError("filter shape unknown")
    return [int(ws[2]), int(ws[3])]


def _bias(ctx: ConvertContext, op: OpDesc) -> list[str]:
    b = op.input("Bias")
    if b is None:
        return []
    val = ctx.value(b)
    if val is not None:
        return [ctx.const(val.reshape(-1), hint="bias")]
    return [ctx.add("Reshape", [ctx.tensor(b), ctx.ints([-1])])]


@register_converter("conv2d", "depthwise_conv2d", supports=_refusal)
def _conv(ctx: ConvertContext, op: OpDesc) -> None:
    k = _kernel_hw(ctx, op)
    strides = pair(op.attrs["strides"])
    ins = [ctx.input(op, "Input"), ctx.input(op, "Filter"), *_bias(ctx, op)]
    res = op.input("ResidualData")  # (fused by conv_residual_add_fuse_pass): Conv, then Add
    out = ctx.output(op, "Output") if res is None else ctx.out(temp_like(ctx, op.output("Output") or ""))
    ctx.add("Conv", ins, [out], kernel_shape=k, strides=strides, group=int(op.attrs["groups"] or 1),
            **_pads(ctx, op, k, strides))
    if res is not None:
        ctx.add("Add", [out, ctx.tensor(res)], [ctx.output(op, "Output")])


@register_converter(*TRANSPOSED, supports=_refusal)
def _conv_transpose(ctx: ConvertContext, op: OpDesc) -> None:
    k = _kernel_hw(ctx, op)
    strides = pair(op.attrs["strides"])
    pads = _pads(ctx, op, k, strides)
    extra = [int(v) for v in op.attrs.get("output_padding") or []]
    out_size = [int(v) for v in op.attrs.get("output_size") or []]
    if out_size:
        xs = ctx.shape(op.input("Input") or "")
        if xs is None or "pads" not in pads:
            raise ConversionError("output_size needs the input's spatial size")
        p, d = pads["pads"], pads["dilations"]
        extra = []
        for i in range(2):
            # ONNX pads are [top, left, bottom, right]
            extra.append(out_size[i] - conv_transpose_out_size(xs[2 + i], k[i], d[i], p[i], p[i + 2], strides[i]))
    group = int(op.attrs["groups"] or 1)
    ins = [ctx.input(op, "Input"), ctx.input(op, "Filter"), *_bias(ctx, op)]
    ctx.add("ConvTranspose", ins, [ctx.output(op, "Output")], kernel_shape=k, strides=strides, group=group,
            output_padding=extra if extra and any(extra) else None, **pads)


def _fused_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    conv_type = str(op.attrs["conv_type"])
    if conv_type not in CONV_TYPES:
        return f"conv_type {conv_type!r}"
    base = base_desc(op, conv_type)
    act, attrs = split_activation(op.attrs)
    return _refusal(base, info) or activation_refusal(act, attrs, base, info)


@register_converter("fused_conv2d", supports=_fused_refusal)
def _fused_conv(ctx: ConvertContext, op: OpDesc) -> None:
    act, attrs = split_activation(op.attrs)
    convert_fused(ctx, base_desc(op, str(op.attrs["conv_type"])), "Output", act, attrs)

