"""The analysis phase end to end: program -> SSA graph -> ordered passes -> runtime program."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pdlite.core.graph import Graph
from pdlite.core.program import Program
from pdlite.core.types import Place
from pdlite.operators.registry import complete_program
from pdlite.optimizer.optimizer import Optimizer, PassRecord
from pdlite.optimizer.pass_registry import PassContext
from pdlite.registries import load_registries
from pdlite.runtime.build import runtime_from_graph
from pdlite.runtime.runtime_program import RuntimeProgram


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
    load_registries(p.target for p in places)
    complete_program(program)  # programs built by hand reach here without a front end
    options = dict(options or {})
    ctx = PassContext(list(places), params, options)
    ctx.meta["program"] = program
    graph = Graph(program.main)
    opt = Optimizer(passes, debug=bool(options.get("graph_debug")))
    opt.run(graph, ctx)
    runtime = runtime_from_graph(graph, options, program)
    return AnalysisResult(program, graph, runtime, list(ctx.meta.get("feed_names", [])),
                          list(ctx.meta.get("fetch_names", [])), ctx, opt.records)
