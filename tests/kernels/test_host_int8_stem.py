"""The int8 conv of few input channels in the depthwise window form (native_src/qstem.c via quant_native.qstemconv_plan,
vnni only) against the int64 reference and against qconv's columns form.

Integer sums: EXACT equality with quant_native.reference_sums (multiplier 1, no bias: the float32 outputs hold the sums
exactly) over 1-4 channels, strides 1-3, dilation 2, padding, odd widths, both round types, batches, float and codes
inputs. Epilogue: the SAME bits as qconv's columns form (the form these convs ran in before) for floats and codes out,
every activation the int8 passes fuse, residual, output QDQ, pointwise chain. The kernel of quantized_conv2d picks the
form for a 3-channel stem (QuantizedConv2d.stem_form) and gives the columns form's outputs.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.kernels.host.quant_int8 import QuantizedConv2d
from pdlite.kernels.registry import KernelContext, kernels_for
from pdlite.operators.registry import OPS
from tests.kernels.test_host_int8 import _chain_program

pytestmark = pytest.mark.skipif(not qn.available() or qn.int8_isa() != "vnni",
                                reason="the stem form runs in vnni processes only (other ISAs run qconv's forms)")

# (N, C, H, W, M, K, S, D, P, round_type)
CASES = [
    (1, 3, 224, 224, 16, 3, 2, 1, 1, 0),  # the classifiers' stem
    (2, 3, 17, 33, 5, 3, 1, 1, 1, 1),  # stride 1, batch, round_type 1
    (1, 1, 8, 9, 3, 3, 1, 2, 2, 0),  # one channel, dilation 2
    (1, 2, 30, 31, 20, 3, 3, 1, 0, 0),  # stride 3, no padding
    (1, 4, 21, 70, 7, 3, 2, 1, 1, 1),  # four channels, 35 outputs a row
    (1, 3, 12, 40, 4, 4, 2, 1, 1, 0),  # 4x4 (no dropped columns: one word a kernel row)
]
HS = {"offset": 3.0, "threshold": 6.0, "scale": 6.0}


def _case(case: tuple, seed: int) -> tuple:
    n, c, h, w, m, k, s, d, p, rt = case
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, h, w)) * 2).astype(np.float32)
    x.flat[::7] = 1.5 * 3.0 / 127  # exact ties of the grid
    x.flat[3] = 40.0  # clamped
    w8 = rng.integers(-128, 128, (m, c, k, k)).astype(np.int8)
    return x, w8, qn.QParam.of(3.0, rt), oh, ow, ((k, k), (s, s), (d, d), (p, p))


def test_stem_form_applies_to_few_channels_only() -> None:
    assert qn.stem_form(3, (3, 3), (2, 2), (1, 1))
    assert not qn.stem_form(16, (3, 3), (2, 2), (1, 1))  # the direct / columns forms
    assert not qn.stem_form(3, (7, 7), (2, 2), (1, 1))  # 3 x 7 x 2 words a filter
    assert not qn.stem_form(3, (3, 3), (4, 4), (2, 2))  # SW + DW > 5: no window form


@pytest.mark.parametrize("i", range(len(CASES)))
@pytest.mark.parametrize("codes_in", [False, True])
def test_stem_sums_exact(i: int, codes_in: bool) -> None:
    x, w8, qp, oh, ow, geo = _case(CASES[i], i)
    m = w8.shape[0]
    w, comp = qn.dw_weights(w8)
    xin = qn.codes_of(x, qp) if codes_in else x
    got = qn.qstemconv_plan(x.shape, w, comp, np.ones(m, np.float32), None, m, oh, ow, *geo, qp, xcodes=codes_in)(xin)
    ref = qn.reference_sums(x, w8.reshape(m, -1), oh, ow, *geo, qp)
    assert np.abs(ref).max() < 2**24
    np.testing.assert_array_equal(got.astype(np.int64), ref.reshape(got.shape))


@pytest.mark.parametrize("act", ["", "relu", "relu6", "hard_swish"])
@pytest.mark.parametrize("extra", ["", "residual", "out_q", "chain"])
@pytest.mark.parametrize("codes_out", [False, True])
def test_stem_epilogue_bits_equal_the_columns_form(act: str, extra: str, codes_out: bool) -> None:
    for i in (0, 1, 4):
        x, w8, qp, oh, ow, geo = _case(CASES[i], 10 + i)
        m = w8.shape[0]
        rng = np.random.default_rng(i)
        mul = (rng.uniform(0.5, 2.0, m) * 1e-3).astype(np.float32)
        bias = rng.standard_normal(m).astype(np.float32)
        code = native.activation(act, {"relu6": {"threshold": 6.0}, "hard_swish": HS}.get(act, {}))
        res = rng.standard_normal((x.shape[0], m, oh, ow)).astype(np.float32) if extra == "residual" else None
        kw = {"out_q": qn.out_qdq(0.8, 0) if extra == "out_q" else None,
              "chain": _chain_program(rng, m) if extra == "chain" else None,
              "codes": qn.QParam.of(1.3, 0) if codes_out else None}
        w, comp = qn.dw_weights(w8)
        got = qn.qstemconv_plan(x.shape, w, comp, mul, bias, m, oh, ow, *geo, qp, code, **kw)(x, res)
        ref = qn.qconv_plan(x.shape, qn.pack_weights(w8.reshape(m, -1)), mul, bias, m, oh, ow, *geo, qp, code,
                            **kw)(x, res)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8), err_msg=f"{CASES[i]}")


def test_quantized_conv2d_runs_the_stem_form() -> None:
    x, w8, qp, oh, ow, geo = _case(CASES[0], 20)
    scale = np.random.default_rng(21).uniform(0.5, 2.0, w8.shape[0]).astype(np.float32) * 1e-2
    attrs = {"strides": [2, 2], "paddings": [1, 1], "dilations": [1, 1], "groups": 1, "in_scale": 3.0,
             "round_type": 0, "qmax": 127, "act_type": "hard_swish", "act_offset": 3.0, "act_threshold": 6.0,
             "act_scale": 6.0}
    desc = OpDesc("quantized_conv2d", {"Input": ["x"], "Filter": ["w"], "WeightScale": ["s"]}, {"Output": ["y"]}, attrs)
    kd = next(d for d in kernels_for("quantized_conv2d") if d.key.target == TargetType.Host)
    k = kd.create(OPS["quantized_conv2d"].attach(desc), KernelContext({"host_native": True}))
    assert isinstance(k, QuantizedConv2d)
    got = k.run({"Input": [x], "Filter": [w8], "WeightScale": [scale]})["Output"][0]
    assert k._stem
    mul = (np.float64(3.0) / 127 * scale.astype(np.float64)).astype(np.float32)
    ref = qn.qconv_plan(x.shape, qn.pack_weights(w8.reshape(w8.shape[0], -1)), mul, None, w8.shape[0], oh, ow, *geo,
                        qp, native.activation("hard_swish", HS))(x)
    np.testing.assert_array_equal(got, ref)


def test_stem_bad_geometry_is_refused() -> None:
    x, w8, qp, oh, ow, geo = _case(CASES[0], 30)
    w, comp = qn.dw_weights(w8)
    with pytest.raises(ValueError, match="qstemconv int8 weights"):
        qn.qstemconv_plan(x.shape, w[:3], comp, np.ones(16, np.float32), None, 16, oh, ow, *geo, qp)(x)
    with pytest.raises(ValueError, match="stem form"):
        qn.qstemconv_plan(x.shape, w, comp, np.ones(16, np.float32), None, 16, oh, ow, (3, 3), (4, 4), (2, 2),
                          (1, 1), qp)(x)


@pytest.mark.parametrize("rt", [0, 1])
def test_stem_quantizes_nan_inf_and_ties_as_the_columns_form(rt: int) -> None:
    """The float input quantized in the window planes (16 at a time at round type 0) as qconv's columns: NaN -> 0,
    +-inf clamped, -0, exact ties of the grid, values just past +-127.5 steps; every row length's tail."""
    for w in (16, 17, 31, 40):
        x, w8, _, oh, ow, geo = _case((1, 3, 11, w, 6, 3, 1, 1, 1, rt), w)
        qp = qn.QParam.of(3.0, rt)
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.5 * 3.0 / 127, -1.5 * 3.0 / 127, 3.0 * 127.5 / 127,
                            -3.0 * 128.5 / 127, 1e30, -1e-30], np.float32)
        picks = x.reshape(-1)[::5][: special.size * 20]  # (a view)
        picks[:] = np.resize(special, picks.size)
        assert np.isnan(x).any() and np.isinf(x).any()
        m = w8.shape[0]
        mul = np.full(m, 1e-2, np.float32)
        w, comp = qn.dw_weights(w8)
        got = qn.qstemconv_plan(x.shape, w, comp, mul, None, m, oh, ow, *geo, qp)(x)
        ref = qn.qconv_plan(x.shape, qn.pack_weights(w8.reshape(m, -1)), mul, None, m, oh, ow, *geo, qp)(x)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8), err_msg=f"width {w}")
