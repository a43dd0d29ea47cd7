"""The native int8 depthwise conv (native_src/qdepthwise.c via quant_native.qdwconv) against NumPy in int64.

Integer sums: EXACT equality with the int64 reference (multiplier 1, no bias: the float32 outputs hold the sums
exactly) over kernel sizes 3 / 5 / 7, strides 1-3, dilations, padding, odd widths (tiles of 16 and 64 outputs and
their tails), both round types, batches; on every instruction set this CPU runs (vnni / avx2 / baseline, forced in a
subprocess through PDLITE_NATIVE_ISA; at vnni the integer window form covers strides and dilations with SW + DW <= 5,
the float-sums form the rest, as at avx2 and baseline). Epilogue (scales, bias, residual, activations, output QDQ,
pointwise chain): qconv's, so the same checks as tests/kernels/test_host_int8.py.

The window form (vnni) against the float-sums form (the fp32 depthwise kernel on the codes as floats, the form every
depthwise conv ran in before it, native._set_qdw_integer(False)): the SAME bits, floats and codes, over the shapes of
MobileNetV3-small and the cases above, every activation the int8 passes fuse, residual, output QDQ, chain (the window
form's codes written straight from the sums' registers where nothing follows the activation).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.kernels.host.conv import numpy_act_inplace
from pdlite.kernels.host.quant import dequantize, quantize
from tests.kernels.test_host_int8 import FORCE, _chain_program, run_forced_isa

pytestmark = pytest.mark.skipif(not qn.available(), reason="native int8 kernels unavailable in this build "
                                "(python setup.py build_ext --inplace compiles them)")

# (N, C, H, W, K, S, D, P, round_type)
CASES = [
    (1, 5, 13, 37, 3, 1, 1, 1, 0),  # 3x3 same, a tile of 16 and a tail
    (2, 3, 20, 70, 3, 2, 1, 1, 1),  # stride 2, batch, round_type 1
    (1, 4, 9, 9, 5, 1, 1, 2, 0),  # 5x5 (two words per kernel row)
    (1, 3, 17, 130, 5, 2, 1, 2, 0),  # 5x5 stride 2, 65 outputs a row (4 tiles and one)
    (1, 3, 11, 21, 3, 1, 2, 2, 1),  # dilation 2
    (1, 2, 7, 7, 7, 3, 1, 3, 0),  # 7x7 stride 3: the plain loops on every ISA (SW + DW > 5)
    (1, 3, 12, 12, 3, 3, 3, 1, 0),  # stride 3, dilation 3: plain loops
    (1, 6, 64, 64, 3, 1, 1, 0, 0),  # no padding, 62 outputs a row
]


def _geo(case: tuple) -> tuple[int, int, tuple]:
    n, c, h, w, k, s, d, p, rt = case
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    return oh, ow, ((k, k), (s, s), (d, d), (p, p))


def _data(case: tuple, seed: int) -> tuple[np.ndarray, np.ndarray, qn.QParam]:
    n, c, h, w, k = case[:5]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, h, w)) * 2).astype(np.float32)
    x.flat[::7] = 1.5 * 3.0 / 127  # exact ties of the grid
    x.flat[3] = 40.0  # clamped
    w8 = rng.integers(-128, 128, (c, 1, k, k)).astype(np.int8)
    return x, w8, qn.QParam.of(3.0, case[8])


def _sums(case: tuple, seed: int) -> np.ndarray:
    x, w8, qp = _data(case, seed)
    oh, ow, geo = _geo(case)
    w, comp = qn.dw_weights(w8)
    return qn.qdwconv(x, w, comp, np.ones(w.shape[0], np.float32), None, oh, ow, *geo, qp)


def _reference(case: tuple, seed: int) -> np.ndarray:
    x, w8, qp = _data(case, seed)
    oh, ow, geo = _geo(case)
    ref = qn.reference_dw_sums(x, qn.dw_weights(w8)[0], oh, ow, *geo, qp)
    assert np.abs(ref).max() < 2**24
    return ref.reshape(x.shape[0], x.shape[1], oh, ow)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_depthwise_sums_exact(i: int) -> None:
    np.testing.assert_array_equal(_sums(CASES[i], i).astype(np.int64), _reference(CASES[i], i))


_CHILD = """
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
from tests.kernels import test_host_int8_depthwise as t
from pdlite.kernels.host import quant_native as qn
np.savez(sys.argv[1], isa=qn.int8_isa(), **{f"dw{i}": t._sums(c, i) for i, c in enumerate(t.CASES)})
"""


@pytest.mark.parametrize("isa", sorted(FORCE))
def test_every_int8_isa_gives_the_exact_depthwise_sums(isa: str, tmp_path: Path) -> None:
    z = run_forced_isa(isa, _CHILD, tmp_path)
    for i, c in enumerate(CASES):
        np.testing.assert_array_equal(z[f"dw{i}"].astype(np.int64), _reference(c, i), err_msg=f"{isa} {c}")


@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("out_q", [False, True])
def test_depthwise_epilogue(act: str, residual: bool, out_q: bool) -> None:
    case = CASES[3]
    x, w8, qp = _data(case, 3)
    oh, ow, geo = _geo(case)
    c = x.shape[1]
    rng = np.random.default_rng(4)
    mul = (rng.uniform(0.5, 2.0, c) * 1e-3).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    res = rng.standard_normal((x.shape[0], c, oh, ow)).astype(np.float32) if residual else None
    defaults = {"relu6": {"threshold": 6.0}, "hard_swish": {"offset": 3.0, "threshold": 6.0, "scale": 6.0}}
    code = native.activation(act, defaults.get(act, {}))
    oq = qn.out_qdq(0.8, 0) if out_q else None
    w, comp = qn.dw_weights(w8)
    got = qn.qdwconv(x, w, comp, mul, bias, oh, ow, *geo, qp, code, res, oq)
    sums = qn.reference_dw_sums(x, w, oh, ow, *geo, qp).astype(np.float32).reshape(got.shape)
    ref = sums * mul.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)
    if res is not None:
        ref += res
    numpy_act_inplace(ref, code)
    if out_q:  # where float rounding of the epilogue moves a value across a rounding edge: one step of 0.8 / 127
        ref = dequantize(quantize(ref, np.float32(0.8), 127, 0), np.float32(0.8), 127)
        step = np.float32(0.8) / 127
        assert np.abs(got - ref).max() <= step * 1.001 and np.mean(got != ref) < 1e-3
    else:
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * np.abs(ref).max())


def test_depthwise_chain_in_the_epilogue_equals_the_chain_after_it() -> None:
    case = CASES[0]
    x, w8, qp = _data(case, 5)
    oh, ow, geo = _geo(case)
    rng = np.random.default_rng(6)
    mul = (rng.uniform(0.5, 2.0, x.shape[1]) * 1e-3).astype(np.float32)
    prog = _chain_program(rng, x.shape[1])
    w, comp = qn.dw_weights(w8)
    plain = qn.qdwconv(x, w, comp, mul, None, oh, ow, *geo, qp, out_q=qn.out_qdq(0.8, 0))
    got = qn.qdwconv(x, w, comp, mul, None, oh, ow, *geo, qp, out_q=qn.out_qdq(0.8, 0), chain=prog)
    np.testing.assert_array_equal(got, qn.chain_numpy(plain, prog))


def test_depthwise_bad_buffers_are_refused() -> None:
    x, w8, qp = _data(CASES[0], 0)
    oh, ow, geo = _geo(CASES[0])
    w, comp = qn.dw_weights(w8)
    with pytest.raises(ValueError, match="qdwconv int8 weights"):
        qn.qdwconv(x, np.ascontiguousarray(w[:, :4]), comp, np.ones(5, np.float32), None, oh, ow, *geo, qp)
    with pytest.raises(ValueError, match="qdwconv multipliers"):
        qn.qdwconv(x, w, comp, np.ones(4, np.float32), None, oh, ow, *geo, qp)


# (N, C, H, W, K, S, D, P, round_type): MobileNetV3-small's and MobileNetV1's depthwise shapes (channels cut), and
# small / odd maps (one window vector a row, a tail of one output)
FORM_CASES = CASES + [
    (1, 16, 112, 112, 3, 2, 1, 1, 0),
    (1, 8, 28, 28, 3, 1, 1, 1, 0),
    (1, 8, 28, 28, 5, 2, 1, 2, 0),
    (1, 8, 14, 14, 5, 1, 1, 2, 0),
    (1, 9, 14, 14, 5, 2, 1, 2, 1),
    (2, 7, 7, 7, 5, 1, 1, 2, 0),
    (1, 5, 7, 7, 3, 1, 1, 1, 0),
    (1, 3, 1, 17, 3, 1, 1, 1, 0),
    (1, 3, 5, 3, 3, 3, 1, 1, 0),  # stride 3, one group of taps: the window form
]


def _forms(case: tuple, seed: int, **kw) -> tuple[np.ndarray, np.ndarray]:
    """qdwconv's output in the window form wherever it applies (at vnni; _set_qdw_integer(2)) and in the float-sums
    form (0)."""
    x, w8, qp = _data(case, seed)
    oh, ow, geo = _geo(case)
    w, comp = qn.dw_weights(w8)
    rng = np.random.default_rng(seed + 100)
    c = x.shape[1]
    mul = (rng.uniform(0.5, 2.0, c) * 2e-3 / w.shape[1]).astype(np.float32)  # (values over the codes' grid)
    bias = (rng.standard_normal(c) * 0.3).astype(np.float32)
    if kw.pop("codes_in", False):
        x = qn.codes_of(x, qp)
    if kw.pop("residual", False):
        kw["residual"] = rng.standard_normal((x.shape[0], c, oh, ow)).astype(np.float32)
    outs = []
    for form in (2, 0):
        before = native._ext._set_qdw_integer(form)
        try:
            outs.append(qn.qdwconv(x, w, comp, mul, bias, oh, ow, *geo, qp, **kw))
        finally:
            native._ext._set_qdw_integer(before)
    return outs[0], outs[1]


_ACTS = {"": {}, "relu": {}, "relu6": {"threshold": 6.0}, "leaky_relu": {"alpha": 0.1},
         "hard_swish": {"offset": 3.0, "threshold": 6.0, "scale": 6.0}}


@pytest.mark.parametrize("i", range(len(FORM_CASES)))
@pytest.mark.parametrize("act", sorted(_ACTS))
def test_window_form_gives_the_float_sums_forms_codes(i: int, act: str) -> None:
    code = native.activation(act, _ACTS[act])
    win, fsum = _forms(FORM_CASES[i], i, act=code, codes_in=True, codes=qn.QParam.of(1.7, 0))
    assert win.dtype == np.uint8 and len(np.unique(win)) > min(16, win.size // 8)  # (not all clipped)
    np.testing.assert_array_equal(win, fsum)


@pytest.mark.parametrize("i", range(len(FORM_CASES)))
@pytest.mark.parametrize("how", ["floats", "residual", "out_q", "chain", "codes_rt1", "float_in"])
def test_window_form_gives_the_float_sums_forms_bits(i: int, how: str) -> None:
    kw: dict = {"act": native.activation("hard_swish", _ACTS["hard_swish"]), "codes_in": how != "float_in"}
    if how == "residual":
        kw["residual"] = True
    elif how == "out_q":
        kw["out_q"] = qn.out_qdq(0.8, 0)
    elif how == "chain":
        kw["chain"] = _chain_program(np.random.default_rng(i), FORM_CASES[i][1])
    elif how == "codes_rt1":
        kw["codes"] = qn.QParam.of(1.7, 1)
    win, fsum = _forms(FORM_CASES[i], i, **kw)
    np.testing.assert_array_equal(win, fsum)


@pytest.mark.parametrize("act", ["relu", "relu6", "hard_swish"])
def test_window_form_codes_of_nan_inf_and_negative_zero(act: str) -> None:
    """Channels whose values are NaN, +-inf or -0 (a NaN / inf bias, an inf multiplier, a zero multiplier and a -0
    bias): the window form's codes (its relu without the NaN step) are the float-sums form's."""
    case = (1, 6, 9, 21, 3, 1, 1, 1, 0)
    x, w8, qp = _data(case, 7)
    oh, ow, geo = _geo(case)
    w, comp = qn.dw_weights(w8)
    xc = qn.codes_of(x, qp)
    mul = np.array([1e-3, 1e-3, np.inf, 0.0, 1e-3, 3e38], np.float32)
    bias = np.array([np.nan, -np.inf, 0.5, -0.0, np.inf, 0.0], np.float32)
    code = native.activation(act, _ACTS[act])
    outs = []
    for form in (2, 0):
        before = native._ext._set_qdw_integer(form)
        try:
            outs.append(qn.qdwconv(xc, w, comp, mul, bias, oh, ow, *geo, qp, code, codes=qn.QParam.of(1.7, 0)))
        finally:
            native._ext._set_qdw_integer(before)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_qdw_form_switch() -> None:
    """_set_qdw_integer takes 0 / 1 / 2 and returns the old setting; anything else is refused."""
    before = native._ext._set_qdw_integer(2)
    try:
        assert native._ext._set_qdw_integer(0) == 2
        with pytest.raises(ValueError, match="0, 1 or 2"):
            native._ext._set_qdw_integer(3)
    finally:
        native._ext._set_qdw_integer(before)
    assert before == 1


# (N, C, H, W, KH, KW, SH, SW, DH, DW, PT, PL): unequal kernel sides, strides, dilations and paddings; a 33x33 kernel
# (over 1000 taps: the window form at vnni, plain loops elsewhere)
ODD_GEOMETRY = [
    (1, 3, 21, 33, 3, 5, 1, 2, 1, 1, 1, 2),
    (1, 3, 21, 33, 5, 3, 2, 1, 2, 1, 4, 1),
    (2, 2, 9, 64, 1, 9, 1, 1, 1, 1, 0, 4),
    (1, 2, 12, 12, 4, 4, 3, 2, 1, 1, 1, 1),
    (1, 2, 40, 40, 33, 33, 1, 1, 1, 1, 16, 16),
]


@pytest.mark.parametrize("i", range(len(ODD_GEOMETRY)))
def test_every_form_sums_exactly_on_odd_geometry(i: int) -> None:
    n, c, h, w, kh, kw, sh, sw, dh, dw, ph, pw = ODD_GEOMETRY[i]
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    rng = np.random.default_rng(i)
    x = (rng.standard_normal((n, c, h, w)) * 2).astype(np.float32)
    w8, comp = qn.dw_weights(rng.integers(-128, 128, (c, 1, kh, kw)).astype(np.int8))
    qp = qn.QParam.of(3.0, i % 2)
    geo = ((kh, kw), (sh, sw), (dh, dw), (ph, pw))
    ref = qn.reference_dw_sums(x, w8, oh, ow, *geo, qp).reshape(n, c, oh, ow)
    for form in (2, 0):
        before = native._ext._set_qdw_integer(form)
        try:
            for xin in (x, qn.codes_of(x, qp)):
                got = qn.qdwconv(xin, w8, comp, np.ones(c, np.float32), None, oh, ow, *geo, qp)
                np.testing.assert_array_equal(got.astype(np.int64), ref, err_msg=f"form {form} {xin.dtype}")
        finally:
            native._ext._set_qdw_integer(before)


@pytest.mark.skipif(qn.int8_isa() != "vnni", reason="the window form runs at vnni only")
def test_window_form_quantizes_nan_inf_and_ties_as_the_float_sums_form() -> None:
    """Float inputs quantized into the window planes 16 at a time (round type 0: qdw_quantize_vnni) against the
    float-sums form's quantizer: NaN, +-inf, -0, ties, values just past the clamp; rows with tails."""
    rng = np.random.default_rng(1)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5 * 3 / 127, 3 * 127.5 / 127, -3 * 128.5 / 127], np.float32)
    for c, h, w, k, s in [(5, 13, 37, 3, 1), (4, 9, 16, 5, 1), (3, 20, 33, 3, 2)]:
        x = (rng.standard_normal((1, c, h, w)) * 2).astype(np.float32)
        picks = x.reshape(-1)[::3]  # (a view)
        picks[:] = np.resize(special, picks.size)
        w8 = rng.integers(-128, 128, (c, 1, k, k)).astype(np.int8)
        wq, comp = qn.dw_weights(w8)
        p = k // 2
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        outs = []
        for mode in (2, 0):
            before = native._ext._set_qdw_integer(mode)
            try:
                outs.append(qn.qdwconv(x, wq, comp, np.full(c, 1e-2, np.float32), None, oh, ow, (k, k), (s, s),
                                       (1, 1), (p, p), qn.QParam.of(3.0, 0)))
            finally:
                native._ext._set_qdw_integer(before)
        np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32), err_msg=f"{(c, h, w, k, s)}")
