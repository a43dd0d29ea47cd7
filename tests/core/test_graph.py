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


def test_ssa_versions_and_edges():
    g = Graph(_block())
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
    g = Graph(_block())
    y = next(v for v in g.var_nodes() if v.name == "y")
    with pytest.raises(GraphError, match="still linked"):
        g.remove_var(y)


def test_second_producer_is_refused():
    g = Graph(_block())
    y = next(v for v in g.var_nodes() if v.name == "y")
    x = next(v for v in g.var_nodes() if v.name == "x")
    with pytest.raises(GraphError, match="producer"):
        g.add_op(OpDesc("relu", {"X": ["x"]}, {"Out": ["y"]}), [x], [y])


def test_lint_catches_desc_edge_disagreement():
    g = Graph(_block())
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    relu.op.inputs["X"] = ["x"]  # desc edited without the edge
    with pytest.raises(GraphError, match="input edges"):
        g.lint()


def test_replace_input_keeps_desc_and_edges_in_sync():
    g = Graph(_block())
    relu = next(n for n in g.op_nodes() if n.name == "relu")
    old = relu.inputs[0]
    x = next(v for v in g.var_nodes() if v.name == "x")
    g.replace_input(relu, old, x)
    assert relu.op.inputs["X"] == ["x"]
    g.lint()


def test_cycle_detected():
    g = Graph(_block())
    ops = g.topological_order()
    # make mul read the add's output: a cycle
    out = next(v for v in g.var_nodes() if v.name == "out")
    g.link(out, ops[0])
    ops[0].op.inputs["Z"] = ["out"]
    with pytest.raises(GraphError, match="cycle"):
        g.topological_order()


def test_remove_op_and_to_block():
    g = Graph(_block())
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
    g = Graph(_block())
    dot = g.to_dot()
    assert dot.startswith("digraph")
    for n in g.nodes:
        assert f"n{n.id} [" in dot
    assert dot.count("->") == sum(len(n.outputs) for n in g.nodes)
