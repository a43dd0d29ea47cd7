"""Runs the ordered pass list over the SSA graph; names the pass that fails or breaks the graph."""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pdlite.core.graph import Graph
from pdlite.errors import GraphError, PdliteError
from pdlite.optimizer.pass_registry import PASSES, PassContext

log = logging.getLogger(__name__)


@dataclass
class PassRecord:
    name: str
    applied: bool
    modified: bool
    ms: float
    ops_after: int


class Optimizer:
    """Apply passes by name, in order. With `debug=True`, lint the graph after every pass."""

    def __init__(self, passes: Sequence[str], *, debug: bool = False) -> None:
        unknown = [p for p in passes if p not in PASSES]
        if unknown:
            raise PdliteError(f"unknown pass(es) {unknown}; registered passes: {sorted(PASSES)}")
        self.passes = list(passes)
        self.debug = debug
        self.records: list[PassRecord] = []

    def run(self, graph: Graph, ctx: PassContext) -> Graph:
        for name in self.passes:
            p = PASSES[name]()
            if not p.applies_to(ctx):
                self.records.append(PassRecord(name, False, False, 0.0, len(graph.op_nodes())))
                continue
            t0 = time.perf_counter()
            try:
                modified = bool(p.apply(graph, ctx))
            except PdliteError:
                raise
            except Exception as e:  # a bug in a pass: say which one
                raise PdliteError(f"pass {name!r} failed: {type(e).__name__}: {e}") from e
            ms = (time.perf_counter() - t0) * 1e3
            if self.debug:
                try:
                    graph.lint()
                except GraphError as e:
                    raise GraphError(f"graph invalid after pass {name!r}: {e}") from e
            self.records.append(PassRecord(name, True, modified, ms, len(graph.op_nodes())))
            log.debug("pass %s: modified=%s %.2f ms", name, modified, ms)
        return graph
