"""generate_program: the one place a runtime program is built, from an optimized graph or a stored `.nb`.

Both front doors end in `build_runtime`: one instruction per op (the op attached by its
definition, the kernel made with the config's options as its context and, for kernels that own
a sub-block, bound to the program), the memory plan's release points, and, when the config asks
for CUDA graphs, the CudaGraphProgram wrapper.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pdlite.core.graph import Graph
from pdlite.core.program import OpDesc, Program
from pdlite.errors import PdliteError, UnsupportedOpError
from pdlite.kernels.registry import KERNELS, Kernel, KernelContext, KernelDef, KernelKey
from pdlite.operators.registry import OPS
from pdlite.runtime.instruction import Instruction
from pdlite.runtime.runtime_program import RuntimeProgram


def build_runtime(entries: Iterable[tuple[OpDesc, KernelDef, Kernel | None]], *,
                  release: Sequence[tuple[str, ...]] | None = None, options: Mapping[str, Any] | None = None,
                  program: Program | None = None) -> RuntimeProgram:
    """A runtime program of `entries` (op, picked kernel, kernel instance or None) in run order."""
    options = dict(options or {})
    context = KernelContext(options)
    insts = []
    for op, kd, kernel in entries:
        opdef = OPS[op.type]
        inst = Instruction(opdef.attach(op), opdef, kd, kernel, context)
        if kernel is None and program is not None:
            inst.kernel.bind_program(program)
        insts.append(inst)
    runtime = RuntimeProgram(insts, list(release) if release is not None else None)
    if options.get("cuda_graph"):
        from pdlite.runtime.cuda_graph import CudaGraphProgram

        runtime = CudaGraphProgram(runtime.instructions, options, runtime.release)
    return runtime


def runtime_from_graph(graph: Graph, options: Mapping[str, Any] | None = None,
                       program: Program | None = None) -> RuntimeProgram:
    """The op nodes in topological order, each with the kernel static_kernel_pick_pass chose."""
    entries = []
    release: list[tuple[str, ...]] = []
    for i, node in enumerate(graph.topological_order()):
        if "release" in node.info and node.info.get("mem_index") != i:
            raise PdliteError(f"op {node.name} moved after memory_optimize_pass planned its releases "
                              "(the graph changed after it; keep memory_optimize_pass last)")
        release.append(tuple(node.info.get("release", ())))
        op = node.op
        assert op is not None
        kd = node.info.get("kernel")
        if kd is None:
            raise PdliteError(f"op {op.type} has no picked kernel (did static_kernel_pick_pass run?)")
        entries.append((op, kd, node.info.get("kernel_instance")))
    return build_runtime(entries, release=release, options=options, program=program)


def runtime_from_keys(program: Program, kernel_keys: Sequence[KernelKey],
                      release: Sequence[tuple[str, ...]] | None = None, options: Mapping[str, Any] | None = None,
                      *, source: str = "model", writer: str = "") -> RuntimeProgram:
    """One instruction per block-0 op with the kernel its stored key names (no analysis): the `.nb` path.

    The registries must be loaded (`pdlite.registries.load_registries`) with the keys' targets."""
    entries = []
    missing = []
    for op, key in zip(program.main.ops, kernel_keys):
        opdef = OPS.get(op.type)
        kd = KERNELS.get(key)
        if opdef is None or kd is None:
            missing.append(f"  {op.type}: {'no op definition' if opdef is None else f'no kernel {key}'}")
            continue
        entries.append((op, kd, None))
    if missing:
        raise UnsupportedOpError(
            f"{source}: this pdlite cannot run {len(missing)} op(s) of the optimized model (written by pdlite "
            f"{writer or '?'}; a plugin missing?):\n" + "\n".join(sorted(set(missing))))
    return build_runtime(entries, release=release or None, options=options, program=program)
