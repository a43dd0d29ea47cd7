"""Ops that only the optimizer creates: a base op (conv, matmul, elementwise, scale) + an activation.

Design (one convention for every fused op):
- The activation is named by a string attribute, `act_type` (`activation_type` for `fc`, as in
  Paddle's fc op), "" meaning none. Its attributes are copied from the activation op with an
  `act_` prefix (hard_swish's `threshold` becomes `act_threshold`, leaky_relu's `alpha`
  `act_alpha`, ...), so one fused op carries any activation of `FUSABLE_ACTIVATIONS` exactly.
- Shape inference delegates to the base op's definition; kernels run the base op's host
  kernel, then the activation op's host kernel (no second copy of either computation).

The ops:
- `fused_conv2d`: Output = act(conv(Input, Filter) + Bias). `conv_type` names the base op
  (conv2d, depthwise_conv2d or conv2d_transpose) whose attributes it keeps; Bias (optional,
  one value per output channel, axis 1) is the base conv op's own Bias slot, which the host
  conv kernels add. Only conv+activation creates it: conv+batch_norm, conv+elementwise_add
  (bias) and conv+scale fold into the conv's Filter and Bias and keep the conv's op type.
- `fc`: Out = act(flatten(Input, in_num_col_dims) @ W + Bias), W of shape [K, N], Bias [N];
  Out's shape is Input.shape[:in_num_col_dims] + [N].
- `fusion_elementwise_<op>_activation` (add, sub, mul, div, max, min): Out = act(X <op> Y)
  with Paddle's `axis` broadcasting.
- `fusion_scale_activation`: Out = act(scale(X)) with scale's scale/bias/bias_after_scale.
- `skip_layernorm` (Paddle Inference's): Out = layer_norm(X + Y) over the dims from begin_norm_axis, X and Y of one
  shape (skip_layernorm_fuse_pass: a residual add and the layer_norm after it).
- `fused_attention`: multi-head self-attention of X (B, S, 3 H D) -> Out (B, S, H D) (attention_fuse_pass: the
  split of q / k / v, their reshapes and transposes, q k^T, softmax, .v and the transpose back).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.operators.elementwise import BroadcastError, aligned_shapes
from pdlite.operators.registry import OPS, Shape, ShapeContext, register_op

FUSABLE_ACTIVATIONS: tuple[str, ...] = (
    "relu", "relu6", "leaky_relu", "hard_swish", "hard_sigmoid", "swish", "silu", "sigmoid", "tanh",
    "gelu", "elu", "mish", "softplus",
)
CONV_TYPES: tuple[str, ...] = ("conv2d", "depthwise_conv2d", "conv2d_transpose")
FUSED_ELEMENTWISE: dict[str, str] = {
    f"fusion_elementwise_{k}_activation": f"elementwise_{k}" for k in ("add", "sub", "mul", "div", "max", "min")
}
ACT_PREFIX = "act_"


def activation_attrs(act: OpDesc) -> dict[str, Any]:
    """The activation's own attributes (its op definition's, defaults filled in) with the act_ prefix."""
    opdef = OPS[act.type]
    attrs = opdef.attach(act).attrs
    return {ACT_PREFIX + k: attrs[k] for k in opdef.defaults}


def split_activation(attrs: dict[str, Any], type_key: str = "act_type") -> tuple[str, dict[str, Any]]:
    """(activation type, its attributes without the prefix, the activation's defaults filled in) from a
    fused op's attributes."""
    act = str(attrs.get(type_key) or "")
    own = {k[len(ACT_PREFIX):]: v for k, v in attrs.items() if k.startswith(ACT_PREFIX) and k != "act_type"}
    opdef = OPS.get(act) if act else None
    return act, ({**opdef.defaults, **own} if opdef is not None else own)


def base_desc(op: OpDesc, base_type: str, drop_inputs: tuple[str, ...] = ()) -> OpDesc:
    """The base op of a fused op: same slots (minus `drop_inputs`), attributes without act ones."""
    attrs = {k: v for k, v in op.attrs.items()
             if not k.startswith(ACT_PREFIX) and k not in ("conv_type", "activation_type")}
    ins = {k: list(v) for k, v in op.inputs.items() if k not in drop_inputs}
    return OPS[base_type].attach(OpDesc(base_type, ins, {k: list(v) for k, v in op.outputs.items()}, attrs))


def _delegate(ctx: ShapeContext, base_type: str, drop_inputs: tuple[str, ...] = ()) -> dict[str, list[Shape]]:
    fn = OPS[base_type].infer_shape
    assert fn is not None
    values = {k: v for k, v in ctx._values.items() if k not in drop_inputs}  # noqa: SLF001 - same package
    return fn(ShapeContext(base_desc(ctx.op, base_type, drop_inputs), values))


@register_op("fused_conv2d", inputs=["Input", "Filter"], outputs=["Output"],
             optional_inputs=["Bias", "ResidualData"], defaults={"conv_type": "conv2d", "act_type": ""})
def _fused_conv_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """act(conv(Input, Filter) + Bias): the base conv's output shape (Bias: one value per channel)."""
    conv = str(ctx.attrs["conv_type"])
    ctx.require(conv in CONV_TYPES, f"conv_type must be one of {list(CONV_TYPES)}, got {conv!r}")
    return _delegate(ctx, conv)


@register_op("fc", inputs=["Input", "W"], outputs=["Out"], optional_inputs=["Bias"],
             defaults={"in_num_col_dims": 1, "activation_type": "", "padding_weights": False})
def _fc_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = act(Input flattened at in_num_col_dims @ W + Bias): Input.shape[:k] + [W.shape[1]]."""
    x, w = ctx.shape("Input"), ctx.shape("W")
    k = int(ctx.attrs["in_num_col_dims"])
    ctx.require(len(w) == 2, f"W must be 2-D, got {list(w)}")
    ctx.require(0 < k < len(x), f"in_num_col_dims {k} must be in [1, {len(x) - 1}] for Input {list(x)}")
    ctx.require(int(np.prod(x[k:])) == w[0], f"Input {list(x)} flattened at {k} does not match W {list(w)}")
    if ctx.has("Bias"):
        ctx.require(int(np.prod(ctx.shape("Bias"))) == w[1], f"Bias {list(ctx.shape('Bias'))} must hold {w[1]} values")
    return {"Out": [tuple(x[:k]) + (w[1],)]}


def _fused_elementwise_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """act(X <op> Y) with Paddle's axis broadcasting."""
    return _delegate(ctx, FUSED_ELEMENTWISE[ctx.op.type])


for _t in FUSED_ELEMENTWISE:
    register_op(_t, inputs=["X", "Y"], outputs=["Out"], defaults={"axis": -1, "act_type": ""})(
        _fused_elementwise_shape)


@register_op("fusion_scale_activation", inputs=["X"], outputs=["Out"],
             defaults={"scale": 1.0, "bias": 0.0, "bias_after_scale": True, "act_type": ""})
def _fused_scale_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """act(scale * X + bias) (or scale * (X + bias)): X's shape."""
    return {"Out": [ctx.shape("X")]}


@register_op("fused_attention", inputs=["X"], outputs=["Out"], defaults={"head_number": 1, "alpha": 1.0})
def _fused_attention_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Multi-head self-attention of X (B, S, 3 H D), q, k and v side by side (attention_fuse_pass): per head h,
    softmax(alpha * q_h k_h^T) v_h, the heads side by side again: Out (B, S, H D)."""
    x = ctx.shape("X")
    h = int(ctx.attrs["head_number"])
    ctx.require(len(x) == 3, f"X must be 3-D (batch, tokens, 3 * heads * head size), got {list(x)}")
    ctx.require(h > 0 and x[2] > 0 and x[2] % (3 * h) == 0,
                f"X's last dim {x[2]} must be 3 * head_number ({h}) * head size")
    return {"Out": [(x[0], x[1], x[2] // 3)]}


@register_op("skip_layernorm", inputs=["X", "Y"], outputs=["Out"], optional_inputs=["Scale", "Bias"],
             defaults={"epsilon": 1e-5, "begin_norm_axis": 1})
def _skip_layernorm_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out = layer_norm(X + Y): the broadcast shape of X and Y (the pass fuses adds of one shape)."""
    x, y = ctx.shape("X"), ctx.shape("Y")
    ctx.require(len(x) == len(y), f"X {list(x)} and Y {list(y)} must have one rank")
    try:
        x = tuple(aligned_shapes(tuple(x), tuple(y), -1)[2])
    except BroadcastError as e:
        ctx.fail(f"X {list(x)} and Y {list(y)}: {e}")
    axis = int(ctx.attrs["begin_norm_axis"])
    ctx.require(0 < axis < len(x) or (axis == 0 and len(x) >= 1), f"begin_norm_axis {axis} invalid for X {list(x)}")
    return {"Out": [tuple(x)]}
