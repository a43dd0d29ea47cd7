"""Activation fusions into elementwise and scale ops.

- elementwise_activation_fuse_pass: act(elementwise_<op>(X, Y)) -> fusion_elementwise_<op>_activation
  (add, sub, mul, div, max, min), keeping `axis` and adding act_type + act_* attributes.
- scale_activation_fuse_pass: act(scale(X)) -> fusion_scale_activation (scale without ScaleTensor).
The elementwise/scale output must have the activation as its only reader and not be fetched.
"""
from __future__ import annotations

from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc
from pdlite.operators.fused import FUSABLE_ACTIVATIONS, FUSED_ELEMENTWISE, activation_attrs
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.pattern import Fuser, Match, Pattern, replace_ops

FUSED_OF = {base: fused for fused, base in FUSED_ELEMENTWISE.items()}


def _base_then_act(key: str, types: tuple[str, ...]) -> Pattern:
    p = Pattern()
    y = p.var("y", intermediate=True)
    p.op(key, types, outputs={"Out": y})
    p.op("act", FUSABLE_ACTIVATIONS, inputs={"X": y}, outputs={"Out": p.var("out")})
    return p


def _fuse(graph: Graph, m: Match, key: str, fused_type: str) -> None:
    base, act = m.op(key), m.op("act")
    desc = OpDesc(fused_type, {k: list(v) for k, v in base.inputs.items() if v}, {"Out": [m["out"].name]},
                  {**base.attrs, "act_type": act.type, **activation_attrs(act)})
    replace_ops(graph, [m[key], m["act"]], desc)


@register_pass("elementwise_activation_fuse_pass")
class ElementwiseActivationFuse(Fuser):
    def pattern(self) -> Pattern:
        return _base_then_act("ew", tuple(FUSED_OF))

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        return "the activation has extra inputs" if len(m["act"].inputs) != 1 else None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        _fuse(graph, m, "ew", FUSED_OF[m.op("ew").type])


@register_pass("scale_activation_fuse_pass")
class ScaleActivationFuse(Fuser):
    def pattern(self) -> Pattern:
        return _base_then_act("scale", ("scale",))

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if m.op("scale").inputs.get("ScaleTensor"):
            return "scale comes from a tensor"
        return "the activation has extra inputs" if len(m["act"].inputs) != 1 else None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        _fuse(graph, m, "scale", "fusion_scale_activation")
