"""squeeze_excitation_fuse_pass: a squeeze-and-excitation block -> one `squeeze_excitation` op (host).

    p = pool2d(x)                                   avg, global (global_pooling, or adaptive with ksize [1, 1]), NCHW
    h = act1(conv(p, W1) + B1)                      1x1, groups 1, stride 1, no padding: W1 (C1, C, 1, 1)
    s = act2(conv(h, W2) + B2)                      the same: W2 (C, C1, 1, 1)
    y = elementwise_mul(s, x) or (x, s)             s (N, C, 1, 1) broadcast over x's H, W
 -> y = squeeze_excitation(x, W1, B1, W2, B2)       (pdlite/operators/squeeze_excitation.py)

The convs are conv2d or fused_conv2d (conv_type conv2d, no ResidualData, any fusable activation; act1 / act2 carry
it as act1_type / act1_<attr>), B1 / B2 their optional Bias slots. p, h and s must have no other reader and not be
fetched; x (read by the pool and the multiply) may have others. It applies where every target of the valid places
runs `squeeze_excitation` (the host: not with the CUDA target or NNAdapter devices, whose kernels take the ops). It runs after the conv and activation fusions and
after the int8 passes (pdlite/optimizer/pipeline.py): in a quantized MobileNetV3 the SE convs stay float and fuse
here when the four ops read and write float tensors as above (an int8 edge in between, a quantize op or codes,
leaves the block alone).
"""
from __future__ import annotations

from typing import Any

from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.kernels.registry import targets_for
from pdlite.operators.fused import ACT_PREFIX, FUSABLE_ACTIVATIONS
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.pattern import Fuser, Match, Pattern, input_node, param_value, replace_ops

CONVS = ("conv2d", "fused_conv2d")
CPU_TARGETS = {TargetType.Host, TargetType.X86, TargetType.ARM, TargetType.Any}


def _pattern(gate_slot: str) -> Pattern:
    p = Pattern()
    x = p.var("x")
    pooled, hidden, gate = (p.var(k, intermediate=True) for k in ("pooled", "hidden", "gate"))
    p.op("pool", "pool2d", inputs={"X": x}, outputs={"Out": pooled})
    p.op("conv1", CONVS, inputs={"Input": pooled, "Filter": p.var("w1", persistable=True)}, outputs={"Output": hidden})
    p.op("conv2", CONVS, inputs={"Input": hidden, "Filter": p.var("w2", persistable=True)}, outputs={"Output": gate})
    map_slot = "Y" if gate_slot == "X" else "X"
    p.op("mul", "elementwise_mul", inputs={gate_slot: gate, map_slot: x}, outputs={"Out": p.var("out")})
    return p


def _pool_refusal(a: dict[str, Any]) -> str | None:
    if a.get("pooling_type") != "avg":
        return "the pool is not an average"
    if str(a.get("data_format", "NCHW")) not in ("NCHW", "AnyLayout"):
        return "the pool is not NCHW"
    if not (a.get("global_pooling") or (a.get("adaptive") and list(a.get("ksize") or []) == [1, 1])):
        return "the pool is not global (global_pooling, or adaptive to 1 x 1)"
    return None


def _conv_refusal(conv: OpDesc, w: Any) -> str | None:
    a = conv.attrs
    if conv.type == "fused_conv2d" and (a.get("conv_type") != "conv2d" or conv.inputs.get("ResidualData")):
        return f"{conv.type} is not a plain conv2d + activation"
    if str(a.get("act_type") or "") not in ("", *FUSABLE_ACTIVATIONS):
        return f"activation {a.get('act_type')!r} is not fusable"
    if w is None or w.ndim != 4 or tuple(w.shape[2:]) != (1, 1) or str(w.dtype) != "float32":
        return "the filter is not a float32 (O, I, 1, 1) parameter"
    if int(a.get("groups") or 1) != 1 or list(a.get("strides") or [1, 1]) != [1, 1]:
        return "the conv is grouped or strided"
    if any(int(v) for v in a.get("paddings") or []) and a.get("padding_algorithm") not in ("VALID", "SAME"):
        return "the conv pads"
    if str(a.get("data_format", "NCHW")) not in ("NCHW", "AnyLayout"):
        return "the conv is not NCHW"
    return None


def _act_attrs(conv: OpDesc, key: str) -> dict[str, Any]:
    act = str(conv.attrs.get("act_type") or "") if conv.type == "fused_conv2d" else ""
    own = {f"{key}_{k[len(ACT_PREFIX):]}": v for k, v in conv.attrs.items()
           if act and k.startswith(ACT_PREFIX) and k != "act_type"}
    return {f"{key}_type": act, **own}


@register_pass("squeeze_excitation_fuse_pass", targets=(TargetType.Host,))
class SqueezeExcitationFuse(Fuser):
    """The block, its gate as the multiply's X (MobileNetV3's elementwise_mul(hardsigmoid, x)) or as its Y."""

    def applies_to(self, ctx: PassContext) -> bool:
        """Only where every target of the valid places runs the op (the host kernel serves the CPU targets): on the
        CUDA target or with NNAdapter devices the block stays as ops those run."""
        have = set(targets_for("squeeze_excitation"))
        if TargetType.Host in have:
            have |= CPU_TARGETS
        return not ctx.options.get("nnadapter_device_names") and ctx.targets <= have

    def pattern(self) -> list[Pattern]:
        return [_pattern("X"), _pattern("Y")]

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        reason = _pool_refusal(m.op("pool").attrs)
        if reason:
            return reason
        w1, w2 = param_value(ctx, m["w1"]), param_value(ctx, m["w2"])
        for key, w in (("conv1", w1), ("conv2", w2)):
            reason = _conv_refusal(m.op(key), w)
            if reason:
                return reason
        assert w1 is not None and w2 is not None
        if w2.shape[:2] != (w1.shape[1], w1.shape[0]):
            return f"the filters' shapes {list(w1.shape)} and {list(w2.shape)} are not (C1, C) and (C, C1)"
        mul = m.op("mul")
        if int(mul.attrs.get("axis", -1)) not in (-1, 0):
            return "the multiply broadcasts along an inner axis"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        c1, c2 = m.op("conv1"), m.op("conv2")
        ins = {"X": [m["x"].name], "W1": [m["w1"].name], "W2": [m["w2"].name]}
        for slot, conv in (("B1", c1), ("B2", c2)):
            if conv.inputs.get("Bias"):
                ins[slot] = [conv.inputs["Bias"][0]]
        desc = OpDesc("squeeze_excitation", ins, {"Out": [m["out"].name]},
                      {**_act_attrs(c1, "act1"), **_act_attrs(c2, "act2")})
        bias_nodes = [input_node(m[k], conv.inputs["Bias"][0])
                      for k, conv in (("conv1", c1), ("conv2", c2)) if conv.inputs.get("Bias")]
        replace_ops(graph, [m["pool"], m["conv1"], m["conv2"], m["mul"]], desc, bias_nodes)

