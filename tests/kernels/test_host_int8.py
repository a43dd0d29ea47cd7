"""The native int8 kernels (native_src/qgemm.c via pdlite/kernels/host/quant_native.py) against NumPy in int64.

Integer sums: EXACT equality with the int64 reference (outputs written with multiplier 1 and no bias, shapes whose
sums stay below 2^24 so the float32 output holds each sum exactly), over odd sizes, padding, strides, dilations,
round types, batches, fc; for every instruction set this CPU runs (vnni / avxvnni / avx2 / baseline, each forced in a
subprocess through PDLITE_NATIVE_ISA, which must report the form it ran). Epilogue (scales, bias, residual,
activations, the output's QDQ): within 2e-6 * max|ref| of NumPy's float32 (one multiply-add may fuse); `qdq` bit
for bit against quantize_linear then dequantize_linear.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pdlite.kernels.host import cpu_features, native
from pdlite.kernels.host import quant_native as qn
from pdlite.kernels.host.conv import numpy_act_inplace
from pdlite.kernels.host.quant import dequantize, quantize

pytestmark = pytest.mark.skipif(not qn.available(), reason="native int8 kernels unavailable in this build "
                                "(python setup.py build_ext --inplace compiles them)")

# (N, C, H, W, M, KH, KW, SH, SW, DH, DW, PT, PL, round_type)
CASES = [
    (1, 3, 5, 7, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0),  # 1x1 in place, odd everything
    (2, 16, 14, 14, 33, 3, 3, 1, 1, 1, 1, 1, 1, 0),  # batch, 3x3 same, M not a block multiple
    (1, 7, 9, 11, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1),  # stride 2, round_type 1
    (1, 5, 10, 13, 9, 5, 3, 2, 1, 2, 1, 2, 1, 0),  # 5x3, dilation 2 in height, asymmetric stride
    (3, 64, 7, 7, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0),  # 7x7 maps (49 columns: a tile and one column)
    (1, 3, 23, 29, 16, 7, 7, 2, 2, 1, 1, 3, 3, 0),  # a stem
    (1, 9, 6, 5, 8, 1, 1, 2, 2, 1, 1, 0, 0, 1),  # strided 1x1
    (1, 130, 4, 4, 3, 3, 3, 1, 1, 1, 1, 2, 2, 0),  # K not a multiple of 4, padding 2
    (1, 5, 9, 30, 10, 3, 5, 1, 1, 2, 3, 0, 4, 1),  # dilations 2 x 3, padding only at the left, C odd
    (1, 96, 19, 21, 24, 3, 3, 1, 1, 1, 1, 1, 1, 0),  # wide reduction, rows not a tile multiple
    (1, 6, 17, 19, 9, 3, 3, 3, 2, 2, 1, 1, 2, 0),  # strides 3 x 2 with dilation 2 in height
    (2, 130, 1, 1, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0),  # 1x1 map (one column: vnni's GEMV form), odd group count
    (1, 64, 1, 1, 9, 1, 1, 1, 1, 1, 1, 0, 0, 1),  # 1x1 map, 16 groups (its unrolled loop twice)
    (1, 16, 40, 41, 12, 1, 1, 1, 1, 1, 1, 0, 0, 0),  # 1x1 on 1640 columns: spans of tiles and a partial last one
]
# all but the 1x1 stride-1 convs also run in qconv's direct form (weights packed with conv=(C, KH, KW))
DIRECT = [i for i, c in enumerate(CASES) if c[5] * c[6] > 1]  # (also where direct_form would not pick it)
FC_CASES = [(1, 37, 10), (5, 64, 100), (3, 3, 1), (1, 1000, 17)]  # (rows, K, N); one row: vnni's GEMV form
ISA_FLAGS = {"vnni": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}, "avx2": {"avx2", "fma"},
             "baseline": set()}
ISA_FLAGS["avxvnni"] = {"avx2", "fma", "avx_vnni"}  # AVX-VNNI's 256-bit vpdpbusd (forced: fp32 at AVX2)
FORCE = {"vnni": "avx512", "avxvnni": "avxvnni", "avx2": "avx2", "baseline": "baseline"}


def _geo(case: tuple) -> tuple:
    n, c, h, w, m, kh, kw, sh, sw, dh, dw, pt, pl, rt = case
    oh = (h + 2 * pt - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + 2 * pl - ((kw - 1) * dw + 1)) // sw + 1
    return oh, ow


def _data(case: tuple, seed: int) -> tuple[np.ndarray, np.ndarray, qn.QParam]:
    n, c, h, w, m, kh, kw = case[:7]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, h, w)) * 2).astype(np.float32)
    x.flat[:: 7] = 1.5 * 3.0 / 127  # exact ties of the grid (round half to even / away)
    w8 = rng.integers(-128, 128, (m, c * kh * kw)).astype(np.int8)
    return x, w8, qn.QParam.of(3.0, case[13])


def _sums(case: tuple, seed: int, direct: bool = False) -> np.ndarray:
    """The kernel's integer sums (as float32 holding exact integers) for CASES[i] with mul 1, no bias (direct: the
    direct form's weights)."""
    x, w8, qp = _data(case, seed)
    oh, ow = _geo(case)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    qw = qn.pack_weights(w8, (case[1], case[5], case[6]) if direct else None)
    return qn.qconv(x, qw, np.ones(w8.shape[0], np.float32), None, w8.shape[0], oh, ow, *k, qp)


def _fc_sums(rows: int, k: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, k)) * 2).astype(np.float32)
    w8 = rng.integers(-128, 128, (n, k)).astype(np.int8)
    return qn.qfc(x, qn.pack_weights(w8), np.ones(n, np.float32), None, qn.QParam.of(2.5, 0))


def _reference(case: tuple, seed: int) -> np.ndarray:
    x, w8, qp = _data(case, seed)
    oh, ow = _geo(case)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    ref = qn.reference_sums(x, w8, oh, ow, *k, qp)
    assert np.abs(ref).max() < 2**24  # float32 holds every sum exactly
    return ref.reshape(x.shape[0], w8.shape[0], oh, ow)


def _fc_reference(rows: int, k: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, k)) * 2).astype(np.float32)
    w8 = rng.integers(-128, 128, (n, k)).astype(np.int8)
    return qn.quantize_int(x, qn.QParam.of(2.5, 0)).astype(np.int64) @ w8.T.astype(np.int64)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_conv_sums_exact(i: int) -> None:
    got = _sums(CASES[i], i)
    np.testing.assert_array_equal(got.astype(np.int64), _reference(CASES[i], i))


@pytest.mark.parametrize("i", DIRECT)
def test_conv_sums_exact_in_the_direct_form(i: int) -> None:
    got = _sums(CASES[i], i, direct=True)
    np.testing.assert_array_equal(got.astype(np.int64), _reference(CASES[i], i))


@pytest.mark.parametrize("shape", FC_CASES)
def test_fc_sums_exact(shape: tuple[int, int, int]) -> None:
    np.testing.assert_array_equal(_fc_sums(*shape, 0).astype(np.int64), _fc_reference(*shape, 0))


_CHILD = """
import json, sys, numpy as np
sys.path.insert(0, sys.argv[2])
from tests.kernels import test_host_int8 as t
from pdlite.kernels.host import quant_native as qn
out = {"isa": qn.int8_isa()}
for i, c in enumerate(t.CASES):
    out[f"conv{i}"] = t._sums(c, i)
for i in t.DIRECT:
    out[f"direct{i}"] = t._sums(t.CASES[i], i, direct=True)
for j, s in enumerate(t.FC_CASES):
    out[f"fc{j}"] = t._fc_sums(*s, 0)
for j, (x, prog) in enumerate(t._register_chains()):
    out[f"chain{j}"] = qn.qchain(x, prog)
np.savez(sys.argv[1], **out)
"""


def _cpu_flags() -> set[str] | None:
    if not cpu_features.is_x86():  # (under qemu-user, an aarch64 process reads the x86 host's /proc/cpuinfo)
        return None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), None)
    return set(line.split(":", 1)[1].split()) if line else None


def run_forced_isa(isa: str, child: str, tmp_path: Path) -> np.lib.npyio.NpzFile:
    """`child` (python -c, argv: the .npz to write, the repo root; it saves the kernels' isa as "isa") run with the
    int8 kernels forced to `isa`; its .npz. Skips where the CPU (or the OS's report of it) cannot run `isa`."""
    flags = _cpu_flags()
    if flags is None or "avx2" not in flags and isa != "baseline":
        pytest.skip("the OS reports no x86 SIMD flags here")
    if not ISA_FLAGS[isa] <= flags:
        pytest.skip(f"this CPU cannot run the {isa} int8 kernels (lacks {sorted(ISA_FLAGS[isa] - flags)})")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PDLITE_NATIVE_ISA": FORCE[isa]}
    subprocess.run([sys.executable, "-c", child, str(tmp_path / "o.npz"), str(root)], env=env, check=True)
    z = np.load(tmp_path / "o.npz")
    assert str(z["isa"]) == isa, f"forced {isa}, the kernels ran {z['isa']}"
    return z


@pytest.mark.parametrize("isa", sorted(FORCE))
def test_every_int8_isa_gives_the_exact_sums(isa: str, tmp_path: Path) -> None:
    z = run_forced_isa(isa, _CHILD, tmp_path)
    for i, c in enumerate(CASES):
        np.testing.assert_array_equal(z[f"conv{i}"].astype(np.int64), _reference(c, i), err_msg=f"{isa} conv {c}")
    for i in DIRECT:
        np.testing.assert_array_equal(z[f"direct{i}"].astype(np.int64), _reference(CASES[i], i),
                                      err_msg=f"{isa} direct conv {CASES[i]}")
    for j, s in enumerate(FC_CASES):
        np.testing.assert_array_equal(z[f"fc{j}"].astype(np.int64), _fc_reference(*s, 0), err_msg=f"{isa} fc {s}")
    for j, (x, prog) in enumerate(_register_chains()):
        np.testing.assert_array_equal(z[f"chain{j}"], qn.chain_numpy(x, prog), err_msg=f"{isa} register chain {j}")


@pytest.mark.parametrize("act", ["", "relu", "relu6", "hard_swish", "hard_sigmoid"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("out_q", [False, True])
@pytest.mark.parametrize("form", ["columns", "direct", "one column"])
def test_conv_epilogue(act: str, residual: bool, out_q: bool, form: str) -> None:
    case = CASES[11] if form == "one column" else CASES[1]  # (one column: vnni's GEMV form, 1x1 on a 1x1 map)
    direct = form == "direct"
    x, w8, qp = _data(case, 3)
    oh, ow = _geo(case)
    rng = np.random.default_rng(4)
    mul = (rng.uniform(0.5, 2.0, w8.shape[0]) * 1e-3).astype(np.float32)
    bias = rng.standard_normal(w8.shape[0]).astype(np.float32)
    res = rng.standard_normal((case[0], w8.shape[0], oh, ow)).astype(np.float32) if residual else None
    defaults = {"relu6": {"threshold": 6.0}, "hard_swish": {"offset": 3.0, "threshold": 6.0, "scale": 6.0},
                "hard_sigmoid": {"slope": 0.2, "offset": 0.5}}
    code = native.activation(act, defaults.get(act, {}))
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    oq = qn.out_qdq(0.8, 0) if out_q else None
    qw = qn.pack_weights(w8, (case[1], 3, 3) if direct else None)
    got = qn.qconv(x, qw, mul, bias, w8.shape[0], oh, ow, *k, qp, code, res, oq)
    ref = qn.qconv_numpy(x, w8, mul, bias, oh, ow, *k, qp)
    if res is not None:
        ref += res
    numpy_act_inplace(ref, code)
    if out_q:  # where float rounding of the epilogue moves a value across a rounding edge: one step of 0.8 / 127
        ref = dequantize(quantize(ref, np.float32(0.8), 127, 0), np.float32(0.8), 127)
        step = np.float32(0.8) / 127
        assert np.abs(got - ref).max() <= step * 1.001 and np.mean(got != ref) < 1e-3
    else:
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * np.abs(ref).max())


@pytest.mark.parametrize("rt", [0, 1])
def test_qdq_is_quantize_then_dequantize_bit_for_bit(rt: int) -> None:
    rng = np.random.default_rng(rt)
    x = (rng.standard_normal((3, 5, 33, 17)) * 4).astype(np.float32)
    x.flat[::11] = np.float32(2.5 * 1.7 / 127)  # ties
    x.flat[5] = np.nan
    s = np.float32(1.7)
    got = qn.qdq(x, qn.QParam.of(float(s), rt))
    ref = dequantize(quantize(np.nan_to_num(x, nan=0.0), s, 127, rt), s, 127)
    np.testing.assert_array_equal(got, ref)


def test_weights_of_other_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="qconv packed weights"):
        x, w8, qp = _data(CASES[0], 0)
        qn.qconv(x, qn.pack_weights(np.tile(w8, (1, 4))), np.ones(5, np.float32), None, 5, 5, 7, (1, 1), (1, 1), (1, 1), (0, 0),
                 qp)


def _chain_program(rng: np.random.Generator, channels: int) -> np.ndarray:
    """Every step kind: QDQ (both round types), per-channel add, scale with the bias after / before / none,
    activations (in registers and not)."""
    hs = native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})
    hsig = native.activation("hard_sigmoid", {"slope": 0.2, "offset": 0.5})
    return np.array(qn.chain_qdq(2.0, 0) + qn.chain_add_c(rng.standard_normal(channels)) + qn.chain_scale(0.94, 0, True)
                    + qn.chain_qdq(3.1, 0) + qn.chain_scale(1.0, 0.5, True) + qn.chain_act(hs)
                    + qn.chain_scale(0.47, 0, True) + qn.chain_qdq(1.5, 1) + qn.chain_scale(1.3, -0.2, False)
                    + qn.chain_act(native.activation("relu6", {"threshold": 6.0})) + qn.chain_act(hsig), np.float32)


def _register_chains() -> list[tuple[np.ndarray, np.ndarray]]:
    """(x, program) pairs whose every step runs in vector registers (round type 0 QDQs at scales with and without the
    FMA division, acts of act_in_regs): rows of 1 to 70 values (tails), ties in x."""
    rng = np.random.default_rng(11)
    hs = native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})
    out = []
    for j, (c, s) in enumerate([(3, 1), (4, 16), (5, 37), (2, 70)]):
        x = (rng.standard_normal((2, c, s)) * 3).astype(np.float32)
        x.flat[::7] = np.float32(2.5 * 2.0 / 127)
        prog = (qn.chain_qdq(2.0, 0) + qn.chain_add_c(rng.standard_normal(c)) + qn.chain_scale(0.94, 0, True)
                + qn.chain_qdq([3.1, 0.7, 5.0, 1.1][j], 0) + qn.chain_scale(1.0, 0.5, True) + qn.chain_act(hs)
                + qn.chain_scale(1.3, -0.2, False) + qn.chain_act(native.activation("relu6", {"threshold": 6.0}))
                + qn.chain_act(native.activation("leaky_relu", {"alpha": 0.1})) + qn.chain_qdq(0.9, 0)
                + qn.chain_act(native.activation("relu", {})))
        out.append((x, np.array(prog, np.float32)))
    return out


def test_register_chains_are_the_ops_one_by_one_bit_for_bit() -> None:
    """The chains that run in registers (qchain.c's vector forms), alone and in a conv's epilogue."""
    for x, prog in _register_chains():
        np.testing.assert_array_equal(qn.qchain(x, prog), qn.chain_numpy(x, prog))
    i = 1
    xc, w8, qp = _data(CASES[i], 5)
    k = ((CASES[i][5], CASES[i][6]), (CASES[i][7], CASES[i][8]), (CASES[i][9], CASES[i][10]),
         (CASES[i][11], CASES[i][12]))
    qw = qn.pack_weights(w8, (CASES[i][1], CASES[i][5], CASES[i][6]))
    mul = np.full(w8.shape[0], 2e-3, np.float32)
    prog = (qn.chain_qdq(2.0, 0) + qn.chain_scale(0.94, 0.1, True)
            + qn.chain_act(native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})))
    plain = qn.qconv(xc, qw, mul, None, w8.shape[0], *_geo(CASES[i]), *k, qp)
    got = qn.qconv(xc, qw, mul, None, w8.shape[0], *_geo(CASES[i]), *k, qp, chain=np.array(prog, np.float32))
    np.testing.assert_array_equal(got, qn.chain_numpy(plain, prog))


def test_pointwise_chain_is_the_ops_one_by_one_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 5, 7, 9)) * 3).astype(np.float32)
    x.flat[::5] = np.float32(2.5 * 2.0 / 127)  # ties of the first QDQ
    prog = _chain_program(rng, 5)
    np.testing.assert_array_equal(qn.qchain(x, prog), qn.chain_numpy(x, prog))
    with pytest.raises(ValueError, match="per-channel add of 5 values for 4 channels"):
        qn.qchain(np.asarray(x[:, :4], order="C"), prog)


@pytest.mark.parametrize("i", [0, 1, 11, 13])
def test_conv_chain_in_the_epilogue_equals_the_chain_after_it(i: int) -> None:
    case = CASES[i]
    x, w8, qp = _data(case, 5)
    oh, ow = _geo(case)
    rng = np.random.default_rng(6)
    mul = (rng.uniform(0.5, 2.0, w8.shape[0]) * 1e-3).astype(np.float32)
    k = ((case[5], case[6]), (case[7], case[8]), (case[9], case[10]), (case[11], case[12]))
    prog = _chain_program(rng, w8.shape[0])
    qw = qn.pack_weights(w8, (case[1], case[5], case[6]) if case[5] * case[6] > 1 else None)
    plain = qn.qconv(x, qw, mul, None, w8.shape[0], oh, ow, *k, qp, out_q=qn.out_qdq(0.8, 0))
    got = qn.qconv(x, qw, mul, None, w8.shape[0], oh, ow, *k, qp, out_q=qn.out_qdq(0.8, 0), chain=prog)
    np.testing.assert_array_equal(got, qn.chain_numpy(plain, prog))


def test_pointwise_chain_of_a_sum_is_the_ops_one_by_one() -> None:
    """x_ops(x) + y_ops(y) then the chain (an add of two QDQ'd tensors, then its activation and what follows)."""
    rng = np.random.default_rng(8)
    x, y = ((rng.standard_normal((2, 6, 5, 7)) * 3).astype(np.float32) for _ in range(2))
    px, py = np.array(qn.chain_qdq(2.5, 0), np.float32), np.array(qn.chain_qdq(1.7, 1), np.float32)
    prog = _chain_program(rng, 6)
    np.testing.assert_array_equal(qn.qchain(x, prog, y, px, py), qn.chain_numpy(x, prog, y, px, py))
    np.testing.assert_array_equal(qn.qchain(x, prog, y, px, np.zeros(0, np.float32)),
                                  qn.chain_numpy(x, prog, y, px, []))
