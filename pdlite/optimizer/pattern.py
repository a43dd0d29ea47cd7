"""Pattern matching for graph rewrites (Paddle-Lite's PatternMatcher + FuseBase roles).

A `Pattern` is a small connected graph of op patterns and var patterns, each with
predicates; edges name the op's slot:

    p = Pattern()
    w = p.var("w", persistable=True)
    y = p.var("y", intermediate=True)          # one consumer, not fetched, not persistable
    p.op("conv", CONV_TYPES, inputs={"Filter": w}, outputs={"Output": y})
    p.op("act", ACTIVATIONS, inputs={"X": y}, outputs={"Out": p.var("out")})

`find_matches(graph, pattern, fetch)` returns non-overlapping `Match`es (key -> node) in
topological order of the first declared op. A `Fuser` is a pass made of three methods:
`pattern()`, `check(graph, match, ctx) -> reason | None` and `rewrite(graph, match, ctx)`;
it repeats find/check/rewrite until nothing changes and records rewrite and refusal counts
in `ctx.meta["pass_stats"][name]`. The helpers at the end (`replace_ops`, `bypass`,
`new_param`) are the graph edits rewrites share.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc, VarDesc
from pdlite.errors import GraphError, PdliteError
from pdlite.operators.elementwise import BroadcastError, aligned_shapes
from pdlite.operators.registry import OPS
from pdlite.optimizer.pass_registry import Pass, PassContext

AttrCheck = Any  # a value (compared with ==) or a predicate on the value


@dataclass(eq=False)
class VarPat:
    key: str
    persistable: bool | None = None
    intermediate: bool = False  # single consumer, not fetched, not persistable: the rewrite may drop it
    when: Callable[[Node], bool] | None = None
    # edges: (op pattern, slot) that write / read this var
    producer: tuple[OpPat, str] | None = None
    consumers: list[tuple[OpPat, str]] = field(default_factory=list)


@dataclass(eq=False)
class OpPat:
    key: str
    types: tuple[str, ...]
    attrs: dict[str, AttrCheck] = field(default_factory=dict)
    when: Callable[[Node], bool] | None = None
    inputs: dict[str, VarPat] = field(default_factory=dict)
    outputs: dict[str, VarPat] = field(default_factory=dict)

    def accepts(self, node: Node) -> bool:
        op = node.op
        if op is None or op.type not in self.types:
            return False
        for name, want in self.attrs.items():
            have = op.attrs.get(name)
            if callable(want):
                if not want(have):
                    return False
            elif have != want:
                return False
        return self.when is None or bool(self.when(node))


class Pattern:
    """Op and var patterns joined by slot edges; the first declared op anchors the search."""

    def __init__(self) -> None:
        self.ops: list[OpPat] = []
        self.vars: list[VarPat] = []

    def var(self, key: str, *, persistable: bool | None = None, intermediate: bool = False,
            when: Callable[[Node], bool] | None = None) -> VarPat:
        v = VarPat(key, persistable, intermediate, when)
        self.vars.append(v)
        return v

    def op(self, key: str, types: str | Iterable[str], *, inputs: dict[str, VarPat] | None = None,
           outputs: dict[str, VarPat] | None = None, attrs: dict[str, AttrCheck] | None = None,
           when: Callable[[Node], bool] | None = None) -> OpPat:
        o = OpPat(key, (types,) if isinstance(types, str) else tuple(types), dict(attrs or {}), when,
                  dict(inputs or {}), dict(outputs or {}))
        for slot, v in o.inputs.items():
            v.consumers.append((o, slot))
        for slot, v in o.outputs.items():
            if v.producer is not None:
                raise PdliteError(f"pattern var {v.key!r} has two producers")
            v.producer = (o, slot)
        self.ops.append(o)
        return o


class Match(dict):
    """A match: pattern key -> graph node."""

    def op(self, key: str) -> OpDesc:
        node = self[key]
        assert node.op is not None
        return node.op


def _var_ok(vp: VarPat, node: Node, fetch: set[str]) -> bool:
    if not node.is_var:
        return False
    if vp.persistable is not None and node.persistable != vp.persistable:
        return False
    if vp.intermediate and (node.persistable or node.name in fetch or len(node.outputs) != 1):
        return False
    return vp.when is None or bool(vp.when(node))


def _slot_vars(op: Node, slot: str, side: str) -> list[Node]:
    assert op.op is not None
    names = (op.op.inputs if side == "in" else op.op.outputs).get(slot) or []
    pool = op.inputs if side == "in" else op.outputs
    return [v for v in pool if v.name in names]


def _extend(pattern: Pattern, m: dict[Any, Node], fetch: set[str]) -> dict[Any, Node] | None:
    """Bind every pattern element reachable from the bound ones (backtracking), or None."""
    bound_nodes = {id(n) for n in m.values()}
    for p, node in list(m.items()):
        if isinstance(p, OpPat):
            edges = [(vp, _slot_vars(node, s, "in")) for s, vp in p.inputs.items()]
            edges += [(vp, _slot_vars(node, s, "out")) for s, vp in p.outputs.items()]
            for vp, cands in edges:
                if vp in m:
                    if m[vp] not in cands:
                        return None
                    continue
                for c in cands:
                    if id(c) in bound_nodes or not _var_ok(vp, c, fetch):
                        continue
                    r = _extend(pattern, {**m, vp: c}, fetch)
                    if r is not None:
                        return r
                return None
        else:
            edges = [(op, slot, node.inputs) for op, slot in ([p.producer] if p.producer else [])]
            edges += [(op, slot, node.outputs) for op, slot in p.consumers]
            for op, slot, pool in edges:
                side = "out" if pool is node.inputs else "in"
                cands = [c for c in pool if op.accepts(c) and node in _slot_vars(c, slot, side)]
                if op in m:
                    if m[op] not in cands:
                        return None
                    continue
                for c in cands:
                    if id(c) in bound_nodes:
                        continue
                    r = _extend(pattern, {**m, op: c}, fetch)
                    if r is not None:
                        return r
                return None
    return m


def find_matches(graph: Graph, pattern: Pattern, fetch: Iterable[str] = (),
                 accept: Callable[[Match], bool] | None = None) -> list[Match]:
    """Non-overlapping matches (no shared op node or intermediate var), anchored in topological order.

    `accept(match)` may veto a candidate before it claims its nodes (so a refused match does
    not hide an overlapping one).
    """
    if not pattern.ops:
        raise PdliteError("a pattern needs at least one op")
    fetch = set(fetch)
    anchor = pattern.ops[0]
    taken: set[int] = set()
    out: list[Match] = []
    for node in graph.topological_order():
        if node.id in taken or not anchor.accepts(node):
            continue
        m = _extend(pattern, {anchor: node}, fetch)
        if m is None or len(m) != len(pattern.ops) + len(pattern.vars):
            continue
        own = [n for p, n in m.items() if isinstance(p, OpPat) or p.intermediate]
        if any(n.id in taken for n in own):
            continue
        match = Match({p.key: n for p, n in m.items()})
        if accept is not None and not accept(match):
            continue
        taken.update(n.id for n in own)
        out.append(match)
    return out


class Fuser(Pass):
    """A rewrite pass: `pattern()` + `check()` (a refusal reason or None) + `rewrite()`.

    `pattern()` may return several patterns, tried in order (e.g. with and without a trailing
    activation); `rewrite` tells them apart by the keys of the match.
    """

    max_rounds = 50

    def pattern(self) -> Pattern | list[Pattern]:
        raise NotImplementedError

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        raise NotImplementedError

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        pats = self.pattern()
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0, "refused": Counter()})
        fetch = set(ctx.meta.get("fetch_names", []))
        refused: set[tuple[int, ...]] = set()

        def accept(m: Match) -> bool:
            sig = tuple(sorted(n.id for n in m.values()))
            if sig in refused:
                return False
            reason = _multi_version(graph, m) or self.check(graph, m, ctx)
            if reason:
                refused.add(sig)
                stats["refused"][reason] += 1
                return False
            return True

        modified = False
        for pat in pats if isinstance(pats, list) else [pats]:
            for _ in range(self.max_rounds):
                matches = find_matches(graph, pat, fetch, accept)
                for m in matches:
                    if any(n not in graph for n in m.values()):
                        continue  # an earlier rewrite of this round removed part of it: next round
                    self.rewrite(graph, m, ctx)
                    stats["rewrites"] += 1
                modified = modified or bool(matches)
                if not matches:
                    break
        return modified


def versions(graph: Graph, name: str) -> int:
    """How many SSA var nodes carry `name` (more than one: the name is written in place)."""
    return sum(1 for v in graph.var_nodes() if v.name == name)


def _multi_version(graph: Graph, m: Match) -> str | None:
    for n in m.values():
        if n.is_var and not n.persistable and versions(graph, n.name) > 1:
            return f"var {n.name!r} is written in place (several SSA versions)"
    return None


# -- edits shared by rewrites ---------------------------------------------------------------------
def replace_ops(graph: Graph, old_ops: Sequence[Node], new_op: OpDesc, new_inputs: Sequence[Node] = ()) -> Node:
    """Replace `old_ops` by `new_op`, which reads and writes var nodes of the old ops (by name)
    or the given `new_inputs` (e.g. new params); var nodes left unlinked are removed."""
    ins_by_name = {v.name: v for v in new_inputs}
    for o in old_ops:
        for v in o.inputs:
            ins_by_name.setdefault(v.name, v)
    outs_by_name = {v.name: v for o in old_ops for v in o.outputs}
    ins, outs = [], []
    for n in new_op.input_names():
        if n not in ins_by_name:
            raise GraphError(f"replace_ops: the new {new_op.type} reads {n!r}, which neither the replaced ops "
                             "nor new_inputs provide")
        if ins_by_name[n] not in ins:
            ins.append(ins_by_name[n])
    for n in new_op.output_names():
        if n not in outs_by_name:
            raise GraphError(f"replace_ops: the new {new_op.type} writes {n!r}, which the replaced ops did not write")
        outs.append(outs_by_name[n])
    opdef = OPS.get(new_op.type)
    if opdef is not None:
        opdef.complete(new_op)  # a new op is attached like the loaded ones
    return graph.replace_ops(old_ops, new_op, ins, outs)


def drop_unlinked(graph: Graph, nodes: Iterable[Node]) -> None:
    """Remove var nodes left with neither producer nor consumers."""
    for v in nodes:
        if v in graph and v.is_var and not v.inputs and not v.outputs:
            graph.remove_var(v)


def new_param(graph: Graph, ctx: PassContext, base: str, value: np.ndarray) -> Node:
    """A new persistable var node holding `value` under a fresh name derived from `base`."""
    i = 0
    name = f"{base}@fused"
    while name in graph.vars or name in ctx.params:
        i += 1
        name = f"{base}@fused{i}"
    value = np.asarray(value, order="C")
    ctx.params[name] = value
    return graph.add_var(VarDesc(name, dtype=var_type_of(value.dtype), shape=list(value.shape), persistable=True))


def input_node(op: Node, name: str) -> Node:
    """The var node that op node `op` reads under `name`."""
    return next(v for v in op.inputs if v.name == name)


def param_value(ctx: PassContext, node: Node) -> np.ndarray | None:
    """The value of a persistable var node (None when the params do not hold it)."""
    v = ctx.params.get(node.name)
    return None if v is None else np.asarray(v)


def bypass_refusal(graph: Graph, src: Node, dst: Node, fetch: Iterable[str]) -> str | None:
    """Why the identity-like op dst = op(src) cannot be removed by `bypass` (None: it can)."""
    fetch = set(fetch)
    if versions(graph, src.name) > 1 or versions(graph, dst.name) > 1:
        return "input or output is written in place"
    if dst.name not in fetch:
        return None
    if src.producer() is None or src.persistable:
        return "fetched output of a graph input or parameter"
    if src.name in fetch or len(src.outputs) != 1:
        return "fetched output whose input is also read elsewhere"
    return None


def bypass(graph: Graph, op: Node, src: Node, dst: Node, fetch: Iterable[str]) -> None:
    """Remove the identity-like `op` (dst = op(src)); check `bypass_refusal` first.

    Readers of dst read src instead; when dst is fetched, src's producer writes dst instead.
    """
    others = [v for v in op.outputs if v is not dst]
    if dst.name not in set(fetch):
        for c in list(dst.outputs):
            graph.replace_input(c, dst, src)
        graph.remove_op(op)
        drop_unlinked(graph, [dst, *others])
        return
    prod = src.producer()
    assert prod is not None
    graph.remove_op(op, orphan_outputs=True)  # dst gets src's producer right below
    drop_unlinked(graph, others)
    graph.replace_output(prod, src, dst)
    drop_unlinked(graph, [src])


def broadcast_vector(value: np.ndarray, axis: int, ref: tuple[int, ...], dim: int) -> np.ndarray | None:
    """The ref[dim] values that Y = `value` adds along `dim` of an X shaped like `ref` (1s elsewhere)
    under Paddle's `axis` broadcasting; None when Y varies along another dim or changes X's shape."""
    if value.ndim > len(ref):
        return None
    try:
        _, ys, out = aligned_shapes(ref, value.shape, axis)
    except BroadcastError:
        return None
    if tuple(out) != tuple(ref) or any(d != 1 for i, d in enumerate(ys) if i != dim):
        return None
    return np.broadcast_to(np.asarray(value, dtype=np.float64).reshape(-1), (ref[dim],))
