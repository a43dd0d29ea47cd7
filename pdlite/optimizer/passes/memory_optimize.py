"""memory_optimize_pass: lifetime analysis of intermediate tensors, a shared-buffer plan, release points.

Intermediates are the non-persistable tensors ops write that are neither fed nor fetched. Over
the runtime order (the graph's topological order, which RuntimeProgram.from_graph also uses)
each one lives from the instruction that first writes it to the one that last reads it (all
SSA versions of a name count as one tensor).

What "reuse" means in NumPy: host kernels return fresh arrays, so tensors cannot be pinned to
preallocated blocks. pdlite gets the effect instead by releasing: each op node gets
`info["release"]`, the intermediates to drop from the scope right after it runs (for a tensor
nobody reads, right after the op that writes it). RuntimeProgram pops them, NumPy hands the
memory back to the allocator, and later tensors reuse it, so the live intermediate memory at
any point is that of the tensors still needed (the plan's `peak_live_bytes`), not the sum of
all of them (`bytes_no_reuse`, what the scope held before).

The plan in ctx.meta["memory_plan"] also assigns each intermediate to a shared buffer, as a
target with explicit allocation would: tensors whose lifetimes do not overlap share a buffer
(greedy in program order, best fit among the free buffers, else the largest one grown, else a
new one; an op's output never shares with its own inputs). `bytes_shared_buffers` is the sum
of the buffers' capacities. Sizes come from the var descs, with a batch of 1 for -1 dims (the
report script benchmarks/optimizer_report.py passes measured sizes to `plan_memory` instead).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.graph import Graph, Node
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.passes.eliminate import has_sub_block, sub_block_names

Step = tuple[Sequence[str], Sequence[str]]  # (names read, names written) by one instruction


@dataclass
class MemoryPlan:
    release: list[list[str]]  # per step: intermediates to drop after it
    buffer_of: dict[str, int]
    buffer_bytes: list[int]
    size: dict[str, int]
    peak_live_bytes: int
    lifetime: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def bytes_no_reuse(self) -> int:
        return sum(self.size.values())

    @property
    def bytes_shared_buffers(self) -> int:
        return sum(self.buffer_bytes)

    def report(self) -> dict[str, int]:
        return {"tensors": len(self.size), "buffers": len(self.buffer_bytes),
                "bytes_no_reuse": self.bytes_no_reuse, "bytes_shared_buffers": self.bytes_shared_buffers,
                "peak_live_bytes": self.peak_live_bytes}


def plan_memory(steps: Sequence[Step], is_intermediate: Callable[[str], bool],
                size_of: Callable[[str], int]) -> MemoryPlan:
    """Lifetimes, release points and a shared-buffer assignment for `steps` run in order."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, (ins, outs) in enumerate(steps):
        for n in outs:
            if is_intermediate(n):
                first.setdefault(n, i)
                last[n] = max(last.get(n, i), i)
        for n in ins:
            if n in first:
                last[n] = i
    size = {n: int(size_of(n)) for n in first}
    release: list[list[str]] = [[] for _ in steps]
    for n, i in last.items():
        release[i].append(n)
    starts: list[list[str]] = [[] for _ in steps]
    for n, i in first.items():
        starts[i].append(n)
    buffer_of: dict[str, int] = {}
    capacity: list[int] = []
    free: set[int] = set()
    live = peak = 0
    for i in range(len(steps)):
        for n in sorted(starts[i], key=lambda k: -size[k]):
            fits = [b for b in free if capacity[b] >= size[n]]
            if fits:
                b = min(fits, key=lambda k: (capacity[k], k))
            elif free:
                b = max(free, key=lambda k: (capacity[k], -k))
                capacity[b] = size[n]
            else:
                b = len(capacity)
                capacity.append(size[n])
            free.discard(b)
            buffer_of[n] = b
            live += size[n]
        peak = max(peak, live)
        for n in release[i]:
            free.add(buffer_of[n])
            live -= size[n]
    lifetime = {n: (first[n], last[n]) for n in first}
    return MemoryPlan(release, buffer_of, capacity, size, peak, lifetime)


def desc_bytes(node: Node) -> int:
    """Bytes of a var from its desc: -1 dims taken as 1 (a batch of 1), unknown dtypes as 4 bytes."""
    var = node.var
    if var is None:
        return 0
    numel = int(np.prod([max(int(d), 1) for d in var.shape])) if var.shape else 1
    try:
        item = numpy_dtype(var.dtype).itemsize if var.dtype is not None else 4
    except Exception:
        item = 4
    return numel * item


@register_pass("memory_optimize_pass")
class MemoryOptimizePass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        order = graph.topological_order()
        keep = set(ctx.meta.get("feed_names", [])) | set(ctx.meta.get("fetch_names", [])) | set(ctx.params)
        by_name: dict[str, Node] = {}
        for v in graph.var_nodes():
            if v.inputs:
                by_name.setdefault(v.name, v)
        persistable = {v.name for v in graph.var_nodes() if v.persistable}

        def intermediate(name: str) -> bool:
            return name not in keep and name not in persistable

        steps = [([v.name for v in n.inputs], [v.name for v in n.outputs]) for n in order]
        # an op with a sub-block (while, conditional_block) also uses every var its block names: none
        # of them may be released before it
        program, known = ctx.meta.get("program"), set(by_name)
        for i, n in enumerate(order):
            if has_sub_block(n) and program is not None:
                steps[i] = (steps[i][0] + sorted(sub_block_names(program, n) & known), steps[i][1])
        plan = plan_memory(steps, intermediate, lambda n: desc_bytes(by_name[n]))
        for i, node in enumerate(order):
            node.info["release"] = tuple(plan.release[i])
            node.info["mem_index"] = i
        ctx.meta["memory_plan"] = {**plan.report(), "buffer_of": plan.buffer_of}
        return False
