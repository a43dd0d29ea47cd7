"""The SSA graph: construction, SSA versions, checked edits, lint, topological order, DOT."""
from __future__ import annotations

import pytest

from pdlite.core.graph import Graph
from pdlite.core.program import BlockDesc, OpDesc, VarDesc
from pdlite.errors import GraphError


def _block() -> BlockDesc:
    b = BlockDesc()
    for n in ["x", "w", "y", "z", "out"]:
        b.vars[n] = VarDesc(n, persistable=(n == "w"))
    b.ops = [
        OpDesc("mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}),
        OpDesc("relu", {"X": ["y"]}, {"Out": ["z"]}),
        OpDesc("scale", {"X": ["z"]}, {"Out": ["z"]}),  # in-place write: a second SSA version of z
        OpDesc("elementwise_add", {"X": ["z"], "Y": ["y"]}, {"Out": ["out"]}),
    ]
    return b


def _graph() -> Graph:
    return Graph(_block(), inputs=["x"])  # x is the graph's input (no feed op in this block)


def test_ssa_versions_and_edges():
    g = _graph()
    ops = g.topological_order()
    assert [n.name for n in ops] == ["mul", "relu", "scale", "elementwise_add"]
    zs = [v for v in g.var_nodes() if v.name == "z"]
    assert len(zs) == 2, "an in-place write makes a new SSA version"
    add = ops[3]
    z_read = next(v for v in add.inputs if v.name == "z")
    assert z_read.producer() is ops[2], "the add reads the scale's version of z"
    assert {v.name for v in ops[0].inputs} == {"x", "w"}
    assert next(v for v in ops[0].inputs if v.name == "w").persistable
    g.lint()


def test_remove_var_with_users_is_refused():
    g = _graph()
    y = next(v for v in g.var_nodes() if v.name == "y")
    with pytest.raises(GraphError, match="still linked"):
        g.remove_var(y)


def test_second_producer_is_refused():
    g = _graph()
    y = next(v for v in g.var_nodes() if v.name == "y")
    x = next(v for v in g.var_nodes() if v.name == "x")
    with pytest.raises(GraphError, match="producer"):
        g.add_op(OpDesc("relu", {"X": ["x"]}, {"Out": ["y"]}), [x], [y])


def test_lint_catches_desc_edge_disagreement():
    g = _graph()
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    relu.op.inputs["X"] = ["x"]  # desc edited without the edge
    with pytest.raises(GraphError, match="input edges"):
        g.lint()


def test_replace_input_keeps_desc_and_edges_in_sync():
    g = _graph()
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    old = relu.inputs[0]
    x = next(v for v in g.var_nodes() if v.name == "x")
    g.replace_input(relu, old, x)
    assert relu.op.inputs["X"] == ["x"]
    g.lint()


def test_cycle_detected():
    g = _graph()
    ops = g.topological_order()
    # make mul read the add's output: a cycle
    out = next(v for v in g.var_nodes() if v.name == "out")
    g.link(out, ops[0])
    ops[0].op.inputs["Z"] = ["out"]
    with pytest.raises(GraphError, match="cycle"):
        g.topological_order()


def test_remove_op_and_to_block():
    g = _graph()
    scale = next(n for n in g.op_nodes() if n.name == "scale")
    add = next(n for n in g.op_nodes() if n.name == "elementwise_add")
    z_in = scale.inputs[0]
    z_out = scale.outputs[0]
    g.replace_input(add, z_out, z_in)
    g.remove_op(scale)
    g.remove_var(z_out)
    g.lint()
    blk = g.to_block()
    assert [o.type for o in blk.ops] == ["mul", "relu", "elementwise_add"]


def test_dot_lists_every_node():
    g = _graph()
    dot = g.to_dot()
    assert dot.startswith("digraph")
    for n in g.nodes:
        assert f"n{n.id} [" in dot
    assert dot.count("->") == sum(len(n.outputs) for n in g.nodes)


def test_remove_op_refuses_to_orphan_read_outputs():
    g = _graph()
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    with pytest.raises(GraphError, match=r"cannot remove op relu.*still read.*z by \['scale'\]"):
        g.remove_op(relu)
    g.lint()  # the refused edit changed nothing
    g.remove_op(relu, orphan_outputs=True)  # explicitly allowed: lint then names the orphan
    with pytest.raises(GraphError, match="'z' is read by \\['scale'\\] but nothing writes it"):
        g.lint()


def test_lint_flags_read_var_without_producer_unless_feed_or_param():
    with pytest.raises(GraphError, match="'x' is read by \\['mul'\\] but nothing writes it"):
        Graph(_block()).lint()  # x is neither declared an input nor a parameter
    b = _block()
    b.vars["feed"] = VarDesc("feed")
    b.ops.insert(0, OpDesc("feed", {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0}))
    with pytest.raises(GraphError, match="'feed' is read"):
        Graph(b).lint()  # a plain var named feed is no feed holder
    from pdlite.core.dtypes import VarType

    b.vars["feed"].type = VarType.FEED_MINIBATCH
    g = Graph(b)
    g.lint()
    assert "x" in g.inputs, "a feed op's output is a graph input"
    feed = next(n for n in g.op_nodes() if n.name == "feed")
    g.remove_op(feed, orphan_outputs=True)
    g.lint()  # x stays a graph input after the feed op is gone


def test_replace_output_moves_the_write():
    g = _graph()
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    z0 = relu.outputs[0]
    z2 = g.add_var(VarDesc("z2"))
    g.replace_output(relu, z0, z2)
    assert relu.op.outputs["Out"] == ["z2"] and relu.outputs == [z2] and z2.producer() is relu
    assert z0.producer() is None
    scale = z0.outputs[0]
    g.replace_input(scale, z0, z2)
    g.remove_var(z0)
    g.lint()
    with pytest.raises(GraphError, match="already has a producer"):
        g.replace_output(relu, z2, next(v for v in g.var_nodes() if v.name == "y"))


def test_replace_ops_keeps_outputs_read_outside():
    g = _graph()
    relu, scale = (next(n for n in g.op_nodes() if n.name == t) for t in ("relu", "scale"))
    y = relu.inputs[0]
    z1 = scale.outputs[0]
    with pytest.raises(GraphError, match="does not write"):
        g.replace_ops([relu], OpDesc("sigmoid", {"X": ["y"]}, {"Out": ["q"]}), [y], [g.add_var(VarDesc("q"))])
    node = g.replace_ops([relu, scale], OpDesc("fused", {"X": ["y"]}, {"Out": ["z"]}), [y], [z1])
    assert z1.producer() is node
    assert sum(1 for v in g.var_nodes() if v.name == "z") == 1, "the inner z version was dropped"
    g.remove_dead_vars()
    g.lint()
