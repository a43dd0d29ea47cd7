"""Typed wrappers of the native int8 kernels (native_src/qgemm.c), and their NumPy references.

`qconv` quantizes a float32 NCHW input as Paddle's `quantize_linear` does (scale `s`, qmax 127, round_type 0 or 1),
sums int8 x int8 products exactly in int32 and writes `act(float(sum) * mul[m] + bias[m] (+ residual))` in float32.
The int32 sums are the same on every instruction set (`int8_isa()`: vnni, avx2 or baseline, picked with the fp32
kernels' ISA: `PDLITE_NATIVE_ISA=avx2` forces the AVX2 form); `reference_sums` computes them with NumPy in int64 for
the tests and for hosts without the extension (`qconv_numpy`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pdlite.kernels.host import native
from pdlite.kernels.host.quant import dequantize, inverse, quantize

F32 = np.float32
QMAX = 127


class QParam(NamedTuple):
    """How the input is quantized: k = qmax * inverse(s) in float32 (Paddle's order), s, round_type."""

    k: float
    s: float
    rt: int

    @classmethod
    def of(cls, s: float, round_type: int, qmax: int = QMAX) -> QParam:
        s32 = F32(s)
        return cls(float(F32(qmax) * inverse(np.array([s32]))[0]), float(s32), int(round_type))


class QWeights(NamedTuple):
    """int8 weights (M, K) packed for qconv in the format of this process's ISA, comp[m] = 128 * sum_k w[m, k]
    (the uint8 offset of the vnni / baseline formats; zeros for avx2), and the plain (M, K) int8 array; `direct`:
    packed for qconv's direct form (stride-1 convs: K reordered as (kh, kw, channel), channels padded)."""

    packed: np.ndarray
    comp: np.ndarray
    w8: np.ndarray
    direct: bool = False


def available() -> bool:
    return native.available() and hasattr(native._ext, "qconv")


def int8_isa() -> str | None:
    """The instruction set the int8 kernels run with: vnni, avx2 or baseline (None without the extension)."""
    return str(native._ext.qgemm_info()[0]) if available() else None


def direct_form(kernel: tuple[int, int], strides: tuple[int, int], channels: int) -> bool:
    """Whether qconv runs a conv of this kernel, strides and input channels in its direct form (weights packed with
    `conv=`): windows larger than 1x1 (a 1x1 conv reads its image as the columns, or the strided pixels only), strided
    ones from 16 channels or a 5x5 window on (measured at VNNI: a 3-channel 3x3 stride-2 stem 0.8x of the columns
    form, 7x7 1.2x, 64 -> 128 3x3 stride 2 1.0x, 256 -> 512 1.1x; stride 1: 1.3x-3x)."""
    taps = kernel[0] * kernel[1]
    return taps > 1 and (tuple(strides) == (1, 1) or channels >= 16 or taps >= 25)


def pack_weights(w8: np.ndarray, conv: tuple[int, int, int] | None = None) -> QWeights:
    """Pack int8 weights (M, K) for qconv; `conv` = (C, KH, KW) of a conv run in the direct form (direct_form):
    K = C * KH * KW reordered (KH, KW, C) with C padded to the format's channel group (zero weights)."""
    w8 = np.asarray(w8, dtype=np.int8, order="C")
    m, k = w8.shape
    mat = w8
    if conv is not None:
        c, kh, kw = conv
        kg = 4 if native._ext.qgemm_info()[1] else 2
        cp = -(-c // kg) * kg
        mat = np.zeros((m, kh, kw, cp), np.int8)
        mat[..., :c] = w8.reshape(m, c, kh, kw).transpose(0, 2, 3, 1)
        mat = mat.reshape(m, -1)
    _, u8, _, size = native._ext.qgemm_info(*mat.shape)
    packed = np.empty(size, dtype=np.uint8)
    native._ext.qpack_weights(mat, packed, mat.shape)
    comp = (128 * w8.sum(axis=1, dtype=np.int64)).astype(np.int32) if u8 else np.zeros(m, np.int32)
    return QWeights(packed, comp, w8, conv is not None)


def out_qdq(s: float, round_type: int, qmax: int = QMAX) -> tuple:
    """qconv's `out_q` argument: the outputs quantized then dequantized with scale s (a QDQ pair after the conv)."""
    return tuple(QParam.of(s, round_type, qmax)), float(qmax)


def qconv(x: np.ndarray, qw: QWeights, mul: np.ndarray, bias: np.ndarray | None, m: int, oh: int, ow: int,
          kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int], pads: tuple[int, int],
          qp: QParam, act: native.Act = native.NO_ACT, residual: np.ndarray | None = None,
          out_q: tuple | None = None, chain: np.ndarray | None = None, codes: QParam | None = None) -> np.ndarray:
    """act(int8 conv of NCHW float32 x + bias (+ residual)), then the QDQ `out_q` (out_qdq) if given, then the
    pointwise `chain` (a program of CHAIN steps, float32) if given: (N, m, oh, ow); `pads` = (top, left).
    x may be codes (uint8, `codes_of`: read as they are, qp's scale only names them) for the pointwise and direct
    forms; `codes`: the output as codes quantized with it (uint8) instead of float32."""
    run = qconv_plan(x.shape, qw, mul, bias, m, oh, ow, kernel, strides, dilations, pads, qp, act, out_q, chain,
                     x.dtype == np.uint8, codes)
    return run(_input(x, "qconv"), residual)


def _input(x: np.ndarray, what: str) -> np.ndarray:
    """A kernel's input as the native call takes it: codes (uint8) as they are, else float32, C-contiguous."""
    return np.asarray(x, order="C") if x.dtype == np.uint8 else native._f32(x, what)


def _bind(ext, shape: tuple[int, ...], head: tuple, mid: tuple, tail: tuple, xcodes: bool, codes: QParam | None):
    """(x, residual | None) -> out calling ext(x, *head, out, *mid, residual, *tail, xcodes[, codes_out, codes]): a
    float32 output, or codes (uint8) quantized with `codes`."""
    if codes is None:
        empty = native.empty_aligned

        def run(x: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
            out = empty(shape)
            ext(x, *head, out, *mid, residual, *tail, xcodes)
            return out
    else:
        cq = tuple(codes)

        def run(x: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
            out = np.empty(shape, np.uint8)
            ext(x, *head, None, *mid, residual, *tail, xcodes, out, cq)
            return out

    return run


def qconv_plan(x_shape: tuple[int, ...], qw: QWeights, mul: np.ndarray, bias: np.ndarray | None, m: int, oh: int,
               ow: int, kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
               pads: tuple[int, int], qp: QParam, act: native.Act = native.NO_ACT, out_q: tuple | None = None,
               chain: np.ndarray | None = None, xcodes: bool = False, codes: QParam | None = None):
    """qconv with everything but the tensors bound, for inputs of x_shape: (x, residual | None) -> out (C-contiguous
    tensors: x float32, or codes with `xcodes`; out float32, or codes quantized with `codes`)."""
    head = (qw.packed, qw.comp, mul, bias)
    mid = ((*x_shape, m, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1], pads[0],
            pads[1]), tuple(qp), act[0], act[1])
    return _bind(native._ext.qconv, (x_shape[0], m, oh, ow), head, mid, (False, out_q, qw.direct, chain),
                 bool(xcodes), codes)


def codes_of(x: np.ndarray, qp: QParam) -> np.ndarray:
    """The int8 codes of float x as the tensor between two int8 ops holds them: bytes q + 128 (uint8), q Paddle's
    quantize_linear of x (scale qp.s, round type qp.rt)."""
    return (quantize_int(np.asarray(x, F32), qp) + 128).astype(np.uint8)


def codes_values(c: np.ndarray) -> np.ndarray:
    """The int8 values q (int32) of codes c (bytes q + 128)."""
    return np.asarray(c, np.int32) - 128


def codes_identity(s: float, round_type: int, qmax: int = QMAX) -> bool:
    """Whether quantize(dequantize(q)) == q for every int8 code q that quantize can write at scale s (all 256 with
    round_type 0; -127..127 with 1, which clips x to [-s, s] first): then the codes of a tensor that has passed a QDQ
    pair of scale s are those the pair quantized, and a producer may write them directly."""
    s32 = F32(s)
    lo, hi = (int(v) for v in quantize(np.array([-1e3, 1e3], F32) * s32, s32, qmax, round_type))
    q = np.arange(lo, hi + 1, dtype=np.float32)
    back = quantize(dequantize(q, s32, qmax), s32, qmax, round_type)
    return bool(np.array_equal(back.astype(np.int32), q.astype(np.int32)))


def dw_weights(w8: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depthwise int8 weights (C, 1, KH, KW) as qdwconv reads them: (C, KH*KW) int8 and comp[c] = 128 * sum W8[c]
    (the + 128 of its byte planes, taken back in the epilogue)."""
    w = np.asarray(np.asarray(w8, np.int8).reshape(w8.shape[0], -1), order="C")
    return w, (128 * w.sum(axis=1, dtype=np.int64)).astype(np.int32)


def qdwconv(x: np.ndarray, w8: np.ndarray, comp: np.ndarray, mul: np.ndarray, bias: np.ndarray | None, oh: int,
            ow: int, kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
            pads: tuple[int, int], qp: QParam, act: native.Act = native.NO_ACT, residual: np.ndarray | None = None,
            out_q: tuple | None = None, chain: np.ndarray | None = None, codes: QParam | None = None) -> np.ndarray:
    """The int8 depthwise conv (groups = channels, one filter each) of NCHW x (float32, or codes as qconv's), weights
    and comp from dw_weights: qconv's quantization, exact int32 sums and epilogue per channel; (N, C, oh, ow), float32
    or codes quantized with `codes`."""
    run = qdwconv_plan(x.shape, w8, comp, mul, bias, oh, ow, kernel, strides, dilations, pads, qp, act, out_q, chain,
                       x.dtype == np.uint8, codes)
    return run(_input(x, "qdwconv"), residual)


def qdwconv_plan(x_shape: tuple[int, ...], w8: np.ndarray, comp: np.ndarray, mul: np.ndarray,
                 bias: np.ndarray | None, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
                 dilations: tuple[int, int], pads: tuple[int, int], qp: QParam, act: native.Act = native.NO_ACT,
                 out_q: tuple | None = None, chain: np.ndarray | None = None, xcodes: bool = False,
                 codes: QParam | None = None):
    """qdwconv bound for inputs of x_shape, as qconv_plan."""
    n, c, h, w = x_shape
    mid = ((n, c, h, w, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1], pads[0],
            pads[1]), tuple(qp), act[0], act[1])
    return _bind(native._ext.qdwconv, (n, c, oh, ow), (w8, comp, mul, bias), mid, (out_q, chain), bool(xcodes), codes)


STEM_MAX_CHANNELS = 4  # stem_form: the few-channel convs (measured: the 3-channel 3x3 stride-2 stem)


def stem_form(channels: int, kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int]) -> bool:
    """Whether a conv of one group over `channels` input channels runs in qstemconv's form in this process (vnni, the
    depthwise window form's strides and dilations, at most STEM_MAX_CHANNELS channels): weights from dw_weights of the
    (M, C, KH, KW) filter. At VNNI, noisy, 1 thread: the 3-channel 3x3 stride-2 stem on 224x224 with hard_swish, codes
    out, 0.14 -> 0.07 ms (the columns form's)."""
    return (available() and 0 < channels <= STEM_MAX_CHANNELS and hasattr(native._ext, "qstem_applies")
            and bool(native._ext.qstem_applies((channels, *kernel, *strides, *dilations))))


def qstemconv_plan(x_shape: tuple[int, ...], w8: np.ndarray, comp: np.ndarray, mul: np.ndarray,
                   bias: np.ndarray | None, m: int, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
                   dilations: tuple[int, int], pads: tuple[int, int], qp: QParam, act: native.Act = native.NO_ACT,
                   out_q: tuple | None = None, chain: np.ndarray | None = None, xcodes: bool = False,
                   codes: QParam | None = None):
    """qconv of a stem_form geometry in qstemconv's form (w8, comp from dw_weights of the (M, C, KH, KW) filter),
    bound as qconv_plan: the same sums, the same outputs."""
    mid = ((*x_shape, m, oh, ow, kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1], pads[0],
            pads[1]), tuple(qp), act[0], act[1])
    return _bind(native._ext.qstemconv, (x_shape[0], m, oh, ow), (w8, comp, mul, bias), mid, (out_q, chain),
                 bool(xcodes), codes)


def reference_dw_sums(x: np.ndarray, w8: np.ndarray, oh: int, ow: int, kernel: tuple[int, int],
                      strides: tuple[int, int], dilations: tuple[int, int], pads: tuple[int, int],
                      qp: QParam) -> np.ndarray:
    """The exact integer sums (N, C, oh*ow) of the depthwise conv as int64 (w8 (C, KH*KW))."""
    cols = im2col_int(quantize_int(x, qp), oh, ow, kernel, strides, dilations, pads).astype(np.int64)
    n, c = x.shape[:2]
    cols = cols.reshape(n, c, kernel[0] * kernel[1], oh * ow)
    return np.einsum("nckl,ck->ncl", cols, np.asarray(w8, np.int64).reshape(c, -1))


# --- pointwise chains: per-element ops applied in one pass (native_src/qchain.c) ---------------------------------
# A program is a flat list of floats, steps [code, count, count values]: CHAIN_ADD_C (a value per channel, axis 1),
# CHAIN_SCALE (s, b, bias_after: the scale op), CHAIN_ACT (native.py's code and 3 params), CHAIN_QDQ (k, s,
# round_type, qmax: quantize_linear then dequantize_linear). Kept as an op attribute (`post_ops`).
CHAIN_ADD_C, CHAIN_SCALE, CHAIN_ACT, CHAIN_QDQ = 1, 2, 3, 4
CHAIN_MAX_STEPS = 16


def chain_add_c(values: np.ndarray) -> list[float]:
    v = np.asarray(values, F32).reshape(-1)
    return [CHAIN_ADD_C, v.size, *(float(t) for t in v)]


def chain_scale(scale: float, bias: float, bias_after: bool) -> list[float]:
    return [CHAIN_SCALE, 3, float(F32(scale)), float(F32(bias)), float(bool(bias_after))]


def chain_act(act: native.Act) -> list[float]:
    return [CHAIN_ACT, 4, float(act[0]), *(float(F32(a)) for a in act[1])]


def chain_qdq(s: float, round_type: int, qmax: int = QMAX) -> list[float]:
    qp = QParam.of(s, round_type, qmax)
    return [CHAIN_QDQ, 4, qp.k, qp.s, float(qp.rt), float(qmax)]


def chain_steps(program: list[float] | np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The program's steps as (code, values)."""
    p = np.asarray(program, F32)
    steps, i = [], 0
    while i < p.size:
        n = int(p[i + 1])
        steps.append((int(p[i]), p[i + 2:i + 2 + n]))
        i += 2 + n
    return steps


def qchain(x: np.ndarray, program: np.ndarray, y: np.ndarray | None = None, x_program: np.ndarray | None = None,
           y_program: np.ndarray | None = None) -> np.ndarray:
    """The chain applied to float32 x (N, C, ...) per channel of axis 1, natively; with y (x's shape):
    program(x_program(x) + y_program(y))."""
    x = native._f32(x, "qchain")
    out = native.empty_aligned(x.shape)
    n, c = (x.shape[0], x.shape[1]) if x.ndim >= 2 else (1, 1)
    extra = () if y is None else (native._f32(y, "qchain"), np.asarray(x_program, F32), np.asarray(y_program, F32))
    native._ext.qchain(x, out, (n, c, x.size // max(n * c, 1)), np.asarray(program, F32), *extra)
    return out


def chain_numpy(x: np.ndarray, program: list[float] | np.ndarray, y: np.ndarray | None = None,
                x_program: list[float] | np.ndarray = (), y_program: list[float] | np.ndarray = ()) -> np.ndarray:
    """The chain in NumPy float32 (the ops it replaces, one by one): the reference of qchain."""
    from pdlite.kernels.host.conv import numpy_act_inplace

    if y is not None:
        x = chain_numpy(x, x_program) + chain_numpy(y, y_program)
    out = np.array(x, dtype=F32)
    shape = (1, -1) + (1,) * (out.ndim - 2)
    for code, v in chain_steps(program):
        if code == CHAIN_ADD_C:
            out = out + v.reshape(shape)
        elif code == CHAIN_SCALE:
            s, b = F32(v[0]), F32(v[1])
            out = (out * s + b if b else out * s) if v[2] else ((out + b) * s if b else out * s)
        elif code == CHAIN_ACT:
            numpy_act_inplace(out, (int(v[0]), tuple(float(t) for t in v[1:4])))
        else:
            s, rt, qmax = F32(v[1]), int(v[2]), int(v[3])
            out = dequantize(quantize(out, s, qmax, rt), s, qmax)
        out = np.asarray(out, F32)
    return out


def qfc(x: np.ndarray, qw: QWeights, mul: np.ndarray, bias: np.ndarray | None, qp: QParam,
        act: native.Act = native.NO_ACT, out_q: tuple | None = None) -> np.ndarray:
    """act(int8 (rows, K) x (K, N) + bias) for float32 x (rows, K), weights packed from (N, K): (rows, N)."""
    rows, k = x.shape
    n = qw.w8.shape[0]
    xt = np.asarray(x.T, order="C")
    out = np.empty((rows, n), dtype=F32)
    native._ext.qconv(xt, qw.packed, qw.comp, mul, bias, out, (1, k, 1, rows, n, 1, rows, 1, 1, 1, 1, 1, 1, 0, 0),
                      tuple(qp), act[0], act[1], None, True, out_q)
    return out


def qdq(x: np.ndarray, qp: QParam, qmax: int = QMAX) -> np.ndarray:
    """(quantize(x) * s) / qmax in one native pass: quantize_linear then dequantize_linear, the same float32 bits."""
    x = native._f32(x, "qdq")
    out = native.empty_aligned(x.shape)
    native._ext.qdq(x, out, x.size, tuple(qp), float(qmax))
    return out


# --- NumPy references ------------------------------------------------------------------------------------------


def quantize_int(x: np.ndarray, qp: QParam) -> np.ndarray:
    """The int8 codes of x (int32) as Paddle's quantize_linear computes them (x already codes, uint8: their values)."""
    if x.dtype == np.uint8:
        return codes_values(x)
    q = quantize(x, np.float32(qp.s), QMAX, qp.rt)
    return q.astype(np.int32)


def im2col_int(q: np.ndarray, oh: int, ow: int, kernel: tuple[int, int], strides: tuple[int, int],
               dilations: tuple[int, int], pads: tuple[int, int]) -> np.ndarray:
    """Columns (N, C*kh*kw, oh*ow) of integer NCHW q; outside the image reads 0."""
    n, c, h, w = q.shape
    kh, kw = kernel
    pt, pl = pads
    hp = max(h + pt, (oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1)
    wp = max(w + pl, (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1)
    padded = np.zeros((n, c, hp, wp), q.dtype)
    padded[:, :, pt:pt + h, pl:pl + w] = q
    cols = np.empty((n, c, kh, kw, oh, ow), q.dtype)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilations[0], j * dilations[1]
            cols[:, :, i, j] = padded[:, :, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                                      c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
    return cols.reshape(n, c * kh * kw, oh * ow)


def reference_sums(x: np.ndarray, w8: np.ndarray, oh: int, ow: int, kernel: tuple[int, int],
                   strides: tuple[int, int], dilations: tuple[int, int], pads: tuple[int, int], qp: QParam) -> np.ndarray:
    """The exact integer sums (N, M, oh*ow) as int64: w8 (M, K) @ columns of quantize(x)."""
    cols = im2col_int(quantize_int(x, qp), oh, ow, kernel, strides, dilations, pads).astype(np.int64)
    return np.matmul(w8.astype(np.int64), cols)


def qconv_numpy(x: np.ndarray, w8: np.ndarray, mul: np.ndarray, bias: np.ndarray | None, oh: int, ow: int,
                kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int], pads: tuple[int, int],
                qp: QParam, depthwise: bool = False) -> np.ndarray:
    """qconv (qdwconv: depthwise, w8 (C, KH*KW)) without its activation and residual, in NumPy: float32(sums) * mul +
    bias, (N, M, oh, ow); x float32 or codes."""
    sums_of = reference_dw_sums if depthwise else reference_sums
    sums = sums_of(x, w8, oh, ow, kernel, strides, dilations, pads, qp).astype(np.int32).astype(F32)
    out = sums * mul.reshape(1, -1, 1).astype(F32)
    if bias is not None:
        out += bias.reshape(1, -1, 1).astype(F32)
    return out.reshape(x.shape[0], w8.shape[0], oh, ow)
