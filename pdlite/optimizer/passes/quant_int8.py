"""The host's int8 passes: Paddle's QDQ programs onto integer kernels (pdlite/kernels/host/quant_int8.py).

They run when the program runs on the host (no NNAdapter devices, no CUDA place), the native kernels are in use
(`host_native`) and the config option `host_int8` is not False. `config.set_option("host_int8", False)` keeps
Paddle's fp32 simulation operation by operation (bit-comparable with Paddle Inference's reference run).

- quant_observer_eliminate_pass: quantize_linear -> dequantize_linear with only_observer (identities that only
  record a scale) are removed, so that conv + batch_norm + activation fuse as in a float program. Exact.
- quant_conv_int8_pass: conv2d / fused_conv2d (one group, NCHW) reading dequantize_linear(quantize_linear(x, s))
  -> quantized_conv2d reading x: q = quantize(x, s) as int8 and
      conv(dq(q), W) = sum_k (q s / qmax) (W8 c[m]) = (s / qmax) c[m] sum_k q W8
  with W = W8 c[m] the float filter the program holds after its folds (dequantized int8 weights, batch norm and
  scales folded per output channel): W8 = round(W[m] / (max|W[m]| / 127)) (Paddle's channel-wise abs-max grid:
  each channel's largest weight is +-127) and c[m] the least-squares step sum(W W8) / sum(W8^2); the rule applies
  only when every W[m] / step lies within 1e-3 of an integer and W8 c reproduces W within 1e-6 max|W[m]| (else the
  conv stays float). The integer sums are exact; the float result differs from the simulation's float sums by
  their rounding (~1e-6 relative), which can move a later quantizer's value across a rounding edge.
- quant_fc_int8_pass: fc / matmul_v2 / mul with a 2-D weight parameter (no transposes), input as above, weights
  per output column -> quantized_fc.
- quant_dequant_fuse_pass: the remaining per-tensor QDQ pairs (inputs of depthwise convs, adds, pools, ...) ->
  quantize_dequantize_linear, one pass over the tensor, the same float32 values; where the pair's input is written by
  a quantized_conv2d / quantized_fc and read by nothing else, the pair becomes that op's `out_scale` (applied to its
  outputs while they are in cache, the same values).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc, VarDesc
from pdlite.core.types import TargetType
from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.operators.fused import split_activation
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import input_node

HOST_TARGETS = {TargetType.Host, TargetType.X86, TargetType.ARM, TargetType.Any}
QMAX = 127
GRID_TOL = 1e-3  # |W / step - round(W / step)| on the int8 grid
FIT_TOL = 1e-6  # max|W - W8 c| / max|W| per channel


def int8_enabled(ctx: PassContext) -> bool:
    """Whether the int8 passes run: host places only, native kernels on, option host_int8 not False."""
    opt = ctx.options
    return (opt.get("host_int8", True) not in native._FALSE and not opt.get("nnadapter_device_names")
            and ctx.targets <= HOST_TARGETS and qn.available()
            and opt.get("host_native", native.DEFAULT_ON) not in native._FALSE)


def int8_grid(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(W8 int8 of w's shape, step per channel of `axis` (float32)) with w == W8 * step within FIT_TOL, or None."""
    wm = np.moveaxis(np.asarray(w, np.float64), axis, 0)
    flat = wm.reshape(wm.shape[0], -1)
    amax = np.abs(flat).max(axis=1)
    step0 = np.where(amax > 0, amax / QMAX, 1.0)
    q = flat / step0[:, None]
    r = np.rint(q)
    if not np.isfinite(q).all() or np.abs(q - r).max(initial=0) > GRID_TOL:
        return None
    rr = (r * r).sum(axis=1)
    step = np.where(rr > 0, (flat * r).sum(axis=1) / np.maximum(rr, 1), 1.0)
    if (np.abs(flat - r * step[:, None]).max(axis=1) > FIT_TOL * np.maximum(amax, 1e-30)).any():
        return None
    w8 = np.moveaxis(r.reshape(wm.shape), 0, axis).astype(np.int8)
    return w8, step.astype(np.float32)


def _producer(v: Node) -> Node | None:
    return v.inputs[0] if v.inputs else None


def _fetched(ctx: PassContext) -> set[str]:
    return set(ctx.meta.get("fetch_names", []))


def _per_tensor_scale(ctx: PassContext, op: Node) -> float | None:
    name = op.op.input("Scale")
    s = ctx.params.get(name)
    if s is None or np.asarray(s).size != 1:
        return None
    s = float(np.asarray(s, np.float32).reshape(-1)[0])
    return s if s > 1e-30 else None


def qdq_source(ctx: PassContext, v: Node) -> tuple[Node, Node, Node, float, int] | None:
    """(x, quantize_linear, dequantize_linear, scale, round_type) when var v is dequantize_linear(quantize_linear(x))
    of one per-tensor scale parameter, qmax 127, no observers; else None."""
    dq = _producer(v)
    if dq is None or dq.op is None or dq.op.type != "dequantize_linear":
        return None
    qv = next((u for u in dq.inputs if u.name == dq.op.input("X")), None)
    q = _producer(qv) if qv is not None else None
    if q is None or q.op is None or q.op.type != "quantize_linear":
        return None
    for n in (q, dq):
        if n.op.attrs["only_observer"] or int(n.op.attrs["qmax"]) != QMAX:
            return None
    if q.op.input("Scale") != dq.op.input("Scale") or int(q.op.attrs["round_type"]) != int(dq.op.attrs["round_type"]):
        return None
    s = _per_tensor_scale(ctx, q)
    if s is None:
        return None
    x = next(u for u in q.inputs if u.name == q.op.input("X"))
    return x, q, dq, s, int(q.op.attrs["round_type"])


def _drop_unread(graph: Graph, ctx: PassContext, *ops: Node) -> None:
    """Remove the ops (in order) whose outputs nobody reads or fetches any more."""
    fetched = _fetched(ctx)
    for op in ops:
        if op in graph and not any(u.outputs or u.name in fetched for u in op.outputs):
            outs = list(op.outputs)
            graph.remove_op(op)
            for u in outs:
                graph.remove_var(u)


def _param(graph: Graph, ctx: PassContext, name: str, value: np.ndarray) -> Node:
    ctx.params[name] = value
    return graph.add_var(VarDesc(name, dtype=var_type_of(value.dtype), shape=list(value.shape), persistable=True))


def _act_attrs(attrs: dict[str, Any], type_key: str) -> dict[str, Any] | None:
    """act_type and act_* attributes of the fused op if the int8 kernels fuse that activation, else None."""
    act, act_attrs = split_activation(dict(attrs), type_key)
    if native.activation(act, act_attrs) is None:
        return None
    return {"act_type": act, **{f"act_{k}": v for k, v in act_attrs.items()}}


class _Int8Rewrite(Pass):
    """One rewrite over the ops of `types`: `match(graph, node, ctx)` returns the new op's parts or None."""

    types: tuple[str, ...] = ()

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx):
            return False
        done = 0
        for node in list(graph.op_nodes()):
            if node in graph and node.op is not None and node.op.type in self.types and self.rewrite(graph, node, ctx):
                done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0

    def rewrite(self, graph: Graph, node: Node, ctx: PassContext) -> bool:
        raise NotImplementedError

    @staticmethod
    def replace(graph: Graph, ctx: PassContext, node: Node, desc: OpDesc, x_slot: str, src: tuple, w_slot: str,
                grid: tuple[np.ndarray, np.ndarray], keep: tuple[str, ...], new_w_slot: str = "") -> None:
        """node -> desc reading x (src[0]) under x_slot, the int8 weights (node's w_slot, desc's new_w_slot) and their
        scale; slots `keep` as they were."""
        x, q, dq = src[0], src[1], src[2]
        w8, step = grid
        wname = node.op.input(w_slot)
        w8v = _param(graph, ctx, f"{wname}@int8", w8)
        sv = _param(graph, ctx, f"{wname}@int8_scale", step)
        ins = [x, w8v, sv] + [input_node(node, n) for s in keep for n in node.op.inputs.get(s, [])]
        desc.inputs.update({x_slot: [x.name], new_w_slot or w_slot: [w8v.name], "WeightScale": [sv.name]})
        desc.inputs.update({s: list(node.op.inputs[s]) for s in keep if node.op.inputs.get(s)})
        old_w = input_node(node, wname)
        graph.replace_ops([node], desc, ins, list(node.outputs))
        if not old_w.outputs and old_w in graph:
            graph.remove_var(old_w)
            ctx.params.pop(wname, None)
        _drop_unread(graph, ctx, dq, q)


@register_pass("quant_observer_eliminate_pass")
class QuantObserverEliminate(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx):
            return False
        fetched = _fetched(ctx)
        done = 0
        for q in list(graph.op_nodes()):
            if q not in graph or q.op is None or q.op.type != "quantize_linear" or not q.op.attrs["only_observer"]:
                continue
            y = q.outputs[0] if len(q.outputs) == 1 else None
            dq = y.outputs[0] if y is not None and len(y.outputs) == 1 else None
            if (dq is None or dq.op is None or dq.op.type != "dequantize_linear" or not dq.op.attrs["only_observer"]
                    or y.name in fetched or len(dq.outputs) != 1 or dq.op.input("X") != y.name):
                continue
            x = input_node(q, q.op.input("X"))
            out = dq.outputs[0]
            if out.name in fetched or not out.outputs:
                continue
            for reader in list(out.outputs):
                graph.replace_input(reader, out, x)
            _drop_unread(graph, ctx, dq, q)
            done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0


_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "groups", "dilations", "data_format")


@register_pass("quant_conv_int8_pass")
class QuantConvInt8(_Int8Rewrite):
    types = ("conv2d", "fused_conv2d")

    def rewrite(self, graph: Graph, node: Node, ctx: PassContext) -> bool:
        op = node.op
        if op.type == "fused_conv2d" and op.attrs.get("conv_type", "conv2d") != "conv2d":
            return False
        if int(op.attrs.get("groups") or 1) != 1 or str(op.attrs.get("data_format", "NCHW")) not in ("NCHW", "AnyLayout"):
            return False
        act = _act_attrs(op.attrs, "act_type") if op.type == "fused_conv2d" else {"act_type": ""}
        src = qdq_source(ctx, input_node(node, op.input("Input")))
        w = ctx.params.get(op.input("Filter"))
        if act is None or src is None or w is None or np.asarray(w).dtype != np.float32 or np.asarray(w).ndim != 4:
            return False
        if int(np.prod(np.asarray(w).shape[1:])) >= 1 << 17:
            return False
        grid = int8_grid(np.asarray(w), 0)
        if grid is None:
            return False
        attrs = {k: op.attrs[k] for k in _CONV_ATTRS if k in op.attrs}
        attrs.update(act, in_scale=src[3], round_type=src[4], qmax=QMAX)
        desc = OpDesc("quantized_conv2d", {}, {"Output": list(op.outputs["Output"])}, attrs)
        self.replace(graph, ctx, node, desc, "Input", src, "Filter", grid, ("Bias", "ResidualData"))
        return True


@register_pass("quant_fc_int8_pass")
class QuantFcInt8(_Int8Rewrite):
    types = ("fc", "matmul_v2", "matmul", "mul")

    def rewrite(self, graph: Graph, node: Node, ctx: PassContext) -> bool:
        op = node.op
        x_slot, w_slot = ("Input", "W") if op.type == "fc" else ("X", "Y")
        w = ctx.params.get(op.input(w_slot))
        if w is None or np.asarray(w).dtype != np.float32 or np.asarray(w).ndim != 2:
            return False
        x_in = input_node(node, op.input(x_slot))
        rank = len(x_in.var.shape) if x_in.var is not None and x_in.var.shape else 0
        if op.type == "fc":
            cols = int(op.attrs["in_num_col_dims"])
            act = _act_attrs(op.attrs, "activation_type")
        elif op.type == "mul":
            cols, act = int(op.attrs["x_num_col_dims"]), {"act_type": ""}
            if int(op.attrs["y_num_col_dims"]) != 1:
                return False
        else:
            t = ("trans_x", "trans_y") if op.type == "matmul_v2" else ("transpose_X", "transpose_Y")
            if any(op.attrs.get(k) for k in t) or float(op.attrs.get("alpha", 1.0)) != 1.0 or rank < 2:
                return False
            cols, act = rank - 1, {"act_type": ""}
        src = qdq_source(ctx, x_in)
        if act is None or src is None:
            return False
        grid = int8_grid(np.asarray(w), 1)
        if grid is None:
            return False
        attrs = {**act, "in_num_col_dims": cols, "in_scale": src[3], "round_type": src[4], "qmax": QMAX}
        desc = OpDesc("quantized_fc", {}, {"Out": list(op.outputs["Out"])}, attrs)
        self.replace(graph, ctx, node, desc, "Input", src, w_slot, grid, ("Bias",) if op.type == "fc" else (), "W")
        return True


@register_pass("quant_dequant_fuse_pass")
class QuantDequantFuse(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx):
            return False
        fetched = _fetched(ctx)
        done = 0
        for dq in list(graph.op_nodes()):
            if dq not in graph or dq.op is None or dq.op.type != "dequantize_linear" or len(dq.outputs) != 1:
                continue
            src = qdq_source(ctx, dq.outputs[0])
            if src is None:
                continue
            x, q = src[0], src[1]
            qv = q.outputs[0]
            if len(qv.outputs) != 1 or qv.name in fetched:
                continue
            if self._into_producer(graph, x, q, dq, src, fetched):
                done += 1
                continue
            scale = input_node(q, q.op.input("Scale"))
            desc = OpDesc("quantize_dequantize_linear", {"X": [x.name], "Scale": [scale.name]},
                          {"Y": [dq.outputs[0].name]}, {"qmax": QMAX, "round_type": src[4]})
            graph.replace_ops([q, dq], desc, [x, scale], [dq.outputs[0]])
            done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0

    @staticmethod
    def _into_producer(graph: Graph, x: Node, q: Node, dq: Node, src: tuple, fetched: set[str]) -> bool:
        """Fold the pair into the quantized op writing x (x read by q alone); False where that does not apply."""
        prod = _producer(x)
        if (prod is None or prod.op is None or prod.op.type not in ("quantized_conv2d", "quantized_fc")
                or float(prod.op.attrs.get("out_scale", 0.0)) > 0 or len(x.outputs) != 1 or x.name in fetched):
            return False
        y, qv = dq.outputs[0], q.outputs[0]
        graph.remove_op(dq, orphan_outputs=True)
        graph.remove_op(q)
        graph.replace_output(prod, x, y)
        for v in (x, qv):
            if v in graph and not v.inputs and not v.outputs:
                graph.remove_var(v)
        prod.op.attrs.update(out_scale=src[3], out_round_type=src[4])
        return True
