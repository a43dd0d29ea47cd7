"""The native row kernels (layer_norm, softmax) and the native gelu against the NumPy kernels and float64 maths.

Each case runs the op's host kernel with host_native on (C) and off (NumPy, the reference). Tolerance: the
NumPy kernels' own bound, max|native - ref| <= 1e-5 * max(1, max|ref|) (summation order, FMA contraction and a
float32 exp polynomial differ); NaN and Inf land where NumPy puts them. Skipped when the extension is not built.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdlite.kernels.host import native
from pdlite.kernels.host.activation import gelu_exact
from pdlite.kernels.registry import KernelContext
from tests.kernels._util import kernel_class, make_op

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension (_native) is not built")

TOL = 1e-5
ON = KernelContext({"host_native": True})
OFF = KernelContext({"host_native": False})


def rand(*shape: int, seed: int = 0, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale + shift).astype(np.float32)


def check(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype, f"{what}: {got.dtype}{got.shape} != {ref.dtype}{ref.shape}"
    assert np.array_equal(np.isnan(got), np.isnan(ref)), f"{what}: NaN positions differ"
    fin = np.isfinite(ref)
    assert np.array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)]), f"{what}: infinities differ"
    if not fin.any():
        return
    err = float(np.max(np.abs(got[fin].astype(np.float64) - ref[fin])))
    bound = TOL * max(1.0, float(np.max(np.abs(ref[fin]))))
    assert err <= bound, f"{what}: max|native - numpy| = {err:.3g} > {bound:.3g}"


def run_both(op_type: str, ins: dict, attrs: dict, outs: dict[str, int]) -> list[dict]:
    """[native outputs, NumPy outputs] of one op (fresh kernels)."""
    res = []
    for ctx in (ON, OFF):
        k = kernel_class(op_type)(make_op(op_type, ins, attrs, outs))
        k.context = ctx
        k.prepare({})
        res.append(k.run({s: [v] for s, v in ins.items() if v is not None}))
    return res


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=4), axis=st.integers(-4, 3),
       affine=st.sampled_from(["both", "scale", "bias", "none"]), seed=st.integers(0, 99))
def test_layer_norm(shape, axis, affine, seed):
    x = rand(*shape, seed=seed, scale=3.0, shift=2.0)
    begin = axis % len(shape) if axis % len(shape) > 0 or len(shape) == 1 else 1 % len(shape)
    n = int(np.prod(shape[begin:]))
    ins = {"X": x, "Scale": rand(n, seed=seed + 1) if affine in ("both", "scale") else None,
           "Bias": rand(n, seed=seed + 2) if affine in ("both", "bias") else None}
    got, ref = run_both("layer_norm", ins, {"begin_norm_axis": begin, "epsilon": 1e-5},
                        {"Y": 1, "Mean": 1, "Variance": 1})
    for slot in ("Y", "Mean", "Variance"):
        check(got[slot][0], ref[slot][0], f"layer_norm {slot} {shape} axis {begin} {affine}")
    # and against float64 maths
    x2 = x.astype(np.float64).reshape(-1, n)
    y = (x2 - x2.mean(1, keepdims=True)) / np.sqrt(x2.var(1, keepdims=True) + 1e-5)
    if ins["Scale"] is not None:
        y = y * ins["Scale"]
    if ins["Bias"] is not None:
        y = y + ins["Bias"]
    # 1e-5 of the largest output, plus float32's own limit: one rounding of x (eps32 * |x|) is amplified by
    # 1 / sqrt(var + eps) in a row whose values are close together (few elements: [25, 34, 2] has rows of 2)
    cond = np.abs(x2).max(1, keepdims=True) / np.sqrt(x2.var(1, keepdims=True) + 1e-5)
    gain = float(np.max(np.abs(ins["Scale"]))) if ins["Scale"] is not None else 1.0
    bound = 1e-5 * max(1.0, float(np.max(np.abs(y)))) + 4 * float(np.finfo(np.float32).eps) * cond * max(gain, 1.0)
    assert np.all(np.abs(got["Y"][0].reshape(-1, n) - y) <= bound)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 70), min_size=1, max_size=4), seed=st.integers(0, 99),
       scale=st.sampled_from([0.1, 3.0, 30.0]))
def test_softmax_last_axis(shape, seed, scale):
    x = rand(*shape, seed=seed, scale=scale)
    got, ref = run_both("softmax", {"X": x}, {"axis": -1}, {"Out": 1})
    check(got["Out"][0], ref["Out"][0], f"softmax {shape}")
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert np.max(np.abs(got["Out"][0] - e / e.sum(-1, keepdims=True))) <= 1e-6


def test_softmax_special_values():
    """NaN poisons its row; -inf entries get 0; a row of -inf or with +inf is NaN (as in NumPy); tiny ratios are 0."""
    x = np.array([[1, np.nan, 2, 0], [-np.inf, 0, 1, 2], [-np.inf] * 4, [np.inf, 1, 2, 3], [-200, 0, -100, -87.5],
                  [88.0, 89.0, 87.0, -1e30]], np.float32)
    with np.errstate(invalid="ignore"):
        got, ref = run_both("softmax", {"X": x}, {"axis": 1}, {"Out": 1})
    check(got["Out"][0], ref["Out"][0], "softmax special values")
    assert got["Out"][0][1, 0] == 0.0 and got["Out"][0][4, 0] == 0.0


@pytest.mark.parametrize("cols", [16, 32, 37, 1000])
def test_softmax_special_values_in_rows_of_whole_vectors(cols: int):
    """Rows of 16 columns or more take the vector form (whole 16-column chunks, then the rest): a NaN in the first
    chunk, a later chunk or the rest poisons its row (the vector max may pass over it; its exp reaches the sum),
    -inf entries get 0, a row of -inf or with +inf is NaN, as in NumPy."""
    x = rand(8, cols, seed=cols, scale=5.0)
    x[0, 0] = np.nan
    x[1, cols - 1] = np.nan
    x[2, min(20, cols - 1)] = np.nan
    x[3, 3] = -np.inf
    x[4, :] = -np.inf
    x[5, cols // 2] = np.inf
    with np.errstate(invalid="ignore"):
        got, ref = run_both("softmax", {"X": x}, {"axis": -1}, {"Out": 1})
    out = got["Out"][0]
    check(out, ref["Out"][0], f"softmax special values, {cols} columns")
    assert np.isnan(out[[0, 1, 2, 4, 5]]).all() and not np.isnan(out[[3, 6, 7]]).any()
    assert out[3, 3] == 0.0 and abs(float(out[6].sum()) - 1) < 1e-5


def test_gelu_native_over_its_range():
    """The native gelu (fc's and the fused convs' epilogue) against the NumPy gelu and float64 maths, at every
    branch point of erf's polynomials, far out and at the special values."""
    x = np.concatenate([np.linspace(-12, 12, 48001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30, 0.84375 * math.sqrt(2), -0.84375 * math.sqrt(2),
                                  4 * math.sqrt(2), -4 * math.sqrt(2), 3e38, -3e38, np.inf, -np.inf, np.nan],
                                 np.float32)])
    got = x.copy()
    native.bias_act(got.reshape(1, 1, -1), None, native.activation("gelu", {"approximate": False}))
    with np.errstate(invalid="ignore", over="ignore"):
        ref = gelu_exact(x.copy())
    check(got, ref, "gelu native vs numpy")
    fin = np.abs(x) < 1e30
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x[fin].astype(np.float64)])
    assert np.max(np.abs(got[fin] - exact) / np.maximum(np.abs(exact), 1.0)) <= 2e-7
    assert native.activation("gelu", {"approximate": True}) is None  # the tanh form runs the NumPy kernel


def test_row_wrappers_check_buffers():
    with pytest.raises(ValueError, match="layer_norm scale"):
        native._ext.layer_norm(rand(3, 4), rand(5), None, np.empty((3, 4), np.float32), None, None, (3, 4), 1e-5)
    with pytest.raises(ValueError, match="softmax y"):
        native._ext.softmax(rand(3, 4), np.empty(11, np.float32), (3, 4))
