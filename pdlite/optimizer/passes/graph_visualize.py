"""Dump the graph as DOT (into ctx.meta['dot'], and to a file when options['dot_dir'] is set)."""
from __future__ import annotations

import os

from pdlite.core.graph import Graph
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass


@register_pass("graph_visualize")
class GraphVisualizePass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        dots: list[str] = ctx.meta.setdefault("dot", [])
        text = graph.to_dot(f"pdlite_{len(dots)}")
        dots.append(text)
        out_dir = ctx.options.get("dot_dir")
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, f"graph_{len(dots) - 1}.dot"), "w") as f:
                f.write(text)
        return False
