"""subgraph_detect_pass: move the ops an NNAdapter device supports into `subgraph` ops.

Active only when the config names NNAdapter devices (`nnadapter_device_names`). Steps, as in
Paddle-Lite: (1) mark every op that has a converter whose capability predicate accepts it
and that the partition config does not exclude; (2) group marked ops into subgraphs so that
contracting each group keeps the graph acyclic (`pdlite.nnadapter.partition`); (3) drop groups
with fewer than `subgraph_min_size` ops or without a non-constant input; (4) replace each group
by a `subgraph` op whose `sub_block` is a new block of the program holding the original ops,
with exact inputs (parameters included) and outputs (vars read outside the group or fetched).
The op's kernel is chosen here (the NNAdapter subgraph kernel, bound to its block and device),
so static_kernel_pick_pass leaves it alone. Device capability comes from the converter table
only: nothing here depends on the device.
"""
from __future__ import annotations

import logging

from pdlite.core.graph import Graph, Node
from pdlite.core.program import BlockDesc, OpDesc
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.registry import KERNELS, KernelKey
from pdlite.nnadapter.convert import TensorInfo, refusal
from pdlite.nnadapter.options import NNAdapterOptions
from pdlite.nnadapter.partition import partition
from pdlite.nnadapter.subgraph_kernel import SubgraphKernel
from pdlite.operators.subgraph import ATTR_TYPES
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass

log = logging.getLogger(__name__)

SUBGRAPH_KERNEL = KernelKey("subgraph", TargetType.NNAdapter, ANY_PRECISION, ANY_LAYOUT)


def _latest_versions(graph: Graph, order: list[Node]) -> dict[str, Node]:
    """For each var name, its last written version (graph inputs when never written)."""
    latest: dict[str, Node] = {}
    for v in graph.var_nodes():
        if not v.inputs:
            latest.setdefault(v.name, v)
    for n in order:
        for v in n.outputs:
            latest[v.name] = v
    return latest


@register_pass("subgraph_detect_pass")
class SubgraphDetectPass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        opts = NNAdapterOptions.from_options(ctx.options, ctx.valid_places)
        if opts is None:
            return False
        device = opts.pick_device()
        program = ctx.meta.get("program")
        if program is None:
            raise PdliteError("subgraph_detect_pass needs the program in ctx.meta['program'] (set by analyse())")
        info = TensorInfo.from_vars(graph.vars, ctx.params)
        supported: set[int] = set()
        refused: dict[str, str] = {}
        for n in graph.op_nodes():
            assert n.op is not None
            if opts.excluded(n.op) or n.op.type in ("feed", "fetch"):
                continue
            why = refusal(n.op, info)
            if why is None:
                supported.add(n.id)
            else:
                refused.setdefault(n.op.type, why)
        for t, why in sorted(refused.items()):
            log.debug("subgraph_detect_pass: %s stays on the host: %s", t, why)
        groups = partition(graph, supported, opts.min_size)
        order = graph.topological_order()
        latest = _latest_versions(graph, order)
        fetch = set(ctx.meta.get("fetch_names", []))
        made = 0
        for members in groups:
            if self._fuse(graph, members, ctx, opts, device, program, latest, fetch):
                made += 1
        ctx.meta.setdefault("nnadapter", {})["subgraphs"] = made
        ctx.meta["nnadapter"]["device"] = device
        return made > 0

    def _fuse(self, graph: Graph, members: list[Node], ctx: PassContext, opts: NNAdapterOptions, device: str,
              program: object, latest: dict[str, Node], fetch: set[str]) -> bool:
        ids = {m.id for m in members}
        in_nodes: list[Node] = []
        out_nodes: list[Node] = []
        for m in members:
            for v in m.inputs:
                p = v.producer()
                if (p is None or p.id not in ids) and v not in in_nodes:
                    in_nodes.append(v)
            for v in m.outputs:
                outside = any(c.id not in ids for c in v.outputs)
                if outside or (v.name in fetch and latest.get(v.name) is v):
                    out_nodes.append(v)
        data_in = [v.name for v in in_nodes if not (v.persistable or v.name in ctx.params)]
        if not data_in or not out_nodes:
            return False  # constant-only (or dead) groups stay on the host
        blocks = program.blocks  # type: ignore[attr-defined]
        used = {name for m in members for name in m.op.input_names() + m.op.output_names()}  # type: ignore[union-attr]
        block = BlockDesc(len(blocks), graph.block.idx, {k: v for k, v in graph.vars.items() if k in used},
                          [m.op for m in members], -1)  # type: ignore[misc]
        blocks.append(block)
        desc = OpDesc("subgraph", {"Inputs": [v.name for v in in_nodes]}, {"Outputs": [v.name for v in out_nodes]},
                      {"sub_block": block.idx, "input_data_names": data_in,
                       "output_data_names": [v.name for v in out_nodes], "nnadapter_device": device},
                      dict(ATTR_TYPES))
        node = graph.replace_ops(members, desc, in_nodes, out_nodes)
        node.info["kernel"] = KERNELS[SUBGRAPH_KERNEL]
        kernel = SubgraphKernel(desc)
        kernel.bind(block, program, opts, device)  # type: ignore[arg-type]
        node.info["kernel_instance"] = kernel
        return True
