"""The native host kernels (pdlite/kernels/host/native_src/) against the NumPy kernels and naive references.

Each case runs the same op through the host kernel twice, with the config option host_native on
(C kernels) and off (the NumPy kernels, the reference), and compares; the depthwise, GEMM, Winograd
and pooling paths also meet a naive float64 reference written here. Tolerance: max|native - ref|
<= 1e-5 * max(1, max|ref|) (only the summation order differs). Skipped when the extension is not built.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdlite.kernels.host import conv as conv_module
from pdlite.kernels.host import cpu_features, native, native_plans
from pdlite.kernels.registry import KernelContext
from tests.kernels._util import depthwise_rows, kernel_class, make_op, native_threads, shuffles16

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension (_native) is not built")

TOL = 1e-5
ON = KernelContext({"host_native": True})
OFF = KernelContext({"host_native": False})
ACTS = {
    "relu": {},
    "relu6": {"act_threshold": 6.0},
    "leaky_relu": {"act_alpha": 0.1},
    "hard_swish": {"act_offset": 3.0, "act_threshold": 6.0, "act_scale": 6.0},
    "hard_sigmoid": {"act_slope": 0.2, "act_offset": 0.5},
    "sigmoid": {},  # not fused natively: the activation kernel runs after the native conv
    "gelu": {},
}


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def check(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = TOL) -> None:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}"
    if not ref.size:
        return
    err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    bound = tol * max(1.0, float(np.max(np.abs(ref))))
    assert err <= bound, f"{what}: max|native - ref| = {err:.3g} > {bound:.3g}"


def run_both(op_type: str, ins: dict, attrs: dict, out_slot: str = "Output") -> tuple[np.ndarray, np.ndarray]:
    """(native output, NumPy output) of one op (fresh kernels, so no state is shared)."""
    res = []
    for ctx in (ON, OFF):
        op = make_op(op_type, ins, attrs, {out_slot: 1})
        k = kernel_class(op_type)(op)
        k.context = ctx
        k.prepare({})
        res.append(k.run({s: [v] for s, v in ins.items() if v is not None})[out_slot][0])
    return res[0], res[1]


@pytest.fixture(params=["rows", "blocked", "planar"])
def dw_form(request):
    """Runs a depthwise test with the AVX-512 forms as by default there (the row-vector form for stride 1, the
    channel-blocked one on other small maps), with the channel-blocked form only, and with neither (the planar
    forms: dw3 / dws2 / the general one), whatever this CPU's default."""
    with shuffles16(request.param != "planar"), depthwise_rows(request.param == "rows"):
        yield request.param


def naive_conv(x, w, strides, pads, dil, groups, bias=None):
    """NCHW conv in float64, pads = (top, bottom, left, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    oh = (h + pads[0] + pads[1] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[2] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    ocg = oc // groups
    out = np.zeros((n, oc, oh, ow))
    for i in range(kh):
        for j in range(kw):
            r, q = i * dil[0], j * dil[1]
            patch = xp[:, :, r : r + (oh - 1) * strides[0] + 1 : strides[0], q : q + (ow - 1) * strides[1] + 1 : strides[1]]
            for g in range(groups):
                out[:, g * ocg : (g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch[:, g * cg : (g + 1) * cg], w[g * ocg : (g + 1) * ocg, :, i, j])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


# ---------------------------------------------------------------------------------------------- depthwise
# (x shape, multiplier, kernel, strides, paddings attr, dilations, padding_algorithm, explicit pads t,b,l,r)
DW_CASES = [
    ((1, 32, 28, 28), 1, 3, [1, 1], [1, 1], [1, 1], "EXPLICIT", (1, 1, 1, 1)),
    ((1, 16, 29, 31), 1, 3, [2, 2], [1, 1], [1, 1], "EXPLICIT", (1, 1, 1, 1)),
    ((2, 5, 13, 11), 2, 3, [2, 2], [1, 1], [1, 1], "EXPLICIT", (1, 1, 1, 1)),  # batch, multiplier
    ((1, 7, 9, 10), 1, 5, [1, 1], [2, 2], [1, 1], "EXPLICIT", (2, 2, 2, 2)),
    ((1, 7, 14, 14), 1, 5, [2, 2], [2, 2], [1, 1], "EXPLICIT", (2, 2, 2, 2)),
    ((1, 3, 17, 19), 1, 3, [1, 1], [2, 2], [2, 2], "EXPLICIT", (2, 2, 2, 2)),  # dilation
    ((1, 4, 10, 13), 1, 3, [3, 2], [0, 1, 2, 1], [2, 1], "EXPLICIT", (0, 1, 2, 1)),  # asymmetric pads
    ((1, 6, 8, 8), 1, 3, [2, 2], [0, 0], [1, 1], "SAME", (0, 1, 0, 1)),
    ((1, 6, 7, 7), 1, 3, [1, 1], [3, 3], [1, 1], "VALID", (0, 0, 0, 0)),
    ((1, 4, 8, 8), 3, 7, [1, 1], [3, 3], [1, 1], "EXPLICIT", (3, 3, 3, 3)),
    ((1, 2, 12, 12), 1, 9, [1, 1], [4, 4], [1, 1], "EXPLICIT", (4, 4, 4, 4)),  # 81 taps: several tap blocks
    ((1, 3, 1, 1), 1, 3, [1, 1], [1, 1], [1, 1], "EXPLICIT", (1, 1, 1, 1)),  # 1x1 image
    ((1, 3, 6, 5), 1, 3, [4, 4], [0, 0], [1, 1], "EXPLICIT", (0, 0, 0, 0)),  # stride beyond the window
    # 3x3 stride 2 in bands of output rows: 2 bands (185 + 25 rows), 3 bands (39 + 39 + 11)
    ((1, 2, 420, 41), 1, 3, [2, 2], [1, 1], [1, 1], "EXPLICIT", (1, 1, 1, 1)),
    ((1, 2, 179, 200), 2, 3, [2, 2], [0, 1, 1, 0], [1, 1], "EXPLICIT", (0, 1, 1, 0)),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,mult,k,strides,pads,dil,algo,tblr", DW_CASES)
def test_depthwise_native_matches_numpy_and_naive(xs, mult, k, strides, pads, dil, algo, tblr, bias, dw_form):
    c = xs[1]
    x, w = rand(*xs, seed=1), rand(c * mult, 1, k, k, seed=2)
    b = rand(c * mult, seed=3) if bias else None
    attrs = dict(strides=strides, paddings=pads, dilations=dil, groups=c, padding_algorithm=algo)
    got, ref = run_both("depthwise_conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs)
    check(got, ref, f"native vs numpy {xs} k{k} {attrs}")
    check(got, naive_conv(x, w, strides, tblr, dil, c, b).astype(np.float64), "native vs naive")


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 6), mult=st.integers(1, 2), h=st.integers(1, 17), w=st.integers(1, 17),
       k=st.sampled_from([1, 2, 3, 5]), s=st.integers(1, 3), d=st.integers(1, 2), p=st.integers(0, 3),
       form=st.sampled_from(["rows", "blocked", "planar"]))
def test_depthwise_native_random(n, c, mult, h, w, k, s, d, p, form):
    if (h + 2 * p - d * (k - 1) - 1) < 0 or (w + 2 * p - d * (k - 1) - 1) < 0:
        return
    x, wt, b = rand(n, c, h, w, seed=h * 31 + w), rand(c * mult, 1, k, k, seed=k), rand(c * mult, seed=5)
    attrs = dict(strides=[s, s], paddings=[p, p], dilations=[d, d], groups=c)
    with shuffles16(form != "planar"), depthwise_rows(form == "rows"):
        got, ref = run_both("depthwise_conv2d", {"Input": x, "Filter": wt, "Bias": b}, attrs)
    check(got, ref, f"{(n, c, mult, h, w, k, s, d, p, form)}")


def check_depthwise(x, w, b, attrs, act, tblr, label):
    """The native depthwise conv with `attrs` (fused with `act` when given) against the NumPy kernel, and without
    an activation also against the naive float64 conv (explicit pads `tblr` = top, bottom, left, right)."""
    if act:
        got, ref = run_both("fused_conv2d", {"Input": x, "Filter": w, "Bias": b},
                            dict(attrs, conv_type="depthwise_conv2d", act_type=act, **ACTS[act]))
    else:
        got, ref = run_both("depthwise_conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs)
        check(got, naive_conv(x, w, attrs["strides"], tblr, attrs["dilations"], x.shape[1], b).astype(np.float64),
              f"native vs naive {label}")
    check(got, ref, f"native vs numpy {label}")


# 3x3 stride-1 convs with one pixel of padding all round run native_src/depthwise.c's dw3 path (straight from the
# image, in bands of rows, edge columns redone): planes from 2x2 up, one band and several, a row longer than a band
@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("xs,mult", [((1, 3, 2, 2), 1), ((2, 2, 2, 5), 2), ((1, 2, 6, 2), 1), ((1, 4, 3, 3), 1),
                                     ((2, 3, 7, 7), 2), ((1, 2, 60, 45), 1), ((1, 2, 4, 2100), 1)])
def test_depthwise_3x3_same_padding_path(xs, mult, act, dw_form):
    c = xs[1]
    x, w, b = rand(*xs, seed=11, scale=3.0), rand(c * mult, 1, 3, 3, seed=12), rand(c * mult, seed=13)
    attrs = dict(strides=[1, 1], paddings=[1, 1], dilations=[1, 1], groups=c)
    check_depthwise(x, w, b, attrs, act, (1, 1, 1, 1), f"{xs} x{mult} {act}")


# The channel-blocked form (small maps, 16 output channels per vector): full blocks of 16 (in-register transposes
# of 16 pixels at a time, a plane's remainder pixel by pixel), a last block of fewer channels, a multiplier whose
# blocks read 8 input channels, batches, strides 1 and 2, 7x7 to 32x32 outputs (1024, the largest it takes) and
# 33x33 (the planar forms), activations, and geometries where part of the image is never read (pixel by pixel).
@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("xs,mult,k,s,p", [
    ((1, 16, 7, 7), 1, 3, 1, 1), ((2, 32, 14, 14), 1, 3, 1, 1), ((1, 48, 14, 14), 1, 3, 2, 1),
    ((1, 20, 28, 28), 1, 3, 2, 1), ((2, 16, 9, 11), 2, 3, 1, 1), ((1, 24, 32, 32), 1, 3, 1, 1),
    ((1, 16, 33, 33), 1, 3, 1, 1), ((1, 16, 12, 13), 1, 5, 1, 2), ((1, 16, 15, 15), 1, 3, 4, 0),
    ((1, 17, 6, 6), 3, 3, 2, 0)])
def test_depthwise_channel_blocked_form(xs, mult, k, s, p, act):
    n, c, h, wd = xs
    x, w, b = rand(*xs, seed=21, scale=3.0), rand(c * mult, 1, k, k, seed=22), rand(c * mult, seed=23)
    attrs = dict(strides=[s, s], paddings=[p, p], dilations=[1, 1], groups=c)
    with shuffles16(True), depthwise_rows(False):
        check_depthwise(x, w, b, attrs, act, (p, p, p, p), f"{xs} x{mult} k{k} s{s} p{p} {act}")


# The row-vector form (outputs 9 to 64 wide, AVX-512): stride 1 with 3x3 padding 1 in one band and several (rows
# per band: 2048 / width), widths with a partial last vector and up to 64 (the largest it takes; 65, 100: other
# forms), other kernels (5x5, 7x7, 1x3, column dilation, asymmetric and large padding: whole rows in the padding);
# 3x3 stride 2 padding 1 on even and odd widths (the last output reading past the row) and heights, one to four
# vectors per output row; multipliers, batches, activations in registers (relu6) and after (hard_swish).
@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("xs,mult,k,pads,dil,s", [
    ((1, 3, 20, 18), 1, (3, 3), (1, 1, 1, 1), (1, 1), 2), ((2, 2, 17, 35), 2, (3, 3), (1, 1, 1, 1), (1, 1), 2),
    ((1, 2, 9, 112), 1, (3, 3), (1, 1, 1, 1), (1, 1), 2), ((1, 2, 6, 127), 1, (3, 3), (1, 1, 1, 1), (1, 1), 2),
    ((1, 2, 5, 129), 1, (3, 3), (1, 1, 1, 1), (1, 1), 2), ((1, 2, 33, 64), 1, (3, 3), (1, 1, 1, 1), (1, 1), 2)])
def test_depthwise_row_vector_form_stride_2(xs, mult, k, pads, dil, s, act):
    test_depthwise_row_vector_form(xs, mult, k, pads, dil, act, s)


@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("xs,mult,k,pads,dil", [
    ((1, 3, 14, 14), 1, (3, 3), (1, 1, 1, 1), (1, 1)), ((2, 4, 9, 9), 2, (3, 3), (1, 1, 1, 1), (1, 1)),
    ((1, 2, 70, 64), 1, (3, 3), (1, 1, 1, 1), (1, 1)), ((1, 2, 5, 65), 1, (3, 3), (1, 1, 1, 1), (1, 1)),
    ((1, 2, 6, 100), 1, (3, 3), (1, 1, 1, 1), (1, 1)), ((1, 3, 130, 17), 1, (3, 3), (1, 1, 1, 1), (1, 1)),
    ((1, 3, 14, 14), 1, (5, 5), (2, 2, 2, 2), (1, 1)), ((2, 2, 11, 40), 1, (7, 7), (3, 3, 3, 3), (1, 1)),
    ((1, 2, 12, 20), 1, (1, 3), (0, 0, 1, 1), (1, 1)), ((1, 2, 12, 20), 1, (3, 3), (1, 1, 2, 2), (1, 2)),
    ((1, 2, 10, 12), 1, (3, 3), (0, 2, 1, 0), (1, 1)), ((1, 2, 6, 15), 1, (3, 3), (4, 4, 1, 1), (1, 1)),
    ((1, 2, 7, 61), 1, (3, 5), (1, 1, 2, 2), (1, 1))])
def test_depthwise_row_vector_form(xs, mult, k, pads, dil, act, s=1):
    c = xs[1]
    x, w, b = rand(*xs, seed=31, scale=3.0), rand(c * mult, 1, *k, seed=32), rand(c * mult, seed=33)
    attrs = dict(strides=[s, s], paddings=list(pads), dilations=list(dil), groups=c)
    with depthwise_rows(True):
        check_depthwise(x, w, b, attrs, act, pads, f"{xs} x{mult} k{k} s{s} {pads} {dil} {act}")


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("conv_type,xs,ws,attrs", [
    ("depthwise_conv2d", (2, 8, 11, 9), (8, 1, 3, 3), dict(strides=[2, 2], paddings=[1, 1], groups=8)),
    ("conv2d", (1, 8, 12, 12), (16, 8, 1, 1), {}),  # pointwise GEMM
    ("conv2d", (2, 8, 12, 10), (16, 8, 3, 3), dict(paddings=[1, 1])),  # Winograd
    ("conv2d", (1, 3, 15, 15), (8, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1])),  # im2col
    ("conv2d", (1, 8, 9, 9), (6, 4, 3, 3), dict(paddings=[1, 1], groups=2)),  # grouped
    ("conv2d_transpose", (1, 4, 5, 5), (4, 3, 2, 2), dict(strides=[2, 2])),
])
def test_fused_conv_activations(conv_type, xs, ws, attrs, act):
    x, w, b = rand(*xs, seed=7, scale=3.0), rand(*ws, seed=8), rand(ws[0] if conv_type != "conv2d_transpose" else ws[1],
                                                                       seed=9)
    fattrs = dict(attrs, conv_type=conv_type, act_type=act, **ACTS[act])
    got, ref = run_both("fused_conv2d", {"Input": x, "Filter": w, "Bias": b}, fattrs)
    check(got, ref, f"fused {conv_type} + {act}")
    assert (got < 0).any() or act in ("relu", "relu6", "sigmoid", "hard_sigmoid"), "inputs should reach x < 0"


def test_fused_conv_with_residual_applies_activation_last():
    x, w, b, res = rand(1, 4, 6, 6, seed=1), rand(6, 4, 3, 3, seed=2), rand(6, seed=3), rand(1, 6, 6, 6, seed=4)
    attrs = dict(paddings=[1, 1], conv_type="conv2d", act_type="relu")
    got, ref = run_both("fused_conv2d", {"Input": x, "Filter": w, "Bias": b, "ResidualData": res}, attrs)
    check(got, ref, "conv + residual + relu")
    naive = np.maximum(naive_conv(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, b) + res, 0)
    check(got, naive, "vs naive")


def _act_ref(y: np.ndarray, act: str) -> np.ndarray:
    """The activations of ACTS (Paddle's formulas) on float64 y."""
    if act == "relu":
        return np.maximum(y, 0)
    if act == "hard_swish":
        return y * np.minimum(np.maximum(y + 3.0, 0), 6.0) / 6.0
    if act == "leaky_relu":
        return np.where(y > 0, y, 0.1 * y)
    return y


@pytest.mark.parametrize("t16", [True, False], ids=["t16", "scalar"])
@pytest.mark.parametrize("act", ["", "relu", "hard_swish", "leaky_relu"])
@pytest.mark.parametrize("xs,oc,k,s,p,bias", [
    ((1, 16, 40, 40), 24, 3, 1, 1, True),   # Winograd, bands (its output transform adds the residual)
    ((2, 16, 14, 14), 24, 3, 1, 1, False),  # Winograd, one pass (on the packed tiles with AVX-512)
    ((1, 64, 7, 7), 80, 3, 1, 1, True),     # the small packed form (AVX-512; elsewhere im2col + the BLAS)
    ((1, 48, 20, 20), 40, 1, 1, 0, True),   # the wide packed form (1x1)
    ((1, 24, 31, 33), 40, 3, 2, 1, False),  # the wide packed form, gathered columns (3x3 stride 2)
    ((1, 8, 12, 12), 8, 5, 1, 2, True),     # the BLAS GEMM: conv, then the native add
])
def test_fused_conv_residual_native_forms(xs, oc, k, s, p, bias, act, t16):
    """fused_conv2d with ResidualData: act((conv + bias) + residual) from each native form (the residual added in
    the form's epilogue, or by the native add after it) against float64; a second run with another residual (the
    bound plan) gives the new sum; a residual that broadcasts takes the generic path."""
    x, w = rand(*xs, seed=31), rand(oc, xs[1], k, k, seed=32, scale=0.3)
    b = rand(oc, seed=33) if bias else None
    oh, ow = (xs[2] + 2 * p - k) // s + 1, (xs[3] + 2 * p - k) // s + 1
    attrs = dict(paddings=[p, p], strides=[s, s], conv_type="conv2d", act_type=act, **ACTS.get(act, {}))
    op = make_op("fused_conv2d", {"Input": x, "Filter": w, "Bias": b, "ResidualData": x}, attrs, {"Output": 1})
    kern = kernel_class("fused_conv2d")(op)
    kern.context = ON
    kern.prepare({})
    conv = naive_conv(x, w, (s, s), (p, p, p, p), (1, 1), 1, b).astype(np.float64)
    for seed in (34, 35):  # the second run: the plan bound by the first
        r = rand(xs[0], oc, oh, ow, seed=seed)
        ins = {"Input": [x], "Filter": [w], "ResidualData": [r]} | ({"Bias": [b]} if bias else {})
        with shuffles16(t16):  # the small form's epilogue: 16x16 transposes, or row by row
            got = kern.run(ins)["Output"][0]
        check(got, _act_ref(conv + r, act).astype(np.float32), f"conv {xs} k{k} s{s} + residual, {act or 'no act'}")
    rb = rand(1, oc, 1, 1, seed=36)  # broadcast along the map: not the native epilogue
    ins = {"Input": [x], "Filter": [w], "ResidualData": [rb]} | ({"Bias": [b]} if bias else {})
    check(kern.run(ins)["Output"][0], _act_ref(conv + rb, act).astype(np.float32), "broadcast residual")


@pytest.mark.parametrize("act", ["relu", "hard_swish", "leaky_relu", "gelu"])
@pytest.mark.parametrize("op_type,ins", [
    ("fusion_elementwise_add_activation", {"X": rand(2, 3, 4, 5, seed=1, scale=3), "Y": rand(2, 3, 4, 5, seed=2)}),
    # same shape, >= native.ADD_ACT_MIN floats: native.add_act
    ("fusion_elementwise_add_activation", {"X": rand(2, 8, 33, 40, seed=6, scale=3), "Y": rand(2, 8, 33, 40, seed=7)}),
    ("fusion_elementwise_mul_activation", {"X": rand(2, 3, 4, 5, seed=3, scale=3), "Y": rand(3, seed=4)}),
    ("fusion_scale_activation", {"X": rand(4, 7, seed=5, scale=3)}),
])
def test_fused_elementwise_activation_in_place(op_type, ins, act):
    attrs = dict(act_type=act, **ACTS.get(act, {}))
    if op_type == "fusion_elementwise_mul_activation":
        attrs["axis"] = 1
    if op_type == "fusion_scale_activation":
        attrs.update(scale=1.5, bias=0.25)
    before = {k: v.copy() for k, v in ins.items()}
    got, ref = run_both(op_type, ins, attrs, "Out")
    check(got, ref, f"{op_type} + {act}", tol=1e-6)
    for k, v in ins.items():
        assert np.array_equal(v, before[k]), f"input {k} was modified"


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("act", [None, "relu", "relu6"])
@pytest.mark.parametrize("size", [1, 4095, 4096 * 3 + 5, 40000])
def test_add_act_is_numpy_add_then_the_activation(size, act, threads):
    """native.add_act: NumPy's float32 sums (NaN, inf and -0.0 included) and the activation bias_act applies, bit
    for bit, on any thread count (blocks of 4096 floats: sizes around them)."""
    x, y = rand(size, seed=31, scale=4), rand(size, seed=32, scale=4)
    x[::97], y[1::89], x[2::101], y[2::101] = np.nan, np.inf, -0.0, -0.0
    code = {None: native.NO_ACT, "relu": (1, native.NO_PARAMS), "relu6": (2, (6.0, 0.0, 0.0))}[act]
    ref = x + y
    if act:
        native.bias_act(ref.reshape(1, 1, -1), None, code)
    with native_threads(threads):
        got = native.add_act(x, y, code)
    assert np.array_equal(got, ref, equal_nan=True)
    if act == "relu":
        assert np.array_equal(got, np.maximum(x + y, 0), equal_nan=True)


def test_elementwise_add_same_shape_runs_native():
    """elementwise_add of two float32 arrays of one shape (MobileNetV2's residuals) takes native.add_act; other
    shapes (broadcasting) and dtypes keep NumPy's add. Values equal either way."""
    x, y = rand(2, 16, 30, 30, seed=41), rand(2, 16, 30, 30, seed=42)
    assert native.add_act_applies(x, y)
    got, ref = run_both("elementwise_add", {"X": x, "Y": y}, {"axis": -1}, "Out")
    assert np.array_equal(got, x + y) and np.array_equal(ref, x + y)
    b = rand(16, seed=43)
    assert not native.add_act_applies(x, np.broadcast_to(b.reshape(16, 1, 1), x.shape))
    got, _ = run_both("elementwise_add", {"X": x, "Y": b}, {"axis": 1}, "Out")
    assert np.array_equal(got, x + b.reshape(1, 16, 1, 1))
    assert not native.add_act_applies(x.astype(np.float64), y.astype(np.float64))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("xs,ys", [((4, 16, 56, 56), (4, 16, 1, 1)), ((4, 576, 7, 7), (4, 576, 1, 1)),
                                   ((2, 3, 5, 40, 41), (2, 3, 1, 1, 1)), ((3, 7, 1000), (3, 1, 1)),
                                   ((1, 96, 14, 14), (1, 96, 1, 1)), ((4, 16, 56, 56), (4, 16, 56, 1))])
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply")
def test_mul_by_gates_is_numpy_multiply(xs, ys, threads):
    """elementwise_mul of a map by per-row gates (squeeze-and-excitation: (N, C, H, W) * (N, C, 1, 1), either
    order) takes native.mul_rows: NumPy's float32 products bit for bit (NaN, inf and -0.0 included) on any thread
    count, and the op gives them."""
    x, y = rand(*xs, seed=51, scale=3), rand(*ys, seed=52, scale=3)
    x.reshape(-1)[::97], x.reshape(-1)[1::89] = np.nan, np.inf
    y.reshape(-1)[0] = -0.0
    for a, b in ((x, y), (y, x)):  # (inf * -0.0 is NaN: NumPy warns)
        assert native.gate_operands(a, b) is not None
        with native_threads(threads):
            got = native.mul_gates_or_none(a, b, ON)
        assert got.shape == xs and np.array_equal(got, a * b, equal_nan=True)
        got, ref = run_both("elementwise_mul", {"X": a, "Y": b}, {"axis": -1}, "Out")
        assert np.array_equal(got, a * b, equal_nan=True) and np.array_equal(ref, a * b, equal_nan=True)


@pytest.mark.parametrize("xs,ys", [
    ((4, 16, 56, 56), (4, 16, 1, 56)),  # a gate per column: not per row of the map
    ((4, 16, 56, 56), (1, 16, 1, 1)),  # one gate per channel for every image: broadcast over the batch
    ((4, 16, 56, 56), (16, 1, 1)),  # another rank
    ((2, 8, 4, 4), (2, 8, 1, 1)),  # below ADD_ACT_MIN floats
    ((4, 16, 56, 56), (4, 16, 56, 56)),  # same shape
])
def test_mul_by_gates_not_taken_elsewhere(xs, ys):
    """Other broadcasts keep NumPy's multiply (and give its values through the op)."""
    x, y = rand(*xs, seed=53), rand(*ys, seed=54)
    assert native.gate_operands(x, y) is None and native.mul_gates_or_none(x, y, ON) is None
    assert native.gate_operands(x.astype(np.float64), y.astype(np.float64)) is None
    got, _ = run_both("elementwise_mul", {"X": x, "Y": y}, {"axis": -1}, "Out")
    assert np.array_equal(got, x * y)


@pytest.mark.parametrize("act", [None, "relu", "hard_sigmoid", "hard_swish"])
@pytest.mark.parametrize("n,c,oc", [(4, 144, 576), (1, 16, 8), (3, 576, 144), (2, 7, 5)])
def test_conv_on_1x1_maps_is_one_product_over_the_batch(n, c, oc, act):
    """A 1x1 conv of 1x1 maps (squeeze-and-excitation's) runs as native_plans.rows_plan (x (N, C) @ W.T for the whole
    batch) where the BLAS is there; values as the NumPy path and the naive conv, any fused activation."""
    if not native.gemm_available():
        pytest.skip("no BLAS sgemm found for the native GEMM")
    x, w, b = rand(n, c, 1, 1, seed=61), rand(oc, c, 1, 1, seed=62), rand(oc, seed=63)
    attrs = dict(act_type=act, **ACTS[act]) if act else {}
    op_type = "fused_conv2d" if act else "conv2d"
    ins = {"Input": x, "Filter": w, "Bias": b}
    got, ref = run_both(op_type, ins, attrs)
    check(got, ref, f"{op_type} 1x1 on 1x1 maps + {act}")
    if act is None:
        check(got, naive_conv(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1, b), "vs naive")
    op = make_op(op_type, ins, attrs, {"Output": 1})
    k = kernel_class(op_type)(op)
    k.context = ON
    k.run({name: [v] for name, v in ins.items()})
    conv = k.base if act else k  # fused_conv2d runs its conv kernel
    assert conv._plan is not None and conv._plan[4].__qualname__.startswith("rows_plan")


# ---------------------------------------------------------------------------------------------- GEMM convs
GEMM_CASES = [
    ((2, 16, 7, 9), (24, 16, 1, 1), {}),
    ((1, 8, 9, 11), (5, 8, 1, 1), dict(strides=[2, 2])),
    ((1, 16, 20, 20), (32, 16, 3, 3), dict(paddings=[1, 1])),  # Winograd
    ((1, 16, 9, 8), (8, 16, 3, 3), dict(paddings=[0, 1, 2, 1])),  # Winograd, asymmetric pads, odd sizes
    ((1, 8, 17, 17), (8, 8, 3, 3), dict(paddings=[1, 1], dilations=[2, 2])),  # im2col (dilated)
    ((1, 3, 33, 30), (16, 3, 7, 7), dict(strides=[2, 2], paddings=[3, 3])),
    ((2, 12, 10, 10), (12, 4, 3, 3), dict(paddings=[1, 1], groups=3)),
    ((1, 8, 5, 5), (4, 8, 2, 2), dict(strides=[1, 2], padding_algorithm="SAME")),
]


def _pads(xs, ws, attrs):
    from pdlite.operators.nn import conv2d_geometry
    from pdlite.operators.registry import OPS

    g = conv2d_geometry({**OPS["conv2d"].defaults, **attrs}, xs, ws)  # geometry reads attached attributes
    return g.pads, (g.sh, g.sw), (g.dh, g.dw), g.groups


@pytest.mark.parametrize("fused_im2col", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", GEMM_CASES)
def test_gemm_convs_match_numpy_and_naive(xs, ws, attrs, fused_im2col, monkeypatch):
    if fused_im2col:  # every im2col conv gathers its columns block by block
        monkeypatch.setattr(conv_module, "FUSED_IM2COL_FLOATS", 0)
    x, w, b = rand(*xs, seed=11), rand(*ws, seed=12), rand(ws[0], seed=13)
    got, ref = run_both("conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs)
    check(got, ref, f"conv2d {xs} {ws} {attrs}")
    pads, strides, dil, groups = _pads(xs, ws, attrs)
    check(got, naive_conv(x, w, strides, pads, dil, groups, b), "vs naive")


@pytest.mark.parametrize("n,c,oc,h,w,pads", [
    (1, 8, 8, 4, 4, (1, 1, 1, 1)), (2, 9, 17, 13, 6, (1, 0, 0, 1)), (1, 8, 8, 8, 8, (0, 0, 0, 0)),
    (1, 32, 48, 30, 33, (2, 2, 1, 1)),
    # small images of a batch share passes: all 5 in one (4x4 tiles), 7 in passes of 5 and 2 (7x7 tiles)
    (5, 16, 24, 7, 7, (1, 1, 1, 1)), (7, 8, 12, 13, 14, (1, 1, 1, 0)),
    # large images go through in bands of tile rows, each band whole on one thread: 12 + 11 rows of 17 tiles per
    # image; one row of 300 tiles per band (5 bands); 32x33 outputs on one image: 2 bands of 8 rows
    (2, 9, 17, 45, 33, (1, 1, 1, 1)), (1, 8, 8, 9, 600, (1, 1, 0, 1)), (1, 16, 8, 32, 33, (1, 1, 1, 1)),
    # 70 outputs: packed in panels of 64 + 16 rows (80, the last 10 zero); 33 channels; 3x5 = 15 tiles per image,
    # 3 images in a pass of 45 tile columns (7 column tiles, the last with 3 of zeros)
    (3, 33, 70, 6, 10, (1, 1, 1, 1)),
])
@pytest.mark.parametrize("packed", [False, True], ids=["blas", "packed"])
def test_winograd_direct(n, c, oc, h, w, pads, packed):
    """Both forms of the 16 products: the BLAS's and packed_conv's register tiles (correct on every instruction
    set, chosen on AVX-512 for narrow passes)."""
    x, wt, b = rand(n, c, h, w, seed=21), rand(oc, c, 3, 3, seed=22), rand(oc, seed=23)
    oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
    if not native.gemm_available():
        pytest.skip("no BLAS sgemm found for the native GEMM")
    got = native.winograd_conv3x3(x, native.winograd_weights(wt, packed), b, oh, ow, (pads[0], pads[2]))
    check(got, naive_conv(x, wt, (1, 1), pads, (1, 1), 1, b), "winograd F(2x2,3x3)")


DIRECT_CASES = [  # (x shape, OC, kernel, strides, pads (top, bottom, left, right), dilations)
    ((1, 3, 224, 224), 16, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # MobileNetV3's stem
    ((2, 3, 61, 58), 64, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # ResNet's stem, odd sizes
    ((1, 3, 33, 50), 32, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # stride 1, a partial last vector
    ((3, 1, 17, 9), 16, (5, 3), (2, 1), (2, 0, 1, 2), (1, 1)),  # one channel, mixed strides, asymmetric pads
    ((1, 4, 20, 40), 48, (3, 3), (1, 2), (0, 2, 0, 0), (2, 2)),  # four channels, dilated
    ((1, 2, 5, 70), 16, (3, 5), (3, 2), (4, 4, 5, 5), (1, 1)),  # padding wider than the window's reach
]


@pytest.mark.parametrize("act", [None, "relu", "relu6", "hard_swish", "leaky_relu"])
@pytest.mark.parametrize("xs,oc,k,s,p,d", DIRECT_CASES)
def test_direct_conv(xs, oc, k, s, p, d, act):
    """direct_conv (few input channels computed in place, bands of rows copied zero-padded) against the naive
    conv with the activation applied after, with and without bias; bit for bit at 1-3 threads. Correct on every
    instruction set (conv.py takes it on AVX-512 only)."""
    x, w, b = rand(*xs, seed=71), rand(oc, xs[1], *k, seed=72), rand(oc, seed=73)
    oh = (xs[2] + p[0] + p[1] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (xs[3] + p[2] + p[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    code = {None: native.NO_ACT, "relu": (1, native.NO_PARAMS), "relu6": (2, (6.0, 0.0, 0.0)),
            "hard_swish": (4, (3.0, 6.0, 6.0)), "leaky_relu": (3, (0.1, 0.0, 0.0))}[act]
    wd = native.direct_conv_weights(w)
    for bias in (b, None):
        outs = []
        for threads in (1, 2, 3):
            with native_threads(threads):
                outs.append(native_plans.direct_plan(wd, bias, xs, oc, oh, ow, k, s, d, (p[0], p[2]), code)(x))
        ref = naive_conv(x, w, s, p, d, 1, bias).astype(np.float32)
        if act:
            native.bias_act(ref, None, code)
        check(outs[0], ref, f"direct_conv {xs} {oc} {k} {s} {p} {d} {act}")
        assert all(np.array_equal(o, outs[0], equal_nan=True) for o in outs[1:]), "differs across thread counts"


def _run_form(form: str, act) -> np.ndarray:
    """One register-tiled form's output with activation `act` (fixed inputs, a NaN among them)."""
    b = rand(64, seed=92)
    if form == "direct":
        x = rand(2, 3, 20, 20, seed=91, scale=4)
        x[0, 0, 5, 5] = np.nan
        wd = native.direct_conv_weights(rand(32, 3, 3, 3, seed=93))
        return native_plans.direct_plan(wd, b[:32], x.shape, 32, 10, 10, (3, 3), (2, 2), (1, 1), (1, 1), act)(x)
    if form == "packed_fc":
        x = rand(19, 40, seed=94, scale=4)
        x[3, 3] = np.nan
        return native.packed_fc(x, native.pack_fc_weights(rand(40, 50, seed=95)), 50, b[:50], act)
    wide = form == "packed_wide"
    side = 20 if wide else 14  # the small form up to 256 outputs per channel
    x = rand(1, 64, side, side, seed=96, scale=4)
    x[0, 1, 2, 3] = np.nan
    wp = native.pack_weights(rand(40, 64, 3, 3, seed=97), wide)
    return native.packed_conv(x, wp, b[:40], 40, side, side, (3, 3), (1, 1), (1, 1), (1, 1), act, wide)


@pytest.mark.parametrize("act", [(3, (0.1, 0.0, 0.0)), (4, (3.0, 6.0, 6.0)), (2, (6.0, 0.0, 0.0))],
                         ids=["leaky_relu", "hard_swish", "relu6"])
@pytest.mark.parametrize("form", ["direct", "packed_small", "packed_wide", "packed_fc"])
def test_activation_in_registers_is_bias_act(form, act):
    """The register-tiled forms apply relu6, leaky_relu and hard_swish to their vectors (bias_act_v16): the same
    bits as the activation applied after by bias_act (bias_act_copy's operations in its order), NaN included."""
    fused = _run_form(form, act)
    after = _run_form(form, native.NO_ACT)
    native.bias_act(after.reshape(1, 1, -1), None, act)
    assert np.isnan(fused).any() and np.array_equal(fused, after, equal_nan=True)


def test_direct_conv_is_taken_for_stems(monkeypatch):
    """A stem conv (3 channels, whole blocks of 16 outputs) takes direct_conv on AVX-512, with its activation, and
    gives the NumPy path's values; 20 output channels (a partial block) or 8 input channels do not take it."""
    made = []
    plan = native_plans.direct_plan
    monkeypatch.setattr(native_plans, "direct_plan", lambda *a: made.append(a) or plan(*a))
    x = rand(1, 3, 40, 40, seed=74)
    for oc, c, taken in ((32, 3, True), (20, 3, False), (32, 8, False)):
        xi = x if c == 3 else rand(1, c, 40, 40, seed=75)
        ins = {"Input": xi, "Filter": rand(oc, c, 3, 3, seed=76), "Bias": rand(oc, seed=77)}
        attrs = dict(strides=[2, 2], paddings=[1, 1], act_type="hard_swish", **ACTS["hard_swish"])
        got, ref = run_both("fused_conv2d", ins, attrs)
        check(got, ref, f"fused_conv2d stem {oc} {c}")
        op = make_op("fused_conv2d", ins, attrs, {"Output": 1})
        k = kernel_class("fused_conv2d")(op)
        k.context = ON
        made.clear()
        k.run({name: [v] for name, v in ins.items()})
        assert bool(made) == (taken and native.isa() == "avx512"), (oc, c)
        assert not made or made[0][-1] == native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0,
                                                                           "scale": 6.0})


def test_direct_conv_rejects_bad_geometry():
    wd = native.direct_conv_weights(rand(16, 3, 3, 3, seed=78))
    with pytest.raises(ValueError, match="strides along the width 1 or 2"):
        native_plans.direct_plan(wd, None, (1, 3, 20, 20), 16, 6, 6, (3, 3), (3, 3), (1, 1), (0, 0), native.NO_ACT)(
            rand(1, 3, 20, 20))
    with pytest.raises(ValueError, match="direct_conv input"):
        native_plans.direct_plan(wd, None, (1, 3, 20, 20), 16, 9, 9, (3, 3), (2, 2), (1, 1), (0, 0), native.NO_ACT)(
            rand(1, 3, 20, 21))


@pytest.mark.parametrize("n,oh,ow,tiles", [(1, 14, 14, 49), (4, 14, 14, 196), (2, 7, 7, 32), (9, 7, 7, 144),
                                           (17, 7, 7, 256), (1, 56, 56, 252), (3, 5, 600, 300), (1, 9, 9, 25)])
def test_winograd_pass_tiles(n, oh, ow, tiles):
    """The widest pass of winograd.c's split (which decides the products' form): small images side by side up to
    256 tile columns, large ones in bands of whole tile rows up to 256."""
    assert native.winograd_pass_tiles(n, oh, ow) == tiles


def test_winograd_can_be_turned_off():
    x, w = rand(1, 16, 12, 12, seed=1), rand(16, 16, 3, 3, seed=2)
    op = make_op("conv2d", {"Input": x, "Filter": w}, dict(paddings=[1, 1]), {"Output": 1})
    k = kernel_class("conv2d")(op)
    k.context = KernelContext({"host_native": True, "host_winograd": False})
    got = k.run({"Input": [x], "Filter": [w]})["Output"][0]
    assert k.use_native() and not k._winograd
    check(got, naive_conv(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1), "im2col path")


# ---------------------------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("is_max", [False, True])
@pytest.mark.parametrize("shape", [(4, 576, 7, 7), (1, 13, 1, 1), (3, 5, 16, 16), (2, 9, 3, 5), (1, 20, 17, 16)])
def test_global_pool_of_small_planes(shape, is_max, threads):
    """Whole-plane windows (global pooling: 8 lane partials a plane, 4 planes' chains interleaved, any plane size):
    mean against float64 (tolerance TOL), max exact with NaN propagated; the same bits at any thread count."""
    x = rand(*shape, seed=81, scale=3)
    x[0, 0, 0, 0] = np.nan
    with native_threads(threads):
        got = native.pool2d(x, 1, 1, shape[2:], shape[2:], (0, 0), is_max, True)
    with native_threads(1):
        one = native.pool2d(x, 1, 1, shape[2:], shape[2:], (0, 0), is_max, True)
    assert np.array_equal(got, one, equal_nan=True)
    ref = (x.max(axis=(2, 3)) if is_max else x.astype(np.float64).mean(axis=(2, 3)))[:, :, None, None]
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(ref[0, 0, 0, 0])
    if is_max:
        assert np.array_equal(got, ref, equal_nan=True)
    else:
        check(got.reshape(-1)[1:], ref.reshape(-1)[1:].astype(np.float32), f"global avg {shape}")


POOL_CASES = [
    ((1, 4, 12, 12), dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1])),
    ((2, 3, 11, 13), dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1], ceil_mode=True)),
    ((1, 3, 9, 10), dict(ksize=[2, 3], strides=[1, 2], paddings=[0, 1, 1, 0])),
    ((1, 3, 8, 8), dict(ksize=[3, 3], strides=[3, 3], padding_algorithm="SAME")),
    ((1, 5, 7, 7), dict(ksize=[7, 7], global_pooling=True)),
    ((1, 5, 8, 12), dict(ksize=[2, 3], adaptive=True)),  # evenly dividing adaptive
    ((1, 5, 7, 10), dict(ksize=[3, 4], adaptive=True)),  # unequal adaptive windows: NumPy
    ((1, 2, 5, 5), dict(ksize=[4, 4], strides=[3, 3], paddings=[2, 2], ceil_mode=True)),  # windows in the padding
    ((1, 2, 6, 40), dict(ksize=[1, 5], strides=[1, 3], paddings=[0, 2])),
]


@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_pool2d_native_matches_numpy(xs, attrs, ptype, exclusive):
    x = rand(*xs, seed=31)
    with np.errstate(divide="ignore", invalid="ignore"):
        got, ref = run_both("pool2d", {"X": x}, dict(attrs, pooling_type=ptype, exclusive=exclusive), "Out")
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN positions differ"
    fin = ~np.isnan(ref)
    check(np.where(fin, got, 0), np.where(fin, ref, 0), f"pool2d {ptype} {attrs}")


@pytest.mark.parametrize("pad,ceil", [(1, False), (0, False), (2, False), (1, True)])
@pytest.mark.parametrize("t16", [True, False], ids=["t16", "scalar"])
# 3, 24, 32 and 55 inner outputs per row (vector loops and tails; 16 at a time with t16)
@pytest.mark.parametrize("h,w", [(9, 9), (34, 51), (8, 66), (12, 112)])
def test_max_pool_naive_and_nan(h, w, t16, pad, ceil):
    """The 3x3 stride-2 max pool against a naive reference, NaN propagated (inside, at the first and last column);
    t16: every output of a row 16 at a time by shuffles, the image's edges read as -FLT_MAX (the default with
    AVX-512), or the scalar form; paddings 0-2 and a ceil-mode last window reaching past the padding."""
    x = rand(1, 2, h, w, seed=41)
    x[0, 1, 3, 3] = np.nan  # in 2 x 2 windows
    x[0, 0, h - 2, w - 4] = np.nan
    x[0, 1, h - 1, 0] = x[0, 0, 1, w - 1] = np.nan
    oh, ow = (h + 2 * pad - 3) // 2 + 1, (w + 2 * pad - 3 + (1 if ceil else 0)) // 2 + 1
    with shuffles16(t16):
        got = native.pool2d(x, oh, ow, (3, 3), (2, 2), (pad, pad), True, True)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad + 2), (pad, pad + 2)), constant_values=-np.inf)
    ref = np.stack([np.stack([xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3)) for j in range(ow)], -1)
                    for i in range(oh)], -2)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.isnan(got[0, 0]).any() and np.isnan(got[0, 1]).any()
    assert np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])


# ---------------------------------------------------------------------------------------------- fc, threads, API
@pytest.mark.parametrize("act", ["", "relu", "hard_swish", "hard_sigmoid", "gelu"])
def test_fc_activation(act):
    x, w, b = rand(3, 20, seed=51, scale=4.0), rand(20, 7, seed=52), rand(7, seed=53)
    attrs = {"in_num_col_dims": 1, "activation_type": act}
    got, ref = run_both("fc", {"Input": x, "W": w, "Bias": b}, attrs, "Out")
    check(got, ref, f"fc {act}")


@pytest.mark.parametrize("act", ["", "relu", "hard_swish", "gelu", "sigmoid"])
@pytest.mark.parametrize("shape,n,bias", [((2, 33, 128), 512, True), ((4, 32, 96), 1000, False), ((130, 70), 600, True)])
def test_fc_native_gemm(act, shape, n, bias):
    """fc above FC_NATIVE_MIN: the native product with the per-column bias and the activation in its blocks."""
    from pdlite.kernels.host.fused import FC_NATIVE_MIN

    x, w = rand(*shape, seed=54, scale=2.0), rand(shape[-1], n, seed=55, scale=0.1)
    assert x.size * n >= FC_NATIVE_MIN
    ins = {"Input": x, "W": w, "Bias": rand(n, seed=56) if bias else None}
    got, ref = run_both("fc", ins, {"in_num_col_dims": len(shape) - 1, "activation_type": act}, "Out")
    check(got, ref, f"fc {shape} x {n} {act}")
    exact = x.astype(np.float64) @ w + (ins["Bias"] if bias else 0)
    if not act:
        check(got, exact.astype(np.float32), "fc vs float64")


@pytest.mark.parametrize("act", ["", "relu", "relu6", "leaky_relu", "hard_swish"])
@pytest.mark.parametrize("m,k,n,bias", [(8, 1, 1, True), (13, 33, 50, True), (130, 70, 600, False),
                                        (64, 128, 96, True), (9, 257, 47, True), (32, 128, 128, True),
                                        (32, 512, 128, True), (300, 256, 64, False)])
def test_packed_fc(act, m, k, n, bias):
    """packed_fc (the packed conv's register tiles for fc: rows in panels of 8, W in tiles of 48 columns; partial
    panels and tiles, one-step reductions) against float64, and bit for bit at 1-3 threads: products under
    packed_gemm.c's FC_PAR_MACS on the calling thread (13 x 33 x 50, 9 x 257 x 47), above it on the pool with x
    packed on the calling thread (the transformer's 32 x 128 x 128, 32 x 512 x 128) or, from FC_PACK_PAR_FLOATS, on
    the pool (300 x 256 x 64); rows in
    blocks of 4 panels, or of 2 or 1 where the column tiles are few (fc_blocks: 64 x 128 x 96, 32 x 512 x 128)."""
    x, w = rand(m, k, seed=57, scale=2.0), rand(k, n, seed=58, scale=0.3)
    b = rand(n, seed=59) if bias else None
    attrs = {"relu6": {"threshold": 6.0}, "leaky_relu": {"alpha": 0.1},
             "hard_swish": {"offset": 3.0, "threshold": 6.0, "scale": 6.0}}.get(act, {})
    code = native.activation(act, attrs) if act else native.NO_ACT
    wp = native.pack_fc_weights(w)
    outs = []
    for t in (1, 2, 3):
        with native_threads(t):
            outs.append(native.packed_fc(x, wp, n, b, code))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    ref = (x.astype(np.float64) @ w + (b if bias else 0)).astype(np.float32)
    conv_module.numpy_act_inplace(ref, code)  # the NumPy kernels' activation
    check(outs[0], ref, f"packed_fc {m}x{k}x{n} {act}")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_give_the_same_results(threads):
    """Results do not depend on the thread count, bit for bit."""
    x, wd, wp = rand(2, 24, 30, 30, seed=61), rand(24, 1, 3, 3, seed=62), rand(40, 24, 3, 3, seed=63)
    xs = rand(3, 24, 14, 14, seed=64)  # Winograd on packed_conv's tiles: 3 images in a pass of 147 tile columns
    outs = []
    for t in (1, threads):
        with native_threads(t):
            a = native.depthwise_conv2d(x, wd.reshape(24, 9), None, 24, 30, 30, (3, 3), (1, 1), (1, 1), (1, 1))
            b = native.pool2d(x, 15, 15, (3, 3), (2, 2), (1, 1), True, True)
            c = native.im2col(x, 15, 15, (3, 3), (2, 2), (1, 1), (1, 1))
            outs.append((a, b, c))
            if native.gemm_available():
                outs[-1] += (native.winograd_conv3x3(x, native.winograd_weights(wp), None, 30, 30, (1, 1)),
                             native.conv_gemm(wp.reshape(1, 40, -1), c, None),
                             native.winograd_conv3x3(xs, native.winograd_weights(wp, True), None, 14, 14, (1, 1)))
    for i, (u, v) in enumerate(zip(*outs)):  # work splits do not depend on the thread count
        assert np.array_equal(u, v), f"output {i} differs with {threads} threads"


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n,grain", [(1, 1), (7, 1), (100, 4), (101, 8), (3, 5)])
def test_parallel_ranges_run_every_item_once(threads, n, grain):
    """parallel_ranges (the wide packed conv's split): each item runs exactly once, whatever the thread count."""
    from pdlite.kernels.host import _native

    with native_threads(threads):
        runs, _ = _native._ranges_trace(n, grain, 0)
    assert runs == [1] * n


def test_parallel_ranges_move_work_off_a_slow_thread():
    """A thread slower than the others (here the calling thread, 1 ms per item) ends with fewer items: the other
    takes them from the back of its range, so the job does not wait on it; each item still runs once."""
    from pdlite.kernels.host import _native

    n = 200  # the calling thread alone would take 100 ms over its own range: time for the other to start
    with native_threads(2):
        runs, by_caller = _native._ranges_trace(n, 1, 1000)
    assert runs == [1] * n
    own = by_caller[: n // 2]  # the calling thread's range: from its front, until the other took the rest
    taken = own.index(False) if False in own else n // 2
    assert all(own[:taken]) and not any(own[taken:]), f"taken from the back only: {by_caller}"
    assert taken < n // 2, f"nothing moved off the slow thread: {by_caller}"
    assert not any(by_caller[n // 2:]), "the slow thread took items of the other's range"


def test_wrappers_check_buffers():
    x = rand(1, 4, 6, 6)
    with pytest.raises(ValueError, match="C-contiguous float32"):
        native.depthwise_conv2d(x[:, :, ::2], rand(4, 9), None, 4, 3, 6, (3, 3), (1, 1), (1, 1), (1, 1))
    with pytest.raises(ValueError, match="C-contiguous float32"):
        native.pool2d(x.astype(np.float64), 3, 3, (2, 2), (2, 2), (0, 0), True, True)
    from pdlite.kernels.host import _native

    with pytest.raises(ValueError, match="expected 144 float32 values"):
        _native.depthwise_conv2d(rand(1, 4, 6, 5), rand(4, 9), None, np.empty((1, 4, 6, 6), np.float32),
                                 (1, 4, 6, 6, 4, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1), 0, (0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="bad geometry"):
        _native.pool2d(x, np.empty(4, np.float32), (4, 6, 6, 1, 1, 0, 3, 1, 1, 0, 0), 1, 1)
    with pytest.raises(ValueError, match="activation"):
        _native.bias_act(x, None, (1, 4, 36), 99, (0.0, 0.0, 0.0))


def test_option_and_default_select_the_path():
    assert native.use_native(KernelContext({})) == native.DEFAULT_ON
    assert native.use_native(ON) and not native.use_native(OFF)
    assert not native.use_native(KernelContext({"host_native": "0"}))
    before = native.DEFAULT_ON
    try:
        native.set_default_enabled(False)
        assert not native.use_native(KernelContext({})) and native.use_native(ON)
    finally:
        native.set_default_enabled(before)


_ISA_SCRIPT = r"""
import numpy as np
from pdlite.kernels.host import _native, native, native_plans
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 16, 19, 21), dtype=np.float32)
wd, b = rng.standard_normal((16, 25), dtype=np.float32), rng.standard_normal(16).astype(np.float32)
out = {"isa": _native.isa()}
out["dw"] = native.depthwise_conv2d(x, wd, b, 16, 10, 11, (5, 5), (2, 2), (1, 1), (2, 2), (4, (3.0, 6.0, 6.0)))
out["dw3"] = native.depthwise_conv2d(x, np.ascontiguousarray(wd[:, :9]), b, 16, 19, 21, (3, 3), (1, 1), (1, 1),
                                     (1, 1), (2, (6.0, 0.0, 0.0)))  # the 3x3 "same" path
out["pool"] = native.pool2d(x, 10, 11, (3, 3), (2, 2), (1, 1), False, True)
out["global_pool"] = native.pool2d(x[:, :, :7, :7].copy(), 1, 1, (7, 7), (7, 7), (0, 0), False, True)
out["gelu"] = native.bias_act(x.copy(), b, native.activation("gelu", {}))
out["softmax"] = native.softmax(x * 9)
out["layer_norm"] = native.layer_norm(x.reshape(16 * 19, 21), wd[0, :21].copy(), None, 1e-5, False)[0]
wk = rng.standard_normal((20, 16 * 9), dtype=np.float32)
out["packed"] = native.packed_conv(x, native.pack_weights(wk.reshape(20, 16, 3, 3)), None, 20, 10, 11, (3, 3),
                                   (2, 2), (1, 1), (1, 1), (1, (0.0, 0.0, 0.0)))
out["packed_wide"] = native.packed_conv(x, native.pack_weights(wk[:, :16].reshape(20, 16, 1, 1), True), None, 20, 19, 21, (1, 1), (1, 1),
                                        (1, 1), (0, 0), (1, (0.0, 0.0, 0.0)), True)
if native.gemm_available():
    w3 = rng.standard_normal((8, 16, 3, 3), dtype=np.float32)
    out["wino"] = native.winograd_conv3x3(x, native.winograd_weights(w3), None, 19, 21, (1, 1), (2, (6.0, 0, 0)))
    xb = rng.standard_normal((3, 16, 7, 7), dtype=np.float32)
    out["wino_batch"] = native.winograd_conv3x3(xb, native.winograd_weights(w3), b[:8], 7, 7, (1, 1), (6, (0, 0, 0)))
    out["wino_packed"] = native.winograd_conv3x3(xb, native.winograd_weights(w3, True), b[:8], 7, 7, (1, 1),
                                                 (1, (0, 0, 0)))
x3 = rng.standard_normal((2, 3, 23, 37), dtype=np.float32)
w7 = rng.standard_normal((32, 3, 7, 7), dtype=np.float32)
out["direct"] = native_plans.direct_plan(native.direct_conv_weights(w7), b[:32] if b.size >= 32 else None, x3.shape,
                                         32, 9, 17, (7, 7), (2, 2), (1, 1), (1, 3), (4, (3.0, 6.0, 6.0)))(x3)
out["mul_rows"] = native.mul_gates_or_none(rng.standard_normal((2, 16, 30, 30), dtype=np.float32),
                                           rng.standard_normal((2, 16, 1, 1), dtype=np.float32), None)
np.savez(__import__("sys").argv[1], **out)
"""


def _cpu_features() -> set[str] | None:
    """The SIMD features the OS reports for this CPU (x86 flags, aarch64 HWCAP), independently of the extension's own
    check; None where it reports none."""
    info = cpu_features.cpu_info()
    return None if info.source.startswith("none") else set(info.features)


# the CPU features each instruction-set version needs (as native_src/module.c's pick_isa checks them), and the
# versions of each architecture, best first
ISA_NEEDS = {"baseline": set(), "avx2": {"avx2", "fma"},
             "avx512": {"avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq"}, "neon": {"asimd"}}
ARCH_ISAS = {"x86": ("avx512", "avx2", "baseline"), "arm64": ("neon", "baseline")}


def _arch() -> str | None:
    return "x86" if cpu_features.is_x86() else "arm64" if cpu_features.is_arm64() else None


def _run_isa(isa: str, tmp_path) -> dict[str, np.ndarray]:
    path = tmp_path / f"{isa}.npz"
    env = dict(os.environ, PDLITE_NATIVE_ISA=isa)
    subprocess.run([sys.executable, "-c", _ISA_SCRIPT, str(path)], env=env, check=True,
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return dict(np.load(path))


@pytest.mark.parametrize("isa", ["avx2", "avx512", "neon"])
def test_every_instruction_set_version_agrees(isa, tmp_path):
    """Each vector build of the kernels (forced by PDLITE_NATIVE_ISA; on aarch64 the default) ran and agrees with the
    baseline build.

    Skipped only where this machine cannot run that version (another architecture's, or its features, read from the
    OS independently of the extension's own check, lack one); where it can, the subprocess must report that it ran
    exactly that version."""
    arch, flags = _arch(), _cpu_features()
    if arch is None or flags is None:
        pytest.skip(f"the OS reports no SIMD features for this CPU ({platform.machine()})")
    if isa not in ARCH_ISAS[arch]:
        pytest.skip(f"{isa} is another architecture's instruction set (this CPU: {platform.machine()})")
    missing = ISA_NEEDS[isa] - flags
    if missing:
        pytest.skip(f"this CPU cannot run the {isa} kernels (lacks {sorted(missing)})")
    base, got = _run_isa("baseline", tmp_path), _run_isa(isa, tmp_path)
    assert str(base["isa"]) == "baseline"
    assert str(got["isa"]) == isa, f"asked for {isa}, the kernels ran {got['isa']}"
    for k in base:
        if k != "isa":
            check(got[k], base[k], f"{isa} vs baseline: {k}")
    for k in SAME_BITS_EVERY_ISA:
        assert np.array_equal(got[k], base[k]), f"{isa} vs baseline: {k} not bit-identical"


# outputs computed by the same operations in the same order on every ISA (no FMA to contract): the same bits
SAME_BITS_EVERY_ISA = ("global_pool",)  # pool.c pool_planes: 8 lane partials of adds, one fixed tree


def test_default_instruction_set_is_the_best_the_cpu_has():
    """On x86-64 the best of AVX-512, AVX2 + FMA and the baseline the CPU's flags allow; on aarch64 NEON (Advanced
    SIMD, which every aarch64 CPU has: the OS must report asimd)."""
    arch, flags = _arch(), _cpu_features()
    if arch is None or flags is None:
        pytest.skip(f"the OS reports no SIMD features for this CPU ({platform.machine()})")
    if os.environ.get("PDLITE_NATIVE_ISA"):
        pytest.skip("PDLITE_NATIVE_ISA is set for this process")
    best = [isa for isa in ARCH_ISAS[arch] if ISA_NEEDS[isa] <= flags][0]
    assert native.isa() == best, (native.isa(), sorted(flags))


def _sources_sha256(folder) -> str:
    """setup.py's SOURCE_HASH, written out again here: (name, size, bytes) of each .c / .h file in name order."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(f for f in os.listdir(folder) if f.endswith((".c", ".h"))):
        with open(os.path.join(folder, name), "rb") as fh:
            data = fh.read()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def test_the_extension_in_use_was_built_from_this_source():
    """A stale build (compiled from other sources) is never used: its SOURCE_HASH must be that of the
    native_src/ files beside native.py, all of them."""
    from pdlite.kernels.host import _native, native_build

    src = os.path.join(os.path.dirname(native.__file__), "native_src")
    if not os.path.isdir(src):
        pytest.skip("an installed pdlite without its C sources")
    assert len([f for f in os.listdir(src) if f.endswith(".c")]) > 1
    assert _native.SOURCE_HASH == _sources_sha256(src) == native_build._source_hash()


def test_the_source_hash_covers_every_file(tmp_path, monkeypatch):
    """Changing any one source file (a header included) or adding one changes the hash native_build.py checks."""
    import shutil

    from pdlite.kernels.host import native_build

    src = os.path.join(os.path.dirname(native.__file__), "native_src")
    if not os.path.isdir(src):
        pytest.skip("an installed pdlite without its C sources")
    copy = tmp_path / "native_src"
    shutil.copytree(src, copy)
    monkeypatch.setattr(native_build, "_SOURCE_DIR", copy)
    seen = {native_build._source_hash()}
    assert seen == {_sources_sha256(src)}
    for name in sorted(os.listdir(copy)):
        f = copy / name
        data = f.read_bytes()
        f.write_bytes(data + b"\n")
        seen.add(native_build._source_hash())
        f.write_bytes(data)
    (copy / "extra.c").write_bytes(b"")
    seen.add(native_build._source_hash())
    assert len(seen) == len(os.listdir(copy)) + 1


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "ppocr_det_v4"])
def test_models_native_and_numpy_paths_agree(name):
    """Whole models (fused convs, pools, Winograd) on both paths, and against Paddle's reference outputs."""
    from pdlite.lite import CxxConfig, create_paddle_predictor
    from pdlite.runtime.threads import blas_thread_control, get_blas_threads
    from tests.conftest import assert_close_rel, load_case, model_dir

    ins, outs = load_case(name)
    got = {}
    for flag in (True, False):
        cfg = CxxConfig()
        cfg.set_model_dir(str(model_dir(name)))
        cfg.set_option("host_native", flag)
        cfg.set_threads(2)
        pred = create_paddle_predictor(cfg)
        assert pred.runtime_program.native_gemm == (flag and native.gemm_available())
        seen = set()
        pred.set_hook(lambda inst, dt, scope, seen=seen: seen.add((native.get_num_threads(), get_blas_threads())))
        before = get_blas_threads()
        got[flag] = pred.predict(ins)
        # set_threads: during the run the native pool runs 2 threads; BLAS runs 1 while the native pool runs the
        # GEMMs; after the run BLAS has its thread count back (pdlite.runtime.threads)
        want_blas = (1 if pred.runtime_program.native_gemm else 2) if blas_thread_control() else before
        assert seen == {(native.get_num_threads() if native.available() else None, want_blas)}
        assert native.get_num_threads() in (2, None)
        assert get_blas_threads() == before
    for a, b, (n, ref) in zip(got[True], got[False], outs.items()):
        assert_close_rel(a, b, 1e-4, f"{name}:{n} native vs numpy")
        assert_close_rel(a, ref, 1e-4, f"{name}:{n} native vs reference")


def test_shape_inference_cached_per_shapes_and_read_values(monkeypatch):
    """The runtime infers shapes once per input shapes; a value-dependent op (reshape2 with a Shape tensor) is
    cached too, keyed by the values inference read, and re-inferred when they change."""
    from pdlite.kernels.registry import kernels_for
    from pdlite.operators.registry import OPS
    from pdlite.runtime import instruction as inst_module
    from pdlite.runtime.instruction import Instruction

    op = make_op("reshape2", {"X": rand(2, 3, 4), "Shape": np.array([6, 4], np.int32)}, {"shape": []},
                 {"Out": 1, "XShape": 1})
    kd = next(k for k in kernels_for("reshape2") if k.key.target.name == "Host")
    inst = Instruction(op, OPS["reshape2"], kd)
    calls = []
    real = inst_module._ValueTracking.__init__
    monkeypatch.setattr(inst_module._ValueTracking, "__init__",
                        lambda self, *a: (calls.append(1), real(self, *a))[1])
    scope = {"X_0": rand(2, 3, 4), "Shape_0": np.array([6, 4], np.int32)}
    for _ in range(3):
        inst.run(scope)
    assert scope["Out_out_0"].shape == (6, 4) and len(calls) == 1
    scope["Shape_0"] = np.array([4, 6], np.int32)  # same shape, new values: inferred again
    inst.run(scope)
    assert scope["Out_out_0"].shape == (4, 6) and len(calls) == 2
    scope["X_0"] = rand(3, 8)  # new input shape
    inst.run(scope)
    assert len(calls) == 3


def _entry_calls() -> list[tuple[str, list[object], list[int]]]:
    """(entry point, a valid argument list, the positions of its float32 buffers) for every native entry point
    that takes buffers (shapes: one 1x4x6x6 image, 3x3 kernels, stride 1, padding 1); none without a build (a source
    tree no install compiled: collected as no tests, not as an import error)."""
    if not native.available():
        return []
    from pdlite.kernels.host import _native

    def f(*shape: int) -> np.ndarray:
        return rand(*shape)

    geo = native._geo((1, 4, 6, 6), 4, 6, 6, (3, 3), (1, 1), (1, 1), (1, 1))
    no = (0.0, 0.0, 0.0)
    calls = [
        ("depthwise_conv2d", [f(1, 4, 6, 6), f(4, 9), f(4), f(1, 4, 6, 6), geo, 1, no], [0, 1, 2, 3]),
        ("conv_gemm", [f(1, 4, 36), f(1, 4, 6, 6), f(4), f(1, 4, 36), (1, 1, 4, 36, 36), 1, no,
                       (4, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1)], [0, 1, 2, 3]),
        ("im2col", [f(1, 4, 6, 6), f(1, 36, 36), (1, 4, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1)], [0, 1]),
        ("winograd_conv3x3", [f(1, 4, 6, 6), f(16, 4, 4), f(4), f(1, 4, 6, 6), (1, 4, 6, 6, 4, 6, 6, 1, 1), 1, no],
         [0, 1, 2, 3]),
        ("pool2d", [f(1, 4, 6, 6), f(1, 4, 3, 3), (4, 6, 6, 3, 3, 2, 2, 2, 2, 0, 0), 1, 1], [0, 1]),
        ("bias_act", [f(1, 4, 6, 6), f(4), (1, 4, 36), 1, no], [0, 1]),
        ("add_act", [f(4, 36), f(4, 36), f(4, 36), 144, 1, no], [0, 1, 2]),
        ("layer_norm", [f(4, 6), f(6), f(6), f(4, 6), f(4), f(4), (4, 6), 1e-5], [0, 1, 2, 3, 4, 5]),
        ("softmax", [f(4, 6), f(4, 6), (4, 6)], [0, 1]),
    ]
    calls.append(("packed_fc", [f(9, 4), native.pack_fc_weights(f(4, 5)), f(5), f(9, 5), (9, 4, 5), 1, no],
                  [0, 1, 2, 3]))
    calls.append(("packed_gemv", [f(2, 4), native.pack_fc_weights(f(4, 5)), f(5), f(2, 5), (2, 4, 5), 1, no],
                  [0, 1, 2, 3]))
    if native.packed_gemm_fast():
        wp = native.pack_weights(f(4, 4, 3, 3))
        calls.append(("packed_conv", [f(1, 4, 6, 6), wp, f(4), f(1, 4, 6, 6), geo, 1, no], [0, 1, 2, 3]))
    return [(name, args, bufs) for name, args, bufs in calls if hasattr(_native, name)]


@pytest.mark.parametrize("name,args,bufs", _entry_calls(), ids=[c[0] for c in _entry_calls()])
def test_entry_points_release_every_buffer_on_a_bad_one(name: str, args: list[object], bufs: list[int]) -> None:
    """Each buffer argument in turn one float too short: a ValueError naming the entry point, and no buffer left
    held (a held Py_buffer keeps a reference to its array); the valid call holds none after returning either."""
    from pdlite.kernels.host import _native

    fn = getattr(_native, name)
    native.gemm_available()  # conv_gemm / winograd need the BLAS sgemm set
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    before = [sys.getrefcount(a) for a in arrays]
    fn(*args)
    assert [sys.getrefcount(a) for a in arrays] == before
    for i in bufs:
        bad = list(args)
        bad[i] = np.zeros(np.asarray(args[i]).size - 1, np.float32)
        with pytest.raises(ValueError, match=f"{name.split('_')[0]}.*: expected .* float32 values"):
            fn(*bad)
        del bad
        assert [sys.getrefcount(a) for a in arrays] == before, f"{name}: a buffer stays held after argument {i}"


def test_large_outputs_start_on_a_cache_line():
    """Outputs of ALIGN_MIN_FLOATS floats or more start on a 64-byte boundary (a row's vector stores then cover one
    cache line each), whatever offset NumPy's allocation has; smaller ones are plain np.empty arrays. The plans'
    outputs (a depthwise conv here) are such arrays."""
    if not native.available():
        pytest.skip("native extension not built")
    for size in (native.ALIGN_MIN_FLOATS, native.ALIGN_MIN_FLOATS + 5, 3 * native.ALIGN_MIN_FLOATS):
        for _ in range(4):  # different allocations, different offsets from NumPy
            a = native.empty_aligned((1, size))
            assert a.shape == (1, size) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
            assert a.ctypes.data % 64 == 0
    small = native.empty_aligned((2, 3))
    assert small.shape == (2, 3) and small.flags.owndata
    buf = np.empty(40, dtype=np.float32)
    for k in range(16):  # the offset to the next boundary, in floats, from any 4-byte-aligned start
        assert (buf[k:].ctypes.data + 4 * native._ext.align_offset(buf[k:])) % 64 == 0
    x = rand(1, 8, 130, 130, seed=79)
    plan = native_plans.depthwise_plan(rand(8, 9, seed=80), None, x.shape, 8, 130, 130, (3, 3), (1, 1), (1, 1), (1, 1),
                                 native.NO_ACT)
    out = plan(x)
    assert out.size >= native.ALIGN_MIN_FLOATS and out.ctypes.data % 64 == 0
    check(out, naive_conv(x, rand(8, 9, seed=80).reshape(8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8, None),
          "depthwise into an aligned output")


def test_packed_weights_start_on_a_cache_line():
    """Weights the register tiles load as vectors (packed conv, both forms; packed fc; Winograd, both layouts; direct
    conv) start on a 64-byte boundary, with the same values as the unaligned packing."""
    if not native.available():
        pytest.skip("native extension not built")
    w = rand(40, 24, 3, 3, seed=81)
    for wide in (False, True):
        for _ in range(3):
            wp = native.pack_weights(w, wide)
            assert wp.ctypes.data % 64 == 0 and wp.flags.c_contiguous and wp.dtype == np.float32
    assert native.pack_fc_weights(rand(30, 50, seed=82)).ctypes.data % 64 == 0
    for packed in (False, True):
        assert native.winograd_weights(w, packed).u.ctypes.data % 64 == 0
    assert native.direct_conv_weights(rand(32, 3, 3, 3, seed=83)).ctypes.data % 64 == 0
    # the values: the small form's panel layout, checked element by element
    wp = native.pack_weights(w)
    k = w.shape[1] * 9
    first = wp.reshape(k, 48)  # one panel: 40 rows padded to 48, laid out (K, rows)
    assert wp.size == k * 48 and np.array_equal(first[:, :40], w.transpose(0, 2, 3, 1).reshape(40, -1).T)
    assert not first[:, 40:].any()


# The short-map form (native_src/depthwise_short.c: at most KH + 1 output rows, rows 16 and more wide, column stride
# 1; here all wider than 64, where AVX-512's row-vector form stops): only the kernel rows inside the image, each row's taps as unit-stride runs of a row padded with zeros. PP-OCR's
# classifier's shapes (5x5 on 2x96 and 3x96, row stride 2), the 3x3 / 5x5 fused loops and the per-tap one (7x1, 2x4,
# column dilation), asymmetric and large padding (whole output rows in it: zeros, then bias), a multiplier and a
# batch, activations; against the NumPy kernel and float64 maths with the form on and off.
@pytest.mark.parametrize("act", ["", "relu6", "hard_swish"])
@pytest.mark.parametrize("xs,mult,k,s,pads,dil", [
    ((1, 20, 2, 96), 1, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)), ((1, 9, 3, 96), 1, (5, 5), (2, 1), (2, 2, 2, 2), (1, 1)),
    ((2, 3, 3, 70), 2, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)), ((1, 4, 2, 65), 1, (7, 1), (1, 1), (3, 3, 0, 0), (1, 1)),
    ((1, 4, 3, 80), 1, (2, 4), (1, 1), (0, 1, 2, 1), (1, 1)), ((1, 3, 4, 90), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 2)),
    ((1, 2, 2, 70), 1, (3, 5), (1, 1), (4, 0, 2, 2), (1, 1))])
def test_depthwise_short_map_form(xs, mult, k, s, pads, dil, act):
    c = xs[1]
    x, w, b = rand(*xs, seed=31, scale=3.0), rand(c * mult, 1, *k, seed=32), rand(c * mult, seed=33)
    attrs = dict(strides=list(s), paddings=list(pads), dilations=list(dil), groups=c)
    for on in (True, False):
        with depthwise_rows(on):
            check_depthwise(x, w, b, attrs, act, pads, f"{xs} x{mult} k{k} s{s} {pads} d{dil} {act} rows={on}")
