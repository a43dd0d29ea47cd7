"""The packed GEMM forms give the same bits on every instruction set whose tiles are fused multiply-adds in one order.

native_src/neon.h and avx2.h run the AVX-512 register tiles of packed_gemm.c as NEON / AVX2 sub-tiles: each output is
still one fused multiply-add per reduction step, k ascending. So the small and wide packed convs and packed fc must
give, on NEON and AVX2, exactly the bits AVX-512 gives (the x86 baseline build, without FMA, rounds twice per step). The inputs are integers divided by a prime in float32 (no random
generator, no libm: the same arrays on every machine, and products that round), and the digests below are the outputs' SHA-256 as
this code computes them with AVX-512 (on an AMD EPYC, Zen 5). On AVX-512, AVX2 and NEON the outputs must match them
bit for bit; on every instruction set they must match float64 maths within the native kernels' tolerance (1e-5).
The depthwise row-vector and channel-blocked forms and direct_conv have AVX2 forms with the AVX-512 forms' products
in the same order (depthwise.c, direct_conv.c): their digests must match on AVX2 too (NEON runs other depthwise
forms: X86_ONLY). Regenerate after a deliberate change of the products' order: `python tests/kernels/test_host_native_isa.py` on an
AVX-512 machine prints the table.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pdlite.kernels.host import native, native_plans

pytestmark = pytest.mark.skipif(not native.available(), reason="the native extension (_native) is not built")

BIT_EXACT_ISAS = ("avx512", "avx2", "neon")  # the FMA tiles whose order is the same (docs/determinism.md)


def ints(n: int, seed: int) -> np.ndarray:
    """n values in (-1, 1): integers divided by a prime in float32 (IEEE division rounds the same everywhere). Not a
    power of two: the products and sums round (on a 2^-k grid they would be exact, and every order give the same
    bits, the test then unable to tell FMA from multiply-add or one order from another)."""
    i = np.arange(n, dtype=np.int64)
    return ((i * 7919 + seed * 104729) % 2039 - 1019).astype(np.float32) / np.float32(1021.0)


def arr(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return ints(int(np.prod(shape)), seed).reshape(shape)


RELU6 = (2, (6.0, 0.0, 0.0))
HSWISH = (4, (3.0, 6.0, 6.0))


def _conv(n, c, h, w, m, k, s, p, wide, act, bias=True):
    x, wt = arr((n, c, h, w), 1), arr((m, c, k, k), 2)
    b = arr((m,), 3) if bias else None
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    got = native.packed_conv(x, native.pack_weights(wt, wide), b, m, oh, ow, (k, k), (s, s), (1, 1), (p, p), act, wide)
    cols = np.lib.stride_tricks.sliding_window_view(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p))),
                                                    (k, k), axis=(2, 3))[:, :, ::s, ::s]
    ref = np.einsum("nchwij,mcij->nmhw", cols, wt.astype(np.float64))
    if b is not None:
        ref += b.reshape(1, -1, 1, 1)
    return got, _act(ref, act)


def _act(ref: np.ndarray, act) -> np.ndarray:
    if act == RELU6:
        return np.clip(ref, 0.0, 6.0)
    if act == HSWISH:
        return np.clip(ref + 3.0, 0.0, 6.0) * ref / 6.0
    return ref


def _fc(m, k, n, act):
    x, w, b = arr((m, k), 4), arr((k, n), 5), arr((n,), 6)
    got = native.packed_fc(x, native.pack_fc_weights(w), n, b, act)
    return got, _act(x.astype(np.float64) @ w + b, act)


def _gemv(m, k, n, act):
    x, w, b = arr((m, k), 10), arr((k, n), 11), arr((n,), 12)
    got = native.packed_gemv(x, native.pack_fc_weights(w), n, b, act)
    return got, _act(x.astype(np.float64) @ w + b, act)


def _dw(c, h, w, s, act, bias=True, k=3):
    """A k x k depthwise conv, padding k // 2, batch 2: the row-vector form (3x3, maps 9 to 64 wide) or the
    channel-blocked one (AVX2: up to 16x16 outputs), AVX-512's and AVX2's, the same products in the same order."""
    x, wt = arr((2, c, h, w), 1), arr((c, k * k), 2)
    b = arr((c,), 3) if bias else None
    p = k // 2
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    got = native.depthwise_conv2d(x, wt, b, c, oh, ow, (k, k), (s, s), (1, 1), (p, p), act)
    cols = np.lib.stride_tricks.sliding_window_view(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p))),
                                                    (k, k), axis=(2, 3))[:, :, ::s, ::s]
    ref = np.einsum("nchwij,cij->nchw", cols, wt.reshape(c, k, k).astype(np.float64))
    if b is not None:
        ref += b.reshape(1, -1, 1, 1)
    return got, _act(ref, act)


def _direct(c, h, w, m, k, s, p, act):
    """A stem's conv by direct_conv (AVX-512: its masked-load form up to 3 wide, the band form wider; AVX2: the band
    form's 8-column tiles; the same taps in the same order)."""
    x, wt, b = arr((1, c, h, w), 7), arr((m, c, k, k), 8), arr((m,), 9)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    got = native_plans.direct_plan(native.direct_conv_weights(wt), b, x.shape, m, oh, ow, (k, k), (s, s), (1, 1),
                                   (p, p), act)(x)
    cols = np.lib.stride_tricks.sliding_window_view(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p))),
                                                    (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return got, _act(np.einsum("nchwij,mcij->nmhw", cols, wt.astype(np.float64)) + b.reshape(1, -1, 1, 1), act)


# name -> the computation: (native output, float64 reference)
CASES = {
    # the small form: panels of 64 and 48 rows, two reduction blocks, 3x3 with padding (tap-major skips)
    "packed 3x3": lambda: _conv(1, 40, 7, 9, 112, 3, 1, 1, False, RELU6),
    # the small form's 1x1 columns read in place (7x7: whole 7-column tiles), batch 2
    "packed 1x1 in place": lambda: _conv(2, 24, 7, 7, 80, 1, 1, 0, False, HSWISH),
    # the small form, strided, one 16-row panel, no bias
    "packed 3x3 stride 2": lambda: _conv(1, 16, 11, 13, 16, 3, 2, 1, False, native.NO_ACT, bias=False),
    # the wide form: 1x1 read in place with a partial last tile (400 columns), 20 rows (panels of 8)
    "wide 1x1": lambda: _conv(1, 24, 20, 20, 20, 1, 1, 0, True, RELU6),
    # the wide form gathering 3x3 columns
    "wide 3x3": lambda: _conv(1, 8, 18, 18, 24, 3, 1, 1, True, HSWISH),
    # packed fc: 3 column tiles (the last partial), 2 row blocks
    "packed fc": lambda: _fc(40, 72, 130, RELU6),
    # packed fc, a last tile of 32 columns (AVX2: two 16-column sub-tiles instead of 24-column ones), partial panel
    "packed fc 32-column tail": lambda: _fc(21, 72, 128, HSWISH),
    # matrix-vector products (gemv.c): 3 rows, a pair of tiles then an odd, partial one
    "packed gemv": lambda: _gemv(3, 200, 130, HSWISH),
    # the depthwise row-vector form: 3x3 stride 1 (a partial last vector on both ISAs), stride 2 (odd and even widths)
    "depthwise 3x3": lambda: _dw(5, 20, 21, 1, RELU6),
    "depthwise 3x3 stride 2": lambda: _dw(6, 23, 37, 2, native.NO_ACT, bias=False),
    "depthwise 3x3 stride 2 wide": lambda: _dw(4, 30, 64, 2, HSWISH),
    # the channel-blocked form: 3x3 on 7x7 (a partial block of 16 channels), 5x5 stride 2 to 7x7
    "depthwise 3x3 7x7": lambda: _dw(20, 7, 7, 1, RELU6),
    "depthwise 5x5 stride 2": lambda: _dw(16, 13, 14, 2, HSWISH, k=5),
    # 14x14 outputs, the channel-blocked form on both ISAs (AVX2's up to 16x16; on AVX-512 it took 5x5 stride 1 from
    # the row-vector 5x5 loop, which gave these bits too): 5x5, 5x5 stride 2; 40 and 24 channels (a last block of 8)
    "depthwise 5x5 14x14": lambda: _dw(40, 14, 14, 1, HSWISH, k=5),
    "depthwise 5x5 stride 2 to 14x14": lambda: _dw(24, 28, 27, 2, RELU6, k=5),
    # the short-map form (depthwise_short.c): 5x5 on 2 rows 70 wide, the kernel rows in the padding left out
    "depthwise 5x5 short": lambda: _dw(6, 2, 70, 1, RELU6, k=5),
    # direct_conv: a 3x3 / 2 stem (a partial last vector of columns), a 7x7 / 2 one
    "direct 3x3 stride 2": lambda: _direct(3, 19, 37, 16, 3, 2, 1, HSWISH),
    "direct 7x7 stride 2": lambda: _direct(3, 21, 22, 32, 7, 2, 3, RELU6),
}
# the cases only AVX-512 and AVX2 compute in one order (NEON runs the planar depthwise forms)
X86_ONLY = {"depthwise 3x3", "depthwise 3x3 stride 2", "depthwise 3x3 stride 2 wide", "depthwise 3x3 7x7",
            "depthwise 5x5 stride 2", "depthwise 5x5 14x14", "depthwise 5x5 stride 2 to 14x14", "depthwise 5x5 short", "direct 3x3 stride 2", "direct 7x7 stride 2"}
# name -> the SHA-256 of its output's bytes with AVX-512
DIGESTS = {
    'packed 3x3': '825f6015c5c97fa92ffceaf6f26e39bc09b176590fc6d47f7dbc131672a3e6f2',
    'packed 1x1 in place': 'd7dbef01054e63b403dd70eef75b348ca0a23d04d387bff69e3a2a02b5809488',
    'packed 3x3 stride 2': '4de13df260608b6e4e072a10b7b1210f23a3b107e57dcaa4a5f610deb7571b79',
    'wide 1x1': '517740681423193dc197bf6fee27ec844a94b5c2ad786536e380f654df545588',
    'wide 3x3': '3aadfb0dc0b0547e693ee7f04d41b43965185eebe4285c4732d2029ead99a12f',
    'packed fc': '68e2b2823abf0938bb085c40c3349be19e593ab865047b1f8e3762e35fa77ee5',
    'packed fc 32-column tail': '0e41aee3fc4a290e27fec9d422cdc6c0c97715a113edb42f1e68de058060d3a1',
    'packed gemv': '81d4865fc4b7741c60602a8b280919691f32058457021c510055630e1528819a',
    'depthwise 3x3': '54eb4dd4d8e72e1e3fc001a72921918a58411a6cd37b46c564391930d9c8f642',
    'depthwise 3x3 stride 2': '00f268feb1d4e6c69dc8c0725230bee452ccb9973d5f00ec2f070599ba91b327',
    'depthwise 3x3 stride 2 wide': '1ef1b64c3b60ed45f6c1dc57a409b1835b7e4c15f8275f3de798bdad1caf463a',
    'depthwise 3x3 7x7': '07d647123280243a6020ded51e0d3856589f2a11e3759ef30318fb6b8e4b8b5a',
    'depthwise 5x5 stride 2': '1bb3db4074486c020a42a440d5ca7394efcee244cf0d2a51996851b083f53593',
    'depthwise 5x5 14x14': 'ba641d3d661a62227a33b452dbf54bfeb1385c24145b9dd0c5a5b5800cf3655e',
    'depthwise 5x5 stride 2 to 14x14': 'c712ef160392d951eece13f2a98a578289037aa95d1c20ef9a2d6c8322976e8b',
    'depthwise 5x5 short': 'f3a3085b40eb5c537f6ad7b17a1a8781e028dbe12382f65810225ab94a0277d2',
    'direct 3x3 stride 2': 'c16a90af47591cc96c3401ff631a2ee48282b449e22ff1be0312da71b6377cad',
    'direct 7x7 stride 2': '12c218a040e8f9aadfa217fa8d2109cb720e803111ecf18bf8baa068697dd08d',
}


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()


@pytest.mark.parametrize("name", list(CASES))
def test_packed_forms_match_float64_and_avx512_bits(name):
    got, ref = CASES[name]()
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))), f"{name}: max|native - float64| = {err:.3g}"
    if native.isa() in BIT_EXACT_ISAS and (name not in X86_ONLY or native.isa() != "neon"):
        assert digest(got) == DIGESTS[name], f"{name}: {native.isa()} gave other bits than AVX-512"


def test_avx2_forms_give_the_avx512_bits():
    """The AVX2 forms checked from a default (AVX-512) run as well, in a subprocess forced to AVX2: a suite that is not
    run with PDLITE_NATIVE_ISA=avx2 still checks them on every AVX-512 machine."""
    if native.isa() != "avx512":
        pytest.skip(f"checked directly by the test above where the default kernels are AVX2; this run has {native.isa()}")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = ("import json; from pdlite.kernels.host import native; from tests.kernels import test_host_native_isa as t; "
              "print(json.dumps({'isa': native.isa(), **{k: t.digest(f()[0]) for k, f in t.CASES.items()}}))")
    out = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, PDLITE_NATIVE_ISA="avx2"), cwd=root,
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got.pop("isa") == "avx2", "the subprocess did not run the AVX2 kernels"
    assert {k: v for k, v in got.items() if v != DIGESTS[k]} == {}, "AVX2 gave other bits than AVX-512"


if __name__ == "__main__":
    assert native.isa() == "avx512", f"the digests are AVX-512's; this machine runs {native.isa()}"
    for key, fn in CASES.items():
        print(f"    {key!r}: {digest(fn()[0])!r},")
