"""constant_folding_pass: evaluate, at analysis time, ops whose inputs are all known constants.

An op is folded when it is deterministic (not random, no side effect, no sub-block), has a
host kernel, and every input is a param (or the output of an op folded before it, in
topological order); `shape` of a tensor whose declared shape is fully static folds too
(check_feed enforces static feed dims, so such shapes are exact). The op is run with its host
kernel; its read outputs become params (var marked persistable, value in ctx.params) and the op
is removed. Outputs that are written in place elsewhere, already params, or larger than
options["constant_folding_max_bytes"] (default 64 MiB) are left alone. Typical folds: fill_constant,
shape -> slice -> concat chains, reshape2/transpose2/cast of params.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph, Node
from pdlite.core.types import DataLayoutType, Place, PrecisionType, TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.registry import KernelContext
from pdlite.operators.quant import INT8_WEIGHT_OPS
from pdlite.operators.registry import OPS
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.passes.eliminate import SIDE_EFFECT_OPS, has_sub_block
from pdlite.optimizer.passes.kernel_pick import pick_kernel
from pdlite.optimizer.pattern import versions

NON_DETERMINISTIC = frozenset({
    "dropout", "uniform_random", "gaussian_random", "truncated_gaussian_random", "randint", "randperm",
    "bernoulli", "multinomial", "sampling_id", "random_crop", "seed", "class_center_sample",
    "uniform_random_batch_size_like", "gaussian_random_batch_size_like", "io_copy", "calib", "layout",
})
HOST_ANY = [Place(TargetType.Host, PrecisionType.Any, DataLayoutType.Any)]


def _static_shape(node: Node) -> list[int] | None:
    shape = list(node.var.shape) if node.var is not None else []
    return shape if shape and all(d >= 0 for d in shape) else None


@register_pass("constant_folding_pass")
class ConstantFoldingPass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0, "refused": {}})
        limit = int(ctx.options.get("constant_folding_max_bytes", 64 << 20))
        feeds = set(ctx.meta.get("feed_names", []))
        folded = 0
        for node in graph.topological_order():
            if node not in graph or not self._candidate(graph, node, ctx, feeds):
                continue
            try:
                values = self._evaluate(node, ctx)
            except Exception as e:  # not foldable after all: leave it to the runtime
                reason = f"{node.name}: {type(e).__name__}"
                stats["refused"][reason] = stats["refused"].get(reason, 0) + 1
                continue
            if any(np.asarray(v).nbytes > limit for v in values.values()):
                continue
            if any((v.outputs or v.name in ctx.meta.get("fetch_names", [])) and v.name not in values
                   for v in node.outputs):
                continue  # the kernel does not produce an output that is read
            self._replace(graph, node, values, ctx)
            folded += 1
        stats["rewrites"] += folded
        return folded > 0

    @staticmethod
    def _candidate(graph: Graph, node: Node, ctx: PassContext, feeds: set[str]) -> bool:
        op = node.op
        assert op is not None
        if (op.type in NON_DETERMINISTIC or op.type in SIDE_EFFECT_OPS or has_sub_block(node)
                or OPS.get(op.type) is None or not node.outputs):
            return False
        for v in node.outputs:
            if v.persistable or v.name in ctx.params or v.name in feeds or versions(graph, v.name) > 1:
                return False
        if op.type in INT8_WEIGHT_OPS and ctx.options.get("nnadapter_device_names"):
            return False  # NNAdapter devices read the int8 weights (pdlite/nnadapter/converters/quant.py)
        if op.type == "shape":
            return len(node.inputs) == 1 and (node.inputs[0].name in ctx.params
                                              or _static_shape(node.inputs[0]) is not None)
        return all(v.persistable and v.name in ctx.params for v in node.inputs)

    @staticmethod
    def _evaluate(node: Node, ctx: PassContext) -> dict[str, Any]:
        op = node.op
        assert op is not None
        if op.type == "shape" and node.inputs[0].name not in ctx.params:
            shape = _static_shape(node.inputs[0])
            return {op.outputs["Out"][0]: np.asarray(shape, dtype=np.int32)}
        kd = pick_kernel(node, HOST_ANY)
        if kd is None:
            raise PdliteError(f"no host kernel for {op.type}")
        desc = OPS[op.type].attach(op)
        kernel = kd.create(desc, KernelContext(dict(ctx.options)))
        ins = {slot: [ctx.params[n] for n in names] for slot, names in desc.inputs.items() if names}
        kernel.prepare({n: ctx.params[n] for n in desc.input_names()})
        outs = kernel.run(ins)
        return {n: v for slot, vals in outs.items() for n, v in zip(desc.outputs.get(slot) or [], vals)}

    @staticmethod
    def _replace(graph: Graph, node: Node, values: dict[str, Any], ctx: PassContext) -> None:
        fetch = set(ctx.meta.get("fetch_names", []))
        outs, ins = list(node.outputs), list(node.inputs)
        graph.remove_op(node, orphan_outputs=True)  # the read outputs become parameters below
        for v in outs:
            if (v.outputs or v.name in fetch) and v.name in values:
                value = np.asarray(values[v.name])
                ctx.params[v.name] = value
                assert v.var is not None
                v.var.persistable = True
                v.var.dtype = var_type_of(value.dtype)
                v.var.shape = list(value.shape)
            elif not v.outputs and v.name not in fetch:
                graph.remove_var(v)
        for v in ins:
            if not v.inputs and not v.outputs:
                graph.remove_var(v)
