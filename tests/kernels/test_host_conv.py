"""conv2d / depthwise_conv2d / conv2d_transpose host kernels.

References: naive float64 loops written here (per output position for conv2d, per input position
scatter for the transpose), with paddings given explicitly per case (SAME paddings spelled out by
hand), so they share no code with pdlite's geometry. Paddle's legacy executor (subprocess) and
paddle.nn.functional (in process) are compared on a subset when paddle is installed.
Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|) (fp32 kernel vs fp64 reference).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdlite.errors import InputError
from pdlite.kernels.host import conv as conv_module
from pdlite.kernels.host.conv import Conv2d, Conv2dTranspose, gather_grid
from tests.kernels._util import make_op, paddle_legacy, run_op

TOL = 1e-5
OUT = {"Output": 1}


def check(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = TOL) -> None:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}"
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    bound = tol * max(1.0, float(np.max(np.abs(ref))) if ref.size else 0.0)
    assert err <= bound, f"{what}: max|got-ref| = {err:.3g} > {bound:.3g}"


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ref_conv2d(x, w, strides, pads, dil, groups, bias=None):
    """Naive NCHW conv; pads = (top, bottom, left, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    oh = (h + pads[0] + pads[1] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[2] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    ocg = oc // groups
    out = np.zeros((n, oc, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r, q = i * strides[0], j * strides[1]
            patch = xp[:, :, r : r + dil[0] * (kh - 1) + 1 : dil[0], q : q + dil[1] * (kw - 1) + 1 : dil[1]]
            for g in range(groups):
                out[:, g * ocg : (g + 1) * ocg, i, j] = np.tensordot(
                    patch[:, g * cg : (g + 1) * cg], w[g * ocg : (g + 1) * ocg], axes=([1, 2, 3], [1, 2, 3])
                )
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def ref_conv2d_transpose(x, w, strides, pads, dil, groups, out_hw=None):
    """Naive NCHW transposed conv by scattering every input pixel; w is (Cin, Cout/g, kh, kw)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    _, ocg, kh, kw = w.shape
    cg = c // groups
    fh = (h - 1) * strides[0] + dil[0] * (kh - 1) + 1
    fw = (wd - 1) * strides[1] + dil[1] * (kw - 1) + 1
    if out_hw is None:
        out_hw = (fh - pads[0] - pads[1], fw - pads[2] - pads[3])
    full = np.zeros((n, ocg * groups, max(fh, pads[0] + out_hw[0]), max(fw, pads[2] + out_hw[1])))
    for g in range(groups):
        xs = x[:, g * cg : (g + 1) * cg]
        ws = w[g * cg : (g + 1) * cg]
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        full[:, g * ocg : (g + 1) * ocg, i * strides[0] + a * dil[0], j * strides[1] + b * dil[1]] += (
                            xs[:, :, i, j] @ ws[:, :, a, b]
                        )
    return full[:, :, pads[0] : pads[0] + out_hw[0], pads[2] : pads[2] + out_hw[1]]


def nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


# (x shape NCHW, filter shape, attrs, explicit (top, bottom, left, right) pads, effective dilations)
CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), dict(strides=[1, 1], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),
    ((2, 3, 9, 7), (5, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),
    ((2, 4, 9, 11), (6, 2, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1], groups=2, dilations=[1, 2]),
     (1, 0, 2, 1), (1, 2)),
    ((1, 6, 10, 9), (6, 3, 3, 3), dict(strides=[1, 2], paddings=[2, 2], groups=2, dilations=[2, 2]),
     (2, 2, 2, 2), (2, 2)),
    # SAME: out = ceil(in/s); pad_sum = max((out-1)*s + k - in, 0); top = sum//2; dilation reset to 1
    ((1, 3, 9, 10), (4, 3, 3, 3), dict(strides=[2, 3], padding_algorithm="SAME", dilations=[2, 2]),
     (1, 1, 1, 1), (1, 1)),  # H: out 5, sum 2; W: out 4, sum (3*3+3-10)=2
    ((1, 3, 8, 8), (4, 3, 4, 4), dict(strides=[1, 1], padding_algorithm="SAME"), (1, 2, 1, 2), (1, 1)),
    ((1, 3, 8, 8), (4, 3, 3, 3), dict(strides=[2, 2], padding_algorithm="VALID", paddings=[5, 5]),
     (0, 0, 0, 0), (1, 1)),
    ((2, 8, 7, 7), (16, 8, 1, 1), dict(), (0, 0, 0, 0), (1, 1)),  # 1x1 matmul path
    ((1, 8, 7, 9), (5, 8, 1, 1), dict(strides=[2, 2]), (0, 0, 0, 0), (1, 1)),  # strided 1x1
    ((1, 8, 7, 9), (5, 8, 1, 1), dict(paddings=[1, 0]), (1, 1, 0, 0), (1, 1)),  # padded 1x1 -> im2col
    ((1, 6, 5, 5), (6, 3, 5, 5), dict(paddings=[2, 2], groups=2), (2, 2, 2, 2), (1, 1)),
    ((1, 3, 4, 4), (2, 3, 4, 4), dict(), (0, 0, 0, 0), (1, 1)),  # kernel = input
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "AnyLayout"])
@pytest.mark.parametrize("xs,ws,attrs,pads,dil", CONV_CASES)
def test_conv2d_matches_naive(xs, ws, attrs, pads, dil, layout):
    x, w = rand(*xs, seed=1), rand(*ws, seed=2)
    groups = attrs.get("groups", 1)
    ref = ref_conv2d(x, w, attrs.get("strides", [1, 1]), pads, dil, groups)
    xin = nhwc(x) if layout == "NHWC" else x
    got = run_op("conv2d", {"Input": xin, "Filter": w}, dict(attrs, data_format=layout), OUT)["Output"][0]
    check(got, nhwc(ref) if layout == "NHWC" else ref, f"conv2d {attrs} {layout}")


# depthwise: (x shape, multiplier, attrs, pads, dilations)
DW_CASES = [
    ((1, 8, 12, 12), 1, dict(strides=[1, 1], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),
    ((2, 5, 11, 9), 1, dict(strides=[2, 2], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),
    ((1, 4, 10, 13), 1, dict(strides=[2, 1], paddings=[2, 2]), (2, 2, 2, 2), (1, 1)),  # 5x5 via kernel size
    ((1, 4, 10, 13), 1, dict(strides=[3, 2], paddings=[0, 1, 2, 1], dilations=[2, 1]), (0, 1, 2, 1), (2, 1)),
    ((1, 3, 9, 9), 2, dict(strides=[1, 1], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),  # channel multiplier 2
    ((1, 6, 8, 8), 1, dict(strides=[2, 2], padding_algorithm="SAME"), (0, 1, 0, 1), (1, 1)),
    ((1, 6, 7, 7), 1, dict(strides=[1, 1], padding_algorithm="VALID", paddings=[3, 3]), (0, 0, 0, 0), (1, 1)),
    ((2, 3, 20, 21), 1, dict(strides=[1, 1], paddings=[1, 1]), (1, 1, 1, 1), (1, 1)),
    ((1, 3, 25, 16), 2, dict(strides=[2, 1], paddings=[0, 1, 2, 1], dilations=[1, 2]), (0, 1, 2, 1), (1, 2)),
]


@pytest.mark.parametrize("stack", [None, 600])  # 600 floats: one or two channels per chunk
@pytest.mark.parametrize("op_type", ["depthwise_conv2d", "conv2d"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("xs,mult,attrs,pads,dil", DW_CASES)
def test_depthwise_matches_naive(xs, mult, attrs, pads, dil, layout, op_type, stack, monkeypatch):
    if stack:
        monkeypatch.setattr(conv_module, "DW_STACK_FLOATS", stack)
    c = xs[1]
    k = 5 if attrs.get("paddings") == [2, 2] else 3
    x, w = rand(*xs, seed=3), rand(c * mult, 1, k, k, seed=4)
    ref = ref_conv2d(x, w, attrs.get("strides", [1, 1]), pads, dil, c)
    xin = nhwc(x) if layout == "NHWC" else x
    got = run_op(op_type, {"Input": xin, "Filter": w}, dict(attrs, groups=c, data_format=layout), OUT)["Output"][0]
    check(got, nhwc(ref) if layout == "NHWC" else ref, f"{op_type} {attrs} {layout}")


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_bias_and_residual(layout):
    x, w, b = rand(2, 4, 6, 6, seed=5), rand(6, 4, 3, 3, seed=6), rand(6, seed=7)
    ref = ref_conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, bias=b)
    res = rand(*ref.shape, seed=8)
    ref = ref + res
    conv = lambda a: nhwc(a) if layout == "NHWC" else a  # noqa: E731
    got = run_op(
        "conv2d",
        {"Input": conv(x), "Filter": w, "Bias": b, "ResidualData": conv(res)},
        dict(paddings=[1, 1], data_format=layout),
        OUT,
    )["Output"][0]
    check(got, conv(ref), "conv2d + Bias + ResidualData")


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2),
    cg=st.integers(1, 3),
    groups=st.integers(1, 3),
    ocg=st.integers(1, 3),
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    k=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    p=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
)
def test_conv2d_random_geometry(n, cg, groups, ocg, h, w, k, s, d, p):
    eh, ew = d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1
    if h + p[0] + p[1] < eh or w + p[2] + p[3] < ew:
        return
    x, wt = rand(n, cg * groups, h, w, seed=h * 10 + w), rand(ocg * groups, cg, *k, seed=k[0])
    ref = ref_conv2d(x, wt, s, p, d, groups)
    attrs = dict(strides=list(s), paddings=list(p), dilations=list(d), groups=groups)
    got = run_op("conv2d", {"Input": x, "Filter": wt}, attrs, OUT)["Output"][0]
    check(got, ref, f"conv2d {attrs}")


# (x shape, filter (Cin, Cout/g, kh, kw), attrs, pads, dil, expected output hw or None)
TRANSPOSE_CASES = [
    ((1, 4, 5, 5), (4, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1]), (1, 1, 1, 1), (1, 1), None),
    ((2, 6, 4, 6), (6, 2, 3, 3), dict(strides=[2, 3], paddings=[1, 0, 2, 1], groups=3, dilations=[2, 1]),
     (1, 0, 2, 1), (2, 1), None),
    ((1, 4, 5, 6), (4, 2, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_padding=[1, 1]),
     (1, 1, 1, 1), (1, 1), (10, 12)),
    ((1, 4, 5, 6), (4, 2, 3, 3), dict(strides=[3, 2], paddings=[1, 1], output_size=[15, 12]),
     (1, 1, 1, 1), (1, 1), (15, 12)),
    ((1, 2, 4, 4), (2, 3, 2, 2), dict(strides=[2, 2]), (0, 0, 0, 0), (1, 1), None),  # ppocr det upsampler
    # kernel = stride (the taps tile the output: written once): cropped by padding, with groups; with an output
    # padding past the taps (the zeros-and-adds path)
    ((2, 4, 3, 5), (4, 1, 3, 2), dict(strides=[3, 2], paddings=[1, 0, 2, 1], groups=2), (1, 0, 2, 1), (1, 1), None),
    ((1, 4, 3, 3), (4, 2, 2, 2), dict(strides=[2, 2], output_padding=[1, 1]), (0, 0, 0, 0), (1, 1), (7, 7)),
    # SAME for the transpose: pads from the *input* size: H: out ceil(5/2)=3, sum (2*2+3-5)=2
    # W: out ceil(4/2)=2, sum (1*2+3-4)=1 -> (0, 1)
    ((1, 2, 5, 4), (2, 2, 3, 3), dict(strides=[2, 2], padding_algorithm="SAME", dilations=[2, 2]),
     (1, 1, 0, 1), (1, 1), None),
    ((1, 2, 5, 4), (2, 2, 3, 3), dict(strides=[1, 1], padding_algorithm="VALID", paddings=[1, 1]),
     (0, 0, 0, 0), (1, 1), None),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("xs,ws,attrs,pads,dil,out_hw", TRANSPOSE_CASES)
def test_conv2d_transpose_matches_naive(xs, ws, attrs, pads, dil, out_hw, layout):
    x, w = rand(*xs, seed=9), rand(*ws, seed=10)
    ref = ref_conv2d_transpose(x, w, attrs.get("strides", [1, 1]), pads, dil, attrs.get("groups", 1), out_hw)
    xin = nhwc(x) if layout == "NHWC" else x
    got = run_op("conv2d_transpose", {"Input": xin, "Filter": w}, dict(attrs, data_format=layout), OUT)["Output"][0]
    check(got, nhwc(ref) if layout == "NHWC" else ref, f"conv2d_transpose {attrs} {layout}")


def test_depthwise_conv2d_transpose():
    x, w = rand(1, 5, 4, 6, seed=11), rand(5, 1, 3, 3, seed=12)
    ref = ref_conv2d_transpose(x, w, (2, 2), (1, 1, 1, 1), (1, 1), 5)
    attrs = dict(strides=[2, 2], paddings=[1, 1], groups=5)
    got = run_op("depthwise_conv2d_transpose", {"Input": x, "Filter": w}, attrs, OUT)["Output"][0]
    check(got, ref, "depthwise_conv2d_transpose")


def test_weights_prepared_once_and_refreshed_on_new_array():
    x, w = rand(1, 3, 6, 6, seed=13), rand(4, 3, 3, 3, seed=14)
    op = make_op("conv2d", {"Input": x, "Filter": w}, dict(paddings=[1, 1]), OUT)
    k = Conv2d(op)
    k.prepare({op.input("Filter"): w})
    check(k.run({"Input": [x], "Filter": [w]})["Output"][0], ref_conv2d(x, w, (1, 1), (1,) * 4, (1, 1), 1))
    w2 = rand(4, 3, 3, 3, seed=15)  # a new Filter array must not reuse the cached weights
    check(k.run({"Input": [x], "Filter": [w2]})["Output"][0], ref_conv2d(x, w2, (1, 1), (1,) * 4, (1, 1), 1))
    kt = Conv2dTranspose(make_op("conv2d_transpose", {"Input": x, "Filter": w.transpose(1, 0, 2, 3)}, {}, OUT))
    kt.prepare({})
    wt = np.ascontiguousarray(w.transpose(1, 0, 2, 3))
    check(kt.run({"Input": [x], "Filter": [wt]})["Output"][0], ref_conv2d_transpose(x, wt, (1, 1), (0,) * 4, (1, 1), 1))


def test_gather_grid_pads_crops_and_strides():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    padded = gather_grid(x, -1, -2, 1, 1, 7, 8, -1.0)
    ref = np.full((2, 3, 7, 8), -1.0, np.float32)
    ref[:, :, 1:5, 2:7] = x
    np.testing.assert_array_equal(padded, ref)
    np.testing.assert_array_equal(gather_grid(x, 1, 1, 2, 3, 3, 2, 0.0)[:, :, :2, :2], x[:, :, 1::2, 1::3])
    assert (gather_grid(x, 10, 0, 1, 1, 2, 2, 5.0) == 5.0).all()


@pytest.mark.parametrize(
    "op_type,xs,ws,attrs,msg",
    [
        ("conv2d", (1, 3, 5, 5), (4, 2, 3, 3), {}, "channels"),
        ("conv2d", (1, 4, 5, 5), (3, 2, 3, 3), dict(groups=2), "divisible"),
        ("conv2d", (1, 3, 2, 2), (4, 3, 3, 3), {}, "output size"),
        ("conv2d", (3, 5, 5), (4, 3, 3, 3), {}, "4-D"),
        ("conv2d", (1, 3, 5, 5), (4, 3, 3, 3), dict(paddings=[1, 1, 1]), "paddings"),
        ("conv2d_transpose", (1, 3, 5, 5), (4, 2, 3, 3), {}, "channels"),
        ("conv2d_transpose", (1, 4, 5, 5), (4, 2, 3, 3), dict(strides=[2, 2], output_size=[20, 9]), "output_size"),
    ],
)
def test_shape_errors_name_the_problem(op_type, xs, ws, attrs, msg):
    with pytest.raises(InputError, match=msg):
        run_op(op_type, {"Input": rand(*xs), "Filter": rand(*ws)}, attrs, OUT)


# --- Paddle references --------------------------------------------------------------------------

PADDLE_CASES = [
    ("conv2d", (2, 6, 9, 11), (4, 3, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1], groups=2, dilations=[1, 2])),
    ("conv2d", (1, 6, 9, 11), (4, 3, 3, 3), dict(strides=[2, 3], padding_algorithm="SAME", groups=2, dilations=[2, 2])),
    ("conv2d", (1, 6, 9, 11), (8, 6, 1, 1), dict(strides=[2, 2])),
    ("depthwise_conv2d", (1, 6, 9, 11), (12, 1, 3, 3), dict(strides=[1, 2], paddings=[0, 1, 2, 1], groups=6,
                                                          dilations=[2, 1])),
    ("depthwise_conv2d", (1, 8, 16, 16), (8, 1, 5, 5), dict(strides=[2, 2], paddings=[2, 2], groups=8)),
    ("conv2d_transpose", (2, 6, 5, 7), (6, 2, 3, 3), dict(strides=[2, 3], paddings=[1, 0, 2, 1], groups=3,
                                                          dilations=[2, 1], output_padding=[1, 2])),
    ("conv2d_transpose", (1, 6, 5, 7), (6, 2, 3, 3), dict(strides=[2, 3], padding_algorithm="SAME", groups=3)),
    ("conv2d_transpose", (1, 6, 5, 7), (6, 2, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_size=[10, 14])),
    ("depthwise_conv2d_transpose", (1, 6, 5, 7), (6, 1, 2, 2), dict(strides=[2, 2], groups=6)),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("op_type,xs,ws,attrs", PADDLE_CASES)
def test_against_paddle_legacy_executor(op_type, xs, ws, attrs, layout):
    x, w = rand(*xs, seed=16), rand(*ws, seed=17)
    ins = {"Input": nhwc(x) if layout == "NHWC" else x, "Filter": w}
    attrs = dict(attrs, data_format=layout)
    ref = paddle_legacy(op_type, ins, attrs, OUT)["Output"][0]
    got = run_op(op_type, ins, attrs, OUT)["Output"][0]
    check(got, ref.astype(np.float64), f"{op_type} {attrs} vs paddle")


def test_against_paddle_functional():
    paddle = pytest.importorskip("paddle")
    f = paddle.nn.functional
    x, w = rand(1, 4, 10, 9, seed=18), rand(6, 2, 3, 3, seed=19)
    ref = f.conv2d(paddle.to_tensor(x), paddle.to_tensor(w), stride=[2, 1], padding=[[0, 0], [0, 0], [1, 2], [0, 1]],
                   dilation=[1, 2], groups=2).numpy()
    got = run_op("conv2d", {"Input": x, "Filter": w},
                 dict(strides=[2, 1], paddings=[1, 2, 0, 1], dilations=[1, 2], groups=2), OUT)["Output"][0]
    check(got, ref.astype(np.float64), "conv2d vs F.conv2d")
    wt = rand(4, 3, 4, 4, seed=20)
    ref = f.conv2d_transpose(paddle.to_tensor(x), paddle.to_tensor(wt), stride=2, padding=1, output_padding=1,
                             data_format="NCHW").numpy()
    got = run_op("conv2d_transpose", {"Input": x, "Filter": wt},
                 dict(strides=[2, 2], paddings=[1, 1], output_padding=[1, 1]), OUT)["Output"][0]
    check(got, ref.astype(np.float64), "conv2d_transpose vs F.conv2d_transpose")
