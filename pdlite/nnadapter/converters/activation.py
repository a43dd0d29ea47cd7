"""Converters of activations and unary math ops (Paddle formulas, in the input's dtype).

- relu6(threshold) = Clip(x, 0, threshold); brelu/hardtanh = Clip(x, t_min, t_max).
- hard_sigmoid(slope, offset) = HardSigmoid(alpha=slope, beta=offset) = clip(slope * x + offset, 0, 1).
- hard_swish(threshold, scale, offset) = x * clip(x + offset, 0, threshold) / scale (ONNX HardSwish
  when the attributes are Paddle's defaults 6, 6, 3).
- gelu = 0.5 x (1 + erf(x / sqrt 2)); approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
- swish(beta) = x * sigmoid(beta x); silu = x * sigmoid(x); softsign = x / (1 + |x|).
"""
from __future__ import annotations

import math

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import is_float, scalar
from pdlite.nnadapter.registry import register_converter

# Paddle op type -> ONNX op type, for ops that are the same function with no attributes
SIMPLE = {
    "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "abs": "Abs", "reciprocal": "Reciprocal", "floor": "Floor", "ceil": "Ceil", "sign": "Sign",
    "sin": "Sin", "cos": "Cos", "erf": "Erf", "round": "Round", "softsign": "Softsign",
}


def _float_only(op: OpDesc, info: TensorInfo) -> str | None:
    return None if is_float(info, op.input("X")) else f"X has dtype {info.dtype(op.input('X'))}, not float"


def _round_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if int(op.attrs["decimals"] or 0) != 0:
        return "round with decimals != 0"
    return _float_only(op, info)


def _simple(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add(SIMPLE[op.type], [ctx.input(op, "X")], [ctx.output(op, "Out")])


for _t in SIMPLE:
    register_converter(_t, supports=_round_refusal if _t == "round" else _float_only)(_simple)


def _clip(ctx: ConvertContext, op: OpDesc, lo: float, hi: float) -> None:
    x = op.input("X")
    assert x is not None
    ctx.add("Clip", [ctx.tensor(x), scalar(ctx, x, lo), scalar(ctx, x, hi)], [ctx.output(op, "Out")])


@register_converter("relu6", supports=_float_only)
def _relu6(ctx: ConvertContext, op: OpDesc) -> None:
    _clip(ctx, op, 0.0, float(op.attrs["threshold"]))


@register_converter("brelu", "hardtanh", supports=_float_only)
def _brelu(ctx: ConvertContext, op: OpDesc) -> None:
    _clip(ctx, op, float(op.attrs["t_min"]), float(op.attrs["t_max"]))


def _clip_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    for slot in ("Min", "Max"):
        n = op.input(slot)
        if n is not None and info.value(n) is None:
            return f"clip with a non-constant {slot} tensor"
    return None


@register_converter("clip", supports=_clip_refusal)
def _clip_op(ctx: ConvertContext, op: OpDesc) -> None:
    lo, hi = float(op.attrs["min"]), float(op.attrs["max"])
    if op.input("Min") is not None:
        lo = float(np.asarray(ctx.value(op.input("Min"))).reshape(-1)[0])
    if op.input("Max") is not None:
        hi = float(np.asarray(ctx.value(op.input("Max"))).reshape(-1)[0])
    x = op.input("X")
    assert x is not None
    dt = ctx.dtype(x)
    if dt.kind == "f":
        info = np.finfo(dt)
        lo, hi = max(lo, float(info.min)), min(hi, float(info.max))
    _clip(ctx, op, lo, hi)


@register_converter("hard_sigmoid", supports=_float_only)
def _hard_sigmoid(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("HardSigmoid", [ctx.input(op, "X")], [ctx.output(op, "Out")],
            alpha=float(op.attrs["slope"]), beta=float(op.attrs["offset"]))


@register_converter("hard_swish", supports=_float_only)
def _hard_swish(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    t, s, o = (float(op.attrs[k]) for k in ("threshold", "scale", "offset"))
    xo = ctx.tensor(x)
    if (t, s, o) == (6.0, 6.0, 3.0):
        ctx.add("HardSwish", [xo], [ctx.output(op, "Out")])
        return
    shifted = ctx.add("Add", [xo, scalar(ctx, x, o)])
    clipped = ctx.add("Clip", [shifted, scalar(ctx, x, 0.0), scalar(ctx, x, t)])
    prod = ctx.add("Mul", [clipped, xo])
    ctx.add("Div", [prod, scalar(ctx, x, s)], [ctx.output(op, "Out")])


@register_converter("leaky_relu", supports=_float_only)
def _leaky_relu(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("LeakyRelu", [ctx.input(op, "X")], [ctx.output(op, "Out")], alpha=float(op.attrs["alpha"]))


@register_converter("elu", supports=_float_only)
def _elu(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Elu", [ctx.input(op, "X")], [ctx.output(op, "Out")], alpha=float(op.attrs["alpha"]))


@register_converter("gelu", supports=_float_only)
def _gelu(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    if op.attrs.get("approximate"):
        cube = ctx.add("Mul", [ctx.add("Mul", [xo, xo]), xo])
        inner = ctx.add("Add", [xo, ctx.add("Mul", [cube, scalar(ctx, x, 0.044715)])])
        t = ctx.add("Tanh", [ctx.add("Mul", [inner, scalar(ctx, x, math.sqrt(2.0 / math.pi))])])
    else:
        t = ctx.add("Erf", [ctx.add("Mul", [xo, scalar(ctx, x, 1.0 / math.sqrt(2.0))])])
    one_plus = ctx.add("Add", [t, scalar(ctx, x, 1.0)])
    half_x = ctx.add("Mul", [xo, scalar(ctx, x, 0.5)])
    ctx.add("Mul", [half_x, one_plus], [ctx.output(op, "Out")])


def _swish_like(ctx: ConvertContext, op: OpDesc, beta: float) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    arg = xo if beta == 1.0 else ctx.add("Mul", [xo, scalar(ctx, x, beta)])
    ctx.add("Mul", [xo, ctx.add("Sigmoid", [arg])], [ctx.output(op, "Out")])


@register_converter("swish", supports=_float_only)
def _swish(ctx: ConvertContext, op: OpDesc) -> None:
    _swish_like(ctx, op, float(op.attrs["beta"]))


@register_converter("silu", supports=_float_only)
def _silu(ctx: ConvertContext, op: OpDesc) -> None:
    _swish_like(ctx, op, 1.0)


@register_converter("rsqrt", supports=_float_only)
def _rsqrt(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Reciprocal", [ctx.add("Sqrt", [ctx.input(op, "X")])], [ctx.output(op, "Out")])


@register_converter("square", supports=_float_only)
def _square(ctx: ConvertContext, op: OpDesc) -> None:
    xo = ctx.input(op, "X")
    ctx.add("Mul", [xo, xo], [ctx.output(op, "Out")])


def _prelu_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    if op.attrs["data_format"] != "NCHW":
        return "prelu with data_format NHWC"
    if op.attrs.get("mode") not in ("all", "channel", "element"):
        return f"prelu mode {op.attrs.get('mode')!r}"
    xs = info.shape(op.input("X"))
    if xs is None:
        return "prelu needs the rank of X"
    if op.attrs.get("mode") == "element" and any(d < 0 for d in xs[1:]):
        return "prelu mode 'element' needs X's non-batch dims"
    return _float_only(op, info)


@register_converter("prelu", supports=_prelu_refusal)
def _prelu(ctx: ConvertContext, op: OpDesc) -> None:
    x, a = op.input("X"), op.input("Alpha")
    assert x is not None and a is not None
    rank = ctx.rank(x) or 0
    mode = op.attrs["mode"]
    if mode == "all":
        shape: list[int] = [1] * rank
    elif mode == "channel":
        shape = [1, -1] + [1] * (rank - 2) if rank >= 2 else [-1]
    else:
        xs = ctx.shape(x) or ()
        shape = [1] + [int(d) for d in xs[1:]]
    slope = ctx.add("Reshape", [ctx.tensor(a), ctx.ints(shape)])
    if ctx.dtype(a) != ctx.dtype(x):
        slope = ctx.cast(slope, ctx.dtype(x))
    ctx.add("PRelu", [ctx.tensor(x), slope], [ctx.output(op, "Out")])


# -- less common activations (Paddle's formulas) -------------------------------------------------
@register_converter("log1p", "log2", "log10", supports=_float_only)
def _logs(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    if op.type == "log1p":
        ctx.add("Log", [ctx.add("Add", [xo, scalar(ctx, x, 1.0)])], [ctx.output(op, "Out")])
        return
    base = 2.0 if op.type == "log2" else 10.0
    ctx.add("Div", [ctx.add("Log", [xo]), scalar(ctx, x, math.log(base))], [ctx.output(op, "Out")])


@register_converter("selu", supports=_float_only)
def _selu(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Selu", [ctx.input(op, "X")], [ctx.output(op, "Out")], alpha=float(op.attrs["alpha"]),
            gamma=float(op.attrs["scale"]))


@register_converter("celu", supports=_float_only)
def _celu(ctx: ConvertContext, op: OpDesc) -> None:
    ctx.add("Celu", [ctx.input(op, "X")], [ctx.output(op, "Out")], alpha=float(op.attrs["alpha"]))


def _softplus_of(ctx: ConvertContext, x: str, xo: str, beta: float, threshold: float) -> str:
    """Paddle's softplus: x where beta * x > threshold, else log(exp(beta * x) + 1) / beta."""
    xb = xo if beta == 1.0 else ctx.add("Mul", [xo, scalar(ctx, x, beta)])
    soft = ctx.add("Log", [ctx.add("Add", [ctx.add("Exp", [xb]), scalar(ctx, x, 1.0)])])
    if beta != 1.0:
        soft = ctx.add("Div", [soft, scalar(ctx, x, beta)])
    return ctx.add("Where", [ctx.add("Greater", [xb, scalar(ctx, x, threshold)]), xo, soft])


@register_converter("softplus", supports=_float_only)
def _softplus(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    y = _softplus_of(ctx, x, ctx.tensor(x), float(op.attrs["beta"]), float(op.attrs["threshold"]))
    ctx.add("Identity", [y], [ctx.output(op, "Out")])


@register_converter("mish", supports=_float_only)
def _mish(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    sp = _softplus_of(ctx, x, xo, 1.0, float(op.attrs["threshold"]))
    ctx.add("Mul", [xo, ctx.add("Tanh", [sp])], [ctx.output(op, "Out")])


@register_converter("thresholded_relu", supports=_float_only)
def _thresholded_relu(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    xo = ctx.tensor(x)
    keep = ctx.add("Greater", [xo, scalar(ctx, x, float(op.attrs["threshold"]))])
    ctx.add("Where", [keep, xo, scalar(ctx, x, float(op.attrs["value"]))], [ctx.output(op, "Out")])


@register_converter("hard_shrink", "softshrink", supports=_float_only)
def _shrink(ctx: ConvertContext, op: OpDesc) -> None:
    lam = float(op.attrs["threshold" if op.type == "hard_shrink" else "lambda"])
    ctx.add("Shrink", [ctx.input(op, "X")], [ctx.output(op, "Out")], lambd=lam,
            bias=0.0 if op.type == "hard_shrink" else lam)


@register_converter("tanh_shrink", supports=_float_only)
def _tanh_shrink(ctx: ConvertContext, op: OpDesc) -> None:
    xo = ctx.input(op, "X")
    ctx.add("Sub", [xo, ctx.add("Tanh", [xo])], [ctx.output(op, "Out")])


def _pow_refusal(op: OpDesc, info: TensorInfo) -> str | None:
    ft = op.input("FactorTensor")
    if ft is not None and info.value(ft) is None:
        return "pow with a non-constant FactorTensor"
    return _float_only(op, info)


@register_converter("pow", supports=_pow_refusal)
def _pow(ctx: ConvertContext, op: OpDesc) -> None:
    x = op.input("X")
    assert x is not None
    ft = op.input("FactorTensor")
    factor = float(np.asarray(ctx.value(ft)).reshape(-1)[0]) if ft is not None else float(op.attrs["factor"])
    xo = ctx.tensor(x)
    if factor == 2.0:
        ctx.add("Mul", [xo, xo], [ctx.output(op, "Out")])
    else:
        ctx.add("Pow", [xo, scalar(ctx, x, factor)], [ctx.output(op, "Out")])
