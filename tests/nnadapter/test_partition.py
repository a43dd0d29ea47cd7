"""The device-neutral partitioner and the subgraph pass on small synthetic programs.

Properties checked on random DAGs (hypothesis): groups hold only supported ops, are disjoint,
respect the minimum size, and contracting every group leaves the op graph acyclic; supported
chains merge into one group.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdlite.core.graph import Graph
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.core.types import Place
from pdlite.nnadapter.partition import parse_partition_config, partition
from pdlite.optimizer.pass_registry import PASSES, PassContext
from pdlite.registries import load_registries


def _graph(edges: list[list[int]]) -> Graph:
    """Op i reads the outputs of ops edges[i] (all earlier) and writes v{i}; op 0.. read `x` when sourceless."""
    ops = []
    for i, srcs in enumerate(edges):
        ins = [f"v{j}" for j in srcs] or ["x"]
        ops.append(OpDesc("op", {"X": ins}, {"Out": [f"v{i}"]}, {"i": i}))
    return Graph(BlockDesc(0, -1, {}, ops))


def _contracted_is_acyclic(graph: Graph, groups: list[list]) -> bool:
    gid = {n.id: n.id for n in graph.op_nodes()}
    for k, g in enumerate(groups):
        for n in g:
            gid[n.id] = -1 - k
    succ: dict[int, set[int]] = {v: set() for v in gid.values()}
    for n in graph.op_nodes():
        for v in n.outputs:
            for c in v.outputs:
                if gid[c.id] != gid[n.id]:
                    succ[gid[n.id]].add(gid[c.id])
    indeg = {v: 0 for v in succ}
    for v in succ:
        for s in succ[v]:
            indeg[s] += 1
    ready = [v for v, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for s in succ[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return seen == len(succ)


def _ids(graph: Graph, which: set[int]) -> set[int]:
    return {n.id for n in graph.op_nodes() if n.op.attrs["i"] in which}


def _members(groups: list[list]) -> list[list[int]]:
    return [[n.op.attrs["i"] for n in g] for g in groups]


def test_no_merge_through_an_unsupported_op() -> None:
    # 0 -> 1 -> 2 and 0 -> 2, op 1 unsupported: {0, 2} would make a cycle through 1
    g = _graph([[], [0], [0, 1]])
    groups = partition(g, _ids(g, {0, 2}))
    assert _members(groups) == [[0], [2]]
    assert _contracted_is_acyclic(g, groups)


def test_contracted_cycle_between_two_groups_is_refused() -> None:
    # A = {0, 2, 6} and B = {1, 3, 7} each hang together, but 2 -> 4 -> 7 and 3 -> 5 -> 6 run through
    # unsupported ops 4 and 5 both ways: keeping both groups whole would make A -> B -> A.
    g = _graph([[], [], [0], [1], [2], [3], [0, 5], [1, 4]])
    groups = partition(g, _ids(g, {0, 1, 2, 3, 6, 7}))
    assert _contracted_is_acyclic(g, groups)
    assert len(groups) > 2


def test_chain_merges_and_min_size_drops_small_groups() -> None:
    g = _graph([[], [0], [1], [2], [3], [4]])
    assert _members(partition(g, _ids(g, {0, 1, 2, 4, 5}))) == [[0, 1, 2], [4, 5]]
    assert _members(partition(g, _ids(g, {0, 1, 2, 4, 5}), min_size=3)) == [[0, 1, 2]]


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], set[int]]:
    n = draw(st.integers(2, 14))
    edges = [sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else [] for i in range(n)]
    supported = set(draw(st.sets(st.integers(0, n - 1))))
    return edges, supported


@settings(max_examples=150, deadline=None)
@given(dags(), st.integers(1, 3))
def test_random_dags_partition_acyclic(dag: tuple[list[list[int]], set[int]], min_size: int) -> None:
    edges, supported = dag
    g = _graph(edges)
    groups = partition(g, _ids(g, supported), min_size)
    seen: set[int] = set()
    for m in _members(groups):
        assert set(m) <= supported and not (set(m) & seen) and len(m) >= min_size
        seen |= set(m)
    assert _contracted_is_acyclic(g, groups)


def test_partition_config_format() -> None:
    rules = parse_partition_config("# comment\n\nrelu\nconv2d:x,w:y\nsoftmax::out\n")
    relu = OpDesc("relu", {"X": ["a"]}, {"Out": ["b"]})
    conv = OpDesc("conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["y"]})
    conv2 = OpDesc("conv2d", {"Input": ["x2"], "Filter": ["w"]}, {"Output": ["y2"]})
    sm = OpDesc("softmax", {"X": ["q"]}, {"Out": ["out"]})
    assert [any(r.matches(o) for r in rules) for o in (relu, conv, conv2, sm)] == [True, True, False, True]
    from pdlite.errors import ConfigError

    with pytest.raises(ConfigError, match="line 1"):
        parse_partition_config("a:b:c:d")


def _program() -> tuple[Program, dict[str, np.ndarray]]:
    """x -> relu -> softplus (kept on the host) -> conv2d(w) -> + a -> relu -> out; relu(x) also fetched."""
    ops = [
        OpDesc("relu", {"X": ["x"]}, {"Out": ["a"]}),
        OpDesc("softplus", {"X": ["a"]}, {"Out": ["b"]}),
        OpDesc("conv2d", {"Input": ["b"], "Filter": ["w"]}, {"Output": ["c"]}),
        OpDesc("elementwise_add", {"X": ["c"], "Y": ["a"]}, {"Out": ["d"]}),
        OpDesc("relu", {"X": ["d"]}, {"Out": ["out"]}),
    ]
    vars_ = {n: VarDesc(n, shape=[1, 2, 4, 4]) for n in "xabcd"}
    vars_["out"] = VarDesc("out", shape=[1, 2, 4, 4])
    vars_["w"] = VarDesc("w", shape=[2, 2, 1, 1], persistable=True)
    return Program([BlockDesc(0, -1, vars_, ops)]), {"w": np.ones((2, 2, 1, 1), np.float32)}


def test_subgraph_pass_builds_blocks_with_exact_io() -> None:
    pytest.importorskip("onnxruntime")
    load_registries()
    program, params = _program()
    graph = Graph(program.main, inputs=["x"])
    options = {"nnadapter_device_names": ["onnxruntime"], "nnadapter_subgraph_partition_config_buffer": "softplus"}
    ctx = PassContext([Place()], params, options,
                      {"program": program, "feed_names": ["x"], "fetch_names": ["out", "a"]})
    assert PASSES["subgraph_detect_pass"]().apply(graph, ctx)
    graph.lint()
    subs = [n for n in graph.topological_order() if n.op.type == "subgraph"]
    # relu(x) | softplus on the host | conv2d + add + relu
    assert [n.op.type for n in graph.topological_order()] == ["subgraph", "softplus", "subgraph"]
    first, second = (s.op for s in subs)
    assert first.inputs["Inputs"] == ["x"] and sorted(first.outputs["Outputs"]) == ["a"]
    assert sorted(second.inputs["Inputs"]) == ["a", "b", "w"] and second.outputs["Outputs"] == ["out"]
    assert sorted(second.attrs["input_data_names"]) == ["a", "b"]
    assert len(program.blocks) == 3
    assert [o.type for o in program.blocks[second.attrs["sub_block"]].ops] == ["conv2d", "elementwise_add", "relu"]
    assert all("kernel" in s.info and "kernel_instance" in s.info for s in subs)


def test_subgraph_pass_is_inactive_without_devices() -> None:
    load_registries()
    program, params = _program()
    graph = Graph(program.main)
    ctx = PassContext([Place()], params, {}, {"program": program})
    assert not PASSES["subgraph_detect_pass"]().apply(graph, ctx)
    assert len(program.blocks) == 1
