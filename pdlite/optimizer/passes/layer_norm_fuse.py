"""skip_layernorm_fuse_pass: a residual add and the layer_norm of its sum -> skip_layernorm (Paddle Inference's op of
that name; pdlite/operators/fused.py, host kernel pdlite/kernels/host/norm.py SkipLayerNorm).

    s = elementwise_add(X, Y)   X and Y of one shape (the descs' shapes equal), s read by the layer_norm only, not fetched
    out = layer_norm(s)         its Mean and Variance unread and not fetched
 -> out = skip_layernorm(X, Y, Scale, Bias; epsilon, begin_norm_axis)

A transformer layer has two (after the attention's out-projection and after the feed-forward's second fc). The same
bits as the two ops on the native kernels (the sum is the add's one rounded add, then layer_norm's own loops): one
step and one intermediate array fewer per pair. Host programs only (no NNAdapter devices, host places).
"""
from __future__ import annotations

from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.passes.attention_fuse import host_program
from pdlite.optimizer.pattern import Fuser, Match, Pattern, replace_ops


@register_pass("skip_layernorm_fuse_pass")
class SkipLayerNormFuse(Fuser):
    """elementwise_add (same shapes) -> layer_norm -> skip_layernorm (this module's docstring)."""

    def pattern(self) -> Pattern:
        p = Pattern()
        s, out = p.var("s", intermediate=True), p.var("out")
        p.op("add", "elementwise_add", inputs={"X": p.var("x"), "Y": p.var("y")}, outputs={"Out": s})
        p.op("ln", "layer_norm", inputs={"X": s}, outputs={"Y": out})
        return p

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not host_program(ctx):
            return False
        self._fetch = set(ctx.meta.get("fetch_names", []))
        return super().apply(graph, ctx)

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        x, y = m["x"].var, m["y"].var
        if x is None or y is None or not x.shape or list(x.shape) != list(y.shape):
            return "the add's operands are not of one shape"
        if m["x"].name == m["y"].name:
            return "the add's operands are one var"
        for v in m["ln"].outputs:
            if v is not m["out"] and (v.outputs or v.name in self._fetch):
                return "the layer_norm's Mean or Variance is read"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        ln = m.op("ln")
        ins = {"X": [m["x"].name], "Y": [m["y"].name]}
        for slot in ("Scale", "Bias"):
            if ln.input(slot):
                ins[slot] = [ln.input(slot)]
        new = OpDesc("skip_layernorm", ins, {"Out": [m["out"].name]},
                     {"epsilon": float(ln.attrs.get("epsilon", 1e-5)),
                      "begin_norm_axis": int(ln.attrs.get("begin_norm_axis", 1))})
        replace_ops(graph, [m["add"], m["ln"]], new)
