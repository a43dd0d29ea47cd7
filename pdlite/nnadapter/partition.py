"""Device-neutral partitioning: group supported ops into subgraphs that can each become one op.

Rule (Paddle-Lite's subgraph detector, FX partitioner's merge refusal): two groups joined by an
edge merge unless another path leads from one to the other through an op outside both, since
contracting them would then create a cycle. Groups are tracked as nodes of a contracted DAG
(union of members, successor and predecessor groups); a merge is checked by a depth-first
search that only visits groups able to reach the target (their first op comes before the
target's last op in topological order).

Groups that only compute shapes (their non-constant inputs are read by `shape` ops alone, so
their outputs are small integer tensors that depend on input shapes, not values, e.g. PP-LiteSeg's
`shape -> slice` feeding an interpolate) are not formed: a device gains nothing from them, and
some cannot build or run a model whose outputs do not depend on its input values.

Also here: the partition config that keeps chosen ops off the device (Paddle-Lite's format).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.errors import ConfigError


@dataclass
class _Group:
    members: list[Node]
    lo: int  # first and last topological position of its ops
    hi: int
    succ: set[int] = field(default_factory=set)
    pred: set[int] = field(default_factory=set)


class _Contracted:
    """The op graph with groups contracted, kept acyclic by refusing merges that would close a cycle."""

    def __init__(self, order: list[Node]) -> None:
        self.pos = {n.id: i for i, n in enumerate(order)}
        self.group_of: dict[int, int] = {n.id: n.id for n in order}
        self.groups: dict[int, _Group] = {}
        for n in order:
            succ = {c.id for v in n.outputs for c in v.outputs if c.id in self.pos}
            pred = {p.id for v in n.inputs for p in v.inputs if p.id in self.pos}
            self.groups[n.id] = _Group([n], self.pos[n.id], self.pos[n.id], succ, pred)

    def find(self, node: Node) -> int:
        return self.group_of[node.id]

    def _reaches(self, start: Iterable[int], target: int) -> bool:
        limit = self.groups[target].hi
        stack = [g for g in start if self.groups[g].lo < limit or g == target]
        seen = set(stack)
        while stack:
            g = stack.pop()
            if g == target:
                return True
            for s in self.groups[g].succ:
                if s not in seen and (s == target or self.groups[s].lo < limit):
                    seen.add(s)
                    stack.append(s)
        return False

    def can_merge(self, a: int, b: int) -> bool:
        """True when merging groups a and b (a before b) keeps the contracted graph acyclic."""
        ga, gb = self.groups[a], self.groups[b]
        if self._reaches(ga.succ - {b}, b):
            return False
        return not self._reaches(gb.succ - {a}, a)

    def merge(self, a: int, b: int) -> int:
        ga, gb = self.groups.pop(a), self.groups.pop(b)
        keep = min(a, b)
        merged = _Group(ga.members + gb.members, min(ga.lo, gb.lo), max(ga.hi, gb.hi),
                        (ga.succ | gb.succ) - {a, b}, (ga.pred | gb.pred) - {a, b})
        self.groups[keep] = merged
        for n in merged.members:
            self.group_of[n.id] = keep
        for s in merged.succ:
            p = self.groups[s].pred
            p.difference_update((a, b))
            p.add(keep)
        for s in merged.pred:
            q = self.groups[s].succ
            q.difference_update((a, b))
            q.add(keep)
        return keep


SHAPE_OPS = frozenset({"shape", "shape64"})


def shape_only(members: list[Node]) -> bool:
    """True when the group's non-constant inputs are read only by its shape ops (or it has none):
    its outputs depend on input shapes, not on input values."""
    ids = {m.id for m in members}
    for m in members:
        for v in m.inputs:
            p = v.producer()
            if (p is None or p.id not in ids) and not v.persistable and m.op is not None \
                    and m.op.type not in SHAPE_OPS:
                return False
    return True


def partition(graph: Graph, supported: set[int], min_size: int = 1) -> list[list[Node]]:
    """Groups of supported op nodes (by id), each in topological order, of at least `min_size` ops,
    leaving out groups that only compute shapes (`shape_only`).

    Contracting every returned group into one node leaves the graph acyclic.
    """
    order = graph.topological_order()
    dag = _Contracted(order)
    for n in order:
        if n.id not in supported:
            continue
        preds = sorted({p for v in n.inputs for p in v.inputs if p.id in supported},
                       key=lambda p: -dag.pos[p.id])
        for p in preds:
            a, b = dag.find(p), dag.find(n)
            if a != b and dag.can_merge(a, b):
                dag.merge(a, b)
    groups = []
    for g in dag.groups.values():
        if g.members[0].id in supported and len(g.members) >= max(1, min_size) and not shape_only(g.members):
            groups.append(sorted(g.members, key=lambda m: dag.pos[m.id]))
    groups.sort(key=lambda ms: dag.pos[ms[0].id])
    return groups


@dataclass(frozen=True)
class PartitionRule:
    """One line of a partition config: op type, and optionally input/output var names it must have."""

    op_type: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def matches(self, op: OpDesc) -> bool:
        if op.type != self.op_type:
            return False
        ins, outs = set(op.input_names()), set(op.output_names())
        return all(n in ins for n in self.inputs) and all(n in outs for n in self.outputs)


def parse_partition_config(text: str, source: str = "partition config") -> list[PartitionRule]:
    """Rules from Paddle-Lite's subgraph partition config format, one per line:

        op_type                                  every op of that type
        op_type:in_var1,in_var2:out_var1          the ops of that type with those inputs and outputs
        op_type::out_var1                         ... with that output
    Blank lines and lines starting with '#' are ignored.
    """
    rules = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(":")]
        if len(parts) > 3 or not parts[0]:
            raise ConfigError(f"{source} line {lineno}: {raw!r}: expected op_type[:in_var,...[:out_var,...]]")
        ins = tuple(n.strip() for n in parts[1].split(",") if n.strip()) if len(parts) > 1 else ()
        outs = tuple(n.strip() for n in parts[2].split(",") if n.strip()) if len(parts) > 2 else ()
        rules.append(PartitionRule(parts[0], ins, outs))
    return rules
