"""quant_state_alias_pass: the state outputs of inference-mode quantization ops become their inputs.

Paddle writes a quant op's OutScale / OutAccum / OutState in place of InScale / InAccum / InState
(legacy programs name them the same variable, PIR programs make new values that alias the inputs).
In inference (is_test, which Paddle Inference forces) the op only copies them, so every reader of a
state output reads the state input instead, and the op loses those outputs. Numbers do not change;
the state tensors stay parameters, so constant folding and the NNAdapter converters see constant scales.
"""
from __future__ import annotations

from pdlite.core.graph import Graph
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import input_node

STATE_SLOTS = (("OutScale", "InScale"), ("OutAccum", "InAccum"), ("OutState", "InState"))
STATE_OPS = frozenset({"fake_quantize_range_abs_max", "fake_quantize_moving_average_abs_max",
                       "fake_quantize_dequantize_moving_average_abs_max", "moving_average_abs_max_scale",
                       "quantize_linear", "dequantize_linear"})


@register_pass("quant_state_alias_pass")
class QuantStateAlias(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        fetched = set(ctx.meta.get("fetch_names", []))
        changed = 0
        for node in list(graph.op_nodes()):
            op = node.op
            assert op is not None
            if op.type not in STATE_OPS:
                continue
            drop: list[str] = []
            for out_slot, in_slot in STATE_SLOTS:
                outs, ins = op.outputs.get(out_slot) or [], op.inputs.get(in_slot) or []
                if len(outs) != 1 or len(ins) != 1:
                    continue
                src = input_node(node, ins[0])
                dst = next(v for v in node.outputs if v.name == outs[0])
                if dst.name in fetched and dst.name != src.name:
                    continue
                for reader in list(dst.outputs):
                    graph.replace_input(reader, dst, src)
                drop.append(out_slot)
            if not drop:
                continue
            desc = op.copy()
            for slot in drop:
                desc.outputs.pop(slot)
            keep = [v for v in node.outputs if v.name in desc.output_names()]
            graph.replace_ops([node], desc, list(node.inputs), keep)
            changed += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": changed}
        return changed > 0
