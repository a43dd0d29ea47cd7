"""linear_interp_v2 (NCW/NWC), bicubic_interp_v2, trilinear_interp_v2 and 5-D nearest_interp_v2 host kernels.

References written here: per-output-element loops of Paddle's C++ index and weight arithmetic
(float32 ratios and weights, as in phi's interpolate kernels), plus independent checks (align_corners
linear = np.interp, bicubic reproduces the input at coinciding points and constants, integer
nearest upsampling = np.repeat). Paddle's legacy executor and paddle.nn.functional are compared when
paddle is installed; the conformance zoo (interp_more) checks them against Paddle Inference.
Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdlite.errors import InputError
from tests.kernels._checks import check, f32, infer, rand
from tests.kernels._util import paddle_legacy, run1

I32 = np.int32


def last(a: np.ndarray) -> np.ndarray:
    """Channel-last copy of an N C ... array."""
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def ref_ratio(in_size: int, out_size: int, scale: float, align: bool, two_d: bool) -> np.float32:
    """AreaPixelComputeScale; the 2-D kernel then zeroes the ratio of a single output."""
    if align:
        return f32(in_size - 1) / f32(out_size - 1) if out_size > 1 else f32(0)
    if out_size <= 1 and two_d:
        return f32(0)
    return f32(1.0 / scale) if scale > 0 else f32(in_size) / f32(out_size)


def ref_linear_tap(r: np.float32, k: int, in_size: int, flag: bool) -> tuple[int, int, np.float32, np.float32]:
    """(x_w, x_e, d_w, d_e) of output index k, line by line from LinearInterpolation."""
    x_w = int(float(r) * (k + 0.5) - 0.5) if flag else int(r * f32(k))
    x_w = max(x_w, 0)
    x_e = x_w + 1 if x_w < in_size - 1 else x_w
    idx = max(f32(float(r) * (k + 0.5) - 0.5), f32(0))
    d_w = f32(idx - f32(x_w)) if flag else f32(r * f32(k) - f32(x_w))
    return x_w, x_e, d_w, f32(1) - d_w


def ref_cubic_coeffs(t: np.float32) -> list[np.float32]:
    a = f32(-0.75)

    def conv1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [f32(conv2(f32(t + 1.0))), f32(conv1(t)), f32(conv1(f32(1.0 - t))), f32(conv2(f32(f32(1.0 - t) + 1.0)))]


def ref_linear(x, out_w, scale, align, mode):
    n, c, w = x.shape
    r = ref_ratio(w, out_w, scale, align, False)
    out = np.empty((n, c, out_w), np.float32)
    for k in range(out_w):
        xw, xe, dw, de = ref_linear_tap(r, k, w, mode == 0 and not align)
        out[:, :, k] = x[:, :, xw] * de + x[:, :, xe] * dw
    return out


def ref_trilinear(x, out, scales, align, mode):
    size = x.shape[2:]
    flag = mode == 0 and not align
    rs = [ref_ratio(i, o, s, align, False) for i, o, s in zip(size, out, scales)]
    res = np.empty((*x.shape[:2], *out), np.float32)
    for j, k, m in itertools.product(*[range(o) for o in out]):
        (tf, tb, df, db), (yn, ys, dn, ds), (xw, xe, dw, de) = (
            ref_linear_tap(r, i, s, flag) for r, i, s in zip(rs, (j, k, m), size))
        res[:, :, j, k, m] = (x[:, :, tf, yn, xw] * db * ds * de + x[:, :, tf, yn, xe] * db * ds * dw
                              + x[:, :, tf, ys, xw] * db * dn * de + x[:, :, tf, ys, xe] * db * dn * dw
                              + x[:, :, tb, yn, xw] * df * ds * de + x[:, :, tb, yn, xe] * df * ds * dw
                              + x[:, :, tb, ys, xw] * df * dn * de + x[:, :, tb, ys, xe] * df * dn * dw)
    return res


def ref_bicubic(x, out, scales, align):
    h, w = x.shape[2:]
    rh, rw = (ref_ratio(i, o, s, align, True) for i, o, s in zip((h, w), out, scales))
    res = np.empty((*x.shape[:2], *out), np.float32)
    for k, m in itertools.product(range(out[0]), range(out[1])):
        y = f32(rh * f32(k)) if align else f32(float(rh) * (k + 0.5) - 0.5)
        xs = f32(rw * f32(m)) if align else f32(float(rw) * (m + 0.5) - 0.5)
        iy, ix = math.floor(y), math.floor(xs)
        cy, cx = ref_cubic_coeffs(f32(y - iy)), ref_cubic_coeffs(f32(xs - ix))
        rows = []
        for ii in range(4):
            yy = min(max(iy - 1 + ii, 0), h - 1)
            px = [x[:, :, yy, min(max(ix - 1 + jj, 0), w - 1)] for jj in range(4)]
            rows.append(px[0] * cx[0] + px[1] * cx[1] + px[2] * cx[2] + px[3] * cx[3])
        res[:, :, k, m] = rows[0] * cy[0] + rows[1] * cy[1] + rows[2] * cy[2] + rows[3] * cy[3]
    return res


ALIGNS = [(False, 0), (False, 1), (True, 1)]
S17, S06, S13 = (float(f32(v)) for v in (1.7, 0.6, 1.3))  # float32 attrs, as in a model


# --- linear_interp_v2 ------------------------------------------------------------------------------
# (extra inputs, attrs, out_w, scale used for the ratio) for an input of width 7
LINEAR_SIZES = [
    ({}, dict(out_w=11), 11, -1),
    ({}, dict(out_w=1), 1, -1),  # the 1-D kernel keeps ratio in / out for a single output
    ({}, dict(out_w=4), 4, -1),
    ({}, dict(scale=[S17]), 11, S17),
    ({"OutSize": np.array([9], I32)}, dict(scale=[1.5]), 9, 1.5),
    ({"SizeTensor": [np.array([5], I32)]}, dict(scale=[1.5]), 5, -1),
    ({"Scale": np.array([2.5], f32)}, dict(out_w=3), 17, 2.5),
    ({}, dict(out_w=7), 7, -1),  # same size: a copy
]


@pytest.mark.parametrize("layout", ["NCW", "NWC"])
@pytest.mark.parametrize("align,mode", ALIGNS)
@pytest.mark.parametrize("extra,attrs,out_w,scale", LINEAR_SIZES)
def test_linear_matches_naive(extra, attrs, out_w, scale, align, mode, layout):
    x = rand(2, 3, 7, seed=1)
    ref = ref_linear(x, out_w, scale, align, mode) if out_w != 7 else x
    a = dict(attrs, align_corners=align, align_mode=mode, interp_method="linear",
             data_layout="NHWC" if layout == "NWC" else "NCHW")
    got = run1("linear_interp_v2", {"X": last(x) if layout == "NWC" else x, **extra}, a)
    check(got, last(ref) if layout == "NWC" else ref, f"linear {a} {list(extra)}")


def test_linear_align_corners_is_np_interp():
    x = rand(2, 6, seed=2)[None]
    got = run1("linear_interp_v2", {"X": x}, dict(out_w=16, align_corners=True, interp_method="linear"))
    ref = np.stack([np.interp(np.linspace(0, 5, 16), np.arange(6), r) for r in x[0].astype(np.float64)])[None]
    check(got, ref, "linear align_corners vs np.interp")


# --- trilinear_interp_v2 ---------------------------------------------------------------------------
# (extra inputs, attrs, out (d, h, w), scales used for the ratio) for an input of 4x5x6
TRILINEAR_SIZES = [
    ({}, dict(out_d=7, out_h=3, out_w=9), (7, 3, 9), (-1, -1, -1)),
    ({}, dict(out_d=1, out_h=1, out_w=2), (1, 1, 2), (-1, -1, -1)),
    ({}, dict(scale=[1.5, S06, 2.0]), (6, 3, 12), (1.5, S06, 2.0)),
    ({"Scale": np.array([S13, 2.0, 0.5], f32)}, {}, (5, 10, 3), (S13, 2.0, 0.5)),
    ({"Scale": np.array([2.0], f32)}, {}, (8, 10, 12), (2.0, 2.0, 2.0)),
    ({"SizeTensor": [np.array([5], I32), np.array([2], I32), np.array([8], I32)]}, dict(scale=[2.0, 2.0, 2.0]),
     (5, 2, 8), (-1, -1, -1)),
    ({"OutSize": np.array([3, 9, 4], I32)}, {}, (3, 9, 4), (-1, -1, -1)),
]


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("align,mode", ALIGNS)
@pytest.mark.parametrize("extra,attrs,out,scales", TRILINEAR_SIZES)
def test_trilinear_matches_naive(extra, attrs, out, scales, align, mode, layout):
    x = rand(2, 3, 4, 5, 6, seed=3)
    ref = ref_trilinear(x, out, scales, align, mode)
    a = dict(attrs, align_corners=align, align_mode=mode, interp_method="trilinear",
             data_layout="NHWC" if layout == "NDHWC" else "NCHW")
    got = run1("trilinear_interp_v2", {"X": last(x) if layout == "NDHWC" else x, **extra}, a)
    check(got, last(ref) if layout == "NDHWC" else ref, f"trilinear {a} {list(extra)}")


def test_trilinear_align_corners_is_separable_np_interp():
    x = rand(1, 2, 3, 4, 5, seed=4)
    out = (5, 7, 9)
    got = run1("trilinear_interp_v2", {"X": x}, dict(out_d=5, out_h=7, out_w=9, align_corners=True,
                                                       interp_method="trilinear"))
    ref = x.astype(np.float64)
    for axis, o in zip((2, 3, 4), out):
        ref = np.apply_along_axis(lambda v, o=o: np.interp(np.linspace(0, len(v) - 1, o), np.arange(len(v)), v),
                                  axis, ref)
    check(got, ref, "trilinear align_corners vs np.interp")


# --- bicubic_interp_v2 -----------------------------------------------------------------------------
BICUBIC_SIZES = [
    ({}, dict(out_h=11, out_w=13), (11, 13), (-1, -1)),
    ({}, dict(out_h=1, out_w=3), (1, 3), (-1, -1)),  # the 2-D kernel zeroes the ratio of a single output
    ({}, dict(out_h=4, out_w=1), (4, 1), (-1, -1)),
    ({}, dict(scale=[S17, S06]), (10, 4), (S17, S06)),
    ({"OutSize": np.array([9, 4], I32)}, dict(scale=[1.5, 1.5]), (9, 4), (1.5, 1.5)),
    ({"SizeTensor": [np.array([5], I32), np.array([2], I32)]}, {}, (5, 2), (-1, -1)),
    ({"Scale": np.array([2.0], f32)}, {}, (12, 14), (2.0, 2.0)),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("extra,attrs,out,scales", BICUBIC_SIZES)
def test_bicubic_matches_naive(extra, attrs, out, scales, align, layout):
    x = rand(2, 3, 6, 7, seed=5)
    ref = ref_bicubic(x, out, scales, align)
    a = dict(attrs, align_corners=align, align_mode=0, interp_method="bicubic", data_layout=layout)
    got = run1("bicubic_interp_v2", {"X": last(x) if layout == "NHWC" else x, **extra}, a)
    check(got, last(ref) if layout == "NHWC" else ref, f"bicubic {a} {list(extra)}")


def test_bicubic_independent_properties():
    x = rand(1, 2, 5, 6, seed=6)
    got = run1("bicubic_interp_v2", {"X": x}, dict(out_h=9, out_w=11, align_corners=True, interp_method="bicubic"))
    check(got[:, :, ::2, ::2], x, "bicubic at the input's own points")  # t = 0: weights (0, 1, 0, 0)
    const = np.full((1, 1, 4, 5), 2.5, f32)
    got = run1("bicubic_interp_v2", {"X": const}, dict(scale=[1.7, 2.3], align_corners=False, interp_method="bicubic"))
    check(got, np.full(got.shape, 2.5), "bicubic of a constant (weights sum to 1)")


# --- 5-D nearest ---------------------------------------------------------------------------------
def test_nearest_5d():
    x = rand(1, 2, 2, 3, 4, seed=7)
    got = run1("nearest_interp_v2", {"X": x}, dict(scale=[2.0, 3.0, 1.0], align_corners=False,
                                                     interp_method="nearest"))
    check(got, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3), "nearest 5-D integer upsampling")
    got = run1("nearest_interp_v2", {"X": last(x)}, dict(out_d=3, out_h=2, out_w=7, align_corners=True,
                                                          interp_method="nearest", data_layout="NDHWC"))
    idx = [[int(float(f32(i - 1) / f32(o - 1) * f32(k)) + 0.5) for k in range(o)] for i, o in zip((2, 3, 4), (3, 2, 7))]
    check(got, last(x[:, :, idx[0]][:, :, :, idx[1]][:, :, :, :, idx[2]]), "nearest 5-D align_corners NDHWC")



@pytest.mark.parametrize("attrs", [dict(scale=[2.0, 2.0]), dict(scale=[4.0, 1.0]), dict(out_h=9, out_w=10),
                                   dict(scale=[1.5, 2.5]), dict(out_h=6, out_w=8, align_corners=True)],
                         ids=["2x", "4x1", "uneven", "fractional", "align"])
def test_nearest_4d_is_a_contiguous_gather(attrs):
    """Whole-factor upsampling (its repeat path) and any other size (one take per axis) give x[:, :, ih][..., iw]
    with Paddle's source indices, in a C-contiguous array (a strided result made the ops after it slow)."""
    x = rand(2, 3, 3, 4, seed=11)
    got = run1("nearest_interp_v2", {"X": x}, dict(interp_method="nearest", **{"align_corners": False, **attrs}))
    align = bool(attrs.get("align_corners"))
    sc = attrs.get("scale", [-1.0, -1.0])

    def src(n: int, o: int, s: float) -> list[int]:  # Paddle's nearest source index (float32 ratio)
        r = f32(n - 1) / f32(o - 1) if align else (f32(1.0 / s) if s > 0 else f32(n) / f32(o))
        return [min(int(float(r * f32(k)) + (0.5 if align else 0.0)), n - 1) for k in range(o)]

    idx = [src(n, o, s) for n, o, s in zip(x.shape[2:], got.shape[2:], sc)]
    assert np.array_equal(got, x[:, :, idx[0]][:, :, :, idx[1]]) and got.flags["C_CONTIGUOUS"]
    if "scale" in attrs and float(sc[0]).is_integer() and float(sc[1]).is_integer():
        assert np.array_equal(got, np.repeat(np.repeat(x, int(sc[0]), axis=2), int(sc[1]), axis=3))

def test_interp_rank_and_size_errors():
    with pytest.raises(InputError, match="linear interpolation needs a 3-D input"):
        infer("linear_interp_v2", {"X": rand(1, 2, 3, 4)}, dict(out_w=5))
    with pytest.raises(InputError, match="trilinear interpolation needs a 5-D input"):
        infer("trilinear_interp_v2", {"X": rand(1, 2, 3, 4)}, dict(out_h=5, out_w=5))
    with pytest.raises(InputError, match="SizeTensor must hold 3"):
        run1("trilinear_interp_v2", {"X": rand(1, 1, 2, 2, 2), "SizeTensor": [np.array([2], I32)] * 2}, {})
    with pytest.raises(InputError, match="scale must hold 1 or 3"):
        run1("trilinear_interp_v2", {"X": rand(1, 1, 2, 2, 2)}, dict(scale=[2.0, 2.0]))
    with pytest.raises(InputError, match="positive"):
        run1("linear_interp_v2", {"X": rand(1, 2, 3)}, {})


# --- Paddle references ---------------------------------------------------------------------------
@pytest.mark.parametrize("align,mode", ALIGNS)
def test_against_paddle_legacy(align, mode):
    base = dict(align_corners=align, align_mode=mode)
    cases = [("linear_interp_v2", rand(2, 3, 7, seed=8), extra, attrs) for extra, attrs, _, _ in LINEAR_SIZES]
    cases += [("bicubic_interp_v2", rand(2, 3, 6, 7, seed=9), extra, attrs) for extra, attrs, _, _ in BICUBIC_SIZES]
    # not compared: trilinear with both OutSize and a scale (Paddle 3.3.1's 3-D kernel then reads the input
    # with wrong strides; pdlite uses 1/scale as the 2-D kernel does)
    cases += [("trilinear_interp_v2", rand(2, 3, 4, 5, 6, seed=10), extra, attrs) for extra, attrs, _, _ in
              TRILINEAR_SIZES]
    cases += [("nearest_interp_v2", rand(2, 3, 4, 5, 6, seed=11), {}, dict(out_d=7, out_h=3, out_w=9)),
              ("nearest_interp_v2", rand(2, 3, 4, 5, 6, seed=11), {}, dict(scale=[1.5, S06, 2.0]))]
    for op, x, extra, attrs in cases:
        a = dict(attrs, **base, interp_method=op.split("_")[0])
        ins = {"X": x, **extra}
        check(run1(op, ins, a), paddle_legacy(op, ins, a)["Out"][0], f"{op} {a} {list(extra)} vs paddle")


def test_against_paddle_functional():
    paddle = pytest.importorskip("paddle")
    f, t = paddle.nn.functional, paddle.to_tensor
    x3, x4, x5 = rand(2, 3, 7, seed=12), rand(2, 3, 6, 7, seed=13), rand(2, 3, 4, 5, 6, seed=14)
    for ac, am in ALIGNS:
        ref = f.interpolate(t(last(x3)), size=[12], mode="linear", align_corners=ac, align_mode=am,
                            data_format="NWC").numpy()
        got = run1("linear_interp_v2", {"X": last(x3)}, dict(out_w=12, align_corners=ac, align_mode=am,
                                                              interp_method="linear", data_layout="NHWC"))
        check(got, ref, f"F.interpolate linear NWC {ac} {am}")
        ref = f.interpolate(t(x5), scale_factor=[1.5, 0.6, 2.0], mode="trilinear", align_corners=ac,
                            align_mode=am).numpy()
        got = run1("trilinear_interp_v2", {"X": x5}, dict(scale=[1.5, 0.6, 2.0], align_corners=ac, align_mode=am,
                                                           interp_method="trilinear"))
        check(got, ref, f"F.interpolate trilinear {ac} {am}")
    for ac in (False, True):
        ref = f.interpolate(t(x4), scale_factor=1.7, mode="bicubic", align_corners=ac).numpy()
        got = run1("bicubic_interp_v2", {"X": x4}, dict(scale=[1.7, 1.7], align_corners=ac, interp_method="bicubic"))
        check(got, ref, f"F.interpolate bicubic {ac}")
