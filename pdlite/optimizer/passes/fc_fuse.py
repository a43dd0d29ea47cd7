"""fc fusions: fc_fuse_pass, fc_scale_fuse_pass, fc_siblings_fuse_pass (the last two: their classes' docstrings).

fc_fuse_pass: mul / matmul / matmul_v2 with a 2-D persistable weight + bias add (+ activation) -> fc.

X @ W + B with W of shape [K, N] and B a persistable vector of N values added along the last
axis is fc(Input=X, W, Bias=B) with in_num_col_dims = k, where X is flattened to
[prod(X.shape[:k]), K]: k = x_num_col_dims for mul (y_num_col_dims must be 1) and
rank(X) - 1 for matmul / matmul_v2 (no transposes, alpha 1; rank(X) >= 2). A following
activation becomes the fc's activation_type (+ act_* attributes).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc, VarDesc
from pdlite.operators.fused import FUSABLE_ACTIVATIONS, activation_attrs
from pdlite.operators.registry import OPS
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import (
    Fuser,
    Match,
    Pattern,
    broadcast_vector,
    bypass,
    bypass_refusal,
    drop_unlinked,
    input_node,
    new_param,
    param_value,
    replace_ops,
    versions,
)

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


def _sibling_key(graph: Graph, op: Node, ctx: PassContext) -> tuple[Any, ...] | str:
    """What fc siblings must share to run as one (their in_num_col_dims, activation and other attributes, W's row
    count, whether they have a bias), or why this fc cannot join."""
    d = op.op
    assert d is not None
    if set(d.inputs) - {"Input", "W", "Bias"} or any(len(v) > 1 for v in d.inputs.values()):
        return "inputs beyond Input, W and one Bias"
    w = param_value(ctx, input_node(op, d.input("W")))
    if w is None or w.ndim != 2 or w.dtype != np.float32:
        return "W is not a 2-D float32 param"
    b_name = d.input("Bias")
    if b_name is not None:
        b = param_value(ctx, input_node(op, b_name))
        if b is None or b.dtype != np.float32 or b.size != w.shape[1]:
            return "the bias is not a float32 param of one value per column"
    out = op.outputs[0] if len(op.outputs) == 1 else None
    if out is None or versions(graph, out.name) > 1:
        return "its output is written in place"
    return (repr(sorted(d.attrs.items())), int(w.shape[0]), b_name is not None)


@register_pass("fc_siblings_fuse_pass")
class FcSiblingsFuse(Pass):
    """fc ops reading the same input with the same attributes (in_num_col_dims, activation) and weights of the same
    row count -> one fc over their weights side by side (and biases end to end), then a split of its output along
    the last axis into the old outputs. Attention's q / k / v projections become one product of 3N columns:
    transformer_encoder's 128 -> 3 x 128 at batch 4 (128 rows), one Xeon (Emerald Rapids): three packed fc 78 us,
    one 60 us; on 2 threads 77 against 45 us (a 128-column product does not split across threads well). On the
    native path each output column's sums are the same as alone (one chain of FMAs over k per column, whatever
    the column tile), so the outputs are bit-equal to the unfused program's."""

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0, "refused": Counter()})
        modified = False
        for x in [v for v in graph.var_nodes() if not v.persistable]:
            groups: dict[tuple[Any, ...], list[Node]] = {}
            for op in x.outputs:
                if op.op is None or op.op.type != "fc" or op.op.input("Input") != x.name:
                    continue
                key = _sibling_key(graph, op, ctx)
                if isinstance(key, str):
                    stats["refused"][key] += 1
                else:
                    groups.setdefault(key, []).append(op)
            for ops in groups.values():
                if len(ops) > 1:
                    self._fuse(graph, ctx, x, ops)
                    stats["rewrites"] += 1
                    modified = True
        return modified

    def _fuse(self, graph: Graph, ctx: PassContext, x: Node, ops: list[Node]) -> None:
        descs = [op.op for op in ops]
        assert all(d is not None for d in descs)
        params = {v.name: v for op in ops for v in op.inputs if v.persistable}
        ws = [param_value(ctx, params[d.input("W")]) for d in descs]
        with_bias = descs[0].input("Bias") is not None
        outs = [op.outputs[0] for op in ops]
        k = int(descs[0].attrs["in_num_col_dims"])
        w_node = new_param(graph, ctx, descs[0].input("W"), np.concatenate(ws, axis=1))
        inputs = [x, w_node]
        if with_bias:
            b = np.concatenate([param_value(ctx, params[d.input("Bias")]).reshape(-1) for d in descs])
            inputs.append(new_param(graph, ctx, descs[0].input("Bias"), b))
        shape = list(outs[0].var.shape)[:k] + [int(sum(w.shape[1] for w in ws))] if outs[0].var else []
        name = f"{outs[0].name}@siblings"
        while name in graph.vars:
            name += "_"
        wide = graph.add_var(VarDesc(name, dtype=VarType.FP32, shape=shape))
        for op in ops:
            graph.remove_op(op, orphan_outputs=True)
        drop_unlinked(graph, params.values())
        fc = OpDesc("fc", {"Input": [x.name], "W": [w_node.name]}, {"Out": [name]}, dict(descs[0].attrs))
        if with_bias:
            fc.inputs["Bias"] = [inputs[2].name]
        split = OpDesc("split", {"X": [name]}, {"Out": [o.name for o in outs]},
                       {"axis": k, "num": 0, "sections": [int(w.shape[1]) for w in ws]})
        for desc in (fc, split):
            OPS[desc.type].complete(desc)
        graph.add_op(fc, inputs, [wide])
        graph.add_op(split, [wide], outs)


LAYOUT_OPS = ("reshape2", "reshape", "transpose2", "transpose", "flatten_contiguous_range", "squeeze2", "unsqueeze2")


def _fc_before_scale(graph: Graph, scale: Node, fetch: set[str]) -> tuple[Node | None, str]:
    """The fc whose output reaches `scale` through layout ops only (each the sole reader of the one before, nothing
    fetched or written in place on the way), or None and why not."""
    v = scale.inputs[0]
    while True:
        if v.name in fetch or len(v.outputs) != 1 or versions(graph, v.name) > 1:
            return None, "the scale's input is read elsewhere, fetched or written in place"
        op = v.producer()
        if op is None or op.op is None:
            return None, "no fc before the scale"
        if op.op.type == "fc":
            return op, ""
        if op.op.type not in LAYOUT_OPS or op.op.input("X") is None:
            return None, "no fc before the scale"
        v = input_node(op, op.op.input("X"))


@register_pass("fc_scale_fuse_pass")
class FcScaleFuse(Pass):
    """s * fc(x) (scale with bias 0, after the fc or after reshapes / transposes of its output) -> an fc with s * W
    and s * Bias, the scale removed: attention's q / sqrt(d) (transformer_encoder: 2 scale ops of ~10 us each at
    batch 4). The fc's activation must be none (s * act(y) is act(s * y) only for some). Not bit-equal to scaling
    after the product (s * (x W + b) against x (s W) + s b: last-bit differences), as Paddle Inference's own
    scale-into-matmul fusions (matmul_scale_fuse_pass, scale_matmul_fuse_pass) are not."""

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0, "refused": Counter()})
        fetch = set(ctx.meta.get("fetch_names", []))
        modified = False
        for scale in [n for n in graph.op_nodes() if n.op is not None and n.op.type == "scale"]:
            if scale not in graph:
                continue
            fc, reason = self._match(graph, scale, fetch, ctx)
            if fc is None:
                stats["refused"][reason] += 1
                continue
            assert fc.op is not None and scale.op is not None
            s = float(scale.op.attrs["scale"])
            for slot in ("W", "Bias"):
                name = fc.op.input(slot)
                if name is None:
                    continue
                old = input_node(fc, name)
                value = np.asarray(param_value(ctx, old), dtype=np.float64) * s  # (float64, as the conv folds)
                new = new_param(graph, ctx, name, value.astype(np.float32))
                graph.replace_input(fc, old, new)
                drop_unlinked(graph, [old])
            bypass(graph, scale, scale.inputs[0], scale.outputs[0], fetch)
            stats["rewrites"] += 1
            modified = True
        return modified

    @staticmethod
    def _match(graph: Graph, scale: Node, fetch: set[str], ctx: PassContext) -> tuple[Node | None, str]:
        """The fc that `scale` folds into, or None and why not."""
        d = scale.op
        assert d is not None
        if d.inputs.get("ScaleTensor") or len(scale.inputs) != 1 or len(scale.outputs) != 1:
            return None, "scale comes from a tensor"
        if float(d.attrs["bias"]) != 0.0:
            return None, "the scale adds a bias"
        fc, why = _fc_before_scale(graph, scale, fetch)
        if fc is None:
            return None, why
        assert fc.op is not None
        if fc.op.attrs.get("activation_type"):
            return None, "the fc has an activation"
        for slot in ("W", "Bias"):
            name = fc.op.input(slot)
            value = None if name is None else param_value(ctx, input_node(fc, name))
            if name is not None and (value is None or value.dtype != np.float32):
                return None, "the fc's W or Bias is not a float32 param"
        why = bypass_refusal(graph, scale.inputs[0], scale.outputs[0], fetch)
        return (None, why) if why else (fc, "")
