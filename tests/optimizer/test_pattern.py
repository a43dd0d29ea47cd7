"""The pattern matcher: predicates, slots, non-overlap, topological order, refusals."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.graph import Graph
from pdlite.core.program import BlockDesc, OpDesc, VarDesc
from pdlite.core.types import Place
from pdlite.errors import GraphError
from pdlite.optimizer.pass_registry import PassContext
from pdlite.optimizer.pattern import (
    Fuser,
    Match,
    Pattern,
    bypass,
    bypass_refusal,
    find_matches,
    replace_ops,
    versions,
)


def _graph(b: BlockDesc) -> Graph:
    """The block's graph with every var read before it is written declared a graph input."""
    written: set[str] = set()
    inputs = set()
    for op in b.ops:
        inputs |= {n for n in op.input_names() if n not in written}
        written |= set(op.output_names())
    return Graph(b, inputs=inputs)


def _block(ops: list[OpDesc], params: tuple[str, ...] = ("w", "w2")) -> BlockDesc:
    b = BlockDesc()
    for op in ops:
        for n in op.input_names() + op.output_names():
            b.vars.setdefault(n, VarDesc(n, persistable=n in params))
    b.ops = ops
    return b


def _chain() -> Graph:
    """x -mul(w)-> y -relu-> z -mul(w2)-> u -relu-> v ; y also read by add (two consumers)."""
    return _graph(_block([
        OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {"x_num_col_dims": 1}),
        OpDesc("relu", {"X": ["y"]}, {"Out": ["z"]}),
        OpDesc("mul", {"X": ["z"], "Y": ["w2"]}, {"Out": ["u"]}, {"x_num_col_dims": 2}),
        OpDesc("relu", {"X": ["u"]}, {"Out": ["v"]}),
        OpDesc("elementwise_add", {"X": ["y"], "Y": ["v"]}, {"Out": ["out"]}),
    ]))


def _mul_relu(intermediate: bool = True, **mul_kw) -> Pattern:
    p = Pattern()
    y = p.var("y", intermediate=intermediate)
    p.op("mul", "mul", inputs={"Y": p.var("w", persistable=True)}, outputs={"Out": y}, **mul_kw)
    p.op("act", ("relu", "sigmoid"), inputs={"X": y}, outputs={"Out": p.var("out")})
    return p


def test_matches_in_topological_order_with_bound_slots():
    g = _chain()
    ms = find_matches(g, _mul_relu(intermediate=False))
    assert [(m["w"].name, m["out"].name) for m in ms] == [("w", "z"), ("w2", "v")]
    assert ms[0].op("mul").attrs["x_num_col_dims"] == 1


def test_intermediate_requires_a_single_consumer_and_not_fetched():
    g = _chain()
    ms = find_matches(g, _mul_relu())
    assert [m["w"].name for m in ms] == ["w2"], "y has two consumers, so only the second chain matches"
    assert find_matches(g, _mul_relu(), fetch=["u"]) == [], "a fetched var is not intermediate"


def test_attribute_predicates_and_values():
    g = _chain()
    assert [m["w"].name for m in find_matches(g, _mul_relu(False, attrs={"x_num_col_dims": 2}))] == ["w2"]
    assert [m["w"].name for m in find_matches(g, _mul_relu(False, attrs={"x_num_col_dims": lambda v: v < 2}))] \
        == ["w"]
    assert find_matches(g, _mul_relu(False, attrs={"x_num_col_dims": 3})) == []


def test_persistable_predicate_and_slot():
    g = _chain()
    p = Pattern()
    p.op("mul", "mul", inputs={"X": p.var("w", persistable=True)})  # w is in slot Y, not X
    assert find_matches(g, p) == []
    p = Pattern()
    p.op("mul", "mul", inputs={"X": p.var("x", persistable=False)})
    assert len(find_matches(g, p)) == 2


def test_var_predicate():
    g = _chain()
    p = Pattern()
    p.op("relu", "relu", outputs={"Out": p.var("o", when=lambda n: n.name == "v")})
    assert [m["relu"].id for m in find_matches(g, p)] == [n.id for n in g.op_nodes() if n.op.outputs["Out"] == ["v"]]


def test_matches_do_not_overlap():
    # relu -> relu -> relu: the pair pattern matches (r1, r2) then not (r2, r3)
    g = _graph(_block([OpDesc("relu", {"X": [a]}, {"Out": [b]}) for a, b in (("a", "b"), ("b", "c"), ("c", "d"))]))
    p = Pattern()
    m = p.var("m", intermediate=True)
    p.op("r1", "relu", outputs={"Out": m})
    p.op("r2", "relu", inputs={"X": m})
    ms = find_matches(g, p)
    assert len(ms) == 1 and ms[0]["r1"].op.outputs["Out"] == ["b"]


def test_accept_veto_frees_the_nodes_for_an_overlapping_match():
    g = _graph(_block([OpDesc("relu", {"X": [a]}, {"Out": [b]}) for a, b in (("a", "b"), ("b", "c"), ("c", "d"))]))
    p = Pattern()
    m = p.var("m", intermediate=True)
    p.op("r1", "relu", outputs={"Out": m})
    p.op("r2", "relu", inputs={"X": m})
    ms = find_matches(g, p, accept=lambda mt: mt["m"].name != "b")
    assert [mt["m"].name for mt in ms] == ["c"]


def test_pattern_var_with_two_producers_is_refused():
    p = Pattern()
    v = p.var("v")
    p.op("a", "relu", outputs={"Out": v})
    with pytest.raises(Exception, match="two producers"):
        p.op("b", "relu", outputs={"Out": v})


class _MulReluToFc(Fuser):
    name = "test_mul_relu"

    def pattern(self) -> Pattern:
        return _mul_relu()

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        return "odd" if m.op("mul").attrs["x_num_col_dims"] == 1 else None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        mul = m.op("mul")
        replace_ops(graph, [m["mul"], m["act"]], OpDesc("fc", {"Input": mul.inputs["X"], "W": mul.inputs["Y"]},
                                                        {"Out": [m["out"].name]}, {"in_num_col_dims": 2}))


def test_fuser_rewrites_records_counts_and_refusals():
    b = _block([
        OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {"x_num_col_dims": 1}),
        OpDesc("relu", {"X": ["y"]}, {"Out": ["z"]}),
        OpDesc("mul", {"X": ["z"], "Y": ["w2"]}, {"Out": ["u"]}, {"x_num_col_dims": 2}),
        OpDesc("relu", {"X": ["u"]}, {"Out": ["v"]}),
    ])
    g = _graph(b)
    ctx = PassContext([Place()])
    assert _MulReluToFc().apply(g, ctx)
    g.lint()
    assert [n.op.type for n in g.topological_order()] == ["mul", "relu", "fc"]
    stats = ctx.meta["pass_stats"]["test_mul_relu"]
    assert stats["rewrites"] == 1 and dict(stats["refused"]) == {"odd": 1}
    assert not any(v.name == "u" for v in g.var_nodes()), "the dropped intermediate is gone"
    assert not _MulReluToFc().apply(g, ctx), "nothing left to rewrite"


def test_replace_ops_refuses_unknown_names():
    g = _chain()
    mul = g.topological_order()[0]
    with pytest.raises(GraphError, match="reads 'nowhere'"):
        replace_ops(g, [mul], OpDesc("relu", {"X": ["nowhere"]}, {"Out": ["y"]}))


def test_bypass_redirects_readers_and_keeps_fetched_names():
    ops = [OpDesc("relu", {"X": ["x"]}, {"Out": ["a"]}), OpDesc("assign", {"X": ["a"]}, {"Out": ["b"]}),
           OpDesc("sigmoid", {"X": ["b"]}, {"Out": ["c"]})]
    g = _graph(_block(ops))
    assign = g.topological_order()[1]
    a, bb = assign.inputs[0], assign.outputs[0]
    assert bypass_refusal(g, a, bb, []) is None
    bypass(g, assign, a, bb, [])
    g.lint()
    assert [n.op.input("X") for n in g.topological_order()] == ["x", "a"]
    # fetched output: the producer writes the fetched name instead
    g = _graph(_block([OpDesc("relu", {"X": ["x"]}, {"Out": ["a"]}), OpDesc("assign", {"X": ["a"]}, {"Out": ["b"]})]))
    assign = g.topological_order()[1]
    bypass(g, assign, assign.inputs[0], assign.outputs[0], ["b"])
    g.lint()
    (relu,) = g.topological_order()
    assert relu.op.outputs["Out"] == ["b"] and versions(g, "a") == 0
    # a fetched copy of a graph input cannot be removed
    g = _graph(_block([OpDesc("assign", {"X": ["x"]}, {"Out": ["b"]})]))
    (assign,) = g.topological_order()
    assert bypass_refusal(g, assign.inputs[0], assign.outputs[0], ["b"]) is not None


def test_in_place_vars_are_refused_by_fusers():
    # y is written twice (in place): fusing across it could reorder the versions
    b = _block([
        OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {"x_num_col_dims": 2}),
        OpDesc("relu", {"X": ["y"]}, {"Out": ["z"]}),
        OpDesc("scale", {"X": ["z"]}, {"Out": ["y"]}),
    ])
    g = _graph(b)
    ctx = PassContext([Place()])
    assert not _MulReluToFc().apply(g, ctx)
    assert any("in place" in r for r in ctx.meta["pass_stats"]["test_mul_relu"]["refused"])
    assert np.array_equal([n.op.type for n in g.topological_order()], ["mul", "relu", "scale"])
