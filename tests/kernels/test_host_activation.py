"""Activations and unary math ops against float64 NumPy/math references and Paddle.

Tolerances: piecewise-linear ops (relu, relu6, hard_sigmoid, hard_swish, leaky_relu, clip, ...)
must equal a float32 NumPy evaluation of the same formula bit for bit; transcendental ones must
be within 4 float32 eps * max(1, |x|, |ref|) of the float64 reference (the |x| term covers the
cancellation that Paddle's own formulas have, e.g. 1 + erf(x) in gelu or log(1 + exp(x)) in mish). Against Paddle's CPU kernels
(which use Eigen/MKL approximations of exp, tanh, erf, ...), the same exact/4-eps split holds.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from pdlite.errors import PdliteError
from pdlite.kernels.host.activation import KERNEL_CLASSES, erf
from pdlite.operators.activation import UNARY_OPS
from pdlite.operators.registry import OPS, ShapeContext
from tests.kernels._util import make_op, paddle1, run1

EPS32 = float(np.finfo(np.float32).eps)
RNG = np.random.default_rng(0)
X = np.concatenate(
    [
        (RNG.standard_normal(4018) * 4).astype(np.float32),
        np.float32([0.0, -0.0, 1e-6, -1e-6, 2.999, 3.0, -3.0, 6.0, 6.5, -6.0, 25.0, -25.0, 80.0, -80.0]),
    ]
).reshape(2, 7, -1)
POS = np.abs(X) + np.float32(1e-3)
UNIT = (np.tanh(X) * np.float32(0.99)).astype(np.float32)  # inside (-1, 1)
PROB = (np.float32(0.5) + UNIT / np.float32(2)).astype(np.float32)  # inside (0, 1)

_erf64 = np.vectorize(math.erf)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


# op -> (attrs, float64 reference, input)
REF64 = {
    "sigmoid": ({}, _sig, X),
    "tanh": ({}, np.tanh, X),
    "swish": ({"beta": 1.7}, lambda x: x * _sig(x), X),  # beta is ignored, as Paddle 3.x does
    "silu": ({}, lambda x: x * _sig(x), X),
    "gelu": ({}, lambda x: 0.5 * x * (1 + _erf64(x / math.sqrt(2))), X),
    "exp": ({}, np.exp, X / 4),
    "log": ({}, np.log, POS),
    "log2": ({}, np.log2, POS),
    "log10": ({}, np.log10, POS),
    "log1p": ({}, np.log1p, POS),
    "sqrt": ({}, np.sqrt, POS),
    "rsqrt": ({}, lambda x: 1 / np.sqrt(x), POS),
    "sin": ({}, np.sin, X),
    "cos": ({}, np.cos, X),
    "erf": ({}, _erf64, X),
    "softplus": ({"beta": 2.0, "threshold": 10.0}, lambda x: _softplus(x, 2.0, 10.0), X),
    "mish": ({}, lambda x: x * np.tanh(_softplus(x)), X),
    "elu": ({"alpha": 0.7}, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), X),
    "selu": ({}, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)), X),
    "celu": ({"alpha": 1.5}, lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5)), X),
    "logsigmoid": ({}, lambda x: -np.logaddexp(0, -x), X),
    "tanh_shrink": ({}, lambda x: x - np.tanh(x), X),
    "pow": ({"factor": 2.5}, lambda x: x**2.5, POS),
    "tan": ({}, np.tan, np.clip(X / 4, -1.4, 1.4)),
    "asin": ({}, np.arcsin, UNIT),
    "acos": ({}, np.arccos, UNIT),
    "atan": ({}, np.arctan, X),
    "sinh": ({}, np.sinh, X / 4),
    "cosh": ({}, np.cosh, X / 4),
    "asinh": ({}, np.arcsinh, X),
    "acosh": ({}, np.arccosh, POS + np.float32(1)),
    "atanh": ({}, np.arctanh, UNIT),
    "expm1": ({}, np.expm1, X / 4),
    "logit": ({"eps": 1e-3}, lambda x: np.log(np.clip(x, 1e-3, 1 - 1e-3) / (1 - np.clip(x, 1e-3, 1 - 1e-3))),
              PROB),
    "stanh": ({"scale_a": 0.5, "scale_b": 2.0}, lambda x: 2.0 * np.tanh(0.5 * x), X),
}


def _tanh_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("op_type", sorted(REF64))
def test_transcendental_against_float64(op_type):
    attrs, ref_fn, x = REF64[op_type]
    got = run1(op_type, {"X": x}, attrs)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == x.shape
    err = np.abs(got.astype(np.float64) - ref)
    tol = 4 * EPS32 * np.maximum(np.maximum(1.0, np.abs(ref)), np.abs(x))
    assert np.all(err <= tol), f"{op_type}: worst error {err.max():.3g} at x={x.reshape(-1)[np.argmax(err)]}"


def test_gelu_tanh_approximation():
    got = run1("gelu", {"X": X}, {"approximate": True})
    ref = _tanh_gelu(X.astype(np.float64))
    assert np.all(np.abs(got - ref) <= 4 * EPS32 * np.maximum(np.maximum(1.0, np.abs(ref)), np.abs(X)))
    # it is a different function from the erf form (differs by up to ~5e-4)
    assert np.max(np.abs(got - run1("gelu", {"X": X}))) > 1e-4


# piecewise-linear ops: bit-exact against the same formula in float32
def _f32(v):
    return np.float32(v)


EXACT = {
    "relu": ({}, lambda x: np.maximum(x, _f32(0))),
    "relu6": ({}, lambda x: np.minimum(np.maximum(x, _f32(0)), _f32(6))),
    "hard_sigmoid": (
        {"slope": 0.16666670143604279, "offset": 0.5},
        lambda x: np.clip(x * _f32(0.16666670143604279) + _f32(0.5), _f32(0), _f32(1)),
    ),
    "hard_swish": ({}, lambda x: np.clip(x + _f32(3), _f32(0), _f32(6)) * x / _f32(6)),
    "leaky_relu": ({"alpha": 0.1}, lambda x: np.where(x < 0, x * _f32(0.1), x)),
    "abs": ({}, np.abs),
    "square": ({}, lambda x: x * x),
    "floor": ({}, np.floor),
    "ceil": ({}, np.ceil),
    "sign": ({}, np.sign),
    "reciprocal": ({}, lambda x: _f32(1) / x),
    "softsign": ({}, lambda x: x / (_f32(1) + np.abs(x))),
    "softshrink": ({"lambda": 0.7}, lambda x: np.where(x > 0.7, x - _f32(0.7), np.where(x < -0.7, x + _f32(0.7), 0))),
    "hard_shrink": ({"threshold": 0.7}, lambda x: np.where(np.abs(x) > _f32(0.7), x, 0)),
    "thresholded_relu": ({"threshold": 0.7}, lambda x: np.where(x > _f32(0.7), x, 0)),
    "brelu": ({"t_min": -1.5, "t_max": 2.0}, lambda x: np.clip(x, _f32(-1.5), _f32(2))),
    "hardtanh": ({"t_min": -1.0, "t_max": 1.0}, lambda x: np.clip(x, _f32(-1), _f32(1))),
    "trunc": ({}, np.trunc),
}


@pytest.mark.parametrize("op_type", sorted(EXACT))
def test_piecewise_ops_exact(op_type):
    attrs, fn = EXACT[op_type]
    got = run1(op_type, {"X": X}, attrs)
    with np.errstate(all="ignore"):
        ref = np.asarray(fn(X)).astype(np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)


def test_every_unary_op_has_a_kernel_and_a_test():
    assert set(KERNEL_CLASSES) == set(UNARY_OPS) - {"pow"}
    tested = set(REF64) | set(EXACT) | {"round", "relu6"}
    assert set(UNARY_OPS) <= tested


@pytest.mark.parametrize(
    "op_type,defaults",
    [
        ("relu6", {"threshold": 6.0}),
        ("hard_sigmoid", {"slope": 0.2, "offset": 0.5}),
        ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
        ("leaky_relu", {"alpha": 0.02}),
        ("gelu", {"approximate": False}),
        ("brelu", {"t_min": 0.0, "t_max": 24.0}),
        ("softplus", {"beta": 1.0, "threshold": 20.0}),
    ],
)
def test_paddle_defaults(op_type, defaults):
    assert make_op(op_type, {"X": X}).attrs == defaults


def test_defaults_do_not_override_model_attrs():
    got = run1("leaky_relu", {"X": -np.ones(3, np.float32)}, {"alpha": 0.5})
    np.testing.assert_array_equal(got, [-0.5, -0.5, -0.5])


@pytest.mark.parametrize("op_type, attrs", [("relu6", {"threshold": 2.0}), ("swish", {"beta": 2.0}),
                                            ("hard_swish", {"threshold": 5.0, "scale": 5.0, "offset": 2.0})])
def test_attributes_paddle3_ignores_are_fixed(op_type, attrs):
    """Paddle Inference 3.x (the oracle) hard-codes these: pdlite's op definitions fix them for every target."""
    assert run1(op_type, {"X": X}, attrs).tolist() == run1(op_type, {"X": X}).tolist()


def test_erf_is_float32_accurate():
    x = np.linspace(-5, 5, 400_001, dtype=np.float32)
    ref = _erf64(x.astype(np.float64))
    got = erf(x)
    assert got.dtype == np.float32
    ulp = np.spacing(np.abs(got)).astype(np.float64)
    ulp[got == 0] = np.spacing(np.float32(0))
    # within 1.25 ulp everywhere (max abs error ~7e-8, below float32 eps)
    assert np.max(np.abs(got - ref) / ulp) <= 1.25
    assert np.max(np.abs(got - ref)) < EPS32
    tiny = np.float32([1e-30, -1e-20, 1e-8, 0.0])
    np.testing.assert_allclose(erf(tiny), 2 / math.sqrt(math.pi) * tiny.astype(np.float64), rtol=EPS32)
    special = erf(np.float32([np.inf, -np.inf, np.nan, 10.0, -4.5]))
    assert list(special[:2]) == [1.0, -1.0] and np.isnan(special[2]) and list(special[3:]) == [1.0, -1.0]
    assert np.signbit(erf(np.float32([-0.0]))[0])


def test_erf_float64_is_exact():
    x = np.array([-2.5, -0.3, 0.0, 0.7, 3.1])
    np.testing.assert_array_equal(erf(x), _erf64(x))


@pytest.mark.parametrize("op_type", ["gelu", "sigmoid", "hard_swish", "relu"])
def test_dtype_is_preserved(op_type):
    for dt in (np.float32, np.float64):
        got = run1(op_type, {"X": X.astype(dt)})
        assert got.dtype == dt


def test_zero_d_input():
    got = run1("hard_swish", {"X": np.array(1.0, np.float32)})
    assert got.shape == () and got.dtype == np.float32 and got == np.float32(4.0 / 6.0)


def test_round_half_to_even_like_paddle3():
    x = np.float32([0.5, 1.5, 2.5, -0.5, -2.5, 6.5, 0.49999997, -1.4, 7.0])
    np.testing.assert_array_equal(run1("round", {"X": x}), np.float32([0, 2, 2, -0.0, -2, 6, 0, -1, 7]))
    np.testing.assert_array_equal(run1("round", {"X": np.float32([1.25, -0.75])}, {"decimals": 1}), np.float32([1.2, -0.8]))


def test_pow_factor_tensor_overrides_attr():
    x = POS[0, 0, :10]
    got = run1("pow", {"X": x, "FactorTensor": np.float32([3.0])}, {"factor": 2.0})
    np.testing.assert_allclose(got, x.astype(np.float64) ** 3, rtol=4 * EPS32)


def test_clip_attrs_and_tensors():
    np.testing.assert_array_equal(run1("clip", {"X": X}, {"min": -1.0, "max": 2.0}), np.clip(X, -1, 2))
    got = run1("clip", {"X": X, "Min": np.float32([0.5]), "Max": np.float32([0.75])}, {"min": -1.0, "max": 2.0})
    np.testing.assert_array_equal(got, np.clip(X, np.float32(0.5), np.float32(0.75)))
    with pytest.raises(PdliteError, match="clip"):
        run1("clip", {"X": X}, {"min": 2.0, "max": 1.0})


X4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize(
    "mode,fmt,alpha,alpha_b",
    [
        ("all", "NCHW", np.float32([0.25]), np.float32(0.25)),
        ("channel", "NCHW", np.float32([0.1, 0.2, 0.3]), np.float32([0.1, 0.2, 0.3]).reshape(1, 3, 1, 1)),
        ("channel", "NHWC", np.float32([0.1, 0.2, 0.3, 0.4, 0.5]), np.float32([0.1, 0.2, 0.3, 0.4, 0.5])),
        ("element", "NCHW", np.arange(60, dtype=np.float32) / 60, (np.arange(60, dtype=np.float32) / 60).reshape(3, 4, 5)),
    ],
)
def test_prelu(mode, fmt, alpha, alpha_b):
    got = run1("prelu", {"X": X4, "Alpha": alpha}, {"mode": mode, "data_format": fmt})
    np.testing.assert_array_equal(got, np.where(X4 > 0, X4, X4 * alpha_b))


def test_prelu_shape_checks():
    alpha = np.zeros(4, np.float32)
    op = make_op("prelu", {"X": X4, "Alpha": alpha}, {"mode": "channel"})
    with pytest.raises(PdliteError, match="one per channel"):
        OPS["prelu"].infer_shape(ShapeContext(op, {"X": [X4], "Alpha": [alpha]}))


# --- against Paddle's legacy executor ---------------------------------------------------------
PADDLE_EXACT = [
    ("relu", {}),
    ("relu6", {}),
    ("hard_sigmoid", {"slope": 0.2, "offset": 0.5}),
    ("hard_sigmoid", {"slope": 0.16666670143604279, "offset": 0.5}),
    ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    ("leaky_relu", {"alpha": 0.1}),
    ("square", {}),
    ("abs", {}),
    ("softsign", {}),
    ("round", {}),
    ("floor", {}),
    ("reciprocal", {}),
    ("brelu", {"t_min": 1.0, "t_max": 2.0}),
    ("softshrink", {"lambda": 0.7}),
    ("hard_shrink", {"threshold": 0.7}),
    ("thresholded_relu", {"threshold": 0.7}),
]
PADDLE_CLOSE = [
    ("gelu", {"approximate": False}),
    ("gelu", {"approximate": True}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("swish", {"beta": 1.0}),
    ("silu", {}),
    ("exp", {}),
    ("sqrt", {}),
    ("rsqrt", {}),
    ("log", {}),
    ("erf", {}),
    ("softplus", {"beta": 1.0, "threshold": 20.0}),
    ("mish", {"threshold": 20.0}),
    ("elu", {"alpha": 1.0}),
    ("selu", {"scale": 1.0507009873554805, "alpha": 1.6732632423543772}),
    ("celu", {"alpha": 1.5}),
    ("logsigmoid", {}),
    ("pow", {"factor": 3.0}),
    ("sin", {}),
    ("cos", {}),
    ("tanh_shrink", {}),
]


def _input_for(op_type):
    return POS if op_type in ("sqrt", "rsqrt", "log") else (X / 4 if op_type == "exp" else X)


@pytest.mark.parametrize("op_type,attrs", PADDLE_EXACT)
def test_exact_ops_match_paddle(op_type, attrs):
    x = _input_for(op_type)
    ref = paddle1(op_type, {"X": x}, attrs)
    got = run1(op_type, {"X": x}, attrs)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("op_type,attrs", PADDLE_CLOSE)
def test_transcendental_ops_match_paddle(op_type, attrs):
    x = _input_for(op_type)
    ref = paddle1(op_type, {"X": x}, attrs)
    got = run1(op_type, {"X": x}, attrs)
    assert got.dtype == ref.dtype
    err = np.abs(got.astype(np.float64) - ref)
    tol = 4 * EPS32 * np.maximum(np.maximum(1.0, np.abs(ref)), np.abs(x))
    assert np.all(err <= tol), f"{op_type}: worst {np.max(err / tol):.3g} x tolerance"


def test_prelu_matches_paddle():
    for mode, alpha in (("all", np.float32([0.25])), ("channel", np.float32([0.1, 0.2, 0.3]))):
        ref = paddle1("prelu", {"X": X4, "Alpha": alpha}, {"mode": mode, "data_format": "NCHW"})
        got = run1("prelu", {"X": X4, "Alpha": alpha}, {"mode": mode})
        np.testing.assert_array_equal(got, ref)
