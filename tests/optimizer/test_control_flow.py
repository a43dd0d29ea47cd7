"""Control flow on the host (pdlite/optimizer/control_flow.py, kernels/host/control_flow.py) and the passes
around it, on hand-built programs whose expected outputs follow Paddle's definitions (while runs its block
while Condition holds; conditional_block once when Cond holds, else Out keeps its value; select_input
picks X[Mask]; tensor arrays). Integer outputs exact, float max|d| <= 1e-6 * max|ref|.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, VarDesc
from pdlite.errors import PdliteError
from pdlite.optimizer.pipeline import DEFAULT_PASSES
from pdlite.registries import load_registries
from tests.optimizer.util import BASE, Builder, op_types, optimize, refusals, run, run_result, with_passes

PREP = ["control_flow_prepare_pass", *BASE]


@pytest.fixture(scope="module", autouse=True)
def _registries() -> None:
    load_registries(plugins=False)


def _sub_block(b: Builder, ops: list[OpDesc], idx: int = 1) -> BlockDesc:
    blk = BlockDesc(idx, 0, {}, ops)
    for op in ops:
        for n in op.output_names():
            b._var(n)
    return blk


def _loop_program(n_iter: int) -> Builder:
    """acc = x; i = 0; while i < n: acc = acc * 2 + x; i += 1 (the counter a folded constant)."""
    b = Builder()
    x = b.feed("x", [3])
    n = b.param("n", np.array([n_iter], np.int64))
    b.op("fill_constant", {}, {"Out": "i"}, shape=[1], dtype=int(VarType.INT64), value=0.0)
    b.op("assign", {"X": x}, {"Out": "acc"})
    b.op("less_than", {"X": "i", "Y": n}, {"Out": "c"})
    body = [OpDesc("scale", {"X": ["acc"]}, {"Out": ["t"]}, {"scale": 2.0, "bias": 0.0}),
            OpDesc("elementwise_add", {"X": ["t"], "Y": ["x"]}, {"Out": ["acc"]}, {"axis": -1}),
            OpDesc("increment", {"X": ["i"]}, {"Out": ["i"]}, {"step": 1.0}),
            OpDesc("less_than", {"X": ["i"], "Y": ["n"]}, {"Out": ["c"]}, {})]
    blk = _sub_block(b, body)
    b.op("while", {"Condition": "c", "X": ["acc", "i", "x", "n"]}, {"Out": ["acc", "i", "c"]}, sub_block=1)
    b.block.vars["c"].dtype = VarType.BOOL
    b.fetch("acc", "i")
    b.blocks = [blk]  # type: ignore[attr-defined]
    return b


@pytest.fixture()
def builder_with_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Builder, "program", lambda self: _program_plain(self))


def _program_plain(b: Builder):  # noqa: ANN202
    from pdlite.core.program import Program

    return Program([b.block, *getattr(b, "blocks", [])])


@pytest.mark.usefixtures("builder_with_blocks")
@pytest.mark.parametrize("passes", ["essential", "default"])
@pytest.mark.parametrize("n_iter", [0, 1, 4])
def test_while_runs_its_block_while_the_condition_holds(n_iter: int, passes: str) -> None:
    b = _loop_program(n_iter)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    want = x.copy()
    for _ in range(n_iter):
        want = want * 2 + x
    (acc, i), res = run(b, {"x": x}, PREP if passes == "essential" else list(DEFAULT_PASSES))
    np.testing.assert_allclose(acc, want, rtol=1e-6)
    assert i.dtype == np.int64 and i.tolist() == [n_iter]
    # the same predictor program again: the loop state starts afresh
    acc2, i2 = run_result(res, {"x": x})
    np.testing.assert_allclose(acc2, want, rtol=1e-6)
    assert i2.tolist() == [n_iter]


def _cond_program() -> Builder:
    """y = x (a previous value); if c: y = relu(x) * 3 ; z = select_input([x - 1, y], cast(c))."""
    b = Builder()
    x = b.feed("x", [4])
    c = b.feed("c", [1], np.bool_)
    b.op("assign", {"X": x}, {"Out": "y"})
    blk = _sub_block(b, [OpDesc("relu", {"X": ["x"]}, {"Out": ["r"]}, {}),
                         OpDesc("scale", {"X": ["r"]}, {"Out": ["y"]}, {"scale": 3.0, "bias": 0.0})])
    b.op("conditional_block", {"Cond": c, "Input": ["x", "y"]}, {"Out": ["y"]}, sub_block=1,
         is_scalar_condition=True)
    b.op("scale", {"X": x}, {"Out": "xm"}, scale=1.0, bias=-1.0)
    b.op("cast", {"X": c}, {"Out": "mask"}, in_dtype=int(VarType.BOOL), out_dtype=int(VarType.INT32))
    b.op("select_input", {"X": ["xm", "y"], "Mask": "mask"}, {"Out": "z"})
    b.fetch("y", "z")
    b.blocks = [blk]  # type: ignore[attr-defined]
    return b


@pytest.mark.usefixtures("builder_with_blocks")
@pytest.mark.parametrize("taken", [True, False])
def test_conditional_block_runs_once_or_keeps_the_previous_value(taken: bool) -> None:
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    (y, z), _ = run(_cond_program(), {"x": x, "c": np.array([taken])}, list(DEFAULT_PASSES))
    np.testing.assert_array_equal(y, np.maximum(x, 0) * 3 if taken else x)
    np.testing.assert_array_equal(z, np.maximum(x, 0) * 3 if taken else x - 1)


@pytest.mark.usefixtures("builder_with_blocks")
def test_assign_read_by_a_block_op_is_not_bypassed() -> None:
    """y = assign(x * 2) is read (by name) inside the block: bypassing it would rename the op's input only."""
    b = Builder()
    x = b.feed("x", [3])
    c = b.feed("c", [1], np.bool_)
    b.op("scale", {"X": x}, {"Out": "a"}, scale=2.0, bias=0.0)
    b.op("assign", {"X": "a"}, {"Out": "y"})
    blk = _sub_block(b, [OpDesc("relu", {"X": ["y"]}, {"Out": ["w"]}, {})])
    b.op("conditional_block", {"Cond": c, "Input": ["y"]}, {"Out": ["w"]}, sub_block=1, is_scalar_condition=True)
    b.fetch("w")
    b.blocks = [blk]  # type: ignore[attr-defined]
    x_val = np.array([1.0, -1.0, 2.0], np.float32)
    (w,), res = run(b, {"x": x_val, "c": np.array([True])}, with_passes("identity_assign_eliminate_pass"))
    np.testing.assert_array_equal(w, np.maximum(x_val * 2, 0))
    assert "assign" in op_types(res)
    assert sum(refusals(res, "identity_assign_eliminate_pass").values()) == 1


@pytest.mark.usefixtures("builder_with_blocks")
def test_memory_plan_keeps_vars_a_block_names() -> None:
    """`x2` is read only inside the block (the while op does not list it): it must live until the while."""
    b = _loop_program(3)
    b.op("scale", {"X": "x"}, {"Out": "x2"}, scale=1.0, bias=0.0)
    b.block.ops.insert(len(b.block.ops) - 4, b.block.ops.pop())  # before the while
    b.blocks[0].ops[1].inputs["Y"] = ["x2"]  # type: ignore[attr-defined]
    res = optimize(b, [*PREP, "memory_optimize_pass"])
    order = res.graph.topological_order()
    w = next(i for i, n in enumerate(order) if n.op.type == "while")
    released_before = {n for node in order[:w] for n in node.info.get("release", ())}
    assert "x2" not in released_before


def _array_program() -> Builder:
    """arr = []; for i in 0..2: arr[i] = x * (i + 1); stack / concat / read arr[1] / length."""
    b = Builder()
    b.feed("x", [2])
    b.op("fill_constant", {}, {"Out": "i"}, shape=[1], dtype=int(VarType.INT64), value=0.0)
    b.op("fill_constant", {}, {"Out": "n"}, shape=[1], dtype=int(VarType.INT64), value=3.0)
    b.op("less_than", {"X": "i", "Y": "n"}, {"Out": "c"})
    body = [OpDesc("cast", {"X": ["i"]}, {"Out": ["f"]}, {"in_dtype": int(VarType.INT64),
                                                          "out_dtype": int(VarType.FP32)}),
            OpDesc("scale", {"X": ["f"]}, {"Out": ["f1"]}, {"scale": 1.0, "bias": 1.0}),
            OpDesc("elementwise_mul", {"X": ["x"], "Y": ["f1"]}, {"Out": ["row"]}, {"axis": -1}),
            OpDesc("write_to_array", {"X": ["row"], "I": ["i"]}, {"Out": ["arr"]}, {}),
            OpDesc("increment", {"X": ["i"]}, {"Out": ["i"]}, {"step": 1.0}),
            OpDesc("less_than", {"X": ["i"], "Y": ["n"]}, {"Out": ["c"]}, {})]
    blk = _sub_block(b, body)
    b.block.vars["arr"] = VarDesc("arr", VarType.LOD_TENSOR_ARRAY, VarType.FP32, [2])
    b.op("while", {"Condition": "c", "X": ["i", "n", "x", "arr"]}, {"Out": ["i", "c", "arr"]}, sub_block=1)
    b.op("tensor_array_to_tensor", {"X": "arr"}, {"Out": "st", "OutIndex": "sti"}, axis=0, use_stack=True)
    b.op("tensor_array_to_tensor", {"X": "arr"}, {"Out": "cat", "OutIndex": "cati"}, axis=0, use_stack=False)
    b.op("fill_constant", {}, {"Out": "one"}, shape=[1], dtype=int(VarType.INT64), value=1.0)
    b.op("read_from_array", {"X": "arr", "I": "one"}, {"Out": "r1"})
    b.op("lod_array_length", {"X": "arr"}, {"Out": "len"})
    b.fetch("st", "cat", "cati", "r1", "len")
    b.blocks = [blk]  # type: ignore[attr-defined]
    return b


@pytest.mark.usefixtures("builder_with_blocks")
@pytest.mark.parametrize("passes", ["essential", "default"])
def test_tensor_array_written_in_a_loop(passes: str) -> None:
    x = np.array([1.5, -2.0], np.float32)
    (st, cat, cati, r1, length), res = run(_array_program(), {"x": x},
                                           PREP if passes == "essential" else list(DEFAULT_PASSES))
    rows = [x * k for k in (1, 2, 3)]
    np.testing.assert_array_equal(st, np.stack(rows))
    np.testing.assert_array_equal(cat, np.concatenate(rows))
    assert cati.dtype == np.int32 and cati.tolist() == [2, 2, 2]
    np.testing.assert_array_equal(r1, rows[1])
    assert length.dtype == np.int64 and length.tolist() == [3]
    types = op_types(res)
    assert types.count("create_array") == 1 and types.index("create_array") < types.index("while")


def test_write_to_array_leaves_its_input_list_alone() -> None:
    from pdlite.kernels.host.control_flow import WriteToArray

    a = [np.zeros(1, np.float32)]
    out = WriteToArray(OpDesc("write_to_array", {"X": ["x"], "I": ["i"], "Array": ["a"]}, {"Out": ["a"]}, {})).run(
        {"X": [np.ones(1, np.float32)], "I": [np.array([2])], "Array": [a]})["Out"][0]
    assert len(a) == 1 and len(out) == 3 and out[1] is None and out[2][0] == 1.0


@pytest.mark.usefixtures("builder_with_blocks")
def test_read_past_the_end_names_the_op() -> None:
    b = _array_program()
    b.block.ops[[o.type for o in b.block.ops].index("fill_constant", 4)].attrs["value"] = 7.0
    with pytest.raises(PdliteError, match=r"read_from_array.*index 7 is out of the array's range \(length 3\)"):
        run(b, {"x": np.ones(2, np.float32)}, list(DEFAULT_PASSES))


@pytest.mark.usefixtures("builder_with_blocks")
def test_a_sub_block_index_out_of_range_is_a_model_error() -> None:
    b = _loop_program(2)
    next(o for o in b.block.ops if o.type == "while").attrs["sub_block"] = 5
    with pytest.raises(PdliteError, match=r"while: sub_block 5 is not a block of the model \(2 blocks\)"):
        run(b, {"x": np.ones(3, np.float32)}, list(DEFAULT_PASSES))


def test_shape_cache_keys_tensor_arrays_by_their_elements():
    """An op reading a tensor array (a list) keys its cached shape inference on the elements' shapes."""
    from pdlite.runtime.instruction import _shapes_key

    a = [np.zeros((2, 3), np.float32)]
    b = [np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)]
    x = np.zeros((5,), np.float32)
    assert _shapes_key({"X": [a], "Y": [x]}) != _shapes_key({"X": [b], "Y": [x]})
    assert _shapes_key({"X": [a], "Y": [x]}) == _shapes_key({"X": [[np.ones((2, 3), np.float32)]], "Y": [x]})
