"""Remove feed and fetch ops; record the feed and fetch variable names (ordered by `col`)."""
from __future__ import annotations

from pdlite.core.graph import Graph
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass


@register_pass("feed_fetch_strip_pass")
class FeedFetchStripPass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        feeds: list[tuple[int, str]] = list(ctx.meta.get("_feeds", []))
        fetches: list[tuple[int, str]] = list(ctx.meta.get("_fetches", []))
        removed = False
        for node in graph.op_nodes():
            op = node.op
            assert op is not None
            if op.type == "feed":
                feeds.append((int(op.attrs.get("col", 0)), op.outputs["Out"][0]))
            elif op.type == "fetch":
                fetches.append((int(op.attrs.get("col", 0)), op.inputs["X"][0]))
            else:
                continue
            graph.remove_op(node, orphan_outputs=True)  # a feed's output stays a graph input (graph.inputs)
            removed = True
        if removed:
            for v in graph.var_nodes():
                if v.name in ("feed", "fetch") and not v.inputs and not v.outputs:
                    graph.remove_var(v)
            # the per-name feed var node lost its producer (the feed op): it is now a graph input
        if "feed_names" not in ctx.meta or removed:
            ctx.meta["feed_names"] = [n for _, n in sorted(feeds)]
            ctx.meta["fetch_names"] = [n for _, n in sorted(fetches)]
        return removed
