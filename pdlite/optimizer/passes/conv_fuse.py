"""Conv fusions: bias add, batch_norm and scale folded into the weights; a trailing activation fused.

For conv2d / depthwise_conv2d (Filter [Cout, Cin/g, kh, kw]) and conv2d_transpose (Filter
[Cin, Cout/g, kh, kw]), output channel o is linear in the filter slice W_o, so a per-channel
affine map a*y + c after the conv folds into the weights: W'_o = a_o * W_o, b'_o = a_o * b_o + c_o.

- conv_elementwise_add_fuse_pass: y = conv(x) + B, B a persistable vector along axis 1 (a 1-D [C]
  with axis=1, a [1, C, 1, 1] with axis=-1, or one value): a = 1, c = B.
- conv_bn_fuse_pass: y = (conv(x) + b - mean) * gamma / sqrt(var + eps) + beta:
  a = gamma / sqrt(var + eps), c = beta - mean * a (computed in float64, stored as float32).
- conv_scale_fuse_pass: y = s * conv(x) + t (bias_after_scale) or s * (conv(x) + t): a = s, c = t or s*t.
- conv_residual_add_fuse_pass: act(conv(x) + r), r a tensor of the output's shape -> fused_conv2d with
  ResidualData r (the activation applied last).
- conv_activation_fuse_pass: act(conv(x)) -> fused_conv2d (conv_type, act_type, act_* attrs).

The folded Filter and Bias are new params under new names (the old arrays may be shared by
other ops); the conv keeps its op type and gets its Bias slot. NHWC convs and convs with
ResidualData are refused.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.operators.fused import CONV_TYPES, FUSABLE_ACTIVATIONS, activation_attrs
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.pattern import (
    Fuser,
    Match,
    Pattern,
    broadcast_vector,
    input_node,
    new_param,
    param_value,
    replace_ops,
)


def out_channels(conv: OpDesc, w: np.ndarray) -> int:
    if conv.type == "conv2d_transpose":
        return int(w.shape[1]) * int(conv.attrs["groups"] or 1)
    return int(w.shape[0])


def scale_filter(conv: OpDesc, w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """W' with output channel o scaled by a[o] (float64 maths, float32 result)."""
    w64 = np.asarray(w, dtype=np.float64)
    if conv.type == "conv2d_transpose":
        g = int(conv.attrs["groups"] or 1)
        cin, ocg = w.shape[:2]
        w2 = w64.reshape(g, cin // g, ocg, *w.shape[2:]) * a.reshape(g, 1, ocg, 1, 1)
        return w2.reshape(w.shape).astype(np.float32)
    return (w64 * a.reshape(-1, 1, 1, 1)).astype(np.float32)


def conv_refusal(graph: Graph, m: Match, ctx: PassContext) -> str | None:
    """Why the matched conv cannot take folded weights (None: it can)."""
    conv = m.op("conv")
    if str(conv.attrs["data_format"]) not in ("NCHW", "AnyLayout"):
        return "conv is not NCHW"
    if conv.inputs.get("ResidualData"):
        return "conv has ResidualData"
    w = param_value(ctx, m["w"])
    if w is None or w.ndim != 4 or w.dtype != np.float32:
        return "Filter is not a 4-D float32 param"
    b = conv.input("Bias")
    if b is not None and param_value(ctx, input_node(m["conv"], b)) is None:
        return "conv Bias is not a param"
    return None


def fold_affine(graph: Graph, m: Match, ctx: PassContext, a: np.ndarray | None, c: np.ndarray,
                removed: list[Node], out: Node) -> None:
    """Replace conv + `removed` ops by the conv with W' = a*W, b' = a*b + c, writing `out`."""
    conv_node = m["conv"]
    conv = m.op("conv")
    w = param_value(ctx, m["w"])
    assert w is not None
    oc = out_channels(conv, w)
    bias_name = conv.input("Bias")
    b = (np.zeros(oc) if bias_name is None
         else np.asarray(param_value(ctx, input_node(conv_node, bias_name)), dtype=np.float64).reshape(-1))
    new_inputs = []
    desc = conv.copy()
    if a is not None:
        wn = new_param(graph, ctx, m["w"].name, scale_filter(conv, w, a))
        desc.inputs["Filter"] = [wn.name]
        new_inputs.append(wn)
        b = a * b
    bn = new_param(graph, ctx, f"{out.name}.bias", (b + c).astype(np.float32))
    new_inputs.append(bn)
    desc.inputs["Bias"] = [bn.name]
    desc.outputs["Output"] = [out.name]
    replace_ops(graph, [conv_node, *removed], desc, new_inputs)


def _conv_then(op_key: str, op_types: str | tuple[str, ...], inputs: dict[str, str], **op_kw) -> Pattern:
    """conv (persistable Filter w) -> y (intermediate) -> op reading y at inputs['y'] and params."""
    p = Pattern()
    w = p.var("w", persistable=True)
    y = p.var("y", intermediate=True)
    p.op("conv", CONV_TYPES, inputs={"Filter": w}, outputs={"Output": y})
    ins = {slot: y if key == "y" else p.var(key, persistable=True) for slot, key in inputs.items()}
    p.op(op_key, op_types, inputs=ins, outputs={op_kw.pop("out_slot", "Out"): p.var("out")}, **op_kw)
    return p


@register_pass("conv_elementwise_add_fuse_pass")
class ConvElementwiseAddFuse(Fuser):
    def pattern(self) -> Pattern:
        return _conv_then("add", "elementwise_add", {"X": "y", "Y": "b"})

    def _bias(self, m: Match, ctx: PassContext) -> np.ndarray | None:
        w, b = param_value(ctx, m["w"]), param_value(ctx, m["b"])
        if w is None or b is None:
            return None
        oc = out_channels(m.op("conv"), w)
        return broadcast_vector(b, int(m.op("add").attrs["axis"]), (1, oc, 1, 1), 1)

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        return conv_refusal(graph, m, ctx) or (None if self._bias(m, ctx) is not None
                                               else "Y is not one value per output channel")

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        c = self._bias(m, ctx)
        assert c is not None
        fold_affine(graph, m, ctx, None, c, [m["add"]], m["out"])


@register_pass("conv_bn_fuse_pass")
class ConvBNFuse(Fuser):
    def pattern(self) -> Pattern:
        return _conv_then("bn", "batch_norm", {"X": "y", "Scale": "gamma", "Bias": "beta", "Mean": "mean",
                                                 "Variance": "var"}, out_slot="Y")

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        bn = m["bn"]
        if str(bn.op.attrs["data_layout"]) not in ("NCHW", "AnyLayout"):
            return "batch_norm is not NCHW"
        if any(v.outputs or v.name in ctx.meta.get("fetch_names", []) for v in bn.outputs if v is not m["out"]):
            return "a batch_norm statistics output is used"
        w = param_value(ctx, m["w"])
        vals = [param_value(ctx, m[k]) for k in ("gamma", "beta", "mean", "var")]
        if w is not None and any(v is None or v.size != out_channels(m.op("conv"), w) for v in vals):
            return "batch_norm params do not hold one value per output channel"
        return conv_refusal(graph, m, ctx)

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        gamma, beta, mean, var = (np.asarray(param_value(ctx, m[k]), dtype=np.float64).reshape(-1)
                                  for k in ("gamma", "beta", "mean", "var"))
        a = gamma / np.sqrt(var + float(m.op("bn").attrs["epsilon"]))
        fold_affine(graph, m, ctx, a, beta - mean * a, [m["bn"]], m["out"])


def _scale_attrs(op: OpDesc) -> tuple[float, float, bool]:
    return (float(op.attrs["scale"]), float(op.attrs["bias"]),
            bool(op.attrs["bias_after_scale"]))


@register_pass("conv_scale_fuse_pass")
class ConvScaleFuse(Fuser):
    def pattern(self) -> Pattern:
        return _conv_then("scale", "scale", {"X": "y"})

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if m.op("scale").inputs.get("ScaleTensor"):
            return "scale comes from a tensor"
        return conv_refusal(graph, m, ctx)

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        s, t, after = _scale_attrs(m.op("scale"))
        w = param_value(ctx, m["w"])
        assert w is not None
        oc = out_channels(m.op("conv"), w)
        fold_affine(graph, m, ctx, np.full(oc, s), np.full(oc, t if after else s * t), [m["scale"]], m["out"])


RESIDUAL_CONV_TYPES = ("conv2d", "depthwise_conv2d")


def _residual_pattern(conv_slot: str, with_act: bool) -> Pattern:
    """conv -> y (intermediate) -> elementwise_add (y at conv_slot, r at the other) [-> act]."""
    p = Pattern()
    y = p.var("y", intermediate=True)
    p.op("conv", RESIDUAL_CONV_TYPES, outputs={"Output": y})
    r = p.var("r")
    ins = {"X": y, "Y": r} if conv_slot == "X" else {"X": r, "Y": y}
    if with_act:
        s = p.var("s", intermediate=True)
        p.op("add", "elementwise_add", inputs=ins, outputs={"Out": s})
        p.op("act", FUSABLE_ACTIVATIONS, inputs={"X": s}, outputs={"Out": p.var("out")})
    else:
        p.op("add", "elementwise_add", inputs=ins, outputs={"Out": p.var("out")})
    return p


@register_pass("conv_residual_add_fuse_pass")
class ConvResidualAddFuse(Fuser):
    """act(conv(x) + r) with r a tensor of the conv output's shape (a residual connection: ResNet's blocks,
    MobileNetV2's) -> fused_conv2d with ResidualData r (and the activation): the host conv adds r in its epilogue,
    no separate pass over the output (Paddle Inference's conv_elementwise_add_onednn_fuse_pass). The conv at X is
    tried first (a projection shortcut conv at Y stays as it is). r must have the output's static shape (equal
    dims, -1 allowed where both are -1): a broadcast add is left alone."""

    def pattern(self) -> list[Pattern]:
        return [_residual_pattern(slot, act) for act in (True, False) for slot in ("X", "Y")]

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        conv = m.op("conv")
        if str(conv.attrs["data_format"]) not in ("NCHW", "AnyLayout"):
            return "conv is not NCHW"
        if conv.inputs.get("ResidualData"):
            return "conv has ResidualData"
        if "act" in m and len(m["act"].inputs) != 1:
            return "the activation has extra inputs"
        add = m.op("add")
        if int(add.attrs["axis"]) != -1:
            return "the add broadcasts along an axis"
        ys, rs = (list(n.var.shape) if n.var is not None else None for n in (m["y"], m["r"]))
        if not ys or ys != rs:
            return "the residual's shape is not known to be the conv output's"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        conv = m.op("conv")
        attrs = {**conv.attrs, "conv_type": conv.type, "act_type": ""}
        removed = [m["conv"], m["add"]]
        if "act" in m:
            act = m.op("act")
            attrs.update(act_type=act.type, **activation_attrs(act))
            removed.append(m["act"])
        inputs = {k: list(v) for k, v in conv.inputs.items() if v}
        inputs["ResidualData"] = [m["r"].name]
        replace_ops(graph, removed, OpDesc("fused_conv2d", inputs, {"Output": [m["out"].name]}, attrs))


@register_pass("conv_activation_fuse_pass")
class ConvActivationFuse(Fuser):
    def pattern(self) -> Pattern:
        p = Pattern()
        y = p.var("y", intermediate=True)
        p.op("conv", CONV_TYPES, outputs={"Output": y})
        p.op("act", FUSABLE_ACTIVATIONS, inputs={"X": y}, outputs={"Out": p.var("out")})
        return p

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if len(m["act"].inputs) != 1:
            return "the activation has extra inputs"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        conv, act = m.op("conv"), m.op("act")
        attrs = {**conv.attrs, "conv_type": conv.type, "act_type": act.type, **activation_attrs(act)}
        desc = OpDesc("fused_conv2d", {k: list(v) for k, v in conv.inputs.items() if v},
                      {"Output": [m["out"].name]}, attrs)
        replace_ops(graph, [m["conv"], m["act"]], desc)
