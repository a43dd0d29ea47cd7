"""The native matrix-vector products (native_src/gemv.c: packed_gemv) and the kernels that take them: the batch-1 fc
and the 1x1 convs of 1x1 maps (squeeze-and-excitation's, native_plans.rows_plan).

packed_gemv computes packed_fc's sums in packed_fc's order (one multiply-add per reduction step, k ascending, then
the bias, then the activation), so it must give packed_fc's bits on the same ISA, at every thread count; against
float64 maths it must be within the native kernels' tolerance, max|native - ref| <= 1e-5 * max(1, max|ref|). The
kernels must match their NumPy paths (host_native off) within the same bound. Skipped when the extension is not
built; it runs on every instruction set.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.kernels.host import conv as conv_module
from pdlite.kernels.host import native
from pdlite.kernels.registry import KernelContext
from tests.kernels._util import kernel_class, make_op, native_threads

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension (_native) is not built")

TOL = 1e-5
ACTS = {"": {}, "relu6": {"threshold": 6.0}, "hard_swish": {"offset": 3.0, "threshold": 6.0, "scale": 6.0},
        "hard_sigmoid": {"slope": 0.2, "offset": 0.5}, "gelu": {"approximate": False}}


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def check(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.shape == ref.shape and got.dtype == np.float32, f"{what}: {got.dtype}{got.shape} vs {ref.shape}"
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    bound = TOL * max(1.0, float(np.max(np.abs(ref))))
    assert err <= bound, f"{what}: max|native - ref| = {err:.3g} > {bound:.3g}"


def code_of(act: str) -> native.Act:
    code = native.activation(act, ACTS[act])
    assert code is not None
    return code


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("m,k,n,bias", [
    (1, 576, 1024, True),  # MobileNetV3's batch-1 fc: 22 tiles of 48 (the last partial), split over the pool
    (1, 1024, 100, False),  # its classifier: 3 tiles (an odd one after the pair)
    (1, 1, 1, True),  # one step, one column
    (2, 144, 576, True),  # a squeeze-and-excitation's expansion at batch 2: exactly 12 tiles
    (3, 37, 49, False),  # 2 tiles, the second one column
    (4, 300, 230, True),  # 5 tiles, 4 rows
])
def test_packed_gemv_is_packed_fc(act, m, k, n, bias):
    """The same bits as packed_fc, at 1 to 3 threads (items: tiles; a pair at a time, then an odd one), and within
    1e-5 of float64 maths with the activation of the NumPy kernels."""
    x, w = rand(m, k, seed=1, scale=2.0), rand(k, n, seed=2, scale=0.3)
    b = rand(n, seed=3) if bias else None
    code, wp = code_of(act), native.pack_fc_weights(w)
    outs = []
    for t in (1, 2, 3):
        with native_threads(t):
            outs.append(native.packed_gemv(x, wp, n, b, code))
    assert all(np.array_equal(outs[0], o) for o in outs[1:]), "differs across thread counts"
    assert np.array_equal(outs[0], native.packed_fc(x, wp, n, b, code)), "other bits than packed_fc"
    ref = x.astype(np.float64) @ w + (b if bias else 0)
    if act == "gelu":  # (not one of numpy_act_inplace's: the NumPy kernel's float32 result)
        from pdlite.kernels.host.activation import gelu_exact

        ref = gelu_exact(ref.astype(np.float32)).astype(np.float64)
    else:
        ref = ref.astype(np.float32)
        conv_module.numpy_act_inplace(ref, code)
    check(outs[0], ref.astype(np.float64), f"packed_gemv {m}x{k}x{n} {act}")


def test_packed_gemv_checks_its_arguments():
    from pdlite.kernels.host import _native

    x, wp = rand(1, 10), native.pack_fc_weights(rand(10, 50))
    out = np.empty((1, 50), np.float32)
    _native.packed_gemv(x, wp, None, out, (1, 10, 50), 0, native.NO_PARAMS)
    with pytest.raises(ValueError, match="packed_gemv: bad shape"):
        _native.packed_gemv(x, wp, None, out, (1, 0, 50), 0, native.NO_PARAMS)
    with pytest.raises(ValueError, match="packed_gemv packed weights"):  # packed for 50 columns: 2 tiles of 48
        _native.packed_gemv(x, np.zeros(10 * 50, np.float32), None, out, (1, 10, 50), 0, native.NO_PARAMS)
    with pytest.raises(ValueError, match="packed_gemv input"):
        _native.packed_gemv(rand(1, 9), wp, None, out, (1, 10, 50), 0, native.NO_PARAMS)


def run_kernel(op_type: str, ins: dict, attrs: dict, out: str, on: bool) -> np.ndarray:
    k = kernel_class(op_type)(make_op(op_type, ins, attrs, {out: 1}))
    k.context = KernelContext({"host_native": on})
    k.prepare({})
    feeds = {s: [v] for s, v in ins.items() if v is not None}
    k.run(feeds)  # twice: the second run reuses what the first one prepared (packed weights, the bound plan)
    return k.run(feeds)[out][0]


@pytest.mark.parametrize("act", ["", "relu", "hard_swish"])
@pytest.mark.parametrize("shape,n", [((1, 576), 1024), ((1, 1, 200), 37), ((3, 64), 200), ((1, 8), 7)])
def test_fc_few_rows(monkeypatch, act, shape, n):
    """fc with 1-4 rows takes packed_gemv (from 4096 weights) and matches its NumPy path."""
    from pdlite.kernels.host.fused import FC_GEMV_MIN

    calls = []
    real = native.packed_gemv
    monkeypatch.setattr(native, "packed_gemv", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    x, w, b = rand(*shape, seed=4, scale=2.0), rand(shape[-1], n, seed=5, scale=0.2), rand(n, seed=6)
    attrs = {"in_num_col_dims": len(shape) - 1, "activation_type": act}
    got = run_kernel("fc", {"Input": x, "W": w, "Bias": b}, attrs, "Out", True)
    assert bool(calls) == (shape[-1] * n >= FC_GEMV_MIN)
    check(got, run_kernel("fc", {"Input": x, "W": w, "Bias": b}, attrs, "Out", False).astype(np.float64),
          f"fc {shape} x {n} {act}")


@pytest.mark.parametrize("batch", [1, 2, 4, 5])
def test_conv_1x1_on_1x1_maps(monkeypatch, batch):
    """A squeeze-and-excitation's 1x1 conv on 1x1 maps (rows_plan: packed_gemv up to GEMV_MAX_ROWS images, fc_gemm
    beyond) matches the NumPy conv kernel."""
    x, w, b = rand(batch, 576, 1, 1, seed=7), rand(144, 576, 1, 1, seed=8, scale=0.1), rand(144, seed=9)
    ins = {"Input": x, "Filter": w, "Bias": b}
    calls = []
    real = native._ext.packed_gemv
    monkeypatch.setattr(native._ext, "packed_gemv", lambda *a: calls.append(1) or real(*a))
    got = run_kernel("conv2d", ins, {}, "Output", True)
    assert bool(calls) == (batch <= native.GEMV_MAX_ROWS)
    check(got, run_kernel("conv2d", ins, {}, "Output", False).astype(np.float64), f"1x1 conv on 1x1, batch {batch}")


@pytest.mark.parametrize("pads,strides", [([0, 0, 1, 0], [1, 2]), ([1, 0, 0, 0], [2, 1])])
def test_conv_1x1_on_padded_1x1_maps(pads, strides):
    """A 1x1 conv of a 1x1 map whose one output reads the padding is not the matrix-vector product (rows_plan takes
    unpadded maps only): bias alone there, as the NumPy kernel gives (hypothesis found this in
    test_host_conv.py's random geometries)."""
    x, w, b = rand(1, 3, 1, 1, seed=10), rand(4, 3, 1, 1, seed=11), rand(4, seed=12)
    ins, attrs = {"Input": x, "Filter": w, "Bias": b}, {"paddings": pads, "strides": strides}
    got = run_kernel("conv2d", ins, attrs, "Output", True)
    ref = run_kernel("conv2d", ins, attrs, "Output", False)
    check(got, ref.astype(np.float64), f"1x1 conv on a padded 1x1 map {pads} {strides}")
