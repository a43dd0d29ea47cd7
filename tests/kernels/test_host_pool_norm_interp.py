"""pool2d, batch_norm, layer_norm and nearest/bilinear interp (v1, v2) host kernels.

References written here: pool2d as a literal per-window loop of Paddle's CPU Pool2dFunctor, with
output sizes and SAME paddings spelled out per case; batch/layer norm from their float64
formulas; interp as per-element loops of Paddle's C++ index arithmetic (float32 ratios) plus
independent sanity checks (exact linear interpolation for align_corners, np.repeat for integer
nearest upsampling). Paddle's legacy executor (subprocess) and paddle.nn.functional (in process)
are compared when paddle is installed.
Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|); NaN positions must match.
"""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from pdlite.errors import InputError
from pdlite.kernels.host.norm import BatchNorm
from pdlite.operators.registry import OPS, ShapeContext
from tests.kernels._util import make_op, paddle_legacy, run1, run_op

TOL = 1e-5
FLT_MAX = float(np.finfo(np.float32).max)
f32 = np.float32


def check(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = TOL) -> None:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}"
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    if (~nan).any():
        g, r = got[~nan].astype(np.float64), ref[~nan].astype(np.float64)
        err, bound = float(np.max(np.abs(g - r))), tol * max(1.0, float(np.max(np.abs(r))))
        assert err <= bound, f"{what}: max|got-ref| = {err:.3g} > {bound:.3g}"


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


# --- pool2d --------------------------------------------------------------------------------------


def ref_pool2d(x, ptype, k, s, pads, out_hw, exclusive=True, adaptive=False):
    """Paddle's Pool2dFunctor, literally (pads = top, bottom, left, right; only top/left are read)."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            if adaptive:
                hs, he = (i * h) // oh, math.ceil((i + 1) * h / oh)
                ws, we = (j * w) // ow, math.ceil((j + 1) * w / ow)
                size = (he - hs) * (we - ws)
            else:
                hs, ws = i * s[0] - pads[0], j * s[1] - pads[2]
                he, we = min(hs + k[0], h + pads[0]), min(ws + k[1], w + pads[2])
                size = (he - hs) * (we - ws)
                hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
                if exclusive:  # may multiply two negative extents, as the C++ does
                    size = (he - hs) * (we - ws)
            win = x[:, :, hs : max(he, hs), ws : max(we, ws)].astype(np.float64)  # not a negative slice
            if ptype == "max":
                out[:, :, i, j] = win.max(axis=(2, 3)) if win.size else -FLT_MAX
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[:, :, i, j] = win.sum(axis=(2, 3)) / size
    return out


def osz(size, k, p0, p1, s, ceil=False):
    return (size - k + p0 + p1 + (s - 1 if ceil else 0)) // s + 1


# (x shape, attrs, reference kwargs): reference pads/sizes written out by hand
POOL_CASES = [
    ((2, 3, 9, 11), dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1]),
     dict(k=(3, 3), s=(2, 2), pads=(1, 1, 1, 1), out_hw=(5, 6))),
    ((1, 2, 8, 8), dict(ksize=[2, 2], strides=[2, 2]), dict(k=(2, 2), s=(2, 2), pads=(0,) * 4, out_hw=(4, 4))),
    ((2, 3, 9, 11), dict(ksize=[3, 2], strides=[2, 3], paddings=[1, 0, 2, 1], ceil_mode=True, exclusive=False),
     dict(k=(3, 2), s=(2, 3), pads=(1, 0, 2, 1), out_hw=(osz(9, 3, 1, 0, 2, True), osz(11, 2, 2, 1, 3, True)),
          exclusive=False)),
    ((2, 3, 9, 11), dict(ksize=[3, 2], strides=[2, 3], paddings=[2, 0, 1, 0], ceil_mode=True),
     dict(k=(3, 2), s=(2, 3), pads=(2, 0, 1, 0), out_hw=(osz(9, 3, 2, 0, 2, True), osz(11, 2, 1, 0, 3, True)))),
    ((1, 2, 9, 11), dict(ksize=[3, 3], strides=[2, 2], paddings=[0, 2, 0, 2], ceil_mode=True, exclusive=False),
     dict(k=(3, 3), s=(2, 2), pads=(0, 2, 0, 2), out_hw=(5, 6), exclusive=False)),
    # SAME 9x11, k3 s2: H out 5 sum 2 -> (1, 1); W out 6 sum 2 -> (1, 1)
    ((1, 2, 9, 11), dict(ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME", exclusive=False),
     dict(k=(3, 3), s=(2, 2), pads=(1, 1, 1, 1), out_hw=(5, 6), exclusive=False)),
    # SAME 8x8, k3 s2: out 4, sum 1 -> (0, 1)
    ((1, 2, 8, 8), dict(ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME"),
     dict(k=(3, 3), s=(2, 2), pads=(0, 1, 0, 1), out_hw=(4, 4))),
    ((1, 2, 9, 11), dict(ksize=[3, 3], strides=[2, 2], padding_algorithm="VALID", paddings=[1, 1]),
     dict(k=(3, 3), s=(2, 2), pads=(0,) * 4, out_hw=(4, 5))),
    ((2, 3, 5, 7), dict(ksize=[1, 1], global_pooling=True, paddings=[1, 1]),
     dict(k=(5, 7), s=(1, 1), pads=(0,) * 4, out_hw=(1, 1))),
    ((2, 3, 9, 11), dict(ksize=[4, 3], adaptive=True), dict(k=None, s=None, pads=None, out_hw=(4, 3), adaptive=True)),
    ((2, 3, 9, 11), dict(ksize=[3, 11], adaptive=True), dict(k=None, s=None, pads=None, out_hw=(3, 11), adaptive=True)),
    ((2, 3, 9, 11), dict(ksize=[1, 1], adaptive=True), dict(k=None, s=None, pads=None, out_hw=(1, 1), adaptive=True)),
    ((1, 2, 12, 8), dict(ksize=[4, 2], adaptive=True), dict(k=None, s=None, pads=None, out_hw=(4, 2), adaptive=True)),
    # windows entirely in the padding: max -> -FLT_MAX, exclusive avg -> 0/0 = NaN (as Paddle)
    ((1, 2, 4, 5), dict(ksize=[2, 2], strides=[1, 1], paddings=[3, 3]),
     dict(k=(2, 2), s=(1, 1), pads=(3, 3, 3, 3), out_hw=(9, 10))),
    ((1, 2, 4, 5), dict(ksize=[2, 2], strides=[1, 1], paddings=[3, 3], exclusive=False),
     dict(k=(2, 2), s=(1, 1), pads=(3, 3, 3, 3), out_hw=(9, 10), exclusive=False)),
    ((1, 3, 10, 10), dict(ksize=[7, 7], strides=[3, 3], paddings=[2, 1, 0, 3], ceil_mode=True),
     dict(k=(7, 7), s=(3, 3), pads=(2, 1, 0, 3), out_hw=(osz(10, 7, 2, 1, 3, True), osz(10, 7, 0, 3, 3, True)))),
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("xs,attrs,ref_kw", POOL_CASES)
def test_pool2d_matches_naive(xs, attrs, ref_kw, ptype, layout):
    x = rand(*xs, seed=1)
    kw = dict(ref_kw)
    if ptype == "max" and kw.get("adaptive"):
        # Paddle's quirk: adaptive *max* pool2d runs non-adaptive ksize/stride windows (no padding)
        kw.update(k=tuple(attrs["ksize"]), s=tuple(attrs.get("strides", [1, 1])), pads=(0,) * 4, adaptive=False)
    ref = ref_pool2d(x, ptype, **kw)
    xin = nhwc(x) if layout == "NHWC" else x
    got = run1("pool2d", {"X": xin}, dict(attrs, pooling_type=ptype, data_format=layout))
    check(got, nhwc(ref) if layout == "NHWC" else ref, f"pool2d {ptype} {attrs} {layout}")



@pytest.mark.parametrize("ptype", ["max", "avg"])
def test_pool2d_kernel_reuses_its_native_call_per_input_shape(ptype):
    """A pool2d kernel keeps its native call for the last NCHW input shape: new values of that shape, another shape
    (then back), a non-contiguous input and a float64 input each give the per-window reference."""
    from tests.kernels._util import kernel_class

    attrs = dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1], pooling_type=ptype)
    kernel = kernel_class("pool2d")(make_op("pool2d", {"X": rand(1, 4, 9, 9)}, attrs))
    kw = dict(k=(3, 3), s=(2, 2), pads=(1, 1, 1, 1))
    for i, shape in enumerate([(1, 4, 9, 9), (1, 4, 9, 9), (2, 3, 7, 7), (1, 4, 9, 9)]):
        x = rand(*shape, seed=10 + i)
        ref = ref_pool2d(x, ptype, out_hw=(osz(shape[2], 3, 1, 1, 2), osz(shape[3], 3, 1, 1, 2)), **kw)
        check(kernel.run({"X": [x]})["Out"][0], ref, f"pool2d {ptype} run {i} on {shape}")
    x = rand(1, 9, 9, 4, seed=20).transpose(0, 3, 1, 2)  # (1, 4, 9, 9), not C-contiguous
    ref = ref_pool2d(np.ascontiguousarray(x), ptype, out_hw=(5, 5), **kw)
    check(kernel.run({"X": [x]})["Out"][0], ref, f"pool2d {ptype} on a transposed view")
    x64 = rand(1, 4, 9, 9, seed=21).astype(np.float64)
    got = kernel.run({"X": [x64]})["Out"][0]
    assert got.dtype == np.float64
    ref = ref_pool2d(x64.astype(np.float32), ptype, out_hw=(5, 5), **kw)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_pool2d_adaptive_max_quirk_differs_from_true_adaptive():
    """Guards the quirk above: with stride 1 the ksize windows are not the adaptive windows."""
    x = rand(1, 2, 5, 5, seed=2)
    got = run1("pool2d", {"X": x}, dict(pooling_type="max", ksize=[3, 3], adaptive=True, strides=[1, 1]))
    check(got, ref_pool2d(x, "max", (3, 3), (1, 1), (0,) * 4, (3, 3)), "quirk")
    assert not np.allclose(got, ref_pool2d(x, "max", None, None, None, (3, 3), adaptive=True))


@pytest.mark.parametrize(
    "attrs,msg",
    [
        (dict(pooling_type="max"), "ksize"),
        (dict(pooling_type="sum", ksize=[2, 2]), "pooling_type"),
        (dict(pooling_type="max", ksize=[2, 2], paddings=[1, 2, 3]), "paddings"),
        (dict(pooling_type="max", ksize=[9, 9]), "output size"),
    ],
)
def test_pool2d_errors(attrs, msg):
    with pytest.raises(InputError, match=msg):
        run1("pool2d", {"X": rand(1, 2, 4, 4)}, attrs)


# --- batch_norm / layer_norm ---------------------------------------------------------------------

BN_OUTS = {"Y": 1}


def bn_params(c: int, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = {k: rng.standard_normal(c).astype(np.float32) for k in ("Scale", "Bias", "Mean")}
    p["Variance"] = (rng.random(c) + 0.1).astype(np.float32)
    return p


def ref_bn(x, p, eps, c_axis, batch_stats):
    x64 = x.astype(np.float64)
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    axes = tuple(i for i in range(x.ndim) if i != c_axis)
    mean = x64.mean(axis=axes) if batch_stats else p["Mean"].astype(np.float64)
    var = x64.var(axis=axes) if batch_stats else p["Variance"].astype(np.float64)
    r = lambda v: np.asarray(v, np.float64).reshape(shape)  # noqa: E731
    return (x64 - r(mean)) / np.sqrt(r(var) + eps) * r(p["Scale"]) + r(p["Bias"])


@pytest.mark.parametrize(
    "xs,attrs,batch_stats",
    [
        ((2, 3, 4, 5), dict(is_test=True, use_global_stats=True, epsilon=1e-5), False),
        ((2, 3, 4, 5), dict(is_test=True, use_global_stats=False, epsilon=1e-3), False),  # ppocr export
        ((2, 3, 4, 5), dict(is_test=False, use_global_stats=True), False),
        ((2, 3, 4, 5), dict(is_test=False), True),  # training mode: batch statistics
        ((2, 3, 4, 5), dict(is_test=True, trainable_statistics=True), True),
        ((2, 4, 5, 3), dict(is_test=True, data_layout="NHWC"), False),
        ((6, 3), dict(is_test=True), False),
        ((2, 3, 2, 3, 4), dict(is_test=True), False),
        ((2, 3, 4, 5), dict(is_test=True, data_layout="AnyLayout"), False),
    ],
)
def test_batch_norm(xs, attrs, batch_stats):
    x = rand(*xs, seed=4) * 2 + 0.5
    c_axis = x.ndim - 1 if attrs.get("data_layout") == "NHWC" else 1
    p = bn_params(xs[c_axis])
    got = run_op("batch_norm", {"X": x, **p}, attrs, BN_OUTS)["Y"][0]
    check(got, ref_bn(x, p, attrs.get("epsilon", 1e-5), c_axis, batch_stats), f"batch_norm {attrs}")


def test_batch_norm_prepare_and_param_refresh():
    x, p = rand(1, 3, 4, 4, seed=5), bn_params(3)
    op = make_op("batch_norm", {"X": x, **p}, dict(is_test=True), BN_OUTS)
    k = BatchNorm(op)
    k.prepare({op.input(s): p[s] for s in p})
    check(k.run({"X": [x], **{s: [v] for s, v in p.items()}})["Y"][0], ref_bn(x, p, 1e-5, 1, False))
    p2 = dict(p, Mean=p["Mean"] + 1)  # new Mean array -> new affine
    check(k.run({"X": [x], **{s: [v] for s, v in p2.items()}})["Y"][0], ref_bn(x, p2, 1e-5, 1, False))


def test_batch_norm_shape_inference_of_stat_outputs_and_errors():
    x, p = rand(2, 3, 4, 4, seed=6), bn_params(3)
    op = make_op("batch_norm", {"X": x, **p}, dict(is_test=True), {"Y": 1, "MeanOut": 1, "SavedVariance": 1})
    shapes = OPS["batch_norm"].infer_shape(ShapeContext(op, {"X": [x], **{k: [v] for k, v in p.items()}}))
    assert shapes == {"Y": [(2, 3, 4, 4)], "MeanOut": [(3,)], "SavedVariance": [(3,)]}
    bad = {"X": [x], **{k: [v] for k, v in p.items()}, "Scale": [np.ones(4, np.float32)]}
    with pytest.raises(InputError, match="Scale"):
        OPS["batch_norm"].infer_shape(ShapeContext(op, bad))


@pytest.mark.parametrize("xs,axis", [((2, 5, 8), 1), ((2, 5, 8), 2), ((3, 4, 2, 6), 3), ((3, 4, 2, 6), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(xs, axis, affine):
    x = rand(*xs, seed=7) * 3 + 1
    right = int(np.prod(xs[axis:]))
    ins = {"X": x}
    x64 = x.astype(np.float64).reshape(int(np.prod(xs[:axis])), right)
    mean, var = x64.mean(axis=1), x64.var(axis=1)
    ref = (x64 - mean[:, None]) / np.sqrt(var[:, None] + 1e-5)
    if affine:
        ins["Scale"], ins["Bias"] = rand(right, seed=8), rand(right, seed=9)
        ref = ref * ins["Scale"] + ins["Bias"]
    got = run_op("layer_norm", ins, dict(begin_norm_axis=axis), {"Y": 1, "Mean": 1, "Variance": 1})
    check(got["Y"][0], ref.reshape(xs), "layer_norm Y")
    check(got["Mean"][0], mean.reshape(xs[:axis]), "layer_norm Mean")
    check(got["Variance"][0], var.reshape(xs[:axis]), "layer_norm Variance")


def test_layer_norm_bad_scale():
    ins = {"X": rand(2, 3, 4), "Scale": rand(5)}
    op = make_op("layer_norm", ins, dict(begin_norm_axis=1), {"Y": 1})
    with pytest.raises(InputError, match="Scale"):
        OPS["layer_norm"].infer_shape(ShapeContext(op, {k: [v] for k, v in ins.items()}))


# --- interpolation -------------------------------------------------------------------------------


def ref_ratio(in_size, out_size, scale, align):
    if out_size <= 1:
        return f32(0.0)
    if align:
        return f32(in_size - 1) / f32(out_size - 1)
    return f32(1.0 / scale) if scale > 0 else f32(in_size) / f32(out_size)


def ref_interp(x, method, out_hw, scale_hw, align, align_mode):
    """Paddle's NearestNeighborInterpolate / BilinearInterpolation, element by element."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    if (oh, ow) == (h, w):
        return x.astype(np.float64)
    rh, rw = ref_ratio(h, oh, scale_hw[0], align), ref_ratio(w, ow, scale_hw[1], align)
    out = np.empty((n, c, oh, ow))
    flag = align_mode == 0 and not align

    def lin(r, k, size):
        y0 = int(float(r) * (k + 0.5) - 0.5) if flag else int(r * f32(k))
        y0 = max(y0, 0)
        y1 = min(y0 + 1, size - 1)
        src = max(f32(float(r) * (k + 0.5) - 0.5), f32(0))
        d = f32(src - f32(y0)) if flag else f32(r * f32(k) - f32(y0))
        return y0, y1, d, f32(1) - d

    for k in range(oh):
        for m in range(ow):
            if method == "nearest":
                iy = int(float(rh * f32(k)) + 0.5) if align else int(rh * f32(k))
                ix = int(float(rw * f32(m)) + 0.5) if align else int(rw * f32(m))
                out[:, :, k, m] = x[:, :, iy, ix]
            else:
                yn, ys, dn, ds = lin(rh, k, h)
                xw, xe, dw, de = lin(rw, m, w)
                out[:, :, k, m] = (
                    x[:, :, yn, xw] * ds * de + x[:, :, ys, xw] * dn * de
                    + x[:, :, yn, xe] * ds * dw + x[:, :, ys, xe] * dn * dw
                )
    return out


I32 = np.int32
S17, S06, S11, S105, S102 = (float(f32(v)) for v in (1.7, 0.6, 1.1, 1.05, 1.02))  # float32 attrs, as in a model
# (extra inputs, attrs, expected out (h, w), scale used for the ratio) for an input of 7x10
INTERP_SIZES = [
    ({}, dict(scale=[2.0, 2.0]), (14, 20), (2.0, 2.0)),
    ({}, dict(out_h=5, out_w=13), (5, 13), (-1, -1)),
    ({}, dict(scale=[S17, S06]), (11, 6), (S17, S06)),
    ({}, dict(out_h=1, out_w=3), (1, 3), (-1, -1)),
    ({"OutSize": np.array([11, 4], I32)}, dict(scale=[1.5, 1.5]), (11, 4), (1.5, 1.5)),  # size wins, ratio 1/scale
    ({"SizeTensor": [np.array([3], I32), np.array([17], I32)]}, dict(scale=[1.5, 1.5]), (3, 17), (-1, -1)),
    ({"Scale": np.array([2.5], np.float32)}, dict(out_h=3, out_w=3), (17, 25), (2.5, 2.5)),
    ({}, dict(scale=[S11, S105]), (7, 10), (S11, S105)),  # same size: plain copy
]


@pytest.mark.parametrize("v2", [True, False])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("align,align_mode", [(False, 0), (False, 1), (True, 1)])
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("extra,attrs,out_hw,scale_hw", INTERP_SIZES)
def test_interp_matches_naive(extra, attrs, out_hw, scale_hw, method, align, align_mode, layout, v2):
    x = rand(2, 3, 7, 10, seed=10)
    attrs = dict(attrs, align_corners=align, align_mode=align_mode, interp_method=method, data_layout=layout)
    if not v2:
        attrs["scale"] = attrs["scale"][0] if attrs.get("scale") else 0.0
        if attrs["scale"] and scale_hw[0] != scale_hw[1]:
            return  # v1's scale is one float
    ref = ref_interp(x, method, out_hw, scale_hw, align, align_mode)
    op_type = f"{method}_interp" + ("_v2" if v2 else "")
    got = run1(op_type, {"X": nhwc(x) if layout == "NHWC" else x, **extra}, attrs)
    check(got, nhwc(ref) if layout == "NHWC" else ref, f"{op_type} {attrs} {list(extra)}")


def test_interp_independent_sanity():
    x = rand(1, 2, 5, 6, seed=11)
    up = run1("nearest_interp_v2", {"X": x}, dict(scale=[2.0, 3.0], align_corners=False))
    np.testing.assert_array_equal(up, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    # align_corners bilinear = exact linear interpolation at k * (in - 1) / (out - 1)
    got = run1("bilinear_interp_v2", {"X": x}, dict(out_h=9, out_w=11, align_corners=True))
    ys, xs = np.linspace(0, 4, 9), np.linspace(0, 5, 11)
    rows = np.stack([np.interp(xs, np.arange(6), r) for r in x.reshape(-1, 6).astype(np.float64)]).reshape(1, 2, 5, 11)
    ref = np.stack([np.interp(ys, np.arange(5), col) for col in rows.transpose(0, 1, 3, 2).reshape(-1, 5)])
    check(got, ref.reshape(1, 2, 11, 9).transpose(0, 1, 3, 2), "bilinear align_corners vs exact")


@pytest.mark.parametrize("v2", [True, False])
def test_interp_scaled_size_uses_a_double_product(v2):
    """int(in * scale) with the float32 attribute widened to double: 50 * 1.02f = 50.999999 -> 50
    (a float32 product would round to 51.0), as Paddle's legacy executor computes."""
    x = rand(1, 2, 3, 50, seed=20)
    attrs = dict(scale=[S102, S102] if v2 else S102, interp_method="nearest", align_corners=False)
    op_type = "nearest_interp" + ("_v2" if v2 else "")
    got = run1(op_type, {"X": x}, attrs)
    assert got.shape == (1, 2, 3, 50)
    np.testing.assert_array_equal(got, x)  # same size: a copy
    if importlib.util.find_spec("paddle") is not None:
        check(got, paddle_legacy(op_type, {"X": x}, attrs)["Out"][0], "vs paddle")


def test_interp_errors():
    with pytest.raises(InputError, match="positive"):
        run1("bilinear_interp_v2", {"X": rand(1, 1, 4, 4)}, {})
    with pytest.raises(InputError, match="SizeTensor"):
        run1("nearest_interp_v2", {"X": rand(1, 1, 4, 4), "SizeTensor": [np.array([2], I32)]}, {})


# --- Paddle references --------------------------------------------------------------------------


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("xs,attrs,_", POOL_CASES[:9] + POOL_CASES[9:11] + POOL_CASES[-3:])
def test_pool2d_against_paddle_legacy(xs, attrs, _, ptype):
    x = rand(*xs, seed=12)
    attrs = dict(attrs, pooling_type=ptype)
    check(run1("pool2d", {"X": x}, attrs), paddle_legacy("pool2d", {"X": x}, attrs)["Out"][0], f"pool2d {attrs}")


@pytest.mark.parametrize("axis", [1, 2])
def test_layer_norm_against_paddle_legacy(axis):
    x = rand(2, 5, 8, seed=13) * 3 + 1
    right = int(np.prod(x.shape[axis:]))
    ins = {"X": x, "Scale": rand(right, seed=14), "Bias": rand(right, seed=15)}
    outs = {"Y": 1, "Mean": 1, "Variance": 1}
    ref = paddle_legacy("layer_norm", ins, dict(begin_norm_axis=axis), outs)
    got = run_op("layer_norm", ins, dict(begin_norm_axis=axis), outs)
    for slot in outs:
        check(got[slot][0], ref[slot][0], f"layer_norm {slot}")


@pytest.mark.parametrize("op_type", ["nearest_interp_v2", "bilinear_interp_v2", "nearest_interp", "bilinear_interp"])
@pytest.mark.parametrize("extra,attrs,_o,_s", INTERP_SIZES)
def test_interp_against_paddle_legacy(op_type, extra, attrs, _o, _s):
    x = rand(2, 3, 7, 10, seed=16)
    method = op_type.split("_")[0]
    attrs = dict(attrs, interp_method=method, align_corners=False, align_mode=0)
    if not op_type.endswith("_v2"):
        attrs["scale"] = attrs["scale"][0] if attrs.get("scale") else 0.0
    ins = {"X": x, **extra}
    check(run1(op_type, ins, attrs), paddle_legacy(op_type, ins, attrs)["Out"][0], f"{op_type} {attrs}")


def test_against_paddle_functional():
    paddle = pytest.importorskip("paddle")
    f = paddle.nn.functional
    t = paddle.to_tensor
    x = rand(2, 4, 9, 11, seed=17)
    ref = f.max_pool2d(t(x), 3, 2, padding=1, ceil_mode=True).numpy()
    check(run1("pool2d", {"X": x}, dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
                                        ceil_mode=True)), ref, "F.max_pool2d")
    ref = f.avg_pool2d(t(x), [3, 2], [2, 3], padding=[1, 2], ceil_mode=True, exclusive=False).numpy()
    check(run1("pool2d", {"X": x}, dict(pooling_type="avg", ksize=[3, 2], strides=[2, 3], paddings=[1, 2],
                                        ceil_mode=True, exclusive=False)), ref, "F.avg_pool2d")
    ref = f.adaptive_avg_pool2d(t(x), [4, 3]).numpy()
    check(run1("pool2d", {"X": x}, dict(pooling_type="avg", ksize=[4, 3], adaptive=True)), ref, "F.adaptive_avg_pool2d")
    p = bn_params(4)
    ref = f.batch_norm(t(x), t(p["Mean"]), t(p["Variance"]), t(p["Scale"]), t(p["Bias"]), training=False,
                       epsilon=1e-3).numpy()
    got = run_op("batch_norm", {"X": x, **p}, dict(is_test=True, epsilon=1e-3), BN_OUTS)["Y"][0]
    check(got, ref, "F.batch_norm")
    s, b = rand(9, 11, seed=18), rand(9, 11, seed=19)
    ref = f.layer_norm(t(x), [9, 11], t(s.ravel()), t(b.ravel()), epsilon=1e-5).numpy()
    got = run_op("layer_norm", {"X": x, "Scale": s.ravel(), "Bias": b.ravel()}, dict(begin_norm_axis=2), {"Y": 1})
    check(got["Y"][0], ref, "F.layer_norm")
    for mode, ac, am in [("bilinear", False, 0), ("bilinear", True, 1), ("bilinear", False, 1), ("nearest", False, 1)]:
        ref = f.interpolate(t(x), scale_factor=1.7, mode=mode, align_corners=ac, align_mode=am).numpy()
        got = run1(f"{mode}_interp_v2", {"X": x}, dict(scale=[1.7, 1.7], interp_method=mode, align_corners=ac,
                                                       align_mode=am))
        check(got, ref, f"F.interpolate {mode} {ac} {am}")
        ref = f.interpolate(t(x), size=[5, 17], mode=mode, align_corners=ac, align_mode=am).numpy()
        got = run1(f"{mode}_interp_v2", {"X": x}, dict(out_h=5, out_w=17, interp_method=mode, align_corners=ac,
                                                       align_mode=am))
        check(got, ref, f"F.interpolate size {mode} {ac} {am}")
