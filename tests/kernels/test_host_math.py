"""matmul_v2, matmul, mul, softmax, log_softmax, scale, dropout, reductions, mean, sum, arg_max/min,
lookup_table(_v2), against float64 NumPy references and Paddle.

Tolerances: products are checked against the float64 result with the standard GEMM error bound
|err| <= 2 K eps32 (|X| @ |Y|); softmax within 4 eps32 (1 + |x - max|) relative; sums within K eps32 sum|x|;
everything else (scale, dropout, lookups, arg_max, max/min) exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.dtypes import VarType
from pdlite.core.types import ANY_PRECISION
from pdlite.errors import PdliteError
from pdlite.operators.math import matmul_v1_shapes, matmul_v2_shape
from tests.kernels._util import paddle1, run1

EPS = float(np.finfo(np.float32).eps)
RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _assert_gemm_close(got, x, y, ref_fn):
    ref = ref_fn(x.astype(np.float64), y.astype(np.float64))
    bound = ref_fn(np.abs(x.astype(np.float64)), np.abs(y.astype(np.float64)))
    k = x.shape[-1] if x.ndim else 1
    assert got.shape == np.shape(ref) and got.dtype == np.float32
    assert np.all(np.abs(got - ref) <= 2 * max(k, 2) * EPS * bound + 1e-30)


MATMUL_V2 = [
    ((3, 4), (4, 5), False, False, (3, 5)),
    ((4, 3), (4, 5), True, False, (3, 5)),
    ((3, 4), (5, 4), False, True, (3, 5)),
    ((2, 1, 3, 4), (6, 4, 5), False, False, (2, 6, 3, 5)),  # batch broadcasting
    ((1, 32, 128), (128, 384), False, False, (1, 32, 384)),  # the transformer's linear layers
    ((2, 4, 32, 32), (2, 4, 32, 32), False, True, (2, 4, 32, 32)),  # attention scores
    ((4,), (4,), False, False, ()),  # vector . vector -> 0-D (Paddle 3)
    ((4,), (2, 4, 5), False, False, (2, 5)),
    ((2, 3, 4), (4,), False, False, (2, 3)),
    ((4,), (5, 4), True, True, (5,)),  # transposes of a 1-D operand are ignored
]


@pytest.mark.parametrize("xs,ys,tx,ty,out", MATMUL_V2)
def test_matmul_v2(xs, ys, tx, ty, out):
    x, y = _rand(*xs), _rand(*ys)
    assert matmul_v2_shape(xs, ys, tx, ty) == out
    got = run1("matmul_v2", {"X": x, "Y": y}, {"trans_x": tx, "trans_y": ty})

    def ref(a, b):
        if tx and a.ndim > 1:
            a = np.swapaxes(a, -1, -2)
        if ty and b.ndim > 1:
            b = np.swapaxes(b, -1, -2)
        return np.matmul(a, b)

    assert got.shape == out
    _assert_gemm_close(got, x, y, ref)


def test_matmul_v2_mismatch_fails():
    with pytest.raises(PdliteError, match="matmul_v2"):
        run1("matmul_v2", {"X": _rand(3, 4), "Y": _rand(5, 6)})


@pytest.mark.parametrize(
    "xs,ys,tx,ty,out",
    [
        ((3, 4), (4, 5), False, False, (3, 5)),
        ((4, 3), (5, 4), True, True, (3, 5)),
        ((4,), (4,), False, False, ()),  # 0-D in Paddle 3 (2.x gave [1])
        ((4,), (4, 5), False, False, (5,)),
        ((3, 4), (4,), False, False, (3,)),
        ((2, 3, 4), (4, 5), False, False, (2, 3, 5)),
        ((3, 4), (2, 4, 5), False, False, (2, 3, 5)),
    ],
)
def test_matmul_v1(xs, ys, tx, ty, out):
    assert matmul_v1_shapes(xs, ys, tx, ty)[2] == out
    x, y = _rand(*xs), _rand(*ys)
    got = run1("matmul", {"X": x, "Y": y}, {"transpose_X": tx, "transpose_Y": ty, "alpha": 0.5})
    a = x.T if tx else x
    b = y.T if ty else y
    ref = 0.5 * np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == out
    np.testing.assert_allclose(got.reshape(-1), np.reshape(ref, -1), rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("xs,ys,xn,yn,out", [((6, 4), (4, 3), 1, 1, (6, 3)), ((2, 3, 4), (12, 5), 1, 1, (2, 5)), ((2, 3, 4), (4, 5), 2, 1, (2, 3, 5)), ((2, 3, 4), (2, 2, 5), 2, 2, (2, 3, 5))])
def test_mul(xs, ys, xn, yn, out):
    x, y = _rand(*xs), _rand(*ys)
    got = run1("mul", {"X": x, "Y": y}, {"x_num_col_dims": xn, "y_num_col_dims": yn})
    xm = x.reshape(int(np.prod(xs[:xn])), -1)
    ym = y.reshape(int(np.prod(ys[:yn])), -1)
    assert got.shape == out
    _assert_gemm_close(got.reshape(xm.shape[0], -1), xm, ym, np.matmul)


# --- softmax ---------------------------------------------------------------------------------
def _softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((4, 10), -1), ((2, 5, 3), 1), ((2, 4, 32, 32), -1), ((7,), 0)])
def test_softmax_and_log_softmax(shape, axis):
    x = _rand(*shape) * 5
    x.reshape(-1)[0] = 80.0  # exp would overflow without the max shift
    got = run1("softmax", {"X": x}, {"axis": axis})
    ref = _softmax64(x.astype(np.float64), axis)
    assert got.dtype == np.float32
    # float32 rounding of x - max carries a relative error eps * |x - max| into exp
    shift = np.abs(x - x.max(axis=axis, keepdims=True)).astype(np.float64)
    assert np.all(np.abs(got - ref) <= 4 * EPS * ref * (1 + shift) + 1e-44)
    lg = run1("log_softmax", {"X": x}, {"axis": axis})
    with np.errstate(divide="ignore"):
        lref = np.log(ref)
    np.testing.assert_allclose(lg, lref, rtol=4 * EPS, atol=4 * EPS * np.abs(lref).max())


# --- scale / dropout -------------------------------------------------------------------------
def test_scale_float():
    x = _rand(3, 4)
    got = run1("scale", {"X": x}, {"scale": 0.1767766922712326, "bias": 0.0})
    np.testing.assert_array_equal(got, x * np.float32(0.1767766922712326))
    got = run1("scale", {"X": x}, {"scale": 2.0, "bias": 1.5, "bias_after_scale": False})
    np.testing.assert_array_equal(got, (x + np.float32(1.5)) * np.float32(2))
    got = run1("scale", {"X": x, "ScaleTensor": np.float32([3.0])}, {"scale": 2.0, "bias": -1.0})
    np.testing.assert_array_equal(got, x * np.float32(3) - np.float32(1))
    assert got.dtype == np.float32


def test_scale_integers_truncate_scale_and_bias():
    x = np.array([1, 2, 3], np.int64)
    np.testing.assert_array_equal(run1("scale", {"X": x}, {"scale": 0.5, "bias": 1.7}, precision=ANY_PRECISION), [1, 1, 1])
    got = run1("scale", {"X": x.astype(np.int32)}, {"scale": 2.5, "bias": 1.7}, precision=ANY_PRECISION)
    assert got.dtype == np.int32 and got.tolist() == [3, 5, 7]


@pytest.mark.parametrize("impl,p", [("downgrade_in_infer", 0.2), ("upscale_in_train", 0.1), ("downgrade_in_infer", 0.5)])
def test_dropout_inference(impl, p):
    x = _rand(4, 5)
    got = run1("dropout", {"X": x}, {"dropout_prob": p, "is_test": True, "dropout_implementation": impl})
    ref = x if impl == "upscale_in_train" else x * (np.float32(1) - np.float32(p))
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.float32


# --- reductions ------------------------------------------------------------------------------
X3 = _rand(2, 3, 4)


@pytest.mark.parametrize("op_type,fn", [("reduce_sum", np.sum), ("reduce_mean", np.mean), ("reduce_max", np.max), ("reduce_min", np.min), ("reduce_prod", np.prod)])
@pytest.mark.parametrize(
    "attrs,axes,keep",
    [
        ({"dim": [1]}, (1,), False),
        ({"dim": [-1, 0], "keep_dim": True}, (0, 2), True),
        ({"dim": [0], "reduce_all": True}, None, False),
        ({"dim": []}, None, False),
        ({"dim": [0, 1, 2], "keep_dim": True}, None, True),
    ],
)
def test_reductions(op_type, fn, attrs, axes, keep):
    got = run1(op_type, {"X": X3}, attrs)
    ref = np.asarray(fn(X3.astype(np.float64), axis=axes, keepdims=keep))
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=24 * EPS, atol=24 * EPS * np.abs(X3).max())


def test_reduce_default_dim_is_0_and_int_rules():
    assert run1("reduce_sum", {"X": X3}).shape == (3, 4)
    xi = np.array([[1, 2, 3], [4, 5, 7]], np.int32)
    s = run1("reduce_sum", {"X": xi}, {"dim": [1]}, precision=ANY_PRECISION)
    assert s.dtype == np.int64 and s.tolist() == [6, 16]  # Paddle 3 sums int32 into int64
    m = run1("reduce_mean", {"X": xi}, {"dim": [1]}, precision=ANY_PRECISION)
    assert m.dtype == np.int32 and m.tolist() == [2, 5]
    s = run1("reduce_sum", {"X": X3}, {"dim": [0], "out_dtype": int(VarType.FP64)})
    assert s.dtype == np.float64
    assert run1("reduce_any", {"X": xi > 4}, {"dim": [1]}, precision=ANY_PRECISION).tolist() == [False, True]


def test_mean_and_sum():
    got = run1("mean", {"X": X3})
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, X3.astype(np.float64).mean(), rtol=24 * EPS)
    xs = [X3, 2 * X3, X3 + 1]
    np.testing.assert_array_equal(run1("sum", {"X": xs}), (X3 + 2 * X3) + (X3 + 1))
    with pytest.raises(PdliteError, match="sum"):
        run1("sum", {"X": [X3, X3[0]]})


@pytest.mark.parametrize(
    "attrs,fn_kwargs,shape",
    [
        ({"axis": 1}, {"axis": 1}, (2, 4)),
        ({"axis": -1, "keepdims": True}, {"axis": -1, "keepdims": True}, (2, 3, 1)),
        ({"axis": 0, "flatten": True}, {}, ()),
        ({"axis": 0, "flatten": True, "keepdims": True}, {}, (1, 1, 1)),
    ],
)
@pytest.mark.parametrize("op_type,fn", [("arg_max", np.argmax), ("arg_min", np.argmin)])
def test_arg_max_min(attrs, fn_kwargs, shape, op_type, fn):
    x = np.round(X3 * 2)  # ties: the first index wins
    got = run1(op_type, {"X": x}, attrs)
    ref = np.asarray(fn(x, **fn_kwargs)) if fn_kwargs else np.asarray(fn(x))
    assert got.dtype == np.int64 and got.shape == shape
    np.testing.assert_array_equal(got.reshape(-1), ref.reshape(-1))
    assert run1(op_type, {"X": x}, {**attrs, "dtype": int(VarType.INT32)}).dtype == np.int32


# --- embedding -------------------------------------------------------------------------------
W = _rand(10, 6)


@pytest.mark.parametrize("ids_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("ids_shape", [(7,), (2, 5), (1, 32), ()])
def test_lookup_table_v2(ids_dtype, ids_shape):
    ids = RNG.integers(0, 10, ids_shape).astype(ids_dtype)
    got = run1("lookup_table_v2", {"W": W, "Ids": ids})
    assert got.shape == (*ids_shape, 6) and got.dtype == np.float32
    np.testing.assert_array_equal(got, W[ids])


def test_lookup_table_v2_padding_idx_rows_are_zero():
    ids = np.array([[0, 3, 9], [3, 3, 1]])
    got = run1("lookup_table_v2", {"W": W, "Ids": ids}, {"padding_idx": 3})
    ref = W[ids].copy()
    ref[ids == 3] = 0
    np.testing.assert_array_equal(got, ref)
    assert not np.shares_memory(got, W)
    np.testing.assert_array_equal(run1("lookup_table_v2", {"W": W, "Ids": ids}, {"padding_idx": -1}), W[ids])


def test_lookup_table_v2_out_of_range_ids_fail():
    for bad in (10, -1):
        with pytest.raises(PdliteError, match="Ids"):
            run1("lookup_table_v2", {"W": W, "Ids": np.array([0, bad])})


def test_lookup_table_v1_trailing_one():
    ids = np.array([[2], [0], [9]])
    got = run1("lookup_table", {"W": W, "Ids": ids}, {"padding_idx": 0})
    ref = W[[2, 0, 9]].copy()
    ref[1] = 0
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(PdliteError, match="dim of 1"):
        run1("lookup_table", {"W": W, "Ids": np.array([1, 2])})


# --- against Paddle's legacy executor ---------------------------------------------------------
@pytest.mark.parametrize("xs,ys,tx,ty,out", MATMUL_V2)
def test_matmul_v2_matches_paddle(xs, ys, tx, ty, out):
    x, y = _rand(*xs), _rand(*ys)
    attrs = {"trans_x": tx, "trans_y": ty}
    ref = paddle1("matmul_v2", {"X": x, "Y": y}, attrs)
    got = run1("matmul_v2", {"X": x, "Y": y}, attrs)
    assert got.shape == ref.shape == out
    k = xs[-1] if not (tx and len(xs) > 1) else xs[-2]
    np.testing.assert_allclose(got, ref, rtol=0, atol=2 * k * EPS * max(np.abs(ref).max(), 1))


@pytest.mark.parametrize(
    "xs,ys,attrs",
    [((4,), (4,), {}), ((4,), (4, 5), {}), ((2, 3, 4), (4, 5), {"alpha": 0.125}), ((4, 3), (5, 4), {"transpose_X": True, "transpose_Y": True})],
)
def test_matmul_v1_matches_paddle(xs, ys, attrs):
    x, y = _rand(*xs), _rand(*ys)
    ref = paddle1("matmul", {"X": x, "Y": y}, attrs)
    got = run1("matmul", {"X": x, "Y": y}, attrs)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=8 * 4 * EPS * max(np.abs(ref).max(), 1))


MATH_EXACT = [
    ("scale", {"X": _rand(3, 4)}, {"scale": 0.1767766922712326, "bias": 0.0, "bias_after_scale": True}),
    ("scale", {"X": _rand(3, 4)}, {"scale": 2.0, "bias": 0.5, "bias_after_scale": False}),
    ("scale", {"X": np.array([1, 2, 3], np.int64)}, {"scale": 2.5, "bias": 1.7, "bias_after_scale": True}),
    ("dropout", {"X": _rand(3, 4)}, {"dropout_prob": 0.2, "is_test": True, "dropout_implementation": "downgrade_in_infer"}),
    ("dropout", {"X": _rand(3, 4)}, {"dropout_prob": 0.1, "is_test": True, "dropout_implementation": "upscale_in_train"}),
    ("lookup_table_v2", {"W": W, "Ids": np.array([[1, 0, 4, 9]])}, {"padding_idx": 0}),
    ("lookup_table_v2", {"W": W, "Ids": np.array([[1, 0, 4]], np.int32)}, {"padding_idx": -1}),
    ("arg_max", {"X": np.round(X3 * 2)}, {"axis": 1, "keepdims": False, "flatten": False, "dtype": 3}),
    ("arg_max", {"X": np.round(X3 * 2)}, {"axis": 0, "keepdims": True, "flatten": True, "dtype": 2}),
    ("reduce_max", {"X": X3}, {"dim": [1, 2], "keep_dim": True}),
    ("reduce_sum", {"X": np.array([[1, 2, 3], [4, 5, 7]], np.int32)}, {"dim": [1]}),
    ("reduce_mean", {"X": np.array([[1, 2, 3], [-4, -5, -7]], np.int64)}, {"dim": [1]}),
]


@pytest.mark.parametrize("op_type,ins,attrs", MATH_EXACT, ids=[c[0] for c in MATH_EXACT])
def test_exact_ops_match_paddle(op_type, ins, attrs):
    ref = paddle1(op_type, ins, attrs)
    got = run1(op_type, ins, attrs, precision=None if ins[next(iter(ins))].dtype == np.float32 else ANY_PRECISION)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape, got.dtype, ref.dtype)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    "op_type,attrs,shape",
    [
        ("softmax", {"axis": -1}, (2, 4, 32, 32)),
        ("softmax", {"axis": 1}, (2, 5, 3)),
        ("log_softmax", {"axis": -1}, (4, 10)),
        ("reduce_mean", {"dim": [-1], "keep_dim": True}, (2, 8, 64)),
        ("reduce_sum", {"dim": [], "reduce_all": True}, (3, 50)),
        ("mean", {}, (3, 50)),
    ],
)
def test_float_ops_match_paddle(op_type, attrs, shape):
    x = _rand(*shape) * 3
    ref = paddle1(op_type, {"X": x}, attrs)
    got = run1(op_type, {"X": x}, attrs)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    n = max(x.size // max(ref.size, 1), 2)
    np.testing.assert_allclose(got, ref, rtol=4 * EPS, atol=n * EPS * np.abs(x).max())
