"""The analysis phase end to end: program -> SSA graph -> ordered passes -> runtime program."""
from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pdlite.core.graph import Graph
from pdlite.core.program import Program
from pdlite.core.types import Place, TargetType
from pdlite.kernels.registry import KernelContext
from pdlite.optimizer.optimizer import Optimizer, PassRecord
from pdlite.optimizer.pass_registry import PassContext
from pdlite.runtime.runtime_program import RuntimeProgram


def load_builtin_registries() -> None:
    """Import every built-in op, kernel and pass (explicitly; registries are filled on import)."""
    import pdlite.kernels.host  # noqa: F401
    import pdlite.operators  # noqa: F401
    import pdlite.optimizer.passes  # noqa: F401
    from pdlite.plugins import load_plugins

    load_plugins()


# Kernels of targets whose backend is an optional dependency (torch for CUDA): imported only
# when a valid place names the target, so that host-only use never pays for the import.
TARGET_KERNEL_MODULES: dict[TargetType, str] = {TargetType.CUDA: "pdlite.kernels.cuda"}


def load_target_kernels(targets: Iterable[TargetType]) -> None:
    """Import the kernel package of each target in `targets` that has an optional one."""
    for t in sorted(set(targets)):
        mod = TARGET_KERNEL_MODULES.get(t)
        if mod is not None:
            importlib.import_module(mod)


@dataclass
class AnalysisResult:
    program: Program
    graph: Graph
    runtime: RuntimeProgram
    feed_names: list[str]
    fetch_names: list[str]
    ctx: PassContext
    records: list[PassRecord]


def analyse(program: Program, params: dict[str, Any], places: Sequence[Place], passes: Sequence[str],
            options: dict[str, Any] | None = None) -> AnalysisResult:
    """Run the pass pipeline over block 0 of `program` and generate the runtime program."""
    load_builtin_registries()
    load_target_kernels(p.target for p in places)
    options = dict(options or {})
    ctx = PassContext(list(places), params, options)
    ctx.meta["program"] = program
    graph = Graph(program.main)
    opt = Optimizer(passes, debug=bool(options.get("graph_debug")))
    opt.run(graph, ctx)
    runtime = RuntimeProgram.from_graph(graph, KernelContext(options))
    if options.get("cuda_graph"):
        from pdlite.kernels.cuda.graph_runner import CudaGraphProgram

        runtime = CudaGraphProgram(runtime.instructions, options, runtime.release)
    return AnalysisResult(program, graph, runtime, list(ctx.meta.get("feed_names", [])),
                          list(ctx.meta.get("fetch_names", [])), ctx, opt.records)
