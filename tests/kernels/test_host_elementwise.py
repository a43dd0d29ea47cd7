"""Binary elementwise ops: Paddle's `axis` broadcasting, integer semantics, dtype preservation.

References: NumPy on explicitly reshaped operands (shapes written out by hand in the cases), exact
for + - * / max min in float32 (IEEE-rounded either way); Paddle's legacy executor when installed.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.types import ANY_PRECISION
from pdlite.errors import PdliteError
from pdlite.kernels.host.elementwise import KERNEL_CLASSES
from pdlite.operators.elementwise import BINARY_OPS, BroadcastError, aligned_shapes
from tests.kernels._util import assert_ulp, make_op, paddle1, run1

RNG = np.random.default_rng(0)

# (x shape, y shape, axis, y reshaped for NumPy by hand or None for "x is reshaped", x reshaped)
CASES = [
    ((2, 3, 4, 5), (2, 3, 4, 5), -1, None, None),
    ((2, 3, 4, 5), (4, 5), -1, (4, 5), None),
    ((2, 3, 4, 5), (5,), -1, (5,), None),
    ((2, 3, 4, 5), (3, 4), 1, (1, 3, 4, 1), None),
    ((2, 3, 4, 5), (3, 4), -2, (1, 3, 4, 1), None),  # axis < 0: |4-2| + axis + 1 = 1
    ((2, 3, 4, 5), (2,), 0, (2, 1, 1, 1), None),
    ((2, 3, 4, 5), (3,), 1, (1, 3, 1, 1), None),
    ((2, 3, 4, 5), (3, 1), 1, (1, 3, 1, 1), None),  # bias of a conv-like op, kept with its trailing 1
    ((2, 4, 3), (3, 1), 2, (1, 1, 3), None),  # trailing singular dim trimmed to fit (old Paddle; 3.x crashes)
    ((2, 3), (1, 3), 1, (1, 3), None),  # equal ranks: axis is irrelevant (Paddle 3 insists on -1 or 0)
    ((2, 3, 4, 5), (1, 3, 1, 1), -1, (1, 3, 1, 1), None),
    ((2, 1, 4), (3, 1), -1, (3, 1), None),  # NumPy-style both ways
    ((2, 3, 4), (), -1, (), None),  # 0-D Y
    ((), (2, 3), -1, None, ()),  # 0-D X
    ((3,), (2, 3, 4), 1, None, (1, 3, 1)),  # X smaller than Y: X aligned into Y at axis
    ((4,), (2, 3, 4), -1, None, (4,)),
    ((3, 4), (2, 3, 4, 5), 1, None, (1, 3, 4, 1)),
]
NUMPY_OPS = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": np.divide,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
}


def _operands(xs, ys, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)
    y[np.abs(y) < 0.1] = 0.5  # keep divisions tame
    return np.asarray(x), np.asarray(y)


def _reference(fn, x, y, y_as, x_as):
    xx = x.reshape(x_as) if x_as is not None else x
    yy = y.reshape(y_as) if y_as is not None else y
    return np.asarray(fn(xx, yy))


@pytest.mark.parametrize("op_type", sorted(NUMPY_OPS))
@pytest.mark.parametrize("xs,ys,axis,y_as,x_as", CASES)
def test_float32_matches_numpy_exactly(op_type, xs, ys, axis, y_as, x_as):
    x, y = _operands(xs, ys)
    got = run1(op_type, {"X": x, "Y": y}, {"axis": axis})
    ref = _reference(NUMPY_OPS[op_type], x, y, y_as, x_as)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    "xs,ys,axis,xo,yo,out",
    [
        ((2, 3, 4, 5), (3, 4), 1, (2, 3, 4, 5), (1, 3, 4, 1), (2, 3, 4, 5)),
        ((2, 3, 4, 5), (3, 4), -2, (2, 3, 4, 5), (1, 3, 4, 1), (2, 3, 4, 5)),
        ((2, 3, 4, 5), (5,), -1, (2, 3, 4, 5), (1, 1, 1, 5), (2, 3, 4, 5)),
        ((2, 4, 3), (3, 1), 2, (2, 4, 3), (1, 1, 3), (2, 4, 3)),
        ((3,), (2, 3, 4), 1, (1, 3, 1), (2, 3, 4), (2, 3, 4)),
        ((2, 1, 4), (3, 1), -1, (2, 1, 4), (1, 3, 1), (2, 3, 4)),
        ((1, 5), (4, 1), -1, (1, 5), (4, 1), (4, 5)),
        ((2, 3), (), -1, (2, 3), (1, 1), (2, 3)),
        ((0, 3), (3,), -1, (0, 3), (1, 3), (0, 3)),
    ],
)
def test_aligned_shapes(xs, ys, axis, xo, yo, out):
    assert aligned_shapes(xs, ys, axis) == (xo, yo, out)


@pytest.mark.parametrize(
    "xs,ys,axis",
    [((2, 3), (4,), -1), ((2, 3, 4), (3,), 0), ((2, 3, 4), (3, 4), 2), ((2, 3), (2, 3, 4, 5, 6), 3)],
)
def test_incompatible_shapes_fail_in_shape_inference(xs, ys, axis):
    with pytest.raises(BroadcastError):
        aligned_shapes(xs, ys, axis)
    x, y = _operands(xs, ys)
    with pytest.raises(PdliteError, match="elementwise_add"):
        run1("elementwise_add", {"X": x, "Y": y}, {"axis": axis})


def test_default_axis_is_minus_one():
    op = make_op("elementwise_mul", {"X": np.zeros(2), "Y": np.zeros(2)})
    assert op.attrs["axis"] == -1


@pytest.mark.parametrize("op_type", ["elementwise_pow", "elementwise_floordiv", "elementwise_mod"])
def test_other_float_ops_match_numpy(op_type):
    x = RNG.uniform(0.5, 3.0, (3, 4, 5)).astype(np.float32)
    y = RNG.uniform(0.5, 3.0, (4, 1)).astype(np.float32)
    x[0, 0, :] *= -1
    got = run1(op_type, {"X": x, "Y": y}, {"axis": 1})
    fn = {"elementwise_pow": np.power, "elementwise_floordiv": np.floor_divide, "elementwise_mod": np.mod}[op_type]
    with np.errstate(invalid="ignore"):
        ref = fn(x.astype(np.float64), y.reshape(1, 4, 1).astype(np.float64))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)


# integer semantics of Paddle's CPU functors, written out by hand
XI = np.array([-7, 7, -7, 7, 6, 0, -1], dtype=np.int64)
YI = np.array([2, -2, -2, 2, 3, 5, 4], dtype=np.int64)
INT_EXPECTED = {
    "elementwise_div": [-3, -3, 3, 3, 2, 0, 0],  # C++ truncation toward zero
    "elementwise_floordiv": [-4, -4, 3, 3, 2, 0, -1],  # floor
    "elementwise_mod": [1, -1, -1, 1, 0, 0, 3],  # sign of the divisor, like Python
    "elementwise_add": [-5, 5, -9, 9, 9, 5, 3],
    "elementwise_max": [2, 7, -2, 7, 6, 5, 4],
}


@pytest.mark.parametrize("op_type", sorted(INT_EXPECTED))
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_semantics(op_type, dtype):
    got = run1(op_type, {"X": XI.astype(dtype), "Y": YI.astype(dtype)}, precision=ANY_PRECISION)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.array(INT_EXPECTED[op_type], dtype=dtype))


def test_integer_pow_truncates_like_cpp():
    got = run1("elementwise_pow", {"X": np.array([2, 3, -2, 2]), "Y": np.array([3, 2, 3, -1])})
    np.testing.assert_array_equal(got, [8, 9, -8, 0])
    assert got.dtype == np.int64


@pytest.mark.parametrize("op_type", ["elementwise_div", "elementwise_floordiv", "elementwise_mod"])
def test_integer_division_by_zero_is_an_error(op_type):
    with pytest.raises(PdliteError, match="division by zero"):
        run1(op_type, {"X": np.array([1, 2], np.int32), "Y": np.array([1, 0], np.int32)})


def test_float_division_by_zero_gives_ieee_values():
    got = run1("elementwise_div", {"X": np.float32([1, -1, 0]), "Y": np.float32([0, 0, 0])})
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


def test_zero_d_operands_give_arrays():
    got = run1("elementwise_add", {"X": np.array(1.5, np.float32), "Y": np.array(2.0, np.float32)})
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32 and got == 3.5


def test_result_keeps_x_dtype_and_shape_arithmetic():
    shape = np.array([4, 6], np.int32)
    got = run1("elementwise_mul", {"X": shape, "Y": np.array([2], np.int32)}, precision=ANY_PRECISION)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [8, 12])


def test_every_op_has_fp32_and_any_kernels():
    from pdlite.kernels.registry import kernels_for

    for op in BINARY_OPS:
        precisions = {d.key.precision.name for d in kernels_for(op)}
        assert {"FP32", "Any"} <= precisions, op
    assert set(KERNEL_CLASSES) == set(BINARY_OPS)


# --- against Paddle's legacy executor ---------------------------------------------------------
@pytest.mark.parametrize("op_type", BINARY_OPS)
@pytest.mark.parametrize("xs,ys,axis", [((2, 3, 4, 5), (3, 4), 1), ((2, 3, 4), (4,), -1), ((3,), (2, 3, 4), 1)])
def test_float32_matches_paddle(op_type, xs, ys, axis):
    x, y = _operands(xs, ys, seed=1)
    if op_type == "elementwise_pow":
        x = np.abs(x) + np.float32(0.1)
    ref = paddle1(op_type, {"X": x, "Y": y}, {"axis": axis})
    got = run1(op_type, {"X": x, "Y": y}, {"axis": axis})
    assert got.dtype == ref.dtype == np.float32
    assert_ulp(got, ref, 1 if op_type == "elementwise_pow" else 0, op_type)


@pytest.mark.parametrize("op_type", BINARY_OPS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integers_match_paddle(op_type, dtype):
    x = XI.astype(dtype)
    y = np.abs(YI).astype(dtype) if op_type == "elementwise_pow" else YI.astype(dtype)
    ref = paddle1(op_type, {"X": x, "Y": y}, {"axis": -1})
    got = run1(op_type, {"X": x, "Y": y}, precision=ANY_PRECISION)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def test_float_floordiv_and_mod_corner_values_match_paddle():
    x = np.float32([1.0, -7.5, 7.5, 0.3, -0.3, 5.0, -5.0])
    y = np.float32([0.1, 2.0, -2.0, 0.1, 0.1, 2.5, 2.5])
    for op_type in ("elementwise_floordiv", "elementwise_mod"):
        ref = paddle1(op_type, {"X": x, "Y": y}, {"axis": -1})
        got = run1(op_type, {"X": x, "Y": y})
        np.testing.assert_array_equal(got, ref, err_msg=op_type)
