"""Host conv2d / depthwise_conv2d / conv2d_transpose kernels (NumPy, float32 throughout).

Paths, chosen per call from the op's geometry:
- 1x1, stride 1, no padding: one matmul `W (Cout, Cin) @ x (N, Cin, H*W)`.
- depthwise (Cin per group == 1): the kh*kw taps as contiguous 1-D slices of a padded, flattened
  input (`flat_taps`), stacked per channel chunk and reduced by a batched matmul with the
  per-channel weights.
- otherwise im2col: a strided 6-D view of the padded input copied once into columns, then one
  (batched, per group) matmul.
Weights are reshaped once per Filter array (`prepare`, or on the first run) and cached by identity.
NHWC inputs are transposed to NCHW and back.

With the native extension (native.py; option `host_native`, default on), float32 NCHW convs run in C on the native
thread pool: depthwise directly; 3x3 stride-1 convs with enough channels and outputs by Winograd F(2x2, 3x3) (option
`host_winograd`); other ungrouped convs with enough outputs or reduction by the packed-weights GEMM (`Conv2d.packed`);
the rest as blocked BLAS GEMMs over the input or its im2col columns, bias and fused activation applied per block in
cache. The first run for an input shape binds its native call (`native_plan`; the last few shapes' plans are kept).
The NumPy code stays the fallback and the reference; the output is a fresh array either way, so bias, residual and
activation are applied to it in place.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pdlite.kernels.host import native, native_plans
from pdlite.kernels.host.activation import gelu_exact
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel, remember
from pdlite.operators.nn import ConvGeometry, conv2d_geometry, conv2d_transpose_geometry

# Floats per operand in one chunk of a tap-wise reduction (256 KiB for float32): keeps the
# accumulator and the source slices of a chunk in the L2 cache.
CHUNK_FLOATS = 1 << 16
# Floats in one depthwise tap stack (1 MiB): measured best among 256 KiB / 1 MiB / unchunked.
DW_STACK_FLOATS = 1 << 18
# Native path: column matrices larger than this (4 MiB) are not built; the GEMM's blocks gather their own
# columns (1 MiB at a time) instead (measured: 25% faster on ResNet18's 7x7 input conv, 4.7 -> 3.5 ms).
FUSED_IM2COL_FLOATS = 1 << 20


def to_nchw(x: np.ndarray, channel_last: bool) -> np.ndarray:
    return np.asarray(x.transpose(0, 3, 1, 2), order="C") if channel_last else x


def from_nchw(y: np.ndarray, channel_last: bool) -> np.ndarray:
    return np.asarray(y.transpose(0, 2, 3, 1), order="C") if channel_last else y


def gather_grid(
    x: np.ndarray, r0: int, c0: int, sr: int, sc: int, hb: int, wb: int, fill: float
) -> np.ndarray:
    """buf (N, C, hb, wb) with buf[..., r, c] = x[..., r0 + r*sr, c0 + c*sc], `fill` outside x.

    With sr = sc = 1 and r0, c0 = -top, -left this is a padded (or cropped) copy of x; with
    strides it is one polyphase component of such a padded image.
    """
    n, c, h, w = x.shape
    buf = np.empty((n, c, hb, wb), dtype=x.dtype)

    def span(o: int, s: int, size: int, nb: int) -> tuple[int, int]:
        lo = max(0, (-o + s - 1) // s)
        hi = min(nb, (size - 1 - o) // s + 1) if size - 1 - o >= 0 else 0
        return lo, max(lo, hi)

    rlo, rhi = span(r0, sr, h, hb)
    clo, chi = span(c0, sc, w, wb)
    if rhi <= rlo or chi <= clo:
        buf.fill(fill)
        return buf
    buf[:, :, :rlo] = fill
    buf[:, :, rhi:] = fill
    buf[:, :, rlo:rhi, :clo] = fill
    buf[:, :, rlo:rhi, chi:] = fill
    rs, cs = r0 + rlo * sr, c0 + clo * sc
    buf[:, :, rlo:rhi, clo:chi] = x[:, :, rs : rs + (rhi - rlo - 1) * sr + 1 : sr, cs : cs + (chi - clo - 1) * sc + 1 : sc]
    return buf


def flat_taps(
    x: np.ndarray,
    oh: int,
    ow: int,
    kh: int,
    kw: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    top: int,
    left: int,
    fill: float,
) -> tuple[list[np.ndarray], list[tuple[int, int]], int]:
    """Operands of a sliding-window reduction as contiguous 1-D slices.

    Returns (bufs, taps, wq): each buf is (N, C, hq*wq); tap t (row-major over the kh*kw window)
    reads `bufs[b][:, :, off:off + oh*wq]` for taps[t] = (b, off), and output (r, col) sits at flat
    index r*wq + col (columns >= ow are scratch). Strided windows use one polyphase component of
    the padded input per (row, column) phase, so every tap is a unit-stride slice.
    """
    rows = [divmod(i * dh, sh) for i in range(kh)]  # (offset in phase rows, phase)
    cols = [divmod(j * dw, sw) for j in range(kw)]
    wq = ow + max(q for q, _ in cols)
    hq = oh + max(q for q, _ in rows) + (1 if wq > ow else 0)
    index: dict[tuple[int, int], int] = {}
    bufs: list[np.ndarray] = []
    taps: list[tuple[int, int]] = []
    n, c = x.shape[:2]
    for qi, a in rows:
        for qj, b in cols:
            if (a, b) not in index:
                index[(a, b)] = len(bufs)
                bufs.append(gather_grid(x, a - top, b - left, sh, sw, hq, wq, fill).reshape(n, c, hq * wq))
            taps.append((index[(a, b)], qi * wq + qj))
    return bufs, taps, wq


def channel_chunk(n: int, length: int) -> int:
    """Channels per chunk so that one (n, chunk, length) operand holds about CHUNK_FLOATS floats."""
    return max(1, CHUNK_FLOATS // max(1, n * length))


def depthwise(x: np.ndarray, w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Depthwise conv of NCHW x with weights w (C, kh*kw) (one filter per input channel).

    Per chunk of channels, the kh*kw tap slices are stacked (contiguous copies) and reduced by one
    batched matmul `(C, 1, taps) @ (N, C, taps, L)`; chunks keep the stack near the L2 cache.
    (Tap-by-tap `acc += w[:, k, None] * slice` is slower: NumPy's broadcast of a per-row scalar
    costs about 3x a plain elementwise pass, and it needs two passes per tap.)
    """
    n, c = x.shape[:2]
    oh, ow = g.oh, g.ow
    bufs, taps, wq = flat_taps(x, oh, ow, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pads[0], g.pads[2], 0.0)
    length, nt = oh * wq, len(taps)
    out = np.empty((n, c, 1, length), dtype=x.dtype)
    step = max(1, DW_STACK_FLOATS // (n * nt * length))
    cols = np.empty((n, min(step, c), nt, length), dtype=x.dtype)
    for c0 in range(0, c, step):
        c1 = min(c, c0 + step)
        stack = cols[:, : c1 - c0]
        for k, (b, off) in enumerate(taps):
            stack[:, :, k] = bufs[b][:, c0:c1, off : off + length]
        np.matmul(w[c0:c1, None, :], stack, out=out[:, c0:c1])
    res = out.reshape(n, c, oh, wq)
    return res if wq == ow else np.asarray(res[:, :, :, :ow], order="C")


def im2col(x: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Columns (N, C*kh*kw, oh*ow) of NCHW x for the conv geometry g."""
    n, c = x.shape[:2]
    hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
    wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
    xp = gather_grid(x, -g.pads[0], -g.pads[2], 1, 1, hp, wp, 0.0)
    s = xp.strides
    view = as_strided(
        xp,
        shape=(n, c, g.kh, g.kw, g.oh, g.ow),
        strides=(s[0], s[1], s[2] * g.dh, s[3] * g.dw, s[2] * g.sh, s[3] * g.sw),
        writeable=False,
    )
    cols = np.empty((n, c, g.kh, g.kw, g.oh, g.ow), dtype=x.dtype)
    np.copyto(cols, view)
    return cols.reshape(n, c * g.kh * g.kw, g.oh * g.ow)


class _ResidualPlan:
    """A native conv plan run with ResidualData of shape `out_shape`: `in_epilogue` (x, r) -> act(conv + bias + r)
    in the kernel's epilogue; else x -> conv + bias (then the native add)."""

    def __init__(self, run: native_plans.Plan, in_epilogue: bool, out_shape: tuple[int, ...]) -> None:
        self.run = run
        self.in_epilogue = in_epilogue
        self.out_shape = out_shape


class _WeightCache:
    """A prepared form of one parameter array, recomputed only when the array object changes."""

    def __init__(self) -> None:
        self._src: Any = None
        self._val: Any = None

    def get(self, src: np.ndarray, make: Any) -> Any:
        if src is not self._src:
            self._val = make(np.asarray(src))
            self._src = src
        return self._val


def bias_of(ins: dict[str, list[Any]]) -> np.ndarray | None:
    """The Bias input as a contiguous float32 vector (None when absent)."""
    bias = ins.get("Bias")
    if not bias:
        return None
    return np.asarray(np.asarray(bias[0], dtype=np.float32).reshape(-1), order="C")


def numpy_act_inplace(out: np.ndarray, act: native.Act) -> None:
    """Apply a native-coded activation (relu, relu6, leaky_relu, hard_swish, hard_sigmoid, gelu) to `out` in place, with
    the operation order of pdlite/kernels/host/activation.py (the same values as its kernels)."""
    code, (a0, a1, a2) = act
    f = out.dtype.type
    if code == 1:
        np.maximum(out, f(0.0), out=out)
    elif code == 2:
        np.maximum(out, f(0.0), out=out)
        np.minimum(out, f(a0), out=out)
    elif code == 3:
        np.multiply(out, f(a0), out=out, where=out < 0)
    elif code == 4:
        t = out + f(a0)
        np.maximum(t, f(0.0), out=t)
        np.minimum(t, f(a1), out=t)
        t *= out
        np.divide(t, f(a2), out=out)
    elif code == 5:
        np.multiply(out, f(a0), out=out)
        out += f(a1)
        np.maximum(out, f(0.0), out=out)
        np.minimum(out, f(1.0), out=out)
    elif code == 6:
        out[...] = gelu_exact(out)


def epilogue(out: np.ndarray, bias: np.ndarray | None, act: native.Act, use_native: bool) -> None:
    """out (N, C, ...) = act(out + bias[c]) in place."""
    if use_native and out.dtype == np.float32 and out.flags.c_contiguous:
        if bias is not None or act[0]:
            native.bias_act(out, bias, act)
        return
    if bias is not None:
        out += bias.astype(out.dtype, copy=False).reshape((1, -1) + (1,) * (out.ndim - 2))
    if act[0]:
        numpy_act_inplace(out, act)


@register_kernel("conv2d")
@register_kernel("depthwise_conv2d")
class Conv2d(Kernel):
    """conv2d / depthwise_conv2d: Output = conv(Input, Filter) (+ Bias) (+ ResidualData).

    `compute(ins, act)` also applies a fused activation (fused_conv2d) on the fresh output.
    """

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._weights = _WeightCache()
        self._wino = _WeightCache()
        self._wino_packed = _WeightCache()
        self._packed = _WeightCache()
        self._packed_wide = _WeightCache()
        self._direct = _WeightCache()
        self._bias = _WeightCache()
        self._geo: dict[tuple[tuple[int, ...], tuple[int, ...]], ConvGeometry] = {}
        self._native: bool | None = None
        self._winograd = True
        # (x shape, Filter, Bias, act, plan, with ResidualData): a _ResidualPlan with ResidualData
        self._plan: tuple[tuple[int, ...], Any, Any, native.Act, Any, bool] | None = None
        self._plans: dict[tuple[int, ...], tuple] = {}  # the last plans by x shape (shapes that alternate)

    def prepare(self, params: Mapping[str, Any]) -> None:
        w = params.get(self.op.input("Filter"))
        if w is not None:
            self._weights.get(w, self._prepare_weights)

    def _prepare_weights(self, w: np.ndarray) -> tuple[str, np.ndarray]:
        w = np.asarray(w, dtype=np.float32)
        oc, cg, kh, kw = w.shape
        groups = int(self.attrs["groups"] or 1)
        if cg == 1 and groups > 1:  # depthwise: (Cout, kh*kw), Cout = Cin * multiplier
            return "dw", np.asarray(w.reshape(oc, kh * kw), order="C")
        if groups == 1:
            return "mm", np.asarray(w.reshape(oc, cg * kh * kw), order="C")
        return "group", np.asarray(w.reshape(groups, oc // groups, cg * kh * kw), order="C")

    def geometry(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvGeometry:
        key = (x_shape, w_shape)
        g = self._geo.get(key)
        if g is None:
            g = self._geo[key] = conv2d_geometry(self.attrs, x_shape, w_shape)
        return g

    def use_native(self) -> bool:
        if self._native is None:
            self._native = native.use_native(self.context)
            self._winograd = self._native and self.context.option("host_winograd", True) is not False
        return self._native

    def winograd(self, g: ConvGeometry, kind: str) -> bool:
        """Whether the native Winograd F(2x2, 3x3) path takes this conv: 3x3, stride 1, no dilation, no groups,
        enough channels and outputs for its transforms to pay (measured ~1.6x at 28x28 outputs). Below 64
        outputs per channel and batch the im2col GEMM is kept: there the weights dominate the memory traffic,
        and the transformed ones are 16/9 as large (measured on ResNet18's 7x7 layers at batch 1: no gain); a
        batch's small images share one pass over them (ResNet18's 7x7 layers at batch 4: 1.8x)."""
        return (self._winograd and kind == "mm" and g.kh == g.kw == 3 and g.sh == g.sw == 1 and g.dh == g.dw == 1
                and g.c >= 8 and g.oc >= 8 and g.n * g.oh * g.ow >= 64 and min(g.oh, g.ow) >= 2
                and native.gemm_available())

    def winograd_weights(self, g: ConvGeometry, w_src: Any) -> native.WinogradWeights:
        """The filter transformed for the Winograd path, laid out for its products on this input shape (see
        native.winograd_packed)."""
        packed = native.winograd_packed(g.n, g.oh, g.ow)
        return (self._wino_packed if packed else self._wino).get(
            w_src, lambda f: native.winograd_weights(np.asarray(f, dtype=np.float32), packed))

    @staticmethod
    def packed(g: ConvGeometry, kind: str) -> str | None:
        """Which form of the native packed-weights GEMM (native_src/packed_gemm.c) takes this conv, if any (AVX-512
        only, one group). "small": at most 256 outputs per channel and image (a BLAS vectorised along them wastes
        much of its tiles on 7x7 and 14x14 maps) and a reduction of at least 128 (below, the transposed write of
        its tiles costs more than the products). "wide": larger maps, with at least 16 outputs or a reduction of
        at least 128 (16 outputs rather than 32: MobileNetV2's 32 -> 16 on 112x112 and 96 -> 24 on 56x56;
        alternated processes: MobileNetV2 b4 t2 0.96x the time, t1 0.97x, MobileNetV3-small b4 t2 0.97x, batch 1
        unchanged). Measured on one Zen 4 core against the BLAS path: small 1.36x on ResNet18's 512x512 3x3
        convs on 7x7 maps, 1.26x on MobileNetV1's 1024x1024 1x1 on 7x7, 1.09x on 256x128x3x3 stride 2 to 14x14;
        wide 1.07x to 1.29x on MobileNet's 1x1 convs on 28x28 to 112x112 maps, 1.08x on ResNet18's 7x7 stride-2
        stem and its 3x3 stride-2 conv to 28x28, 1.10x on MobileNet's 3x3 stride-2 stem; 0.9x with fewer outputs
        and a short reduction (16 x 32).
        A 1x1 stride-1 conv on a map of at most 256 outputs whose tiles of 48 columns are at least 80% filled
        (14x14: 196 of 240; not 7x7: 49 of 96) takes the wide form too unless it is large (outputs x reduction >=
        2^17, MobileNetV1's 512x512): it reads the image in place, where the small form packs its columns and its
        64-channel panels run half empty on 96 outputs. One Xeon (Emerald Rapids) core, batch 4 (batch 1): 384 -> 64
        0.26 against 0.36 ms (0.063 / 0.086), 576 -> 96 0.57 / 0.64, 96 -> 576 0.56 / 0.64, 64 -> 384 0.26 against
        0.29 on the BLAS path (its reduction is under 128), 256 -> 256 0.66 / 0.69; 512 -> 512 2.7 against 2.5 (0.89 /
        0.58), so it stays small; 3x3 convs on 14x14 maps are faster small (their columns gathered either way). A
        reduction under 128 on fewer than 8 tiles (batch 1 on 14x14: 5; PP-OCR cls's 2x96 maps: 4) takes it too at
        AVX-512: it had stayed on the BLAS path (one Xeon, 2 threads: 64 -> 384 at batch 1 0.042 against 0.057 ms),
        but on one Zen 4 core, loaded (noisy), the BLAS took 24 us on 32 -> 200 on 2x96 (wide 14), 14 on 104 -> 32
        (6.4), 76 on 40 -> 240 on 14x14 (33); whole models, one process, old and new rule alternated: PP-OCR cls 1
        thread 0.72x the time, MobileNetV3-small 0.92x at 1 thread, 0.89x at 2. At AVX2 (its 8-float sub-tiles) the
        wide form was no faster there (40 -> 240 on 14x14 82 against 76 us): the BLAS keeps them.
        At AVX-512 the 1x1 convs on maps of at most 256 outputs left to the BLAS above (7x7, reduction under 128)
        take "small" with at least 2^15 weights, else "wide": MobileNetV3-small's 96 -> 576 53-75 -> ~30 us in the
        model, the model 0.93x the time at 1 thread (BENCHMARKS.md, helper 39D's section)."""
        if kind != "mm" or not native.packed_gemm_fast():
            return None
        depth = g.c * g.kh * g.kw
        size = g.oh * g.ow
        if size <= 256:
            pointwise = g.kh == g.kw == 1 and g.sh == g.sw == 1 and g.pads == (0, 0, 0, 0)
            tile = native.FC_TILE  # the wide form's columns per tile (PW_NR), as packed fc's
            tiles = -(-size // tile)
            if (pointwise and size / (tiles * tile) >= 0.8 and g.oc * depth < 2**17 and g.oc >= 32
                    and (depth >= 128 or g.n * tiles >= 8 or native.isa() == "avx512")):
                return "wide"
            if depth >= 128 and g.oc >= 32:
                return "small"
            if pointwise and g.oc >= 32 and native.isa() == "avx512":
                return "small" if g.oc * depth >= 2**15 else "wide"
            return None
        return "wide" if g.oc >= 16 or depth >= 128 else None

    def native_plan(self, g: ConvGeometry, kind: str, w: np.ndarray, w_src: Any, bias: np.ndarray | None,
                    act: native.Act, x_shape: tuple[int, ...], residual: bool = False) -> native_plans.Plan | None:
        """The bound native call of this conv (NCHW float32), or None (the generic code runs); `residual`: a call
        (x, r) adding r (ResidualData, the output's shape) before the activation, from the forms whose epilogue
        takes one (Winograd, the packed forms), else None."""
        pads = (g.pads[0], g.pads[2])
        if kind == "dw":
            return None if residual else native_plans.depthwise_plan(w, bias, x_shape, g.oc, g.oh, g.ow,
                                                                     (g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), pads,
                                                                     act)
        if (kind == "mm" and g.kh == g.kw == g.oh == g.ow == 1 and x_shape[2:] == (1, 1) and not residual
                and g.pads == (0, 0, 0, 0) and native.gemm_available()):
            # 1x1 maps (a squeeze-and-excitation's) read in full (no padding): one product for the batch
            return native_plans.rows_plan(w.reshape(g.oc, g.c), bias, g.n, act)
        if kind == "mm" and not residual and native.direct_conv_applies(g.oc, g.c, g.kh, g.kw, g.sw):
            wd = self._direct.get(w_src, lambda f: native.direct_conv_weights(w.reshape(g.oc, g.c, g.kh, g.kw)))
            return native_plans.direct_plan(wd, bias, x_shape, g.oc, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw),
                                            (g.dh, g.dw), pads, act)
        wino = self.winograd(g, kind)  # (implies the BLAS sgemm is there)
        if wino:
            return native_plans.winograd_plan(self.winograd_weights(g, w_src), bias, x_shape, g.oh, g.ow, pads, act,
                                              residual=residual)
        form = self.packed(g, kind)
        if form is not None:
            wide = form == "wide"
            w4 = w.reshape(g.oc, g.c, g.kh, g.kw)
            wp = (self._packed_wide if wide else self._packed).get(w_src, lambda f: native.pack_weights(w4, wide))
            return native_plans.packed_plan(wp, bias, x_shape, g.oc, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw),
                                            (g.dh, g.dw), pads, act, wide, residual=residual)
        if residual or not native.gemm_available():
            return None
        wg = w.reshape(g.groups if kind == "group" else 1, -1, w.shape[-1])
        if g.kh == g.kw == 1 and g.pads == (0, 0, 0, 0) and g.sh == g.sw == 1:
            return native_plans.gemm_plan(wg, bias, x_shape, g.oh, g.ow, None, act)
        if g.n * g.c * g.kh * g.kw * g.oh * g.ow > FUSED_IM2COL_FLOATS or g.kh == g.kw == 1 and g.pads == (0, 0, 0, 0):
            return None  # blocks gathering their own columns; strided 1x1
        i2c = ((g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), pads)
        return native_plans.gemm_plan(wg, bias, x_shape, g.oh, g.ow, i2c, act)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Output": [self.compute(ins, native.NO_ACT)[0]]}

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        return self.bind_act(ins, fixed, native.NO_ACT)

    def bind_act(self, ins: dict[str, list[Any]], fixed: frozenset[str], act: native.Act) -> Bound | None:
        """The native plan compute() just ran for these inputs (Kernel.bind), reading Input (and ResidualData where
        the plan's epilogue adds it); None where it ran none or its weights are not the program's parameters."""
        b, res = ins.get("Bias"), ins.get("ResidualData")
        if "Filter" not in fixed or (b and "Bias" not in fixed):
            return None
        x = ins["Input"][0]
        p = self._plans.get(x.shape)
        if (p is None or p[1] is not ins["Filter"][0] or p[2] is not (b[0] if b else None) or p[3] != act
                or p[5] != bool(res) or x.dtype != np.float32 or not x.flags.c_contiguous):
            return None
        if not res:
            return bound(p[4], ("Input",), ("Output",))
        plan, r = p[4], res[0]
        if (plan.in_epilogue and type(r) is np.ndarray and r.dtype == np.float32 and r.flags.c_contiguous
                and r.shape == plan.out_shape):
            return bound(plan.run, ("Input", "ResidualData"), ("Output",))
        return None

    def _with_residual(self, plan: _ResidualPlan, x: np.ndarray, r: Any,
                       act: native.Act) -> tuple[np.ndarray, bool] | None:
        """(conv(x) + bias + r, whether `act` was applied) by the native plan: r in its epilogue, or its output then
        native.add_act (or NumPy's add, act left to the caller); None where r is not a C-contiguous float32 array
        of the output's shape (the generic code runs)."""
        if not (isinstance(r, np.ndarray) and r.dtype == np.float32 and r.flags.c_contiguous
                and r.shape == plan.out_shape):
            return None
        if plan.in_epilogue:
            return plan.run(x, r), True
        out = plan.run(x)
        summed = native.add_act_or_none(out, r, self.context, act)
        if summed is not None:
            return summed, True
        out += r
        return out, not act[0]

    def compute(self, ins: dict[str, list[Any]], act: native.Act) -> tuple[np.ndarray, bool]:
        """(Output, whether `act` was applied): act(conv + bias [+ residual]); without the native path, with
        ResidualData: conv + bias + residual, act not applied."""
        x = ins["Input"][0]
        w_src = ins["Filter"][0]
        p = self._plan
        if p is not None and p[0] != x.shape:
            p = self._plans.get(x.shape, p)
        res = ins.get("ResidualData")
        if p is not None and p[0] == x.shape and p[1] is w_src and p[3] == act and x.dtype == np.float32 \
                and x.flags.c_contiguous and p[5] == bool(res):
            b = ins.get("Bias")
            if p[2] is (b[0] if b else None):
                if not res:
                    return p[4](x), True  # the same conv as last time: its bound native call
                done = self._with_residual(p[4], x, res[0], act)
                if done is not None:
                    return done
        g = self.geometry(tuple(x.shape), tuple(w_src.shape))
        kind, w = self._weights.get(w_src, self._prepare_weights)
        x = to_nchw(x, g.channel_last)
        if x.dtype != w.dtype:
            x = x.astype(w.dtype)
        fuse = act if not res and not g.channel_last else native.NO_ACT
        bias = self._bias.get(ins["Bias"][0], lambda b: bias_of(ins)) if ins.get("Bias") else None
        fast = self.use_native() and x.dtype == np.float32
        if fast and not x.flags.c_contiguous:
            x = np.asarray(x, order="C")
        n = g.n
        if n == 0:  # an empty batch: an empty result (the NumPy paths' reshapes cannot infer -1 on size 0)
            shape = (0, g.oh, g.ow, g.oc) if g.channel_last else (0, g.oc, g.oh, g.ow)
            return np.zeros(shape, dtype=x.dtype), True
        pads = (g.pads[0], g.pads[2])
        if fast and not g.channel_last and isinstance(x, np.ndarray):
            plan = None
            if res:  # the residual in the native epilogue, else (below) the native add after the conv
                plan = self.native_plan(g, kind, w, w_src, bias, act, x.shape, residual=True)
                shape = (g.n, g.oc, g.oh, g.ow)
                if plan is not None:
                    plan = _ResidualPlan(plan, True, shape)
                else:
                    plan = self.native_plan(g, kind, w, w_src, bias, native.NO_ACT, x.shape)
                    plan = None if plan is None else _ResidualPlan(plan, False, shape)
            else:
                plan = self.native_plan(g, kind, w, w_src, bias, act, x.shape)
            if plan is not None:
                b = ins.get("Bias")
                self._plan = (x.shape, w_src, b[0] if b else None, act, plan, bool(res))
                remember(self._plans, x.shape, self._plan)
                if not res:
                    return plan(x), True
                done = self._with_residual(plan, x, res[0], act)
                if done is not None:
                    return done
        if kind == "dw":
            if fast:
                out = native.depthwise_conv2d(x, w, bias, g.oc, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw),
                                              (g.dh, g.dw), pads, fuse)
                bias = None
                done = True
            else:
                mult = g.oc // g.c
                out = depthwise(np.repeat(x, mult, axis=1) if mult > 1 else x, w, g)
                done = False
        else:
            pointwise = g.kh == g.kw == 1 and g.pads == (0, 0, 0, 0)
            gemm = fast and native.gemm_available()
            wg = w.reshape(g.groups if kind == "group" else 1, -1, w.shape[-1])
            if pointwise and g.sh == g.sw == 1:
                cols = x.reshape(n, g.c, g.h * g.w)
            elif pointwise:
                cols = np.asarray(x[:, :, :: g.sh, :: g.sw][:, :, : g.oh, : g.ow], order="C").reshape(n, g.c, -1)
            elif gemm and self.winograd(g, kind):
                cols = None
                out = native.winograd_conv3x3(x, self.winograd_weights(g, w_src), bias, g.oh, g.ow, pads, fuse)
            elif gemm and n * g.c * g.kh * g.kw * g.oh * g.ow > FUSED_IM2COL_FLOATS:  # blocks gather their columns
                cols = None
                out = native.conv2d_gemm(x, wg, bias, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), pads, fuse)
            elif fast:
                cols = native.im2col(x, g.oh, g.ow, (g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), pads)
            else:
                cols = im2col(x, g)
            if gemm:
                if cols is not None:
                    out = native.conv_gemm(wg, cols, bias, fuse)
                out = out.reshape(n, g.oc, g.oh, g.ow)
                bias = None
                done = True
            else:
                if kind == "mm":
                    out = np.matmul(w, cols)
                else:
                    out = np.matmul(w, cols.reshape(n, g.groups, -1, g.oh * g.ow))
                out = out.reshape(n, g.oc, g.oh, g.ow)
                done = False
        if not done or bias is not None:
            epilogue(out, bias, fuse, fast)
        out = from_nchw(out, g.channel_last)
        if res:
            out += res[0]
        return out, fuse[0] != 0 or not act[0]


@register_kernel("conv2d_transpose")
@register_kernel("depthwise_conv2d_transpose")
class Conv2dTranspose(Kernel):
    """conv2d_transpose: cols = W^T @ x per group, then col2im by strided accumulation per tap."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._weights = _WeightCache()
        self._geo: dict[tuple[tuple[int, ...], tuple[int, ...]], ConvGeometry] = {}

    def prepare(self, params: Mapping[str, Any]) -> None:
        w = params.get(self.op.input("Filter"))
        if w is not None:
            self._weights.get(w, self._prepare_weights)

    def _prepare_weights(self, w: np.ndarray) -> np.ndarray:
        """(groups, Cout/g * kh * kw, Cin/g): the transposed per-group filter matrix."""
        w = np.asarray(w, dtype=np.float32)
        cin, ocg, kh, kw = w.shape
        groups = int(self.attrs["groups"] or 1)
        wg = w.reshape(groups, cin // groups, ocg * kh * kw)
        return np.asarray(wg.transpose(0, 2, 1), order="C")

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Output": [self.compute(ins, native.NO_ACT)[0]]}

    def compute(self, ins: dict[str, list[Any]], act: native.Act) -> tuple[np.ndarray, bool]:
        """(Output, whether `act` was applied)."""
        x = ins["Input"][0]
        w_src = ins["Filter"][0]
        key = (tuple(x.shape), tuple(w_src.shape))
        g = self._geo.get(key)
        if g is None:
            g = self._geo[key] = conv2d_transpose_geometry(self.attrs, *key)
        wt = self._weights.get(w_src, self._prepare_weights)
        x = to_nchw(x, g.channel_last)
        if x.dtype != wt.dtype:
            x = x.astype(wt.dtype)
        n, h, w = g.n, g.h, g.w
        if x.dtype == np.float32 and native.use_native(self.context) and native.gemm_available():
            # on the native pool (BLAS itself runs single-threaded while it is in use)
            cols = native.conv_gemm(wt, np.asarray(x, order="C").reshape(n, g.c, h * w), None)
        else:
            cols = np.matmul(wt, x.reshape(n, g.groups, g.c // g.groups, h * w))  # (N, g, ocg*kh*kw, HW)
        cols = cols.reshape(n, g.oc, g.kh, g.kw, h, w)
        top, left = g.pads[0], g.pads[2]
        hf = max((h - 1) * g.sh + (g.kh - 1) * g.dh + 1, top + g.oh)
        wf = max((w - 1) * g.sw + (g.kw - 1) * g.dw + 1, left + g.ow)
        # kernel = stride: taps tiling the output, each output written once (det: 0.38 -> 0.14 ms; -0.0 stays -0.0)
        tiled = g.kh == g.sh and g.kw == g.sw and g.dh == g.dw == 1 and (hf, wf) == (h * g.kh, w * g.kw)
        acc = np.empty((n, g.oc, h, g.kh, w, g.kw), x.dtype) if tiled else np.zeros((n, g.oc, hf, wf), x.dtype)
        for i in range(g.kh):
            r = i * g.dh
            for j in range(g.kw):
                c = j * g.dw
                if tiled:
                    acc[:, :, :, i, :, j] = cols[:, :, i, j]
                else:
                    acc[:, :, r : r + (h - 1) * g.sh + 1 : g.sh, c : c + (w - 1) * g.sw + 1 : g.sw] += cols[:, :, i, j]
        out = acc.reshape(n, g.oc, hf, wf)[:, :, top : top + g.oh, left : left + g.ow]
        out = np.asarray(out, order="C")
        fuse = act if not g.channel_last else native.NO_ACT
        epilogue(out, bias_of(ins), fuse, native.use_native(self.context))
        return from_nchw(out, g.channel_last), fuse[0] != 0 or not act[0]
