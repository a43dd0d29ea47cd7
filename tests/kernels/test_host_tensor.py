"""Shape-manipulation ops: reshape, flatten, transpose, concat, split, stack, slice, strided_slice,
squeeze, unsqueeze. Exact (bit-for-bit) results: references are hand-written shapes and NumPy
indexing; Paddle's legacy executor when installed.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import PdliteError
from pdlite.operators.tensor import slice_bounds, unsqueeze_shape
from tests.kernels._util import paddle1, paddle_legacy, run1, run_op

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)


# --- reshape ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,target,expected",
    [
        ((2, 3, 4, 5), [0, 0, -1], (2, 3, 20)),
        ((2, 3, 4, 5), [-1, 5], (24, 5)),
        ((2, 3, 4, 5), [0, -1, 0], (2, 15, 4)),  # the 0 at index 2 copies dim 2 (4); -1 = 120 / (2 * 4)
        ((2, 3, 4, 5), [6, 20], (6, 20)),
        ((1, 32, 128), [0, 0, 4, 32], (1, 32, 4, 32)),
        ((1, 1), [], ()),  # 0-D target
        ((), [1, 1, 1], (1, 1, 1)),
        ((0, 4), [-1, 2], (0, 2)),
    ],
)
def test_reshape2(shape, target, expected):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    res = run_op("reshape2", {"X": x}, {"shape": target}, outs={"Out": 1, "XShape": 1})
    out = res["Out"][0]
    assert out.shape == expected and out.dtype == np.float32
    np.testing.assert_array_equal(out.reshape(-1), x.reshape(-1))
    assert res["XShape"][0].shape == (0, *shape)


@pytest.mark.parametrize(
    "target,match",
    [([-1, -1], "only one"), ([0, 0, 0, 0, 0], "copies no dim"), ([7, -1], "cannot reshape"), ([5, 5], "cannot")],
)
def test_reshape2_errors(target, match):
    with pytest.raises(PdliteError, match=match):
        run1("reshape2", {"X": X4[0]}, {"shape": target})


def test_reshape_shape_inputs_override_attr():
    x = X4
    got = run1("reshape2", {"X": x, "Shape": np.array([0, 12, -1], np.int32)}, {"shape": [1, 1, 120]})
    assert got.shape == (2, 12, 5)
    # ShapeTensor (a list of one-element tensors) wins over Shape
    ins = {"X": x, "Shape": np.array([0, 12, -1]), "ShapeTensor": [np.array([6]), np.array([-1], np.int64)]}
    assert run1("reshape2", ins, {"shape": [120]}).shape == (6, 20)
    assert run1("reshape", {"X": x}, {"shape": [-1]}).shape == (120,)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.float64])
def test_reshape_keeps_any_dtype(dtype):
    x = np.arange(6).astype(dtype).reshape(2, 3)
    got = run1("reshape2", {"X": x}, {"shape": [3, 2]})
    assert got.dtype == dtype and got.shape == (3, 2)


# --- flatten / transpose ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,start,stop,expected",
    [
        ((2, 3, 4, 5), 1, 3, (2, 60)),
        ((2, 3, 4, 5), 0, -1, (120,)),
        ((2, 3, 4, 5), -2, -1, (2, 3, 20)),
        ((2, 3, 4, 5), 2, 2, (2, 3, 4, 5)),
        ((), 0, -1, (1,)),
        ((7,), 0, 0, (7,)),
    ],
)
def test_flatten_contiguous_range(shape, start, stop, expected):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    res = run_op("flatten_contiguous_range", {"X": x}, {"start_axis": start, "stop_axis": stop}, {"Out": 1, "XShape": 1})
    assert res["Out"][0].shape == expected
    np.testing.assert_array_equal(res["Out"][0].reshape(-1), x.reshape(-1))


def test_flatten_contiguous_range_bad_axes():
    with pytest.raises(PdliteError, match="start_axis"):
        run1("flatten_contiguous_range", {"X": X4}, {"start_axis": 3, "stop_axis": 1})


@pytest.mark.parametrize("axis,expected", [(0, (1, 120)), (1, (2, 60)), (3, (24, 5)), (4, (120, 1))])
def test_flatten2(axis, expected):
    assert run1("flatten2", {"X": X4}, {"axis": axis}).shape == expected
    assert run1("flatten", {"X": X4}, {"axis": axis}).shape == expected


@pytest.mark.parametrize("perm", [[0, 2, 1, 3], [3, 2, 1, 0], [-1, 0, -2, 1]])
def test_transpose2(perm):
    got = run1("transpose2", {"X": X4}, {"axis": perm})
    np.testing.assert_array_equal(got, np.transpose(X4, [p % 4 for p in perm]))
    assert got.flags.c_contiguous


def test_transpose_rejects_non_permutation():
    with pytest.raises(PdliteError, match="permutation"):
        run1("transpose", {"X": X4}, {"axis": [0, 1, 1, 2]})


# --- concat / split / stack ------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_concat(axis):
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    shape_b = list(a.shape)
    shape_b[axis] = 5
    b = RNG.standard_normal(shape_b).astype(np.float32)
    got = run1("concat", {"X": [a, b, a]}, {"axis": axis})
    np.testing.assert_array_equal(got, np.concatenate([a, b, a], axis=axis))


def test_concat_axis_tensor_and_ints():
    a, b = np.arange(6).reshape(2, 3), np.arange(4).reshape(2, 2)
    got = run1("concat", {"X": [a, b], "AxisTensor": np.array([1], np.int32)}, {"axis": 0})
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))
    assert got.dtype == np.int64
    with pytest.raises(PdliteError, match="concat"):
        run1("concat", {"X": [a, b]}, {"axis": 0})


@pytest.mark.parametrize(
    "attrs,sizes",
    [
        ({"axis": 1, "num": 3}, [1, 1, 1]),
        ({"axis": -1, "sections": [2, -1, 1]}, [2, 2, 1]),
        ({"axis": 2, "sections": [1, 3]}, [1, 3]),
    ],
)
def test_split(attrs, sizes):
    n = len(sizes)
    got = run_op("split", {"X": X4}, attrs, outs={"Out": n})["Out"]
    axis = attrs["axis"]
    ref = np.split(X4, np.cumsum(sizes)[:-1], axis=axis)
    assert len(got) == n
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_split_tensor_inputs_and_errors():
    ins = {"X": X4, "AxisTensor": np.array([3]), "SectionsTensorList": [np.array([4]), np.array([1])]}
    got = run_op("split", ins, {"axis": 0, "sections": [1, 1]}, outs={"Out": 2})["Out"]
    assert [g.shape for g in got] == [(2, 3, 4, 4), (2, 3, 4, 1)]
    with pytest.raises(PdliteError, match="equal parts"):
        run_op("split", {"X": X4}, {"axis": 1, "num": 2}, outs={"Out": 2})


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_stack_unstack(axis):
    xs = [RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]
    y = run_op("stack", {"X": xs}, {"axis": axis}, outs={"Y": 1})["Y"][0]
    np.testing.assert_array_equal(y, np.stack(xs, axis=axis))
    parts = run_op("unstack", {"X": y}, {"axis": axis, "num": 5}, outs={"Y": 5})["Y"]
    for p, x in zip(parts, xs):
        np.testing.assert_array_equal(p, x)


# --- slice -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dim,start,end,expected",
    [
        (5, 1, 3, (1, 3)),
        (5, -2, 5, (3, 5)),
        (5, 0, -1, (0, 4)),
        (5, -100, 100, (0, 5)),
        (5, 3, 1, (3, 3)),  # end before start: empty
        (5, 7, 9, (5, 5)),  # start past the end: empty
        (5, 4, -100, (4, 4)),
        (5, 0, 2**62, (0, 5)),  # INT64_MAX-like "to the end"
        (0, 0, 3, (0, 0)),
    ],
)
def test_slice_bounds_clamp_like_paddle(dim, start, end, expected):
    assert slice_bounds(dim, start, end) == expected


@pytest.mark.parametrize(
    "attrs,index,shape",
    [
        ({"axes": [1], "starts": [1], "ends": [3]}, np.s_[:, 1:3], (2, 2, 4, 5)),
        ({"axes": [-1, 0], "starts": [-3, 1], "ends": [100, 2]}, np.s_[1:2, :, :, -3:], (1, 3, 4, 3)),
        ({"axes": [2], "starts": [3], "ends": [1]}, np.s_[:, :, 3:3], (2, 3, 0, 5)),
        ({"axes": [0, 1], "starts": [0, 2], "ends": [1, 3], "decrease_axis": [0, 1]}, np.s_[0, 2], (4, 5)),
        (
            {"axes": [0, 1, 2, 3], "starts": [1, 1, 1, 1], "ends": [2, 2, 2, 2], "decrease_axis": [0, 1, 2, 3]},
            np.s_[1, 1, 1, 1],
            (),
        ),
    ],
)
def test_slice(attrs, index, shape):
    got = run1("slice", {"Input": X4}, attrs)
    assert got.shape == shape
    np.testing.assert_array_equal(got, np.asarray(X4[index]))


def test_slice_tensor_inputs_override_attrs():
    attrs = {"axes": [1, 2], "starts": [0, 0], "ends": [1, 1]}
    ins = {"Input": X4, "StartsTensor": np.array([1, 2], np.int64), "EndsTensorList": [np.array([3]), np.array([-1])]}
    np.testing.assert_array_equal(run1("slice", ins, attrs), X4[:, 1:3, 2:-1])
    ins = {"Input": X4, "StartsTensorList": [np.array([2], np.int32), np.array([0], np.int32)], "EndsTensor": np.array([3, 2])}
    np.testing.assert_array_equal(run1("slice", ins, attrs), X4[:, 2:3, 0:2])


def test_slice_of_shape_tensor_is_0d_int32():
    # the transformer model's pattern: shape -> slice(axes=[0], decrease_axis=[0])
    shp = run1("shape", {"Input": X4})
    got = run1("slice", {"Input": shp}, {"axes": [0], "starts": [0], "ends": [1], "decrease_axis": [0], "infer_flags": [1]})
    assert got.shape == () and got.dtype == np.int32 and got == 2


def test_slice_decrease_of_non_unit_dim_fails():
    with pytest.raises(PdliteError, match="decrease_axis"):
        run1("slice", {"Input": X4}, {"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]})


@pytest.mark.parametrize(
    "start,end,stride",
    [(8, 2, -2), (-1, -1, -1), (9, -1, -1), (-3, -100, -1), (100, 0, -3), (2, 100, 3), (-100, 3, 1), (5, 2, 1), (4, -20, -1)],
)
def test_strided_slice_is_python_slicing(start, end, stride):
    x = np.arange(10, dtype=np.float32)
    got = run1("strided_slice", {"Input": x}, {"axes": [0], "starts": [start], "ends": [end], "strides": [stride]})
    np.testing.assert_array_equal(got, x[start:end:stride])


def test_strided_slice_multi_axis_and_decrease():
    attrs = {"axes": [1, 3], "starts": [2, 0], "ends": [3, 5], "strides": [1, 2], "decrease_axis": [1]}
    np.testing.assert_array_equal(run1("strided_slice", {"Input": X4}, attrs), X4[:, 2, :, 0:5:2])
    with pytest.raises(PdliteError, match="stride"):
        run1("strided_slice", {"Input": X4}, {"axes": [0], "starts": [0], "ends": [1], "strides": [0]})


# --- squeeze / unsqueeze ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,axes,expected",
    [((1, 3, 1, 4), [], (3, 4)), ((1, 3, 1, 4), [0], (3, 1, 4)), ((1, 3, 1, 4), [-2, 1], (1, 3, 4)), ((1,), [], ())],
)
def test_squeeze2(shape, axes, expected):
    x = np.zeros(shape, np.float32)
    res = run_op("squeeze2", {"X": x}, {"axes": axes}, outs={"Out": 1, "XShape": 1})
    assert res["Out"][0].shape == expected


@pytest.mark.parametrize(
    "axes,expected",
    [
        ([0, 2], (1, 3, 1, 4)),
        ([2, 0], (1, 3, 4, 1)),  # Paddle inserts sequentially and moves earlier 1s: not np.expand_dims
        ([-1], (3, 4, 1)),
        ([0, -1], (1, 3, 4, 1)),
        ([1, 1], (3, 1, 1, 4)),
        ([-1, -1], (3, 4, 1, 1)),
    ],
)
def test_unsqueeze2_paddle_order(axes, expected):
    x = np.zeros((3, 4), np.float32)
    assert unsqueeze_shape(x.shape, axes) == expected
    assert run1("unsqueeze2", {"X": x}, {"axes": axes}).shape == expected
    assert run1("unsqueeze2", {"X": x, "AxesTensor": np.array(axes)}, {"axes": [5]}).shape == expected


def test_unsqueeze_axes_tensor_list_and_range_check():
    x = np.zeros((3, 4), np.float32)
    assert run1("unsqueeze", {"X": x, "AxesTensorList": [np.array([0]), np.array([3])]}).shape == (1, 3, 4, 1)
    with pytest.raises(PdliteError, match="out of range"):
        run1("unsqueeze2", {"X": x}, {"axes": [3, 0]})


# --- against Paddle's legacy executor ---------------------------------------------------------
PADDLE_CASES = [
    ("reshape2", {"X": X4}, {"shape": [0, -1, 10]}),
    ("reshape2", {"X": X4, "Shape": np.array([4, 0, -1], np.int32)}, {"shape": [-1]}),
    ("reshape2", {"X": X4, "ShapeTensor": [np.array([6], np.int64), np.array([-1], np.int64)]}, {"shape": [-1]}),
    ("flatten_contiguous_range", {"X": X4}, {"start_axis": 1, "stop_axis": 3}),
    ("flatten_contiguous_range", {"X": X4}, {"start_axis": -3, "stop_axis": -2}),
    ("flatten2", {"X": X4}, {"axis": 2}),
    ("transpose2", {"X": X4}, {"axis": [0, 2, 1, 3]}),
    ("transpose2", {"X": X4}, {"axis": [3, 1, 0, 2]}),
    ("concat", {"X": [X4, X4[:, :1]]}, {"axis": 1}),
    ("concat", {"X": [X4, X4[..., :2]]}, {"axis": -1}),
    ("slice", {"Input": X4}, {"axes": [1, 3], "starts": [-2, 1], "ends": [100, -1], "infer_flags": [1, 1]}),
    ("slice", {"Input": X4}, {"axes": [0, 2], "starts": [1, 3], "ends": [2, 1], "infer_flags": [1, 1]}),
    ("slice", {"Input": X4}, {"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [0, 1], "infer_flags": [1, 1]}),
    ("slice", {"Input": X4[0, 0, 0]}, {"axes": [0], "starts": [-1], "ends": [10000], "decrease_axis": [0], "infer_flags": [1]}),
    (
        "slice",
        {"Input": X4, "StartsTensor": np.array([1], np.int64), "EndsTensorList": [np.array([3], np.int64)]},
        {"axes": [2], "starts": [0], "ends": [1], "infer_flags": [-1]},
    ),
    ("strided_slice", {"Input": X4}, {"axes": [1, 3], "starts": [2, -1], "ends": [-100, -6], "strides": [-1, -2], "infer_flags": [1, 1]}),
    ("strided_slice", {"Input": X4}, {"axes": [2], "starts": [1], "ends": [2], "strides": [1], "decrease_axis": [2], "infer_flags": [1]}),
    ("squeeze2", {"X": X4[:, :1, :, 1:2]}, {"axes": [1, -1, 0]}),
    ("squeeze2", {"X": X4[:1, :1]}, {"axes": []}),
    ("unsqueeze2", {"X": X4[0]}, {"axes": [3, 0, -1]}),
    ("stack", {"X": [X4, X4]}, {"axis": -2}),
]


@pytest.mark.parametrize("op_type,ins,attrs", PADDLE_CASES, ids=[c[0] for c in PADDLE_CASES])
def test_matches_paddle(op_type, ins, attrs):
    if op_type == "stack":
        ref = paddle_legacy(op_type, ins, attrs, {"Y": 1})["Y"][0]
        got = run_op(op_type, ins, attrs, outs={"Y": 1})["Y"][0]
    else:
        ref = paddle1(op_type, ins, attrs)
        got = run1(op_type, ins, attrs)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def test_split_matches_paddle():
    attrs = {"axis": 3, "sections": [2, -1, 1], "num": 0}
    ref = paddle_legacy("split", {"X": X4}, attrs, {"Out": 3})["Out"]
    got = run_op("split", {"X": X4}, attrs, outs={"Out": 3})["Out"]
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
