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
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pdlite.kernels.registry import Kernel, register_kernel
from pdlite.operators.nn import ConvGeometry, conv2d_geometry, conv2d_transpose_geometry

# Floats per operand in one chunk of a tap-wise reduction (256 KiB for float32): keeps the
# accumulator and the source slices of a chunk in the L2 cache.
CHUNK_FLOATS = 1 << 16
# Floats in one depthwise tap stack (1 MiB): measured best among 256 KiB / 1 MiB / unchunked.
DW_STACK_FLOATS = 1 << 18


def to_nchw(x: np.ndarray, channel_last: bool) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if channel_last else x


def from_nchw(y: np.ndarray, channel_last: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1)) if channel_last else y


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
    return res if wq == ow else np.ascontiguousarray(res[:, :, :, :ow])


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


def _add_bias(out: np.ndarray, ins: dict[str, list[Any]]) -> None:
    bias = ins.get("Bias")
    if bias:
        out += np.asarray(bias[0], dtype=out.dtype).reshape(1, -1, 1, 1)


@register_kernel("conv2d")
@register_kernel("depthwise_conv2d")
class Conv2d(Kernel):
    """conv2d / depthwise_conv2d: Output = conv(Input, Filter) (+ Bias) (+ ResidualData)."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._weights = _WeightCache()
        self._geo: dict[tuple[tuple[int, ...], tuple[int, ...]], ConvGeometry] = {}

    def prepare(self, params: Mapping[str, Any]) -> None:
        w = params.get(self.op.input("Filter"))
        if w is not None:
            self._weights.get(w, self._prepare_weights)

    def _prepare_weights(self, w: np.ndarray) -> tuple[str, np.ndarray]:
        w = np.asarray(w, dtype=np.float32)
        oc, cg, kh, kw = w.shape
        groups = int(self.attrs.get("groups", 1) or 1)
        if cg == 1 and groups > 1:  # depthwise: (Cout, kh*kw), Cout = Cin * multiplier
            return "dw", np.ascontiguousarray(w.reshape(oc, kh * kw))
        if groups == 1:
            return "mm", np.ascontiguousarray(w.reshape(oc, cg * kh * kw))
        return "group", np.ascontiguousarray(w.reshape(groups, oc // groups, cg * kh * kw))

    def geometry(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvGeometry:
        key = (x_shape, w_shape)
        g = self._geo.get(key)
        if g is None:
            g = self._geo[key] = conv2d_geometry(self.attrs, x_shape, w_shape)
        return g

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["Input"][0]
        w_src = ins["Filter"][0]
        g = self.geometry(tuple(x.shape), tuple(w_src.shape))
        kind, w = self._weights.get(w_src, self._prepare_weights)
        x = to_nchw(x, g.channel_last)
        if x.dtype != w.dtype:
            x = x.astype(w.dtype)
        n = g.n
        if kind == "dw":
            mult = g.oc // g.c
            out = depthwise(np.repeat(x, mult, axis=1) if mult > 1 else x, w, g)
        elif g.kh == g.kw == 1 and g.pads == (0, 0, 0, 0) and g.sh == g.sw == 1 and kind == "mm":
            out = np.matmul(w, x.reshape(n, g.c, g.h * g.w)).reshape(n, g.oc, g.oh, g.ow)
        elif g.kh == g.kw == 1 and g.pads == (0, 0, 0, 0) and kind == "mm":
            xs = np.ascontiguousarray(x[:, :, :: g.sh, :: g.sw][:, :, : g.oh, : g.ow])
            out = np.matmul(w, xs.reshape(n, g.c, g.oh * g.ow)).reshape(n, g.oc, g.oh, g.ow)
        else:
            cols = im2col(x, g)
            if kind == "mm":
                out = np.matmul(w, cols)
            else:
                cols = cols.reshape(n, g.groups, -1, g.oh * g.ow)
                out = np.matmul(w, cols)
            out = out.reshape(n, g.oc, g.oh, g.ow)
        _add_bias(out, ins)
        out = from_nchw(out, g.channel_last)
        res = ins.get("ResidualData")
        if res:
            out += res[0]
        return {"Output": [out]}


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
        groups = int(self.attrs.get("groups", 1) or 1)
        wg = w.reshape(groups, cin // groups, ocg * kh * kw)
        return np.ascontiguousarray(wg.transpose(0, 2, 1))

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
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
        cols = np.matmul(wt, x.reshape(n, g.groups, g.c // g.groups, h * w))  # (N, g, ocg*kh*kw, HW)
        cols = cols.reshape(n, g.oc, g.kh, g.kw, h, w)
        top, left = g.pads[0], g.pads[2]
        hf = max((h - 1) * g.sh + (g.kh - 1) * g.dh + 1, top + g.oh)
        wf = max((w - 1) * g.sw + (g.kw - 1) * g.dw + 1, left + g.ow)
        acc = np.zeros((n, g.oc, hf, wf), dtype=x.dtype)
        for i in range(g.kh):
            r = i * g.dh
            for j in range(g.kw):
                c = j * g.dw
                acc[:, :, r : r + (h - 1) * g.sh + 1 : g.sh, c : c + (w - 1) * g.sw + 1 : g.sw] += cols[:, :, i, j]
        out = acc[:, :, top : top + g.oh, left : left + g.ow]
        out = np.ascontiguousarray(out)
        _add_bias(out, ins)
        return {"Output": [from_nchw(out, g.channel_last)]}
