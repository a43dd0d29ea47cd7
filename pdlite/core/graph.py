"""The SSA graph of the analysis phase: op nodes and var nodes, edges from op inputs and outputs.

Each write of a variable name creates a new var node (static single assignment), so a
name rewritten in place by an op gets one node per version. Edits go through methods
that refuse invalid changes; `lint()` checks the invariants after each pass in debug mode.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, VarDesc
from pdlite.errors import GraphError


@dataclass(eq=False)
class Node:
    """A node of the SSA graph: either an op (`op` set) or a var (`var` set)."""

    id: int
    op: OpDesc | None = None
    var: VarDesc | None = None
    name: str = ""
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    # analysis results attached by passes (picked kernel, tensor type, ...)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def is_op(self) -> bool:
        return self.op is not None

    @property
    def is_var(self) -> bool:
        return self.op is None

    @property
    def persistable(self) -> bool:
        return bool(self.var is not None and self.var.persistable)

    def producer(self) -> Node | None:
        """The op node writing this var node (None for graph inputs and params)."""
        return self.inputs[0] if self.inputs else None

    def __repr__(self) -> str:
        kind = f"op:{self.op.type}" if self.op is not None else "var"
        return f"Node#{self.id}({kind} {self.name})"


class Graph:
    """An SSA graph over one block. Var descriptions are shared with the block by name."""

    def __init__(self, block: BlockDesc, inputs: Iterable[str] = ()) -> None:
        self.block = block
        self.vars: dict[str, VarDesc] = block.vars
        # names that are graph inputs besides parameters: the feed ops' outputs (they stay inputs
        # when the feed ops are removed) and `inputs` (a sub-block's vars coming from its parent)
        self.inputs: set[str] = set(inputs)
        self._nodes: dict[int, Node] = {}
        self._next_id = 0
        self._latest: dict[str, Node] = {}
        for op in block.ops:
            self._append_op(op)
            if op.type == "feed":
                self.inputs.update(op.output_names())

    # -- construction -------------------------------------------------------------------------
    def _new_node(self, **kw: Any) -> Node:
        n = Node(self._next_id, **kw)
        self._next_id += 1
        self._nodes[n.id] = n
        return n

    def var_desc(self, name: str) -> VarDesc:
        desc = self.vars.get(name)
        if desc is None:
            desc = VarDesc(name)
            self.vars[name] = desc
        return desc

    def _read(self, name: str) -> Node:
        node = self._latest.get(name)
        if node is None:
            node = self._new_node(var=self.var_desc(name), name=name)
            self._latest[name] = node
        return node

    def _append_op(self, op: OpDesc) -> Node:
        node = self._new_node(op=op, name=op.type)
        for name in op.input_names():
            v = self._read(name)
            if v not in node.inputs:
                node.inputs.append(v)
                v.outputs.append(node)
        for name in op.output_names():
            v = self._new_node(var=self.var_desc(name), name=name)
            v.inputs.append(node)
            node.outputs.append(v)
            self._latest[name] = v
        return node

    # -- queries ------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def op_nodes(self) -> list[Node]:
        return [n for n in self._nodes.values() if n.is_op]

    def var_nodes(self) -> list[Node]:
        return [n for n in self._nodes.values() if n.is_var]

    def __contains__(self, node: Node) -> bool:
        return self._nodes.get(node.id) is node

    def topological_order(self) -> list[Node]:
        """Op nodes in a topological order that keeps the original order among independent ops."""
        indeg: dict[int, int] = {}
        for n in self._nodes.values():
            if n.is_op:
                indeg[n.id] = sum(1 for v in n.inputs if v.inputs)
        import heapq

        ready = [n.id for n in self._nodes.values() if n.is_op and indeg[n.id] == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            n = self._nodes[heapq.heappop(ready)]
            order.append(n)
            for v in n.outputs:
                for c in v.outputs:
                    indeg[c.id] -= 1
                    if indeg[c.id] == 0:
                        heapq.heappush(ready, c.id)
        if len(order) != len(indeg):
            raise GraphError("the graph has a cycle; ops in it: " + ", ".join(
                n.name for n in self._nodes.values() if n.is_op and n not in order))
        return order

    # -- edits --------------------------------------------------------------------------------
    def add_op(self, op: OpDesc, inputs: Iterable[Node], outputs: Iterable[Node]) -> Node:
        """Insert an op node reading `inputs` and writing `outputs` (var nodes with no producer)."""
        node = self._new_node(op=op, name=op.type)
        for v in inputs:
            self._check_owned(v)
            if v not in node.inputs:
                node.inputs.append(v)
                v.outputs.append(node)
        for v in outputs:
            self._check_owned(v)
            if v.inputs:
                raise GraphError(f"var {v.name!r} already has a producer ({v.inputs[0].name}); SSA forbids a second")
            v.inputs.append(node)
            node.outputs.append(v)
        return node

    def add_var(self, desc: VarDesc) -> Node:
        """A new var node for `desc` (registered in the block's vars)."""
        self.vars.setdefault(desc.name, desc)
        return self._new_node(var=self.vars[desc.name], name=desc.name)

    def remove_op(self, node: Node, *, orphan_outputs: bool = False) -> None:
        """Remove an op node and its edges. Refused while another op reads one of its outputs, unless
        `orphan_outputs` (the caller gives them a new producer next, or makes them graph inputs:
        feeds, folded constants); `lint()` flags any left read but unproduced."""
        self._check_owned(node)
        if not node.is_op:
            raise GraphError(f"remove_op got a var node {node.name!r}")
        if not orphan_outputs:
            read = {v.name: sorted({c.name for c in v.outputs}) for v in node.outputs if v.outputs}
            if read:
                raise GraphError(f"cannot remove op {node.name}#{node.id}: its outputs are still read "
                                 f"({', '.join(f'{k} by {v}' for k, v in read.items())}); rewire the readers "
                                 "(replace_input), replace the op (replace_ops) or move the output (replace_output)")
        self._detach(node)

    def _detach(self, node: Node) -> None:
        for v in node.inputs:
            v.outputs.remove(node)
        for v in node.outputs:
            v.inputs.remove(node)
        del self._nodes[node.id]

    def replace_ops(self, old: Sequence[Node], op: OpDesc, inputs: Iterable[Node], outputs: Iterable[Node]) -> Node:
        """Replace the op nodes `old` by one new op reading `inputs` and writing `outputs` (at once).

        Every output of `old` read by an op outside `old` (or kept as a graph output by the caller)
        must be among `outputs`; `outputs` are outputs of `old` or var nodes with no producer. Var
        nodes of `old` left with no edges are removed."""
        old = list(old)
        for n in old:
            self._check_owned(n)
            if not n.is_op:
                raise GraphError(f"replace_ops got a var node {n.name!r}")
        ids = {n.id for n in old}
        outputs = list(outputs)
        keep = {v.id for v in outputs}
        lost = sorted({v.name for n in old for v in n.outputs
                       if v.id not in keep and any(c.id not in ids for c in v.outputs)})
        if lost:
            raise GraphError(f"replace_ops: the new {op.type} does not write {lost}, which ops outside the "
                             "replaced ones read")
        touched = [v for n in old for v in n.inputs + n.outputs]
        for n in old:
            self._detach(n)
        node = self.add_op(op, inputs, outputs)
        for v in touched:
            if v.id in self._nodes and not v.inputs and not v.outputs:
                del self._nodes[v.id]
        return node

    def replace_output(self, op: Node, old: Node, new: Node) -> None:
        """Make `op` write the var node `new` (which has no producer) instead of `old` (edges and the op
        desc's slots); `old` keeps its readers and loses its producer: give it another one next."""
        self._check_owned(op)
        self._check_owned(new)
        if old not in op.outputs:
            raise GraphError(f"replace_output: op {op.name}#{op.id} does not write {old.name!r}")
        if new.inputs:
            raise GraphError(f"replace_output: var {new.name!r} already has a producer ({new.inputs[0].name})")
        assert op.op is not None
        old.inputs.remove(op)
        op.outputs[op.outputs.index(old)] = new
        new.inputs.append(op)
        for names in op.op.outputs.values():
            for i, n in enumerate(names):
                if n == old.name:
                    names[i] = new.name

    def remove_var(self, node: Node) -> None:
        """Remove a var node; refused while an op still reads or writes it."""
        self._check_owned(node)
        if node.inputs or node.outputs:
            users = [n.name for n in node.inputs + node.outputs]
            raise GraphError(f"cannot remove var {node.name!r}: still linked to ops {users}")
        del self._nodes[node.id]

    def link(self, var: Node, op: Node) -> None:
        """Make op read var (and record it in the op desc by the caller)."""
        self._check_owned(var)
        self._check_owned(op)
        if var not in op.inputs:
            op.inputs.append(var)
            var.outputs.append(op)

    def unlink(self, var: Node, op: Node) -> None:
        if var in op.inputs:
            op.inputs.remove(var)
            var.outputs.remove(op)

    def replace_input(self, op: Node, old: Node, new: Node) -> None:
        """Make `op` read `new` wherever it read `old` (edges and the op desc's slots)."""
        self.unlink(old, op)
        self.link(new, op)
        for names in op.op.inputs.values():
            for i, n in enumerate(names):
                if n == old.name:
                    names[i] = new.name

    def remove_dead_vars(self) -> int:
        dead = [n for n in self._nodes.values() if n.is_var and not n.inputs and not n.outputs]
        for n in dead:
            del self._nodes[n.id]
        return len(dead)

    def is_input(self, v: Node) -> bool:
        """Whether the var node may be read without a producer: a parameter, a feed or a declared input."""
        return (v.persistable or v.name in self.inputs
                or (v.var is not None and v.var.type in (VarType.FEED_MINIBATCH, VarType.FETCH_LIST)))

    def _check_owned(self, node: Node) -> None:
        if self._nodes.get(node.id) is not node:
            raise GraphError(f"{node!r} does not belong to this graph")

    # -- checks and output --------------------------------------------------------------------
    def lint(self) -> None:
        """Check edge symmetry, op-desc/edge agreement, single producers, that every var read has a
        producer or is a graph input (feed, parameter, `inputs`), and acyclicity."""
        for n in self._nodes.values():
            if n.is_var and n.outputs and not n.inputs and not self.is_input(n):
                raise GraphError(f"var {n.name!r} is read by {sorted({c.name for c in n.outputs})} but nothing "
                                 "writes it, and it is neither a feed nor a parameter")
            for i in n.inputs:
                if self._nodes.get(i.id) is not i:
                    raise GraphError(f"{n!r} has input {i!r} that is not in the graph")
                if n not in i.outputs:
                    raise GraphError(f"edge {i!r} -> {n!r} is one-sided")
            for o in n.outputs:
                if self._nodes.get(o.id) is not o:
                    raise GraphError(f"{n!r} has output {o!r} that is not in the graph")
                if n not in o.inputs:
                    raise GraphError(f"edge {n!r} -> {o!r} is one-sided")
            if n.is_var:
                if len(n.inputs) > 1:
                    raise GraphError(f"var {n.name!r} has {len(n.inputs)} producers")
                if any(not p.is_op for p in n.inputs + n.outputs):
                    raise GraphError(f"var {n.name!r} is linked to another var")
            else:
                assert n.op is not None
                in_names = {v.name for v in n.inputs}
                out_names = {v.name for v in n.outputs}
                if in_names != set(n.op.input_names()):
                    raise GraphError(f"op {n.name}#{n.id}: input edges {sorted(in_names)} != desc inputs "
                                     f"{sorted(set(n.op.input_names()))}")
                if out_names != set(n.op.output_names()):
                    raise GraphError(f"op {n.name}#{n.id}: output edges {sorted(out_names)} != desc outputs "
                                     f"{sorted(set(n.op.output_names()))}")
        self.topological_order()

    def to_dot(self, title: str = "pdlite") -> str:
        """Graphviz DOT text: ops as boxes, vars as ellipses (params grey)."""
        lines = [f'digraph "{title}" {{', "  rankdir=TB;", '  node [fontsize=10];']
        for n in self._nodes.values():
            if n.is_op:
                kernel = n.info.get("kernel")
                label = n.name + (f"\\n{kernel.key.target.name}/{kernel.key.precision.name}" if kernel else "")
                lines.append(f'  n{n.id} [label="{label}", shape=box, style=filled, fillcolor="#cfe2f3"];')
            else:
                shape = list(n.var.shape) if n.var is not None else []
                color = "#dddddd" if n.persistable else "#ffffff"
                lines.append(f'  n{n.id} [label="{n.name}\\n{shape}", shape=ellipse, style=filled, '
                             f'fillcolor="{color}"];')
        for n in self._nodes.values():
            for o in n.outputs:
                lines.append(f"  n{n.id} -> n{o.id};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_block(self) -> BlockDesc:
        """The block these ops form, in topological order (vars restricted to those still used)."""
        order = self.topological_order()
        used = {v.name for n in order for v in n.inputs + n.outputs}
        vars_ = {k: v for k, v in self.vars.items() if k in used}
        return BlockDesc(self.block.idx, self.block.parent_idx, vars_, [n.op for n in order if n.op is not None],
                         self.block.forward_block_idx)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.topological_order())
