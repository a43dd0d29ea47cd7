"""Eliminations: inference-time dropout, identity scale, assign/identity chains, dead ops and vars.

- identity_dropout_eliminate_pass: in inference dropout is Out = X ("upscale_in_train") or
  Out = X * (1 - p) ("downgrade_in_infer", Paddle's default): the first is removed, the
  second becomes `scale` with scale = 1 - p (removed too when p = 0).
- identity_scale_eliminate_pass: scale with scale = 1, bias = 0 (and no ScaleTensor) is removed.
- identity_assign_eliminate_pass: assign, share_data and a cast to the same dtype are removed
  (chains go one link per round).
  A removed op's readers read its input instead; when its output is fetched, the input's
  producer writes the fetched name instead (refused when that is not possible).
- dead_code_elimination_pass: ops none of whose outputs is read, fetched or persistable (and
  without side effects or sub-blocks) are removed, then producer-less unread vars, and, for
  single-block programs, params no var refers to any more.
"""
from __future__ import annotations

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import Fuser, Match, Pattern, bypass, bypass_refusal, replace_ops

# ops kept even when nothing reads their outputs
SIDE_EFFECT_OPS = frozenset({
    "feed", "fetch", "print", "save", "save_combine", "load", "load_combine", "assert", "while",
    "conditional_block", "write_to_array", "send", "recv", "barrier", "c_allreduce_sum",
})


def _fetch(ctx: PassContext) -> list[str]:
    return list(ctx.meta.get("fetch_names", []))


@register_pass("identity_dropout_eliminate_pass")
class DropoutEliminate(Fuser):
    def pattern(self) -> Pattern:
        p = Pattern()
        p.op("dropout", "dropout", inputs={"X": p.var("x")}, outputs={"Out": p.var("out")})
        return p

    @staticmethod
    def _is_identity(op: OpDesc) -> bool:
        return (op.attrs["dropout_implementation"] == "upscale_in_train"
                or float(op.attrs["dropout_prob"]) == 0.0)

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        mask = [v for v in m["dropout"].outputs if v is not m["out"]]
        if any(v.outputs or v.name in _fetch(ctx) for v in mask):
            return "the Mask output is used"
        if self._is_identity(m.op("dropout")):
            return control_flow_refusal(graph, m["x"], m["out"]) or bypass_refusal(graph, m["x"], m["out"], _fetch(ctx))
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        op = m.op("dropout")
        if self._is_identity(op):
            bypass(graph, m["dropout"], m["x"], m["out"], _fetch(ctx))
            return
        p = float(op.attrs["dropout_prob"])
        scale = OpDesc("scale", {"X": [m["x"].name]}, {"Out": [m["out"].name]},
                       {"scale": 1.0 - p, "bias": 0.0, "bias_after_scale": True})
        replace_ops(graph, [m["dropout"]], scale)


@register_pass("identity_scale_eliminate_pass")
class IdentityScaleEliminate(Fuser):
    def pattern(self) -> Pattern:
        p = Pattern()
        p.op("scale", "scale", inputs={"X": p.var("x")}, outputs={"Out": p.var("out")},
             attrs={"scale": lambda v: v is None or float(v) == 1.0,
                    "bias": lambda v: v is None or float(v) == 0.0})
        return p

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if m.op("scale").inputs.get("ScaleTensor"):
            return "scale comes from a tensor"
        return control_flow_refusal(graph, m["x"], m["out"]) or bypass_refusal(graph, m["x"], m["out"], _fetch(ctx))

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        bypass(graph, m["scale"], m["x"], m["out"], _fetch(ctx))


def _identity_like(node: Node) -> bool:
    op = node.op
    assert op is not None
    if op.type == "cast":
        return op.attrs.get("in_dtype") is not None and op.attrs.get("in_dtype") == op.attrs.get("out_dtype")
    return True


@register_pass("identity_assign_eliminate_pass")
class IdentityAssignEliminate(Fuser):
    def pattern(self) -> Pattern:
        p = Pattern()
        p.op("op", ("assign", "share_data", "cast"), inputs={"X": p.var("x")}, outputs={"Out": p.var("out")},
             when=_identity_like)
        return p

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if len(m["op"].inputs) != 1:
            return "more than one input"
        return control_flow_refusal(graph, m["x"], m["out"]) or bypass_refusal(graph, m["x"], m["out"], _fetch(ctx))

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        bypass(graph, m["op"], m["x"], m["out"], _fetch(ctx))


def has_sub_block(node: Node) -> bool:
    op = node.op
    assert op is not None
    return any(k in op.attrs for k in ("sub_block", "sub_blocks"))


def sub_block_names(program: object, node: Node) -> set[str]:
    """Every var name the ops of `node`'s sub-block (and of blocks nested in it) read or write."""
    blocks = getattr(program, "blocks", None) or []
    names: set[str] = set()
    todo = [node.op.attrs.get("sub_block")] if node.op is not None else []
    seen: set[int] = set()
    while todo:
        idx = todo.pop()
        if not isinstance(idx, int) or not 0 < idx < len(blocks) or idx in seen:
            continue
        seen.add(idx)
        for op in blocks[idx].ops:
            names.update(op.input_names())
            names.update(op.output_names())
            todo.append(op.attrs.get("sub_block"))
    return names


def control_flow_refusal(graph: Graph, *vars: Node) -> str | None:
    """A reason to leave `vars` alone when an op with a sub-block reads or writes one of their names:
    its block refers to them by name, so a bypass that renames them would break it."""
    names = {v.name for v in vars}
    for n in graph.op_nodes():
        if has_sub_block(n) and names & {v.name for v in n.inputs + n.outputs}:
            return f"{n.name} (an op with a sub-block) reads or writes it"
    return None


@register_pass("dead_code_elimination_pass")
class DeadCodeElimination(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        fetch = set(_fetch(ctx))
        removed = 0
        for node in reversed(graph.topological_order()):
            op = node.op
            assert op is not None
            if op.type in SIDE_EFFECT_OPS or has_sub_block(node) or not node.outputs:
                continue
            if any(v.outputs or v.name in fetch or v.persistable for v in node.outputs):
                continue
            touched = node.inputs + node.outputs
            graph.remove_op(node)
            for v in touched:
                if not v.inputs and not v.outputs:
                    graph.remove_var(v)
            removed += 1
        removed_vars = graph.remove_dead_vars()
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0})
        stats["rewrites"] += removed
        stats["dead_vars"] = stats.get("dead_vars", 0) + removed_vars
        self._prune_params(graph, ctx)
        return bool(removed or removed_vars)

    @staticmethod
    def _prune_params(graph: Graph, ctx: PassContext) -> None:
        """Drop params no var node refers to (single-block programs only: sub-blocks may read them)."""
        program = ctx.meta.get("program")
        if program is None or len(program.blocks) != 1:
            return
        used = {v.name for v in graph.var_nodes()} | set(_fetch(ctx))  # a fetched param may have no op left
        for name in [n for n in ctx.params if n not in used]:
            del ctx.params[name]
