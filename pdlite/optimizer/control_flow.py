"""Control flow on the host: the `while` and `conditional_block` kernels, and control_flow_prepare_pass.

The kernels run a sub-block. Each builds, once, a runtime program for its block the way the
analysis builds block 0's (an SSA graph, control_flow_prepare_pass, static_kernel_pick_pass with
host places, type_target_cast_pass, `runtime_from_graph`), so the block's ops run on the same
kernels and instructions as block 0's; a `while` or `conditional_block` inside a body binds the
program and builds its own block likewise. They live here, in the optimizer layer, because
building a block reuses the kernel pick (a kernel module below the runtime could not).

Scopes: Paddle runs a body in a child scope whose writes to outer vars go through to the parent.
pdlite's kernels are functions of their inputs, so a run gets a local scope holding the op's
inputs (`X` / `Input`, the condition), runs the block over it, and returns the `Out` vars the
block wrote: the instruction stores them in the parent scope. A `conditional_block` whose
condition does not hold returns its `Out` vars' previous values (those it reads as `Input`; None
for the others, which only the branch's select_input would read, and it picks the other). There is
no iteration limit: Paddle has none either.

control_flow_prepare_pass makes tensor arrays explicit in a graph (block 0's or a sub-block's):
a LOD_TENSOR_ARRAY var read before anything wrote it (Paddle's scope holds an empty array for
it) gets a `create_array` producer, and every `write_to_array` reads the array it updates as
its `Array` input, so the graph's edges, the kernel order and the memory plan see that read.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.graph import Graph, Node
from pdlite.core.program import BlockDesc, OpDesc
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, DataLayoutType, Place, PrecisionType, TargetType
from pdlite.errors import InputError, ModelFormatError
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.optimizer.optimizer import Optimizer
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.runtime.build import runtime_from_graph

HOST_ANY = TensorType(TargetType.Host, ANY_PRECISION, ANY_LAYOUT)
HOST_PLACES = [Place(TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW)]
BLOCK_PASSES = ["control_flow_prepare_pass", "static_kernel_pick_pass", "type_target_cast_pass"]


def _is_array(v: Node) -> bool:
    return v.var is not None and v.var.type == VarType.LOD_TENSOR_ARRAY


@register_pass("control_flow_prepare_pass")
class ControlFlowPreparePass(Pass):
    """Tensor arrays made explicit (see the module docstring); a no-op for graphs without arrays."""

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        latest: dict[str, Node] = {}
        changed = False
        for node in graph.topological_order():
            op = node.op
            assert op is not None
            for v in list(node.inputs):
                if _is_array(v) and not v.inputs and not graph.is_input(v) and v.name not in latest:
                    graph.add_op(OpDesc("create_array", {}, {"Out": [v.name]}, {"dtype": int(VarType.FP32)}),
                                 [], [v])
                    latest[v.name] = v
                    changed = True
            if op.type == "write_to_array" and not op.inputs.get("Array"):
                name = op.outputs["Out"][0]
                prev = latest.get(name) or next(
                    (v for v in graph.var_nodes() if v.name == name and not v.inputs and graph.is_input(v)), None)
                if prev is None and name in graph.inputs:  # a sub-block's array from outside, not read before
                    prev = graph.add_var(graph.var_desc(name))
                if prev is not None:
                    op.inputs["Array"] = [name]
                    graph.link(prev, node)
                    changed = True
            for v in node.outputs:
                latest[v.name] = v
        return changed


def _truthy(op: str, v: Any) -> bool:
    a = np.asarray(v)
    if a.size != 1:
        raise InputError(f"op {op}: the condition must hold one element, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


class BlockKernel(Kernel):
    """Base of the kernels that run block `sub_block` of the bound program over a local scope."""

    in_slots: tuple[str, ...] = ()

    def __init__(self, op: OpDesc, context: Any = None) -> None:
        super().__init__(op, context)
        self.in_names = list(dict.fromkeys(n for s in self.in_slots for n in op.inputs.get(s) or []))
        self.out_names = list(op.outputs.get("Out") or [])
        self._program: Any = None
        self._params: dict[str, Any] = {}
        self._runtime: Any = None
        self._lock = threading.Lock()

    def bind_program(self, program: Any) -> None:
        self._program = program

    def prepare(self, params: Mapping[str, Any]) -> None:
        # a var the block writes is no weight there, even when constant folding made its first value
        # a param (a loop counter's start): the block's kernels must not prepare it as one
        written = set(self.out_names)
        self._params = {n: v for n, v in params.items() if n not in written}

    def block(self) -> BlockDesc:
        idx = int(self.attrs["sub_block"])
        if self._program is None:
            raise ModelFormatError(f"op {self.op.type}: no program bound, so its sub-block {idx} cannot run")
        if not 0 < idx < len(self._program.blocks):
            raise ModelFormatError(f"op {self.op.type}: sub_block {idx} is not a block of the model "
                                   f"({len(self._program.blocks)} blocks)")
        return self._program.blocks[idx]

    def body(self) -> Any:
        """The block's runtime program, built on first use (shared by clones: runs are reentrant)."""
        with self._lock:
            if self._runtime is None:
                b = self.block()
                blk = BlockDesc(b.idx, b.parent_idx, dict(b.vars), [op.copy() for op in b.ops], b.forward_block_idx)
                graph = Graph(blk, inputs=list(self.in_names) + list(self._params))
                options = {k: v for k, v in self.context.options.items() if k != "cuda_graph"}
                ctx = PassContext(list(HOST_PLACES), dict(self._params), options,
                                  {"feed_names": list(self.in_names), "fetch_names": list(self.out_names),
                                   "program": self._program})
                Optimizer(BLOCK_PASSES).run(graph, ctx)
                rt = runtime_from_graph(graph, options, self._program)
                rt.prepare(self._params)
                self._runtime = rt
            return self._runtime

    def outputs(self, scope: dict[str, Any]) -> dict[str, list[Any]]:
        return {"Out": [scope.get(n) for n in self.out_names]}


@register_kernel("while", precision=ANY_PRECISION, layout=ANY_LAYOUT,
                 inputs={"X": HOST_ANY, "Condition": HOST_ANY}, outputs={"Out": HOST_ANY, "StepScopes": HOST_ANY})
class WhileKernel(BlockKernel):
    """Runs the body while Condition (which the body rewrites) is true."""

    in_slots = ("X", "Condition")

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        scope = dict(self._params)
        scope.update(zip(self.op.inputs.get("X") or [], ins.get("X") or []))
        cond = self.op.inputs["Condition"][0]
        scope[cond] = ins["Condition"][0]
        body = self.body()
        while _truthy("while", scope[cond]):
            body.run(scope)
        return self.outputs(scope)


@register_kernel("conditional_block", precision=ANY_PRECISION, layout=ANY_LAYOUT,
                 inputs={"Cond": HOST_ANY, "Input": HOST_ANY}, outputs={"Out": HOST_ANY, "Scope": HOST_ANY})
class ConditionalBlockKernel(BlockKernel):
    """Runs the block once when Cond holds; otherwise Out keeps its previous values."""

    in_slots = ("Input", "Cond")

    def holds(self, conds: list[Any]) -> bool:
        if self.attrs["is_scalar_condition"]:
            if len(conds) != 1:
                raise InputError(f"op conditional_block: is_scalar_condition needs one Cond, got {len(conds)}")
            return _truthy("conditional_block", conds[0])
        return all(np.asarray(c).size != 0 for c in conds)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not self.holds(list(ins.get("Cond") or [])):
            # Out keeps its previous value: an input's when the op reads it, else none (None: the
            # select_input after a branch never picks the branch that did not run)
            prev = dict(zip(self.op.inputs.get("Input") or [], ins.get("Input") or []))
            return {"Out": [prev.get(n) for n in self.out_names]}
        scope = dict(self._params)
        for slot in self.in_slots:
            scope.update(zip(self.op.inputs.get(slot) or [], ins.get(slot) or []))
        self.body().run(scope)
        return self.outputs(scope)
