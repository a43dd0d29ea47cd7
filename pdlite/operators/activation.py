"""Unary activation and math ops: Out has the shape of X; defaults are Paddle's op defaults."""
from __future__ import annotations

from pdlite.operators.registry import Shape, ShapeContext, register_op

# op type -> attribute defaults (the legacy ProgramDesc op's defaults).
UNARY_OPS: dict[str, dict] = {
    "relu": {},
    "relu6": {"threshold": 6.0},
    "sigmoid": {},
    "tanh": {},
    "hard_sigmoid": {"slope": 0.2, "offset": 0.5},
    "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0},
    "swish": {"beta": 1.0},
    "silu": {},
    "leaky_relu": {"alpha": 0.02},
    "gelu": {"approximate": False},
    "exp": {},
    "log": {},
    "log2": {},
    "log10": {},
    "log1p": {},
    "sqrt": {},
    "rsqrt": {},
    "abs": {},
    "square": {},
    "reciprocal": {},
    "floor": {},
    "ceil": {},
    "round": {"decimals": 0},
    "sign": {},
    "sin": {},
    "cos": {},
    "erf": {},
    "pow": {"factor": 1.0},
    "softplus": {"beta": 1.0, "threshold": 20.0},
    "softsign": {},
    "mish": {"threshold": 20.0},
    "elu": {"alpha": 1.0},
    "selu": {"scale": 1.0507009873554805, "alpha": 1.6732632423543772},
    "celu": {"alpha": 1.0},
    "logsigmoid": {},
    "tanh_shrink": {},
    "softshrink": {"lambda": 0.5},
    "hard_shrink": {"threshold": 0.5},
    "thresholded_relu": {"threshold": 1.0, "value": 0.0},
    "brelu": {"t_min": 0.0, "t_max": 24.0},
    "hardtanh": {"t_min": 0.0, "t_max": 24.0},  # phi's name for brelu
    "tan": {},
    "asin": {},
    "acos": {},
    "atan": {},
    "sinh": {},
    "cosh": {},
    "asinh": {},
    "acosh": {},
    "atanh": {},
    "expm1": {},
    "trunc": {},
    "logit": {"eps": 1e-6},
    "stanh": {"scale_a": 0.67, "scale_b": 1.7159},
}
_FLT_MAX = 3.4028234663852886e38
# Attributes Paddle Inference 3.x (our oracle) ignores: its phi kernels hard-code relu6's 6, swish's
# beta 1 and hard_swish's 6/6/3 whatever the program says (checked on 3.3.1). Paddle-Lite honoured them;
# pdlite follows the oracle, for every target, by fixing them in the op definition.
_FIXED = {"relu6": {"threshold": 6.0}, "swish": {"beta": 1.0},
          "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0}}
# Optional tensor inputs that override an attribute.
_OPTIONAL_INPUTS = {"pow": ["FactorTensor"]}


def _same_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out has X's shape."""
    return {"Out": [ctx.shape("X")]}


for _t, _defaults in UNARY_OPS.items():
    register_op(
        _t, inputs=["X"], outputs=["Out"], optional_inputs=_OPTIONAL_INPUTS.get(_t, ()), defaults=_defaults,
        fixed=_FIXED.get(_t),
    )(_same_shape)


@register_op("clip", inputs=["X"], outputs=["Out"], optional_inputs=["Min", "Max"], defaults={"min": -_FLT_MAX, "max": _FLT_MAX})
def _clip_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = min(max(X, min), max); the Min/Max tensors (one element) override the attributes."""
    return {"Out": [ctx.shape("X")]}


@register_op("prelu", inputs=["X", "Alpha"], outputs=["Out"], defaults={"mode": "all", "data_format": "NCHW"})
def _prelu_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = X where X > 0 else Alpha * X; Alpha has 1 (all), C (channel) or X[1:] (element) values."""
    x = ctx.shape("X")
    n = 1
    for d in ctx.shape("Alpha"):
        n *= d
    mode = ctx.attrs["mode"]
    if mode == "all":
        ctx.require(n == 1, f"mode 'all' needs one Alpha value, got {n}")
    elif mode == "channel":
        ctx.require(len(x) >= 2, f"mode 'channel' needs X of rank >= 2, got {list(x)}")
        c = x[1] if ctx.attrs["data_format"] == "NCHW" else x[-1]
        ctx.require(n == c, f"mode 'channel' needs {c} Alpha values (one per channel), got {n}")
    elif mode == "element":
        want = 1
        for d in x[1:]:
            want *= d
        ctx.require(n == want, f"mode 'element' needs {want} Alpha values (X's shape without batch), got {n}")
    else:
        ctx.fail(f"unknown mode {mode!r}; expected 'all', 'channel' or 'element'")
    return {"Out": [x]}
