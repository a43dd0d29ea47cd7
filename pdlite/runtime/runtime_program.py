"""The runtime program: instructions in execution order, generated from the optimized graph."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pdlite.core.graph import Graph
from pdlite.errors import PdliteError
from pdlite.operators.registry import OPS
from pdlite.runtime.instruction import Instruction

# profiler hook: called with (instruction, seconds, outputs scope) after each instruction
Hook = Callable[[Instruction, float, dict[str, Any]], None]


class RuntimeProgram:
    def __init__(self, instructions: list[Instruction]) -> None:
        self.instructions = instructions

    @classmethod
    def from_graph(cls, graph: Graph) -> RuntimeProgram:
        """generate_program: op nodes in topological order, each with its picked kernel."""
        insts = []
        for node in graph.topological_order():
            op = node.op
            assert op is not None
            kd = node.info.get("kernel")
            if kd is None:
                raise PdliteError(f"op {op.type} has no picked kernel (did static_kernel_pick_pass run?)")
            opdef = OPS[op.type]
            insts.append(Instruction(opdef.attach(op), opdef, kd, node.info.get("kernel_instance")))
        return cls(insts)

    def prepare(self, params: dict[str, Any]) -> None:
        for inst in self.instructions:
            if not inst.prepared:
                inst.kernel.prepare({n: params[n] for n in inst.op.input_names() if n in params})
                inst.prepared = True

    def run(self, scope: dict[str, Any], hook: Hook | None = None) -> None:
        if hook is None:
            for inst in self.instructions:
                inst.run(scope)
            return
        for inst in self.instructions:
            t0 = time.perf_counter()
            inst.run(scope)
            hook(inst, time.perf_counter() - t0, scope)

    def __len__(self) -> int:
        return len(self.instructions)
