"""fc_fuse_pass: mul / matmul / matmul_v2 with a 2-D persistable weight + bias add (+ activation) -> fc.

X @ W + B with W of shape [K, N] and B a persistable vector of N values added along the last
axis is fc(Input=X, W, Bias=B) with in_num_col_dims = k, where X is flattened to
[prod(X.shape[:k]), K]: k = x_num_col_dims for mul (y_num_col_dims must be 1) and
rank(X) - 1 for matmul / matmul_v2 (no transposes, alpha 1; rank(X) >= 2). A following
activation becomes the fc's activation_type (+ act_* attributes).
"""
from __future__ import annotations

import numpy as np

from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc
from pdlite.operators.fused import FUSABLE_ACTIVATIONS, activation_attrs
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.pattern import Fuser, Match, Pattern, broadcast_vector, new_param, param_value, replace_ops

MATMULS = ("mul", "matmul", "matmul_v2")


def _pattern(with_act: bool) -> Pattern:
    p = Pattern()
    y = p.var("y", intermediate=True)
    p.op("mm", MATMULS, inputs={"X": p.var("x"), "Y": p.var("w", persistable=True)}, outputs={"Out": y})
    if with_act:
        z = p.var("z", intermediate=True)
        p.op("add", "elementwise_add", inputs={"X": y, "Y": p.var("b", persistable=True)}, outputs={"Out": z})
        p.op("act", FUSABLE_ACTIVATIONS, inputs={"X": z}, outputs={"Out": p.var("out")})
    else:
        p.op("add", "elementwise_add", inputs={"X": y, "Y": p.var("b", persistable=True)},
             outputs={"Out": p.var("out")})
    return p


def in_num_col_dims(m: Match) -> int | str:
    """k of the fc, or why the matmul is not an fc."""
    op = m.op("mm")
    a = op.attrs
    rank = len(m["x"].var.shape) if m["x"].var is not None else 0
    if op.type == "mul":
        if int(a.get("y_num_col_dims", 1)) != 1:
            return "mul with y_num_col_dims != 1"
        return int(a.get("x_num_col_dims", 1))
    if op.type == "matmul" and (a.get("transpose_X") or a.get("transpose_Y") or float(a.get("alpha", 1.0)) != 1.0):
        return "matmul with a transpose or alpha != 1"
    if op.type == "matmul_v2" and (a.get("trans_x") or a.get("trans_y")):
        return "matmul_v2 with a transpose"
    if rank < 2:
        return "X has rank < 2 (or an unknown rank)"
    return rank - 1


@register_pass("fc_fuse_pass")
class FcFuse(Fuser):
    def pattern(self) -> list[Pattern]:
        return [_pattern(True), _pattern(False)]

    def _bias(self, m: Match, ctx: PassContext) -> np.ndarray | None:
        k, w, b = in_num_col_dims(m), param_value(ctx, m["w"]), param_value(ctx, m["b"])
        if isinstance(k, str) or w is None or b is None or w.ndim != 2:
            return None
        return broadcast_vector(b, int(m.op("add").attrs["axis"]), (1,) * k + (int(w.shape[1]),), k)

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        k = in_num_col_dims(m)
        if isinstance(k, str):
            return k
        w = param_value(ctx, m["w"])
        if w is None or w.ndim != 2 or w.dtype != np.float32:
            return "W is not a 2-D float32 param"
        if "act" in m and len(m["act"].inputs) != 1:
            return "the activation has extra inputs"
        return None if self._bias(m, ctx) is not None else "the bias is not one value per output column"

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        b = param_value(ctx, m["b"])
        vec = self._bias(m, ctx)
        assert b is not None and vec is not None
        new_inputs = []
        bias_name = m["b"].name
        if b.ndim != 1 or b.dtype != np.float32:  # a [1, N]-like bias: store it as [N]
            node = new_param(graph, ctx, m["b"].name, vec.astype(np.float32))
            new_inputs.append(node)
            bias_name = node.name
        attrs = {"in_num_col_dims": in_num_col_dims(m), "activation_type": ""}
        old = [m["mm"], m["add"]]
        if "act" in m:
            attrs.update(activation_type=m.op("act").type, **activation_attrs(m.op("act")))
            old.append(m["act"])
        desc = OpDesc("fc", {"Input": [m["x"].name], "W": [m["w"].name], "Bias": [bias_name]},
                      {"Out": [m["out"].name]}, attrs)
        replace_ops(graph, old, desc, new_inputs)
