"""fake_quant_to_qdq_pass: old fake-quant programs in QDQ form, so NNAdapter devices run their convs in int8.

Paddle's old format quantizes a conv's (or mul/matmul's) input with fake_quantize_range_abs_max /
fake_quantize_moving_average_abs_max (integers as float, scale sx), keeps the weight as integer-valued
floats W and rescales the output with fake_channel_wise_dequantize_max_abs(Scales=[sw, sx], quant_bits 8, 8):

    z = conv(q, W) * sw[c] * sx / (127 * 127)  ==  conv(q * sx / 127, W * sw[c] / 127)

The pass writes the right-hand side with quantize_linear / dequantize_linear (the same q: round_type is the
fake op's) and an int8 weight, drops the rescaling op, and lets the conv write z. Exact in real numbers;
in float32 the products are rounded in another order, so the pass only runs when the config names NNAdapter
devices (their int8 kernels compute it in integers anyway); the host keeps Paddle's order.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc, VarDesc
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import input_node

FAKE_QUANT = ("fake_quantize_range_abs_max", "fake_quantize_moving_average_abs_max")
# op -> (activation slot, weight slot, weight output-channel axis)
LINEAR_OPS = {"conv2d": ("Input", "Filter", 0), "depthwise_conv2d": ("Input", "Filter", 0),
              "mul": ("X", "Y", 1), "matmul": ("X", "Y", 1), "matmul_v2": ("X", "Y", 1)}


def _producer(v: Node) -> Node | None:
    return v.inputs[0] if v.inputs else None


@register_pass("fake_quant_to_qdq_pass")
class FakeQuantToQdq(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not ctx.options.get("nnadapter_device_names"):
            return False
        fetched = set(ctx.meta.get("fetch_names", []))
        act_cache: dict[int, Node] = {}
        done = 0
        for dq in list(graph.op_nodes()):
            if dq not in graph or dq.op is None or dq.op.type != "fake_channel_wise_dequantize_max_abs":
                continue
            m = self._match(graph, dq, ctx, fetched)
            if m is None:
                continue
            lin, x_in, w_in, fq, axis = m
            xd = act_cache.get(fq.id)
            if xd is None:
                xd = self._activation(graph, fq)
                act_cache[fq.id] = xd
            wd = self._weight(graph, ctx, w_in, dq, axis)
            graph.replace_input(lin, x_in, xd)
            graph.replace_input(lin, w_in, wd)
            if not w_in.outputs:
                graph.remove_var(w_in)
                ctx.params.pop(w_in.name, None)
            y, z = lin.outputs[0], dq.outputs[0]
            graph.remove_op(dq, orphan_outputs=True)
            graph.replace_output(lin, y, z)
            if not y.inputs and not y.outputs:
                graph.remove_var(y)
            done += 1
        for fq_id, _ in list(act_cache.items()):
            fq = next((n for n in graph.op_nodes() if n.id == fq_id), None)
            if fq is not None and not any(v.outputs or v.name in fetched for v in fq.outputs):
                outs = list(fq.outputs)
                graph.remove_op(fq)
                for v in outs:
                    graph.remove_var(v)
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0

    @staticmethod
    def _match(graph: Graph, dq: Node, ctx: PassContext, fetched: set[str]):
        op = dq.op
        assert op is not None
        scales = op.inputs.get("Scales") or []
        if len(scales) != 2 or [int(b) for b in op.attrs["quant_bits"]][:2] != [8, 8]:
            return None
        if any(s not in ctx.params for s in scales) or len(dq.inputs) < 1:
            return None
        y = next((v for v in dq.inputs if v.name == op.input("X")), None)
        lin = _producer(y) if y is not None else None
        if lin is None or lin.op is None or lin.op.type not in LINEAR_OPS or len(y.outputs) != 1 or y.name in fetched:
            return None
        a_slot, w_slot, axis = LINEAR_OPS[lin.op.type]
        if lin.op.type in ("matmul", "matmul_v2") and (lin.op.attrs.get("trans_y") or lin.op.attrs.get("transpose_Y")
                                                      or lin.op.attrs.get("trans_x") or lin.op.attrs.get("transpose_X")):
            return None
        x_in = next((v for v in lin.inputs if v.name == lin.op.input(a_slot)), None)
        w_in = next((v for v in lin.inputs if v.name == lin.op.input(w_slot)), None)
        fq = _producer(x_in) if x_in is not None else None
        if fq is None or fq.op is None or fq.op.type not in FAKE_QUANT or w_in is None or w_in.name not in ctx.params:
            return None
        if int(fq.op.attrs["bit_length"]) != 8 or fq.op.input("InScale") != scales[1]:
            return None
        w = np.asarray(ctx.params[w_in.name])
        if w.dtype != np.float32 or not np.all(w == np.round(w)) or np.abs(w).max(initial=0) > 127:
            return None
        out_axis = axis if lin.op.type in ("conv2d", "depthwise_conv2d") else w.ndim - 1
        if np.asarray(ctx.params[scales[0]]).size != w.shape[out_axis]:
            return None
        cols = int(op.attrs["x_num_col_dims"])
        if lin.op.type in ("conv2d", "depthwise_conv2d"):
            if cols != 1:  # the rescaling runs along NCHW's channel dim
                return None
        elif y.var is None or len(y.var.shape) != cols + 1:  # ... along the matmul's output columns
            return None
        return lin, x_in, w_in, fq, out_axis

    @staticmethod
    def _activation(graph: Graph, fq: Node) -> Node:
        """quantize_linear + dequantize_linear of the fake op's input (same q), returning the float var."""
        op = fq.op
        assert op is not None
        x = input_node(fq, op.input("X"))
        s = input_node(fq, op.input("InScale"))
        shape = list(x.var.shape) if x.var else []
        q = graph.add_var(VarDesc(f"{x.name}@qdq.q", shape=shape))
        d = graph.add_var(VarDesc(f"{x.name}@qdq.dq", shape=shape))
        attrs = {"quant_axis": -1, "bit_length": 8, "qmax": 127, "qmin": -128,
                 "round_type": int(op.attrs["round_type"])}
        graph.add_op(OpDesc("quantize_linear", {"X": [x.name], "Scale": [s.name]}, {"Y": [q.name]}, dict(attrs)),
                     [x, s], [q])
        graph.add_op(OpDesc("dequantize_linear", {"X": [q.name], "Scale": [s.name]}, {"Y": [d.name]}, dict(attrs)),
                     [q, s], [d])
        return d

    @staticmethod
    def _weight(graph: Graph, ctx: PassContext, w_in: Node, dq: Node, axis: int) -> Node:
        """dequantize_linear of the weight stored as int8, with the per-channel scale Scales[0]."""
        op = dq.op
        assert op is not None
        w8 = np.asarray(ctx.params[w_in.name]).astype(np.int8)
        sname = op.input("Scales")
        s = input_node(dq, sname)
        qname, dname = f"{w_in.name}@int8", f"{w_in.name}@qdq.dq"
        ctx.params[qname] = w8
        qv = graph.add_var(VarDesc(qname, dtype=var_type_of(w8.dtype), shape=list(w8.shape), persistable=True))
        dv = graph.add_var(VarDesc(dname, shape=list(w8.shape)))
        graph.add_op(OpDesc("dequantize_linear", {"X": [qname], "Scale": [s.name]}, {"Y": [dname]},
                            {"quant_axis": axis, "bit_length": 8, "qmax": 127, "qmin": -128, "round_type": 0}),
                     [qv, s], [dv])
        return dv
