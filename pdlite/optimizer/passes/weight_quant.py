"""weight_quantize_pass: weight-only quantization (paddle_lite_opt's --quant_model --quant_type).

Not in the default pipeline: `pdlite-opt --quant_model true` (Opt.set_quant_model) inserts it before kernel
pick. Every float32 weight of a conv / fc / mul / matmul op is stored as int8 (QUANT_INT8, qmax 127) or
int16 (QUANT_INT16, qmax 32767) with per-channel abs-max scales along the output-channel axis:

    s[c] = max|W[c]|,   Wq = clip(round_half_even(W * qmax / s[c]), -qmax - 1, qmax),
    W' = Wq * s[c] / qmax   (a dequantize_linear op between the int weight and its consumer)

so the .nb holds 1/4 (1/2) of the float bytes and the model computes with W', which differs from W by at
most s[c] / (2 qmax) per element. The host's dequantize_linear kernel dequantizes once, when the program is
prepared (its inputs are parameters), so runs cost nothing extra. options["quant_type"] picks the type.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc, VarDesc
from pdlite.errors import ConfigError
from pdlite.kernels.host.quant import channel_abs_max, channel_view, quantize
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass

QUANT_TYPES = {"QUANT_INT8": (np.int8, 127), "QUANT_INT16": (np.int16, 32767)}
# op type -> (weight slot, output-channel axis of a 4-D / 2-D weight)
WEIGHT_SLOTS = {"conv2d": ("Filter", 0), "depthwise_conv2d": ("Filter", 0), "fused_conv2d": ("Filter", 0),
                "conv2d_transpose": ("Filter", 1), "depthwise_conv2d_transpose": ("Filter", 1),
                "fc": ("W", 1), "mul": ("Y", 1), "matmul": ("Y", 1), "matmul_v2": ("Y", 1)}
# ops with more than one weight: op type -> the (slot, axis) pairs after WEIGHT_SLOTS' one
MORE_WEIGHT_SLOTS = {"squeeze_excitation": (("W1", 0), ("W2", 0))}


def weight_slots(op_type: str) -> tuple[tuple[str, int], ...]:
    """The (weight slot, output-channel axis) pairs of an op type (none: it has no weight to quantize)."""
    one = WEIGHT_SLOTS.get(op_type)
    return ((one,) if one else ()) + MORE_WEIGHT_SLOTS.get(op_type, ())


def quantize_weight(w: np.ndarray, axis: int, qmax: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """(integer weight, per-channel scales) of a float weight."""
    s = channel_abs_max(w, axis)
    q = quantize(w, channel_view(s, axis, w.ndim), qmax, 0)
    return q.astype(dtype), s


@register_pass("weight_quantize_pass")
class WeightQuantize(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        kind = str(ctx.options.get("quant_type", "QUANT_INT16"))
        if kind not in QUANT_TYPES:
            raise ConfigError(f"weight_quantize_pass: quant_type {kind!r} is not one of {sorted(QUANT_TYPES)}")
        dtype, qmax = QUANT_TYPES[kind]
        done = 0
        for node in list(graph.op_nodes()):
            op = node.op
            assert op is not None
            for slot, axis in weight_slots(op.type):
                if len(op.inputs.get(slot) or []) != 1:
                    continue
                if op.type in ("matmul", "matmul_v2") and op.attrs.get("trans_y", op.attrs.get("transpose_Y", False)):
                    axis = 0
                wname = op.inputs[slot][0]
                w = ctx.params.get(wname)
                wnode = next((v for v in node.inputs if v.name == wname), None)
                if (w is None or wnode is None or not wnode.persistable or np.asarray(w).dtype != np.float32
                        or np.asarray(w).ndim not in (2, 4) or wnode.inputs):
                    continue
                w = np.asarray(w)
                q, s = quantize_weight(w, axis, qmax, dtype)
                qname, sname, dqname = f"{wname}@{kind.lower()}", f"{wname}@scale", f"{wname}@dequantized"
                qnode = graph.add_var(VarDesc(qname, dtype=var_type_of(q.dtype), shape=list(q.shape), persistable=True))
                snode = graph.add_var(VarDesc(sname, dtype=var_type_of(s.dtype), shape=list(s.shape), persistable=True))
                dnode = graph.add_var(VarDesc(dqname, dtype=wnode.var.dtype if wnode.var else None, shape=list(w.shape)))
                ctx.params[qname], ctx.params[sname] = q, s
                dq = OpDesc("dequantize_linear", {"X": [qname], "Scale": [sname]}, {"Y": [dqname]},
                            {"quant_axis": axis, "bit_length": 8 if qmax == 127 else 16, "qmax": qmax,
                             "qmin": -qmax - 1, "round_type": 0})
                graph.add_op(dq, [qnode, snode], [dnode])
                for reader in list(wnode.outputs):
                    graph.replace_input(reader, wnode, dnode)
                graph.remove_var(wnode)
                ctx.params.pop(wname, None)
                done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0


def with_weight_quantization(passes: list[str]) -> list[str]:
    """`passes` with weight_quantize_pass before the device partition / kernel pick (after the fusions,
    so fused ops' weights are quantized too)."""
    out = [p for p in passes if p != "weight_quantize_pass"]
    at = next((i for i, p in enumerate(out) if p in ("subgraph_detect_pass", "static_kernel_pick_pass")), len(out))
    return [*out[:at], "weight_quantize_pass", *out[at:]]
