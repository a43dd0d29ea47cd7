"""conv3d and pool3d host kernels against independent references written here.

conv3d: a tap-by-tap float64 sum with explicit input coordinates and bounds masks (the kernel
uses im2col over a window view), with output sizes and SAME paddings spelled out per case.
pool3d: a literal per-window loop of Paddle's CPU Pool3dFunctor. Paddle's legacy executor
(subprocess) is compared when paddle is installed; the conformance zoo (conv3d_pool3d) checks
both against Paddle Inference.
Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|); NaN positions must match.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdlite.errors import InputError
from tests.kernels._checks import check, infer, rand
from tests.kernels._util import paddle_legacy, run1, run_op

FLT_MAX = float(np.finfo(np.float32).max)


def ndhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 4, 1))


def check_nan(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    check(np.where(nan, 0, got), np.where(nan, 0, ref), what)


# --- conv3d ----------------------------------------------------------------------------------------
def ref_conv3d(x, w, strides, pads, dil, groups, out_size):
    """Output [N, Cout, *out_size] as sum over taps of W[:, :, i, j, l] @ X at (o*s - pad + tap*d)."""
    n, c = x.shape[:2]
    oc, cg = w.shape[:2]
    ocg = oc // groups
    out = np.zeros((n, oc, *out_size))
    grids = np.meshgrid(*[np.arange(o) for o in out_size], indexing="ij")
    for tap in itertools.product(*[range(k) for k in w.shape[2:]]):
        pos = [g * s - pads[2 * a] + t * d for a, (g, s, t, d) in enumerate(zip(grids, strides, tap, dil))]
        ok = np.ones(out_size, bool)
        for a, p in enumerate(pos):
            ok &= (p >= 0) & (p < x.shape[2 + a])
        vals = x[:, :, np.clip(pos[0], 0, x.shape[2] - 1), np.clip(pos[1], 0, x.shape[3] - 1),
                 np.clip(pos[2], 0, x.shape[4] - 1)] * ok  # [N, C, od, oh, ow]
        for gi in range(groups):
            wt = w[gi * ocg:(gi + 1) * ocg, :, tap[0], tap[1], tap[2]].astype(np.float64)  # [ocg, cg]
            out[:, gi * ocg:(gi + 1) * ocg] += np.einsum("oc,ncdhw->nodhw", wt, vals[:, gi * cg:(gi + 1) * cg])
    return out


# (x shape, filter shape, attrs, expected out size, paddings [f, b, t, b, l, r] and dilations actually used)
CONV_CASES = [
    ((2, 4, 5, 6, 7), (3, 4, 3, 2, 3), {}, (3, 5, 5), [0] * 6, (1, 1, 1)),
    ((2, 4, 5, 6, 7), (6, 4, 3, 3, 3), dict(strides=[1, 2, 2], paddings=[1, 1, 1]), (5, 3, 4), [1] * 6, (1, 1, 1)),
    ((1, 4, 5, 6, 7), (6, 2, 2, 3, 2), dict(groups=2, paddings=[1, 0, 2, 1, 0, 1], dilations=[2, 1, 2]),
     (4, 7, 6), [1, 0, 2, 1, 0, 1], (2, 1, 2)),
    ((1, 4, 5, 6, 7), (8, 1, 3, 2, 3), dict(groups=4, strides=[2, 1, 3]), (2, 5, 2), [0] * 6, (1, 1, 1)),
    # SAME: out = ceil(in / s) = (3, 3, 3); pad_sum = (2*2+3-5, 2*2+2-6, 2*3+3-7) = (2, 0, 2); dilations reset to 1
    ((1, 4, 5, 6, 7), (5, 4, 3, 2, 3), dict(padding_algorithm="SAME", strides=[2, 2, 3], dilations=[2, 2, 2],
                                            paddings=[9, 9, 9]), (3, 3, 3), [1, 1, 0, 0, 1, 1], (1, 1, 1)),
    ((1, 4, 5, 6, 7), (5, 4, 3, 2, 3), dict(padding_algorithm="VALID", strides=[1, 2, 1], paddings=[1, 1, 1]),
     (3, 3, 5), [0] * 6, (1, 1, 1)),
    ((2, 3, 4, 5, 6), (5, 3, 1, 1, 1), dict(strides=[2, 2, 1]), (2, 3, 6), [0] * 6, (1, 1, 1)),  # pointwise
]


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("xs,ws,attrs,out_size,pads,dil", CONV_CASES)
def test_conv3d_matches_tap_sum(xs, ws, attrs, out_size, pads, dil, layout):
    x, w = rand(*xs, seed=1), rand(*ws, seed=2)
    groups = attrs.get("groups", 1)
    ref = ref_conv3d(x, w, attrs.get("strides", [1, 1, 1]), pads, dil, groups, out_size)
    xin = ndhwc(x) if layout == "NDHWC" else x
    got = run_op("conv3d", {"Input": xin, "Filter": w}, dict(attrs, data_format=layout), {"Output": 1})["Output"][0]
    assert got.dtype == np.float32
    check(got, ndhwc(ref) if layout == "NDHWC" else ref, f"conv3d {attrs} {layout}")


def test_conv3d_bias_and_large_slabs(monkeypatch):
    """Bias is added per output channel; column slabs of one output depth give the same result."""
    from pdlite.kernels.host import conv3d

    x, w, b = rand(1, 3, 6, 5, 4, seed=3), rand(4, 3, 2, 2, 2, seed=4), rand(4, seed=5)
    attrs = dict(paddings=[1, 1, 1], strides=[1, 2, 1])
    ref = ref_conv3d(x, w, [1, 2, 1], [1] * 6, (1, 1, 1), 1, (7, 3, 5)) + b.reshape(1, 4, 1, 1, 1)
    got = run_op("conv3d", {"Input": x, "Filter": w, "Bias": b}, attrs, {"Output": 1})["Output"][0]
    check(got, ref, "conv3d bias")
    monkeypatch.setattr(conv3d, "COLS_FLOATS", 1)
    got = run_op("conv3d", {"Input": x, "Filter": w}, attrs, {"Output": 1})["Output"][0]
    check(got, ref - b.reshape(1, 4, 1, 1, 1), "conv3d one depth per slab")


def test_conv3d_errors():
    x = rand(1, 4, 3, 3, 3)
    with pytest.raises(InputError, match="conv3d.*channels"):
        infer("conv3d", {"Input": x, "Filter": rand(2, 3, 1, 1, 1)}, {}, {"Output": 1})
    with pytest.raises(InputError, match="5-D"):
        infer("conv3d", {"Input": x[0], "Filter": rand(2, 4, 1, 1, 1)}, {}, {"Output": 1})
    with pytest.raises(InputError, match="paddings must have 3 or 6"):
        infer("conv3d", {"Input": x, "Filter": rand(2, 4, 1, 1, 1)}, {"paddings": [1, 1]}, {"Output": 1})
    with pytest.raises(InputError, match="output size"):
        infer("conv3d", {"Input": x, "Filter": rand(2, 4, 4, 1, 1)}, {}, {"Output": 1})


# --- pool3d ----------------------------------------------------------------------------------------
def ref_pool3d(x, ptype, k, s, pads, out_size, exclusive=True, adaptive=False):
    """Paddle's Pool3dFunctor, literally (pads = the "before" pads [front, top, left])."""
    n, c = x.shape[:2]
    size = x.shape[2:]
    out = np.empty((n, c, *out_size))
    for o in itertools.product(*[range(v) for v in out_size]):
        lo, hi, pool = [], [], 1
        for a in range(3):
            if adaptive:
                st, en = (o[a] * size[a]) // out_size[a], math.ceil((o[a] + 1) * size[a] / out_size[a])
            else:
                st = o[a] * s[a] - pads[a]
                en = min(st + k[a], size[a] + pads[a])
                pool *= en - st
                st, en = max(st, 0), min(en, size[a])
            lo.append(st)
            hi.append(en)
        win = x[:, :, lo[0]:max(hi[0], 0), lo[1]:max(hi[1], 0), lo[2]:max(hi[2], 0)]  # no Python negative ends
        win = win.reshape(n, c, -1).astype(np.float64)
        if ptype == "max":
            out[(slice(None), slice(None), *o)] = np.max(win, axis=2, initial=-FLT_MAX)
        else:
            if exclusive or adaptive:
                pool = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
            with np.errstate(divide="ignore", invalid="ignore"):
                out[(slice(None), slice(None), *o)] = win.sum(axis=2) / pool
    return out


# (attrs, out size, windows: ksize, strides, "before" pads) for an input of [2, 3, 5, 6, 7]
POOL_CASES = [
    (dict(ksize=[2, 2, 2], strides=[2, 2, 2], ceil_mode=True), (3, 3, 4), ([2, 2, 2], [2, 2, 2], [0, 0, 0])),
    (dict(ksize=[2, 3, 3], paddings=[1, 1, 1]), (6, 6, 7), ([2, 3, 3], [1, 1, 1], [1, 1, 1])),
    (dict(ksize=[2, 3, 3], paddings=[1, 1, 1], exclusive=False), (6, 6, 7), ([2, 3, 3], [1, 1, 1], [1, 1, 1])),
    (dict(ksize=[3, 3, 2], strides=[2, 2, 3], paddings=[1, 0, 2, 1, 0, 1], ceil_mode=True, exclusive=False),
     (3, 4, 3), ([3, 3, 2], [2, 2, 3], [1, 2, 0])),
    (dict(ksize=[3, 3, 2], strides=[2, 2, 3], paddings=[1, 0, 2, 1, 0, 1], ceil_mode=True),
     (3, 4, 3), ([3, 3, 2], [2, 2, 3], [1, 2, 0])),
    # windows wholly in the padding: max -FLT_MAX, exclusive avg 0/0 (NaN) as in Paddle
    (dict(ksize=[1, 2, 2], strides=[3, 3, 3], paddings=[2, 2, 2], ceil_mode=True), (4, 4, 4),
     ([1, 2, 2], [3, 3, 3], [2, 2, 2])),
    (dict(ksize=[3, 3, 3], strides=[2, 2, 2], padding_algorithm="SAME"), (3, 3, 4),  # SAME: pads 1,1 0,1 1,1
     ([3, 3, 3], [2, 2, 2], [1, 0, 1])),
    (dict(ksize=[3, 3, 3], strides=[2, 2, 2], padding_algorithm="VALID", paddings=[1, 1, 1]), (2, 2, 3),
     ([3, 3, 3], [2, 2, 2], [0, 0, 0])),
    (dict(ksize=[1, 1, 1], global_pooling=True, paddings=[1, 1, 1]), (1, 1, 1), ([5, 6, 7], [1, 1, 1], [0, 0, 0])),
    (dict(ksize=[4, 4, 4], strides=[3, 3, 3], paddings=[2, 2, 2], ceil_mode=True), (3, 3, 4),
     ([4, 4, 4], [3, 3, 3], [2, 2, 2])),
]


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("attrs,out_size,windows", POOL_CASES)
def test_pool3d_matches_literal_loop(attrs, out_size, windows, ptype, layout):
    x = rand(2, 3, 5, 6, 7, seed=6)
    k, s, pads = windows
    ref = ref_pool3d(x, ptype, k, s, pads, out_size, exclusive=attrs.get("exclusive", True))
    a = dict(attrs, pooling_type=ptype, data_format=layout)
    with np.errstate(invalid="ignore"):
        got = run1("pool3d", {"X": ndhwc(x) if layout == "NDHWC" else x}, a)
    check_nan(got, ndhwc(ref) if layout == "NDHWC" else ref, f"pool3d {a}")


def test_pool3d_adaptive():
    """avg: adaptive windows; max: Paddle's quirk, the ksize/strides windows over an output of size ksize."""
    x = rand(2, 3, 5, 6, 7, seed=7)
    for ks in ([2, 4, 3], [3, 4, 5], [5, 6, 7], [1, 1, 1]):
        got = run1("pool3d", {"X": x}, dict(pooling_type="avg", ksize=ks, adaptive=True, paddings=[1, 1, 1]))
        check(got, ref_pool3d(x, "avg", ks, [1, 1, 1], [0, 0, 0], tuple(ks), adaptive=True), f"adaptive avg {ks}")
    got = run1("pool3d", {"X": x}, dict(pooling_type="max", ksize=[3, 4, 5], strides=[1, 2, 1], adaptive=True))
    check(got, ref_pool3d(x, "max", [3, 4, 5], [1, 2, 1], [0, 0, 0], (3, 4, 5)), "adaptive max quirk")
    # independent: evenly dividing adaptive average = mean over reshaped blocks
    y = rand(1, 2, 4, 6, 8, seed=8)
    got = run1("pool3d", {"X": y}, dict(pooling_type="avg", ksize=[2, 3, 4], adaptive=True))
    check(got, y.reshape(1, 2, 2, 2, 3, 2, 4, 2).astype(np.float64).mean(axis=(3, 5, 7)), "adaptive avg blocks")


def test_pool3d_errors():
    with pytest.raises(InputError, match="5-D"):
        infer("pool3d", {"X": rand(1, 2, 3, 4)}, {"pooling_type": "max", "ksize": [2, 2, 2]})
    with pytest.raises(InputError, match="pooling_type"):
        infer("pool3d", {"X": rand(1, 2, 3, 4, 5)}, {"pooling_type": "min", "ksize": [2, 2, 2]})
    with pytest.raises(InputError, match="ksize"):
        infer("pool3d", {"X": rand(1, 2, 3, 4, 5)}, {"pooling_type": "max", "ksize": [2, 2]})


# --- Paddle's legacy executor ------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("xs,ws,attrs,_o,_p,_d", CONV_CASES)
def test_conv3d_against_paddle_legacy(xs, ws, attrs, _o, _p, _d, layout):
    x, w = rand(*xs, seed=9), rand(*ws, seed=10)
    ins = {"Input": ndhwc(x) if layout == "NDHWC" else x, "Filter": w}
    a = dict(attrs, data_format=layout)
    ref = paddle_legacy("conv3d", ins, a, {"Output": 1})["Output"][0]
    check(run_op("conv3d", ins, a, {"Output": 1})["Output"][0], ref, f"conv3d {a} vs paddle")


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("attrs", [c[0] for c in POOL_CASES] + [dict(ksize=[2, 4, 3], adaptive=True),
                                                               dict(ksize=[3, 4, 5], strides=[1, 2, 1], adaptive=True)])
def test_pool3d_against_paddle_legacy(attrs, ptype):
    x = rand(2, 3, 5, 6, 7, seed=11)
    for layout, xin in (("NCDHW", x), ("NDHWC", ndhwc(x))):
        a = dict(attrs, pooling_type=ptype, data_format=layout)
        ref = paddle_legacy("pool3d", {"X": xin}, a)["Out"][0]
        with np.errstate(invalid="ignore"):
            got = run1("pool3d", {"X": xin}, a)
        check_nan(got, ref, f"pool3d {a} vs paddle")


def test_against_paddle_functional():
    paddle = pytest.importorskip("paddle")
    f, t = paddle.nn.functional, paddle.to_tensor
    x, w, b = rand(2, 3, 6, 7, 5, seed=12), rand(4, 3, 3, 3, 2, seed=13), rand(4, seed=14)
    ref = f.conv3d(t(ndhwc(x)), t(w), t(b), stride=[2, 1, 2], padding="SAME", data_format="NDHWC").numpy()
    got = run_op("conv3d", {"Input": ndhwc(x), "Filter": w, "Bias": b},
                 dict(strides=[2, 1, 2], padding_algorithm="SAME", data_format="NDHWC"), {"Output": 1})["Output"][0]
    check(got, ref, "F.conv3d NDHWC SAME + bias")
    ref = f.avg_pool3d(t(x), [3, 2, 2], [2, 2, 1], padding=1, ceil_mode=True, exclusive=False).numpy()
    got = run1("pool3d", {"X": x}, dict(pooling_type="avg", ksize=[3, 2, 2], strides=[2, 2, 1], paddings=[1, 1, 1],
                                        ceil_mode=True, exclusive=False))
    check(got, ref, "F.avg_pool3d")
    ref = f.adaptive_avg_pool3d(t(x), [4, 3, 2]).numpy()
    check(run1("pool3d", {"X": x}, dict(pooling_type="avg", ksize=[4, 3, 2], adaptive=True)), ref, "adaptive_avg_pool3d")
