"""int8 codes between ops: the native int8 kernels reading and writing codes (bytes q + 128) instead of floats.

- Reading: qconv (pointwise, direct and one-column forms) and qdwconv given the codes of x give the SAME float32 bits
  as given x (they quantized x to those codes themselves), and exact int32 sums against NumPy in int64 on the codes.
- Writing: the codes output (quantized with a scale of its own, after the activation, output QDQ and chain) is, byte
  for byte, NumPy's quantize_linear of the float output.
- Every instruction set this CPU runs (vnni / avx2 / baseline, forced in a subprocess).
- quantize(dequantize(q)) == q for every code on the scales of the quantized models (the fixtures' PTQ programs and
  a sweep of scales): why a producer may write the codes its output QDQ quantized.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.kernels.host.quant import dequantize, quantize
from tests.kernels import test_host_int8 as t8
from tests.kernels import test_host_int8_depthwise as tdw
from tests.kernels.test_host_int8 import FORCE, run_forced_isa

pytestmark = pytest.mark.skipif(not qn.available(), reason="native int8 kernels unavailable in this build "
                                "(python setup.py build_ext --inplace compiles them)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "quant"
# qconv cases that read codes: the pointwise ones (1x1 stride 1), every other one in the direct form
POINTWISE = [i for i, c in enumerate(t8.CASES) if c[5] * c[6] == 1 and c[7] * c[8] == 1]
DIRECT = t8.DIRECT
RELU = native.activation("relu", {})
CQ = qn.QParam.of(5.0, 0)  # the codes output's scale (round_type 0) ...
CQ1 = qn.QParam.of(0.75, 1)  # ... and one that clamps, round_type 1


def _conv(i: int, direct: bool, x: np.ndarray, **kw) -> np.ndarray:
    case = t8.CASES[i]
    _, w8, qp = t8._data(case, i)
    oh, ow = t8._geo(case)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    qw = qn.pack_weights(w8, (case[1], case[5], case[6]) if direct else None)
    mul = np.linspace(0.01, 0.02, w8.shape[0], dtype=np.float32)
    bias = np.linspace(-1, 1, w8.shape[0], dtype=np.float32)
    return qn.qconv(x, qw, mul, bias, w8.shape[0], oh, ow, *k, qp, RELU, **kw)


def _dw(i: int, x: np.ndarray, **kw) -> np.ndarray:
    case = tdw.CASES[i]
    _, w8, qp = tdw._data(case, i)
    oh, ow, geo = tdw._geo(case)
    w, comp = qn.dw_weights(w8)
    mul = np.linspace(0.01, 0.02, w.shape[0], dtype=np.float32)
    bias = np.linspace(-1, 1, w.shape[0], dtype=np.float32)
    return qn.qdwconv(x, w, comp, mul, bias, oh, ow, *geo, qp, RELU, **kw)


def _conv_cases() -> list[tuple[int, bool]]:
    return [(i, False) for i in POINTWISE] + [(i, True) for i in DIRECT]


@pytest.mark.parametrize("i,direct", _conv_cases())
def test_conv_reading_codes_is_the_conv_reading_floats(i: int, direct: bool) -> None:
    x, w8, qp = t8._data(t8.CASES[i], i)
    codes = qn.codes_of(x, qp)
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(_conv(i, direct, codes), _conv(i, direct, x))
    # the sums on codes, against NumPy's int64 (multiplier 1, no bias: float32 holds them exactly)
    case = t8.CASES[i]
    oh, ow = t8._geo(case)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    qw = qn.pack_weights(w8, (case[1], case[5], case[6]) if direct else None)
    sums = qn.qconv(codes, qw, np.ones(w8.shape[0], np.float32), None, w8.shape[0], oh, ow, *k, qp)
    np.testing.assert_array_equal(sums.astype(np.int64), t8._reference(case, i))


@pytest.mark.parametrize("i,direct", _conv_cases())
@pytest.mark.parametrize("cq", [CQ, CQ1])
def test_conv_writing_codes_is_quantize_of_its_float_output(i: int, direct: bool, cq: qn.QParam) -> None:
    x, _, _ = t8._data(t8.CASES[i], i)
    oq = qn.out_qdq(2.0, 0)
    out = _conv(i, direct, x, out_q=oq)
    codes = _conv(i, direct, x, out_q=oq, codes=cq)
    assert codes.dtype == np.uint8 and codes.shape == out.shape
    np.testing.assert_array_equal(codes, qn.codes_of(out, cq))


@pytest.mark.parametrize("i", range(len(tdw.CASES)))
def test_depthwise_codes_in_and_out(i: int) -> None:
    x, _, qp = tdw._data(tdw.CASES[i], i)
    codes = qn.codes_of(x, qp)
    out = _dw(i, x)
    np.testing.assert_array_equal(_dw(i, codes), out)
    np.testing.assert_array_equal(_dw(i, codes, codes=CQ), qn.codes_of(out, CQ))
    np.testing.assert_array_equal(_dw(i, x, codes=CQ1), qn.codes_of(out, CQ1))


def test_codes_with_a_chain_and_a_residual() -> None:
    i = DIRECT[1]
    x, _, _ = t8._data(t8.CASES[i], i)
    rng = np.random.default_rng(0)
    m = t8.CASES[i][4]
    chain = t8._chain_program(rng, m)
    res = rng.standard_normal(_conv(i, True, x).shape).astype(np.float32)
    out = _conv(i, True, x, residual=res, chain=chain)
    np.testing.assert_array_equal(_conv(i, True, x, residual=res, chain=chain, codes=CQ), qn.codes_of(out, CQ))


_LUT_CHILD = """
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
from tests.kernels import test_host_int8_codes as t
from pdlite.kernels.host import quant_native as qn
out = {"isa": qn.int8_isa()}
for name, (i, form, chain) in t._table_cases().items():
    if form == "depthwise":
        x, _, _ = t.tdw._data(t.tdw.CASES[i], i)
        out[name + "_values"] = t._dw(i, x, chain=chain)
        out[name + "_codes"] = t._dw(i, x, chain=chain, codes=t.CQ)
        continue
    x, _, _ = t.t8._data(t.t8.CASES[i], i)
    out[name + "_values"] = t._conv(i, form == "direct", x, chain=chain)
    out[name + "_codes"] = t._conv(i, form == "direct", x, chain=chain, codes=t.CQ)
np.savez(sys.argv[1], **out)
"""


def _table_cases() -> dict[str, tuple[int, str, np.ndarray]]:
    """Convs (pointwise on 1640 columns, direct, one column, depthwise) with chains whose tail after a QDQ becomes a
    table of codes when the output is codes (qchain.c's q_chain_lut): PP-OCRv4 det's (per-channel add, scale, QDQ,
    scale + b, hard_swish, scale, QDQ, scale + b) and every step kind (t8._chain_program)."""
    rng = np.random.default_rng(3)
    hs = native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})
    out = {}
    for name, i, form in [("pointwise", 13, "pointwise"), ("direct", DIRECT[1], "direct"), ("column", 11, "column"),
                          ("depthwise", 0, "depthwise"), ("depthwise_wide", 7, "depthwise")]:
        m = tdw.CASES[i][1] if form == "depthwise" else t8.CASES[i][4]
        det = (qn.chain_add_c(rng.standard_normal(m)) + qn.chain_scale(1.9, 0, True) + qn.chain_qdq(2.5, 0)
               + qn.chain_scale(1.0, 0.8, True) + qn.chain_act(hs) + qn.chain_scale(0.63, 0, True)
               + qn.chain_qdq(1.4, 0) + qn.chain_scale(1.0, -0.5, True))
        out[f"{name}_det"] = (i, form, np.array(det, np.float32))
        out[f"{name}_all"] = (i, form, t8._chain_program(rng, m))
    return out


@pytest.mark.parametrize("isa", sorted(FORCE))
def test_codes_through_a_chain_table_are_quantize_of_the_chain_output(isa: str, tmp_path: Path) -> None:
    z = run_forced_isa(isa, _LUT_CHILD, tmp_path)
    for name in _table_cases():
        np.testing.assert_array_equal(z[name + "_codes"], qn.codes_of(z[name + "_values"], CQ),
                                      err_msg=f"{isa}: {name}")


ACTS = {"none": native.NO_ACT, "relu": RELU, "relu6": native.activation("relu6", {"threshold": 6.0})}


def _codes_variants(i: int, direct: bool, x: np.ndarray, codes: qn.QParam | None) -> dict[str, np.ndarray]:
    """The conv's output (codes, or floats with codes=None) after each activation of the codes-from-the-sums form, with
    and without a residual; the bias of channel 0 NaN, of 1 +inf, of 2 -inf (the shortcuts' NaN, -0 and inf cases)."""
    case = t8.CASES[i]
    _, w8, qp = t8._data(case, i)
    oh, ow = t8._geo(case)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    qw = qn.pack_weights(w8, (case[1], case[5], case[6]) if direct else None)
    m = w8.shape[0]
    mul = np.linspace(0.01, 0.02, m, dtype=np.float32)
    bias = np.linspace(-1, 1, m, dtype=np.float32)
    bias[:3] = [np.nan, np.inf, -np.inf][:m]
    res = np.random.default_rng(i).standard_normal((case[0], m, oh, ow)).astype(np.float32)
    return {f"{name}{r is not None}": qn.qconv(x, qw, mul, bias, m, oh, ow, *k, qp, act, residual=r, codes=codes)
            for name, act in ACTS.items() for r in (None, res)}


@pytest.mark.parametrize("i,direct", _conv_cases())
def test_codes_straight_from_the_sums(i: int, direct: bool) -> None:
    """Codes written without an output QDQ or chain (the x86 forms that quantize the sums' values in registers, relu
    as max(x, 0)): quantize_linear of the float output, byte for byte, for no activation, relu and relu6, with and
    without a residual, NaN and infinite values included."""
    x, _, _ = t8._data(t8.CASES[i], i)
    with np.errstate(invalid="ignore"):
        want = {key: qn.codes_of(v, CQ) for key, v in _codes_variants(i, direct, x, None).items()}
    for key, got in _codes_variants(i, direct, x, CQ).items():
        np.testing.assert_array_equal(got, want[key], err_msg=key)


def test_codes_where_the_form_cannot_read_them_are_refused() -> None:
    i = next(j for j, c in enumerate(t8.CASES) if c[5] * c[6] > 1)  # a 3x3: the columns form (not direct)
    x, _, qp = t8._data(t8.CASES[i], i)
    with pytest.raises(ValueError, match="pointwise or direct"):
        _conv(i, False, qn.codes_of(x, qp))
    j = DIRECT[0]
    case = t8.CASES[j]
    xj, w8, qpj = t8._data(case, j)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    run = qn.qconv_plan(xj.shape, qn.pack_weights(w8, (case[1], case[5], case[6])), np.ones(w8.shape[0], np.float32),
                        None, w8.shape[0], *t8._geo(case), *k, qpj, xcodes=True)
    with pytest.raises(ValueError, match="input codes: expected"):  # codes of another shape
        run(qn.codes_of(xj[..., :-1], qpj))


_CHILD = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from pdlite.kernels.host import quant_native as qn
from tests.kernels import test_host_int8_codes as T
out = {"isa": qn.int8_isa()}
for i, d in T._conv_cases():
    x, _, qp = T.t8._data(T.t8.CASES[i], i)
    out[f"conv{i}{d}"] = T._conv(i, d, qn.codes_of(x, qp), codes=T.CQ)
    out.update({f"var{i}{d}{k}": v for k, v in T._codes_variants(i, d, x, T.CQ).items()})
for i in range(len(T.tdw.CASES)):
    x, _, qp = T.tdw._data(T.tdw.CASES[i], i)
    out[f"dw{i}"] = T._dw(i, qn.codes_of(x, qp), codes=T.CQ)
out["qdq"] = np.stack([qn.qdq(x, qn.QParam.of(float(s), rt)) for s, rt, x in T._qdq_cases()])
np.savez(sys.argv[1], **out)
"""


def _qdq_cases() -> list[tuple[np.float32, int, np.ndarray]]:
    """(scale, round type, x): 120 scales from 1e-3 to 1e3, x over [-2.5 s, 2.5 s] with every code's exact value."""
    rng = np.random.default_rng(5)
    out = []
    for j, s in enumerate(np.geomspace(1e-3, 1e3, 120, dtype=np.float32)):
        x = (rng.uniform(-2.5, 2.5, 1000) * s).astype(np.float32)
        x[:256] = np.arange(-128, 128, dtype=np.float32) * s / np.float32(127)  # the codes' own values
        out.append((s, j % 2, x))
    return out


def _qdq_reference() -> np.ndarray:
    return np.stack([dequantize(quantize(x, s, 127, rt), s, 127) for s, rt, x in _qdq_cases()])


def test_qdq_with_the_fma_division_is_bit_exact() -> None:
    """quantize_dequantize_linear's division by qmax runs as two FMAs where q_out_init proved them exact on every code
    of the scale: the values of NumPy's quantize then dequantize, on 120 scales (both round types; a zero may carry
    the other sign, as the division form's rounding by 1.5 * 2^23 always did)."""
    got = np.stack([qn.qdq(x, qn.QParam.of(float(s), rt)) for s, rt, x in _qdq_cases()])
    np.testing.assert_array_equal(got, _qdq_reference())


@pytest.mark.parametrize("isa", sorted(FORCE))
def test_every_int8_isa_reads_and_writes_the_same_codes(isa: str, tmp_path: Path) -> None:
    z = run_forced_isa(isa, _CHILD, tmp_path)
    for i, d in _conv_cases():
        x, _, _ = t8._data(t8.CASES[i], i)
        np.testing.assert_array_equal(z[f"conv{i}{d}"], qn.codes_of(_conv(i, d, x), CQ), err_msg=f"{isa} conv {i}")
        with np.errstate(invalid="ignore"):
            for k, v in _codes_variants(i, d, x, None).items():
                np.testing.assert_array_equal(z[f"var{i}{d}{k}"], qn.codes_of(v, CQ), err_msg=f"{isa} conv {i} {k}")
    for i in range(len(tdw.CASES)):
        x, _, _ = tdw._data(tdw.CASES[i], i)
        np.testing.assert_array_equal(z[f"dw{i}"], qn.codes_of(_dw(i, x), CQ), err_msg=f"{isa} depthwise {i}")
    np.testing.assert_array_equal(z["qdq"], _qdq_reference(), err_msg=f"{isa} qdq")


def _fixture_scales() -> list[tuple[float, int]]:
    """(scale, round_type) of every per-tensor quantize_linear in the fixtures' PTQ programs."""
    from pdlite.model_parser import load_model

    found = set()
    for d in sorted(FIXTURES.glob("ptq_*_qdq")):
        m = load_model(d)
        for op in m.program.blocks[0].ops:
            if op.type == "quantize_linear" and op.input("Scale") in m.params:
                s = np.asarray(m.params[op.input("Scale")].array, np.float32).reshape(-1)
                if s.size == 1 and s[0] > 0:
                    found.add((float(s[0]), int(op.attrs.get("round_type", 0))))
    return sorted(found)


def test_requantizing_dequantized_codes_gives_them_back() -> None:
    scales = _fixture_scales()
    assert len(scales) > 20, "the PTQ fixtures' activation scales"
    sweep = [(float(s), rt) for s in np.geomspace(1e-4, 1e4, 2001, dtype=np.float32) for rt in (0, 1)]
    bad = [(s, rt) for s, rt in scales + sweep if not qn.codes_identity(s, rt)]
    assert not bad, f"quantize(dequantize(q)) != q at {bad[:5]}"


def test_bound_int8_calls_equal_run() -> None:
    """quantized_conv2d (float or codes in, float or codes out, residual) and pointwise_chain bind their native call
    for the runtime's steady path: the bound call gives run()'s outputs bit for bit, on new values too."""
    from tests.kernels.test_host_bind import _call, _kernel, _same

    rng = np.random.default_rng(3)
    w8 = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    base = {"Filter": [w8], "WeightScale": [np.linspace(0.01, 0.02, 16, dtype=np.float32)],
            "Bias": [np.linspace(-1, 1, 16, dtype=np.float32)]}
    attrs = {"paddings": [1, 1], "in_scale": 3.0, "act_type": "relu"}
    qp = qn.QParam.of(3.0, 0)
    cases = [({"Input": [x]}, attrs), ({"Input": [qn.codes_of(x, qp)]}, {**attrs, "in_codes": True}),
             ({"Input": [x]}, {**attrs, "code_scale": 2.0}),
             ({"Input": [x], "ResidualData": [rng.standard_normal((1, 16, 10, 10)).astype(np.float32)]}, attrs)]
    for i, (extra, at) in enumerate(cases):
        ins = {**base, **extra}
        k = _kernel("quantized_conv2d", ins, {"Output": 1}, at)
        ref = k.run(ins)
        b = k.bind(ins, frozenset(("Filter", "WeightScale", "Bias")))
        if not native.use_native(k.context):  # --host-numpy: the NumPy path runs through run(), nothing bound
            assert b is None, i
            continue
        assert b is not None, i
        _same(_call(b, ins), ref, f"quantized_conv2d case {i}")
        x2 = (rng.standard_normal(x.shape) * 3).astype(np.float32)
        ins2 = {**ins, "Input": [qn.codes_of(x2, qp) if at.get("in_codes") else x2]}
        _same(_call(b, ins2), k.run(ins2), f"quantized_conv2d case {i}, new values")
        assert k.bind(ins, frozenset()) is None  # weights not the program's parameters: not held
    y = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    prog = qn.chain_qdq(2.0, 0) + qn.chain_act(native.activation("relu", {}))
    for ins, at in [({"X": [y]}, {"post_ops": prog}), ({"X": [y], "Y": [y * 2]}, {"post_ops": prog,
                                                                                  "x_ops": qn.chain_qdq(1.5, 0)})]:
        k = _kernel("pointwise_chain", ins, {"Out": 1}, at)
        b = k.bind(ins, frozenset())
        if not native.use_native(k.context):
            assert b is None
            continue
        assert b is not None
        _same(_call(b, ins), k.run(ins), "pointwise_chain")


@pytest.mark.parametrize("depthwise", [False, True])
def test_numpy_kernels_read_and_write_the_same_codes(depthwise: bool) -> None:
    """quantized_conv2d without the native kernels (host_native False at run time) reads and writes the same codes:
    equal but where the epilogue's float multiply-add, which may fuse natively (test_host_int8.py's 2e-6 on floats),
    puts a value on the other side of a rounding edge: one code, rarely."""
    from pdlite.core.program import OpDesc
    from pdlite.core.types import TargetType
    from pdlite.kernels.registry import KernelContext, kernels_for
    from pdlite.operators.registry import OPS

    rng = np.random.default_rng(11)
    c = 8
    w8 = rng.integers(-127, 128, (c, 1, 3, 3) if depthwise else (16, c, 3, 3)).astype(np.int8)
    m = w8.shape[0]
    qp = qn.QParam.of(3.0, 0)
    x = qn.codes_of(rng.standard_normal((1, c, 9, 11)).astype(np.float32) * 2, qp)
    ins = {"Input": [x], "Filter": [w8], "WeightScale": [np.linspace(0.01, 0.02, m, dtype=np.float32)],
           "Bias": [np.linspace(-1, 1, m, dtype=np.float32)]}
    attrs = {"paddings": [1, 1], "in_scale": 3.0, "act_type": "relu", "in_codes": True, "code_scale": 2.0,
             "groups": c if depthwise else 1}
    outs = []
    for native_on in (True, False):
        desc = OpDesc("quantized_conv2d", {s: [f"{s}0"] for s in ins}, {"Output": ["o"]}, dict(attrs))
        op = OPS["quantized_conv2d"].attach(desc)
        kd = next(d for d in kernels_for("quantized_conv2d") if d.key.target == TargetType.Host)
        k = kd.create(op, KernelContext({"host_native": native_on}))
        outs.append(k.run(ins)["Output"][0])
    assert outs[0].dtype == outs[1].dtype == np.uint8 and outs[0].shape == outs[1].shape
    diff = np.abs(outs[0].astype(np.int32) - outs[1].astype(np.int32))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01, (diff.max(), (diff > 0).mean())
    with pytest.raises(ValueError, match="in_codes"):  # floats where codes are expected
        k.run({**ins, "Input": [x.astype(np.float32)]})
