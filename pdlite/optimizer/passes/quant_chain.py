"""The host's int8 pass for the per-element ops between integer convs: one pass over the tensor instead of one per op.

quant_pointwise_chain_pass (after quant_dequant_fuse_pass, under the same conditions as the other int8 passes,
quant_int8.int8_enabled): a run of per-element ops, each the only reader of the one before (not fetched), becomes
one program of steps (kernels/host/quant_native.py's CHAIN_*), each step the float32 operations of the op it
replaces in the same order, so the values are those of the ops run one by one:

- quantize_dequantize_linear (one per-tensor scale) -> a QDQ step;
- scale (attribute scale, no ScaleTensor) -> a scale step;
- elementwise_add of a parameter of one value, or of one value per channel (axis 1) -> a scale (x * 1 + b) or
  per-channel add step; fusion_elementwise_add_activation of such a parameter -> that step and the activation;
- fusion_scale_activation -> scale and activation steps; relu, relu6, leaky_relu, hard_swish, hard_sigmoid -> an
  activation step (the native activations, native.activation).

An elementwise_add (or fusion_elementwise_add_activation) of two tensors of one shape where either input is a
QDQ pair's output read by nothing else first becomes a `pointwise_chain` reading the pairs' inputs (`x_ops` / `y_ops`:
the QDQ steps, then the sum, then the activation). A chain whose input is written by a quantized_conv2d (or such a
pointwise_chain) read by nothing else becomes that op's `post_ops` (the conv's epilogue runs the steps while the
outputs are in cache); any other chain of two ops or more becomes a `pointwise_chain` op.
PP-OCR det (PP-LCNetV3): conv -> QDQ -> bias add -> scale -> QDQ -> scale + hardswish -> scale -> QDQ -> scale is
one conv with a chain of 8 steps instead of 8 passes over its output.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.operators.fused import split_activation
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.passes.quant_int8 import QMAX, int8_enabled
from pdlite.optimizer.pattern import input_node

ACT_OPS = ("relu", "relu6", "leaky_relu", "hard_swish", "hard_sigmoid")
X_SLOT = {"quantize_dequantize_linear": "X", "scale": "X", "elementwise_add": "X",
          "fusion_elementwise_add_activation": "X", "fusion_scale_activation": "X", **{a: "X" for a in ACT_OPS}}


def _channels(v: Node) -> int:
    shape = v.var.shape if v.var is not None and v.var.shape else []
    return int(shape[1]) if len(shape) >= 2 and int(shape[1]) > 0 else 0


def _param(ctx: PassContext, op: Node, slot: str) -> np.ndarray | None:
    name = op.op.input(slot)
    v = ctx.params.get(name)
    return None if v is None or not op.op.inputs.get(slot) else np.asarray(v)


def _add_step(ctx: PassContext, op: Node, x: Node) -> list[float] | None:
    """The step of x + Y for a parameter Y of one value or one value per channel of x (axis 1), else None."""
    if op.op.input("X") != x.name:
        return None
    y = _param(ctx, op, "Y")
    if y is None or y.dtype != np.float32:
        return None
    if y.size == 1:
        return qn.chain_scale(1.0, float(y.reshape(-1)[0]), True)
    c = _channels(x)
    rank = len(x.var.shape) if x.var is not None and x.var.shape else 0
    axis = int(op.op.attrs.get("axis", -1))
    per_channel = y.size == c and rank >= 2 and (
        (y.ndim == 1 and axis in (1, 1 - rank)) or (y.shape == (c,) + (1,) * (rank - 2) and axis in (-1, 1))
        or y.shape == (1, c) + (1,) * (rank - 2))
    return qn.chain_add_c(y) if c and per_channel else None


def _act_step(act: str, attrs: dict[str, Any]) -> list[float] | None:
    code = native.activation(act, attrs)
    return None if code is None else ([] if not act else qn.chain_act(code))


def steps_of(ctx: PassContext, op: Node, x: Node) -> list[float] | None:
    """The chain steps of op reading x, or None when op is not a per-element op the chains take."""
    t, a = op.op.type, op.op.attrs
    if t not in X_SLOT or op.op.input("X") != x.name or len(op.outputs) != 1:
        return None
    if t == "quantize_dequantize_linear":
        s = _param(ctx, op, "Scale")
        if s is None or s.size != 1 or int(a["qmax"]) != QMAX or not float(s.reshape(-1)[0]) > 0:
            return None
        return qn.chain_qdq(float(np.float32(s.reshape(-1)[0])), int(a["round_type"]))
    if t in ("scale", "fusion_scale_activation"):
        if op.op.inputs.get("ScaleTensor"):
            return None
        head = qn.chain_scale(float(a["scale"]), float(a["bias"]), bool(a.get("bias_after_scale", True)))
        if t == "scale":
            return head
        act = _act_step(*split_activation(dict(a), "act_type"))
        return None if act is None else head + act
    if t in ("elementwise_add", "fusion_elementwise_add_activation"):
        head = _add_step(ctx, op, x)
        if head is None or t == "elementwise_add":
            return head
        act = _act_step(*split_activation(dict(a), "act_type"))
        return None if act is None else head + act
    return _act_step(t, dict(a))


def _chain(ctx: PassContext, first: Node, fetched: set[str]) -> tuple[list[Node], list[float]]:
    """The ops of the chain starting at `first` and its program."""
    x = input_node(first, first.op.input("X"))
    ops, prog = [], []
    while True:
        op = ops[-1].outputs[0].outputs[0] if ops else first
        steps = steps_of(ctx, op, x)
        if steps is None or len(qn.chain_steps(prog + steps)) > qn.CHAIN_MAX_STEPS:
            break
        ops.append(op)
        prog += steps
        y = op.outputs[0]
        if y.name in fetched or len(y.outputs) != 1:
            break
        x = y
    return ops, prog


def _shape(v: Node) -> list[int]:
    return list(v.var.shape) if v.var is not None and v.var.shape else []


def _qdq_side(ctx: PassContext, v: Node, fetched: set[str]) -> tuple[Node, list[float]]:
    """(input, steps) of one side of an add: the QDQ pair's input and its step where v is a QDQ output read by the add
    alone, else v and no steps."""
    q = v.inputs[0] if v.inputs else None
    if q is None or q.op.type != "quantize_dequantize_linear" or len(v.outputs) != 1 or v.name in fetched:
        return v, []
    src = input_node(q, q.op.input("X"))
    steps = steps_of(ctx, q, src)
    return (v, []) if steps is None else (src, steps)


def _binary_adds(graph: Graph, ctx: PassContext, fetched: set[str]) -> int:
    """The adds of two QDQ'd tensors of one shape -> pointwise_chain ops with a Y input."""
    done = 0
    for add in graph.topological_order():
        if add not in graph or add.op.type not in ("elementwise_add", "fusion_elementwise_add_activation"):
            continue
        xs, ys = add.op.inputs.get("X", []), add.op.inputs.get("Y", [])
        if len(xs) != 1 or len(ys) != 1 or xs[0] == ys[0] or xs[0] in ctx.params or ys[0] in ctx.params:
            continue
        x, y = input_node(add, xs[0]), input_node(add, ys[0])
        shape = _shape(x)  # (unknown dims: the kernel checks the shapes at run time)
        if len(shape) < 2 or shape != _shape(y) or len(add.outputs) != 1 or int(add.op.attrs.get("axis", -1)) not in (
                -1, 0):
            continue
        post = _act_step(*split_activation(dict(add.op.attrs), "act_type")) if add.op.type != "elementwise_add" else []
        (xin, xsteps), (yin, ysteps) = _qdq_side(ctx, x, fetched), _qdq_side(ctx, y, fetched)
        if post is None or not (xsteps or ysteps) or xin is yin:
            continue
        old = [n for v, st in ((x, xsteps), (y, ysteps)) if st for n in v.inputs] + [add]
        desc = OpDesc("pointwise_chain", {"X": [xin.name], "Y": [yin.name]}, {"Out": [add.outputs[0].name]},
                      {"post_ops": post, "x_ops": xsteps, "y_ops": ysteps})
        keep = [input_node(n, n.op.input("Scale")) for n in old[:-1]]
        graph.replace_ops(old, desc, [xin, yin], [add.outputs[0]])
        for v in keep:
            if v in graph and not v.inputs and not v.outputs:
                graph.remove_var(v)
        done += 1
    return done


@register_pass("quant_pointwise_chain_pass")
class QuantPointwiseChain(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx):
            return False
        fetched = set(ctx.meta.get("fetch_names", []))
        adds = _binary_adds(graph, ctx, fetched)
        folded = chains = 0
        for first in graph.topological_order():
            if first not in graph or first.op is None or first.op.type not in X_SLOT:
                continue
            ops, prog = _chain(ctx, first, fetched)
            if not ops:
                continue
            x0 = input_node(first, first.op.input("X"))
            last = ops[-1].outputs[0]
            prod = x0.inputs[0] if x0.inputs else None
            into = prod is not None and (
                (prod.op.type == "quantized_conv2d" and not prod.op.attrs.get("post_ops"))
                or (prod.op.type == "pointwise_chain" and len(qn.chain_steps(list(prod.op.attrs["post_ops"]) + prog))
                    <= qn.CHAIN_MAX_STEPS))
            if into and len(x0.outputs) == 1 and x0.name not in fetched and _channels(x0):
                inner = [op.outputs[0] for op in ops[:-1]]
                for op in ops:
                    graph.remove_op(op, orphan_outputs=True)
                graph.replace_output(prod, x0, last)
                for v in [x0, *inner]:
                    if v in graph and not v.inputs and not v.outputs:
                        graph.remove_var(v)
                prod.op.attrs["post_ops"] = list(prod.op.attrs.get("post_ops") or []) + prog
                folded += 1
            elif len(ops) >= 2 and _channels(x0):
                desc = OpDesc("pointwise_chain", {"X": [x0.name]}, {"Out": [last.name]}, {"post_ops": prog})
                graph.replace_ops(ops, desc, [x0], [last])
                chains += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"adds": adds, "folded": folded, "chains": chains}
        return adds + folded + chains > 0
