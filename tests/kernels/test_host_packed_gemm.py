"""The native packed-weights conv GEMM (native_src/packed_gemm.c) against float64 maths and the NumPy conv kernel.

Shapes cover its edges: output channels not a multiple of 16 or 64 (zero-padded panels of 16..64 rows), columns
not a multiple of its 7-column tiles and more than one chunk of 32 tiles, reductions over several blocks of 128,
1x1 convs read in place (both forms: the wide one's full tiles, the packed one's when the columns fill whole
7-column tiles) and every im2col geometry (stride, padding, dilation), batches, bias and activations.
The packed form's write-out runs both ways (16x16 in-register transposes, the default with AVX-512, and element
by element). Tolerance as the other native kernels: max|native - ref| <= 1e-5 * max(1, max|ref|). Skipped when
the extension is not built; it runs on every instruction set (only the conv kernel's choice of it needs AVX-512).
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.kernels.host import conv as conv_module
from pdlite.kernels.host import native
from pdlite.kernels.registry import KernelContext
from pdlite.operators.nn import conv2d_geometry
from pdlite.operators.registry import OPS
from tests.kernels._util import kernel_class, make_op, native_threads, shuffles16

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension (_native) is not built")

TOL = 1e-5


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.shape == ref.shape and got.dtype == np.float32, f"{what}: {got.dtype}{got.shape} vs {ref.shape}"
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    bound = TOL * max(1.0, float(np.max(np.abs(ref))))
    assert err <= bound, f"{what}: max|native - ref| = {err:.3g} > {bound:.3g}"


def reference(x, w, bias, k, s, p, d, act):
    """act(conv + bias) in float64 through the NumPy kernel's im2col (pads p on every side)."""
    n, c, h, wd = x.shape
    attrs = {**OPS["conv2d"].defaults, "strides": [s, s], "paddings": [p, p], "dilations": [d, d]}
    g = conv2d_geometry(attrs, x.shape, w.shape)
    cols = conv_module.im2col(x, g).astype(np.float64)
    out = np.matmul(w.reshape(w.shape[0], -1).astype(np.float64), cols).reshape(n, -1, g.oh, g.ow)
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    if act == "relu":
        out = np.maximum(out, 0.0)
    elif act == "relu6":
        out = np.clip(out, 0.0, 6.0)
    elif act == "leaky_relu":
        out = np.where(out < 0.0, out * 0.25, out)
    return out, g


ACT_CODES = {None: native.NO_ACT, "relu": (1, native.NO_PARAMS), "relu6": (2, (6.0, 0.0, 0.0)),
             "leaky_relu": (3, (0.25, 0.0, 0.0))}
# the wide form: tiles of 8 rows x 48 columns, its 1x1 stride-1 columns read in place when 48 of them are there

# (n, c, h, w, m, k, stride, pad, dilation, bias, act)
CASES = [
    (1, 64, 7, 7, 64, 3, 1, 1, 1, True, "relu"),  # one full panel, 7 full tiles
    (1, 40, 7, 7, 100, 3, 1, 1, 1, True, None),  # K = 360: two reduction blocks; panels of 64 and 48 rows (36 pad)
    (2, 24, 14, 14, 24, 3, 2, 1, 1, False, "relu6"),  # batch, stride 2, 24 rows (one panel of 32, 8 padded)
    (1, 300, 5, 6, 70, 1, 1, 0, 1, True, None),  # 1x1 read in place, K = 300, 30 columns (2 padded in the last tile)
    (3, 16, 17, 19, 16, 1, 2, 0, 1, True, "relu"),  # strided 1x1 (im2col), 81 columns
    (1, 8, 20, 20, 33, 3, 1, 2, 2, True, None),  # dilation, 400 columns: two chunks of tiles, K = 72
    (1, 3, 16, 16, 17, 7, 2, 3, 1, True, "relu"),  # a stem: K = 147
    (1, 1, 3, 3, 1, 1, 1, 0, 1, False, None),  # the smallest: K = 1, one row, one partial tile
    (2, 20, 10, 11, 13, 1, 1, 0, 1, True, "relu"),  # wide: 1x1, 110 columns (2 tiles in place, 14 packed), 13 rows
    (1, 12, 9, 9, 40, 1, 1, 0, 1, True, "leaky_relu"),  # an activation applied over the written rows, 81 columns
    (1, 12, 9, 9, 40, 1, 1, 0, 1, False, "leaky_relu"),  # the same without bias
    # kernel rows over the padding skipped per tile (the packed form's reduction is tap-major):
    (1, 16, 4, 5, 20, 3, 1, 3, 1, True, "relu"),  # pad 3: output rows 0 and 7 all padding (bias only), 9 wide
    (2, 32, 7, 7, 48, 3, 1, 1, 1, False, None),  # 7x7 maps, batch 2: each image's top and bottom rows skip a row
    (1, 24, 9, 8, 16, 3, 1, 2, 2, True, "relu6"),  # dilation 2, pad 2: tiles across two output rows
    # 1x1 convs whose columns fill whole 7-column tiles: the packed form reads them in place (no packing pass)
    (2, 150, 7, 7, 80, 1, 1, 0, 1, True, "relu6"),  # 7x7, K = 150 (two reduction blocks), panels of 64 and 16
    (1, 130, 14, 20, 33, 1, 1, 0, 1, False, None),  # 280 columns: 40 tiles, two chunks; 33 rows (one panel of 48)
    (3, 9, 7, 14, 20, 1, 1, 0, 1, True, "leaky_relu"),  # batch 3, K = 9, an activation over the written rows
]


@pytest.mark.parametrize("t16", [True, False], ids=["t16", "scalar"])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("n,c,h,w,m,k,s,p,d,has_bias,act", CASES)
def test_packed_conv_matches_float64(n, c, h, w, m, k, s, p, d, has_bias, act, wide, t16):
    """t16: the packed form writes its blocks out through 16x16 in-register transposes (the default with AVX-512:
    rows and columns in groups of 16, partial ones at the panel's and chunk's ends), else element by element."""
    x, wt = rand(n, c, h, w, seed=1), rand(m, c, k, k, seed=2)
    bias = rand(m, seed=3) if has_bias else None
    ref, g = reference(x, wt, bias, k, s, p, d, act)
    wp = native.pack_weights(wt, wide)
    assert wp.size == -(-m // (8 if wide else 16)) * (8 if wide else 16) * c * k * k
    with shuffles16(t16):
        got = native.packed_conv(x, wp, bias, m, g.oh, g.ow, (k, k), (s, s), (d, d), (p, p), ACT_CODES[act], wide)
    check(got, ref, f"packed conv {(n, c, h, w, m, k, s, p, d)} wide={wide} t16={t16}")


@pytest.mark.parametrize("t16", [True, False], ids=["t16", "scalar"])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("threads", [2, 3])
def test_packed_conv_thread_counts_give_the_same_results(threads, wide, t16):
    x, wt, b = rand(2, 48, 9, 9, seed=4), rand(80, 48, 3, 3, seed=5), rand(80, seed=6)
    wp = native.pack_weights(wt, wide)
    outs = []
    for t in (1, threads):
        with native_threads(t), shuffles16(t16):
            outs.append(native.packed_conv(x, wp, b, 80, 9, 9, (3, 3), (1, 1), (1, 1), (1, 1), native.NO_ACT, wide))
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("n,c,h,w,k,p", [
    (1, 16, 40, 40, 1, 0),  # 1x1 in place: 34 tiles in groups of 8, split mid-group (2 threads: 17 + 17)
    (3, 20, 10, 11, 1, 0),  # 3 tiles per image (the last partial): ranges cross images
    (2, 3, 30, 30, 3, 1),  # gathered columns: 19 tiles per image (groups of 4)
])
def test_packed_wide_thread_ranges(n, c, h, w, k, p, threads):
    """The wide form gives each thread one contiguous range of tiles over all images, starting anywhere in a group
    or image, run a group at a time, a thread done with its own taking groups from the back of another's
    (parallel_ranges): the same values as on one thread (each output's reduction does not depend on the split,
    nor on which thread runs a group), and within tolerance of float64."""
    x, wt, b = rand(n, c, h, w, seed=10), rand(24, c, k, k, seed=11), rand(24, seed=12)
    ref, g = reference(x, wt, b, k, 1, p, 1, "relu")
    wp = native.pack_weights(wt, True)
    outs = []
    for t in (1, threads):
        with native_threads(t):
            outs.append(native.packed_conv(x, wp, b, 24, g.oh, g.ow, (k, k), (1, 1), (1, 1), (p, p),
                                           ACT_CODES["relu"], True))
    check(outs[1], ref, f"packed wide {(n, c, h, w, k)} on {threads} threads")
    assert np.array_equal(outs[0], outs[1])


def test_packed_conv_checks_buffers():
    x, wt = rand(1, 8, 5, 5), rand(20, 8, 1, 1)
    wp = native.pack_weights(wt)
    from pdlite.kernels.host import _native

    with pytest.raises(ValueError, match="packed weights"):  # packed for 20 rows: 32 * 8 floats, not 20 * 8
        _native.packed_conv(x, np.ascontiguousarray(wt.reshape(-1)), None, np.empty((1, 20, 5, 5), np.float32),
                            (1, 8, 5, 5, 20, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0), 0, native.NO_PARAMS)
    with pytest.raises(ValueError, match="bad geometry"):
        _native.packed_conv(x, wp, None, np.empty(0, np.float32), (1, 8, 5, 5, 20, 5, 5, 1, 1, 0, 1, 1, 1, 0, 0),
                            0, native.NO_PARAMS)


@pytest.mark.parametrize("xs,ws,attrs,form", [
    ((1, 384, 14, 14), (64, 384, 1, 1), {}, "wide"),  # 1x1 on 14x14: tiles of 48 columns 82% full, read in place
    ((1, 96, 14, 14), (576, 96, 1, 1), {}, "wide avx512"),  # ... a short reduction on 5 tiles (AVX2: the BLAS)
    ((1, 32, 2, 96), (200, 32, 1, 1), {}, "wide avx512"),  # ... on 4 (PP-OCR cls's 2x96 maps)
    ((1, 32, 2, 96), (16, 32, 1, 1), {}, None),  # ... 16 outputs: the BLAS
    ((4, 96, 14, 14), (576, 96, 1, 1), {}, "wide"),  # ... on 20 tiles (batch 4)
    ((1, 96, 7, 7), (576, 96, 1, 1), {}, "small avx512"),  # ... on 7x7, 2^15 weights or more (AVX2: the BLAS)
    ((1, 48, 7, 7), (288, 48, 1, 1), {}, "wide avx512"),  # ... fewer
    ((1, 48, 7, 7), (16, 48, 1, 1), {}, None),  # ... 16 outputs: the BLAS
    ((1, 512, 14, 14), (512, 512, 1, 1), {}, "small"),  # large: the small form's 64-channel panels are full
    ((4, 960, 7, 7), (160, 960, 1, 1), {}, "small"),  # 7x7: tiles of 48 columns half empty
    ((1, 256, 14, 14), (256, 256, 3, 3), dict(paddings=[1, 1]), "small"),  # 3x3: columns gathered either way
    ((1, 32, 56, 56), (64, 32, 1, 1), {}, "wide"),  # a larger map
    ((4, 32, 112, 112), (16, 32, 1, 1), {}, "wide"),  # ... 16 outputs and a short reduction (MobileNetV2's 32 -> 16)
    ((4, 32, 112, 112), (8, 32, 1, 1), {}, None),  # ... 8 outputs: the BLAS
])
def test_packed_form_choice(xs, ws, attrs, form):
    """Which packed form (native_src/packed_gemm.c) the conv kernel gives a conv where the packed forms are fast
    (Conv2d.packed's rule, measured on one Xeon core and one Zen 4 core: its docstring)."""
    if not native.packed_gemm_fast():
        pytest.skip(f"the packed forms are chosen where their tiles are tuned ({native.PACKED_FAST_ISAS}), not {native.isa()}")
    g = conv2d_geometry({**OPS["conv2d"].defaults, **attrs}, xs, ws)
    if form in ("wide avx512", "small avx512"):
        form = form.split()[0] if native.isa() == "avx512" else None
    assert conv_module.Conv2d.packed(g, "mm") == form


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 64, 7, 7), (96, 64, 3, 3), dict(paddings=[1, 1])),  # 3x3 on a 7x7 map, batch 1 (no Winograd: too few tiles)
    ((2, 128, 14, 14), (64, 128, 1, 1), {}),  # 1x1 on 14x14
    ((1, 64, 14, 14), (48, 64, 3, 3), dict(strides=[2, 2], paddings=[1, 1])),
    ((1, 24, 20, 20), (40, 24, 1, 1), {}),  # wide: 1x1 on a 20x20 map
    ((2, 3, 40, 44), (32, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1])),  # wide, gathered: a stem, 440 columns
])
def test_conv_kernel_small_maps(xs, ws, attrs):
    """The conv kernel on the shapes it gives the packed GEMM (on AVX-512) matches its NumPy path."""
    x, w, b = rand(*xs, seed=7), rand(*ws, seed=8), rand(ws[0], seed=9)
    g = conv2d_geometry({**OPS["conv2d"].defaults, **attrs}, xs, ws)
    assert (conv_module.Conv2d.packed(g, "mm") is not None) == native.packed_gemm_fast()
    res = []
    for on in (True, False):
        op = make_op("conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs, {"Output": 1})
        k = kernel_class("conv2d")(op)
        k.context = KernelContext({"host_native": on})
        res.append(k.run({"Input": [x], "Filter": [w], "Bias": [b]})["Output"][0])
    check(res[0], res[1].astype(np.float64), f"conv2d {xs} {ws}")


@pytest.mark.parametrize("xs,ws", [((1, 96, 7, 7), (576, 96, 1, 1)), ((1, 48, 7, 7), (288, 48, 1, 1)),
                                   ((2, 64, 7, 7), (384, 64, 1, 1))])
def test_conv_kernel_short_reduction_7x7(xs, ws):
    """1x1 convs with a reduction under 128 on 7x7 maps (MobileNetV3-small's 96 -> 576; at AVX-512 the packed forms,
    elsewhere the BLAS) match an fp64 reference at 1 and 2 threads, the two thread counts bit-equal."""
    x, w, b = rand(*xs, seed=17), rand(*ws, seed=18), rand(ws[0], seed=19)
    ref = np.einsum("nchw,mc->nmhw", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64)) + b[None, :, None, None]
    res = []
    for threads in (1, 2):
        op = make_op("conv2d", {"Input": x, "Filter": w, "Bias": b}, {}, {"Output": 1})
        k = kernel_class("conv2d")(op)
        k.context = KernelContext({"host_native": True})
        with native_threads(threads):
            res.append(k.run({"Input": [x], "Filter": [w], "Bias": [b]})["Output"][0])
        check(res[-1], ref, f"conv2d {xs} {ws} at {threads} thread(s)")
    assert np.array_equal(res[0], res[1]), "the thread count changed the sums"
