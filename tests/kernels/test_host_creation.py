"""Creation, dtype and indexing ops: shape, fill_constant(+_batch_size_like), fill_any_like, cast,
assign, share_data, range, expand_v2, expand, tile, gather, where, where_index.

All results are exact: references are hand-written values and NumPy; Paddle's legacy executor
when installed.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.dtypes import VarType
from pdlite.errors import PdliteError
from pdlite.kernels.host.creation import bf16_to_f32, f32_to_bf16
from pdlite.kernels.registry import kernels_for
from tests.kernels._util import paddle1, run1

RNG = np.random.default_rng(0)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def test_shape_is_int32():
    got = run1("shape", {"Input": X3})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [2, 3, 4])
    assert run1("shape", {"Input": np.float32(1.0).reshape(())}).shape == (0,)
    assert {d.output_type("Out").precision.name for d in kernels_for("shape")} == {"INT32"}


# --- fill_constant ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dtype,np_dtype", [(VarType.FP32, np.float32), (VarType.INT32, np.int32), (VarType.INT64, np.int64), (VarType.BOOL, np.bool_), (VarType.FP64, np.float64)]
)
def test_fill_constant_dtypes(dtype, np_dtype):
    got = run1("fill_constant", {}, {"shape": [2, 3], "value": 1.0, "dtype": int(dtype)})
    assert got.dtype == np_dtype and got.shape == (2, 3)
    assert np.all(got == np_dtype(1))


def test_fill_constant_str_value():
    # the transformer model's op: int32 [1] of 200
    attrs = {"dtype": 2, "force_cpu": True, "place_type": -1, "shape": [1], "str_value": "200", "value": 200.0}
    got = run1("fill_constant", {}, attrs)
    assert got.dtype == np.int32 and got.tolist() == [200]
    big = run1("fill_constant", {}, {"shape": [1], "dtype": int(VarType.INT64), "str_value": "9007199254740993", "value": 0.0})
    assert big[0] == 9007199254740993  # exact: not via a float
    inf = run1("fill_constant", {}, {"shape": [2], "str_value": "-inf", "value": 0.0})
    assert np.all(np.isneginf(inf))
    assert run1("fill_constant", {}, {"shape": [1], "str_value": "0.1", "value": 5.0})[0] == np.float32(0.1)


def test_fill_constant_tensor_inputs():
    attrs = {"shape": [1], "value": 3.0, "dtype": int(VarType.FP32)}
    assert run1("fill_constant", {"ShapeTensorList": [np.array([2]), np.array([4], np.int32)]}, attrs).shape == (2, 4)
    ins = {"ShapeTensor": np.array([3, 1], np.int64), "ShapeTensorList": [np.array([2])]}
    assert run1("fill_constant", ins, attrs).shape == (3, 1)  # ShapeTensor wins
    got = run1("fill_constant", {"ValueTensor": np.float32([7.5])}, attrs)
    assert got.tolist() == [7.5]
    assert run1("fill_constant", {}, {"shape": [], "value": 2.0}).shape == ()
    with pytest.raises(PdliteError, match="negative"):
        run1("fill_constant", {}, {"shape": [2, -1]})


def test_fill_constant_batch_size_like():
    attrs = {"shape": [1, 5, 6], "value": 0.5, "dtype": int(VarType.FP32), "input_dim_idx": 1, "output_dim_idx": 2}
    got = run1("fill_constant_batch_size_like", {"Input": X3}, attrs)
    assert got.shape == (1, 5, 3) and np.all(got == 0.5)


def test_fill_any_like_and_zeros_like():
    got = run1("fill_any_like", {"X": X3}, {"value": 2.0, "dtype": -1})
    assert got.dtype == np.float32 and got.shape == X3.shape and np.all(got == 2)
    got = run1("fill_any_like", {"X": X3}, {"value": 1.0, "dtype": int(VarType.INT64)})
    assert got.dtype == np.int64
    assert np.all(run1("fill_zeros_like", {"X": X3}) == 0)


# --- cast ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x,out_vt,expected",
    [
        (np.float32([-1.7, 2.9, -0.2, 3.0]), VarType.INT32, np.int32([-1, 2, 0, 3])),  # truncation
        (np.float32([0.0, -0.5, 2.0]), VarType.BOOL, np.bool_([False, True, True])),
        (np.bool_([True, False]), VarType.FP32, np.float32([1, 0])),
        (np.int64([2**40 + 1, -3]), VarType.FP32, np.float32([2**40, -3])),
        (np.float32([1.5, 65520.0]), VarType.FP16, np.float16([1.5, np.inf])),
        (np.int32([300, -1]), VarType.UINT8, np.uint8([44, 255])),
    ],
)
def test_cast(x, out_vt, expected):
    got = run1("cast", {"X": x}, {"in_dtype": int(VarType.FP32), "out_dtype": int(out_vt)})
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_bfloat16_round_to_nearest_even():
    x = np.array([0x3F800000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0xC0490FDB], dtype=np.uint32).view(np.float32)
    np.testing.assert_array_equal(f32_to_bf16(x), np.uint16([0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC049]))
    np.testing.assert_array_equal(bf16_to_f32(np.uint16([0x3F80, 0xC049])), np.float32([1.0, -3.140625]))
    got = run1("cast", {"X": x}, {"in_dtype": int(VarType.FP32), "out_dtype": int(VarType.BF16)})
    back = run1("cast", {"X": got}, {"in_dtype": int(VarType.BF16), "out_dtype": int(VarType.FP32)})
    assert back.dtype == np.float32 and back[0] == 1.0 and back[2] == np.float32(1.015625)


def test_assign_copies_share_data_shares():
    a = run1("assign", {"X": X3})
    assert a is not X3 and not np.shares_memory(a, X3)
    np.testing.assert_array_equal(a, X3)
    assert np.shares_memory(run1("share_data", {"X": X3}), X3)


# --- range / expand / tile -------------------------------------------------------------------
def _range_ins(start, end, step, dtype):
    return {"Start": np.array([start], dtype), "End": np.array([end], dtype), "Step": np.array([step], dtype)}


@pytest.mark.parametrize(
    "start,end,step,dtype,n",
    [(0, 10, 3, np.int64, 4), (10, 0, -3, np.int32, 4), (0, 1, 0.1, np.float32, 10), (1.5, -2, -0.7, np.float32, 5), (3, 3, 1, np.int64, 0)],
)
def test_range(start, end, step, dtype, n):
    got = run1("range", _range_ins(start, end, step, dtype))
    assert got.dtype == dtype and got.shape == (n,)
    # Paddle's loop: value = start; repeat { out[i] = value; value += step } in the dtype
    ref, v = [], dtype(start)
    for _ in range(n):
        ref.append(v)
        v = dtype(v + dtype(step))
    np.testing.assert_array_equal(got, np.array(ref, dtype=dtype))


def test_range_errors():
    with pytest.raises(PdliteError, match="step"):
        run1("range", _range_ins(0, 5, 0, np.int64))
    with pytest.raises(PdliteError, match="away"):
        run1("range", _range_ins(0, 5, -1, np.int64))


@pytest.mark.parametrize(
    "xshape,target,expected",
    [((3, 1), [2, 3, 4], (2, 3, 4)), ((3, 1), [-1, 5], (3, 5)), ((1, 4), [2, -1, -1], (2, 1, 4)), ((), [3], (3,))],
)
def test_expand_v2(xshape, target, expected):
    x = RNG.standard_normal(xshape).astype(np.float32)
    got = run1("expand_v2", {"X": x}, {"shape": target})
    np.testing.assert_array_equal(got, np.broadcast_to(x, expected))
    got = run1("expand_v2", {"X": x, "Shape": np.array(target, np.int32)}, {"shape": [9]})
    assert got.shape == expected
    got = run1("expand_v2", {"X": x, "expand_shapes_tensor": [np.array([t]) for t in target]})
    assert got.shape == expected


def test_expand_v2_errors():
    with pytest.raises(PdliteError, match="cannot expand"):
        run1("expand_v2", {"X": X3}, {"shape": [2, 5, 4]})
    with pytest.raises(PdliteError, match="positive"):
        run1("expand_v2", {"X": X3}, {"shape": [-1, 2, 3, 4]})


@pytest.mark.parametrize("reps", [[2], [1, 2, 1], [2, 1, 3, 1], []])
def test_tile(reps):
    got = run1("tile", {"X": X3}, {"repeat_times": reps})
    np.testing.assert_array_equal(got, np.tile(X3, reps))
    got = run1("tile", {"X": X3, "repeat_times_tensor": [np.array([r]) for r in reps]} if reps else {"X": X3})
    assert got.shape == np.tile(X3, reps).shape


def test_expand_v1():
    got = run1("expand", {"X": X3}, {"expand_times": [1, 2, 3]})
    np.testing.assert_array_equal(got, np.tile(X3, [1, 2, 3]))
    got = run1("expand", {"X": X3, "ExpandTimes": np.array([2, 1, 1], np.int32)}, {"expand_times": [1, 1, 1]})
    assert got.shape == (4, 3, 4)


# --- gather / where --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "index,axis,expected_shape",
    [
        (np.array([2, 0, 1, 1]), 1, (2, 4, 4)),
        (np.array([[1], [0]], np.int32), 0, (2, 3, 4)),
        (np.array(3), 2, (2, 3)),
        (np.array([3, 3]), -1, (2, 3, 2)),
    ],
)
def test_gather(index, axis, expected_shape):
    got = run1("gather", {"X": X3, "Index": index}, {"axis": axis})
    assert got.shape == expected_shape
    np.testing.assert_array_equal(got, np.take(X3, index.reshape(-1) if index.ndim == 2 else index, axis=axis))


def test_gather_axis_tensor_and_range_check():
    got = run1("gather", {"X": X3, "Index": np.array([1]), "Axis": np.array([2])})
    np.testing.assert_array_equal(got, X3[:, :, 1:2])
    with pytest.raises(PdliteError, match="Index"):
        run1("gather", {"X": X3, "Index": np.array([0, 2])})
    with pytest.raises(PdliteError, match="Index"):
        run1("gather", {"X": X3, "Index": np.array([-1])})


def test_where_and_where_index():
    cond = X3 > 0
    y = np.zeros((1, 3, 1), np.float32)
    np.testing.assert_array_equal(run1("where", {"Condition": cond, "X": X3, "Y": y}), np.where(cond, X3, y))
    got = run1("where_index", {"Condition": cond})
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argwhere(cond))


# --- against Paddle's legacy executor ---------------------------------------------------------
PADDLE_CASES = [
    ("shape", {"Input": X3}, {}),
    ("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": int(VarType.FP32), "str_value": ""}),
    ("fill_constant", {}, {"shape": [1], "value": 200.0, "dtype": int(VarType.INT32), "str_value": "200"}),
    ("fill_constant", {"ShapeTensor": np.array([2, 2], np.int64)}, {"shape": [1], "value": 3.0, "dtype": int(VarType.INT64)}),
    ("fill_constant", {"ValueTensor": np.float32([4.25])}, {"shape": [3], "value": 3.0, "dtype": int(VarType.FP32)}),
    ("fill_constant_batch_size_like", {"Input": X3}, {"shape": [1, 7], "value": 2.0, "dtype": 5, "input_dim_idx": 2, "output_dim_idx": 0}),
    ("cast", {"X": np.float32([-1.7, 2.9, -0.2, 3.0])}, {"in_dtype": 5, "out_dtype": 2}),
    ("cast", {"X": np.float32([-1.7, 0.0, 3.0])}, {"in_dtype": 5, "out_dtype": 0}),
    ("cast", {"X": np.int64([5, -3])}, {"in_dtype": 3, "out_dtype": 5}),
    ("range", _range_ins(0.0, 1.0, 0.1, np.float32), {}),
    ("range", _range_ins(1.5, -2.0, -0.7, np.float32), {}),
    ("range", _range_ins(10, 0, -3, np.int64), {}),
    ("expand_v2", {"X": X3[:, :1]}, {"shape": [3, -1, 5, -1]}),
    ("tile", {"X": X3}, {"repeat_times": [2, 1, 1, 2]}),
    ("gather", {"X": X3, "Index": np.array([2, 0, 2])}, {"axis": 1}),
    ("gather", {"X": X3, "Index": np.array([1, 0], np.int32)}, {"axis": 0}),
    ("where", {"Condition": X3 > 0, "X": X3, "Y": -X3}, {}),
    ("assign", {"X": X3}, {}),
    ("fill_any_like", {"X": X3}, {"value": 3.0, "dtype": -1}),
]


@pytest.mark.parametrize("op_type,ins,attrs", PADDLE_CASES, ids=[c[0] for c in PADDLE_CASES])
def test_matches_paddle(op_type, ins, attrs):
    ref = paddle1(op_type, ins, attrs)
    got = run1(op_type, ins, attrs)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape, got.dtype, ref.dtype)
    np.testing.assert_array_equal(got, ref)
