"""Rules 0-2d of the QDQ rewrites (qdq_fusion/__init__.py): quantizers merged, activations to uint8 (and the full
uint8 range), convs, adds, hard_swish and squeeze-excitation gates requantized to their readers' quantizers."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdlite.nnadapter.qdq_fusion.graph import (
    _U8_ZP,
    F32,
    NEGLIGIBLE,
    _attr,
    _attrs,
    _Graph,
    _is_zero,
    _max_code,
    _per_tensor_u8,
    _post_step,
    _quant_params_key,
    _quantized_tail,
    _reason,
    _u8_activation,
    _walk_to_quantizer,
    _walk_to_quantizers,
)


# ------------------------------------------------------------------------------------------------- rule 0
class MergeQuantizers:
    """Quantizers of the same value with the same constant scale and zero point compute the same codes: the
    first one is kept and the others' readers read it. (Paddle's quantizer writes one quantize_linear per
    quantized reader; a residual block's input read by a conv and by the add then has two.)"""

    def pattern(self, g: _Graph) -> Iterable[list[Any]]:
        groups: dict[tuple[str, ...], list[Any]] = {}
        for n in g.nodes:
            if n.op_type == "QuantizeLinear":
                groups.setdefault((n.input[0], *_quant_params_key(g, n)), []).append(n)
        return [v for k, v in groups.items() if len(v) > 1 and "" not in k]

    def rewrite(self, g: _Graph, same: list[Any]) -> None:
        keep = same[0].output[0]
        for q in same[1:]:
            for r in g.readers.get(q.output[0], []):
                r.input[:] = [keep if i == q.output[0] else i for i in r.input]
        g.nodes = [n for n in g.nodes if not any(n is q for q in same[1:])]
        g.index()



# ------------------------------------------------------------------------------------------------- rule 1
class ActivationsToUint8:
    """Q(x, s, 0) -> int8 read only by DQ(., s', 0) becomes uint8 with zero point 128 (see the module doc). A
    Concat of such quantizers read only by DQ (how converters/quant.py quantizes a concat) is one unit: all its
    quantizers and readers change together (a concat of codes is the same concat for either zero point)."""

    def pattern(self, g: _Graph) -> Iterable[tuple[list[Any], str]]:
        """(quantizers, the value their codes reach the readers as): one quantizer and its output, or the
        quantizers of a Concat's inputs and the Concat's output."""
        units: list[tuple[list[Any], str]] = []
        for n in g.nodes:
            if n.op_type == "QuantizeLinear":
                units.append(([n], n.output[0]))
            elif n.op_type == "Concat" and n.input and all(
                    getattr(g.producer.get(i), "op_type", "") == "QuantizeLinear" for i in n.input):
                units.append(([g.producer[i] for i in n.input], n.output[0]))
        return units

    def check(self, g: _Graph, unit: tuple[list[Any], str]) -> str | None:
        qs, value = unit
        for q in qs:
            if len(q.input) < 3 or not _is_zero(g, q.input[2], np.int8) or g.const(q.input[2]).ndim != 0:
                return "not a per-tensor int8 quantizer with zero point 0"
            if g.const(q.input[0]) is not None:
                return "quantizes a constant"
            if value != q.output[0] and (len(g.readers.get(q.output[0], [])) != 1 or q.output[0] in g.outputs):
                return "a concatenated quantizer read elsewhere too"
        readers = g.readers.get(value, [])
        if not readers or value in g.outputs:
            return "no readers, or a graph output"
        for r in readers:
            if r.op_type != "DequantizeLinear" or len(r.input) < 3 or not _is_zero(g, r.input[2], np.int8):
                return f"read by {r.op_type}"
            if g.const(r.input[2]).ndim != 0:
                return "read per channel"
        return None

    def rewrite(self, g: _Graph, unit: tuple[list[Any], str], zp: str) -> None:
        qs, value = unit
        for n in (*qs, *g.readers[value]):
            n.input[2] = zp


# ------------------------------------------------------------------------------------------------ rule 1b
def _value_range(g: _Graph, value: str, depth: int = 0) -> tuple[float, float] | None:
    """Bounds (lo, hi) that `value` provably lies in, from the clamps that produce it (Relu, Clip, Max / Min
    with constant bounds, HardSigmoid; through max pools and nearest resizes, which pick elements); None when
    nothing bounds it."""
    n = g.producer.get(value)
    if n is None or depth > 16 or not n.input or n.input[0] == "":
        return None
    if n.op_type == "HardSigmoid":
        return (0.0, 1.0)
    step = _post_step(g, n)
    if isinstance(step, str):
        return None
    inner = _value_range(g, n.input[0], depth + 1) or (-np.inf, np.inf)
    if step[0] == "pick":
        return inner
    lo, hi = step[1]
    return (max(inner[0], -np.inf if lo is None else lo), min(inner[1], np.inf if hi is None else hi))


class FullRangeQuantizers:
    """A uint8 quantizer ``Q(v, s, 128)`` of a value that is never negative (a relu / relu6 output: Paddle's
    int8 codes of it are 0 .. 127, half of the range unused) becomes ``Q(v, top / 255, 0)``, top the largest
    value the original codes reach (min(v's upper bound, 127 s)), its readers ``DQ(., top / 255, 0)``: the same
    range [0, top], on a grid twice as fine. Then uint8 saturation does the clamp, so the conv's requantized
    output needs no Clip of its codes after it (rule 2 drops clamps to [0, 255]; MobileNetV2's 35 relu6 Clips
    are 8% of its int8 run on ONNX Runtime). Not Paddle's grid: each value moves by at most half a step of each
    grid (s / 2 + top / 510) from Paddle's simulation, and its own rounding error is half as large."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "QuantizeLinear"]

    def check(self, g: _Graph, q: Any) -> tuple[Any, float] | None:
        """(the quantizer, its new scale), or None where the rule does not apply."""
        if not _per_tensor_u8(g, q) or int(g.const(q.input[2])) != _U8_ZP or q.output[0] in g.outputs:
            return None
        readers = g.readers.get(q.output[0], [])
        s = float(g.const(q.input[1]))
        # the readers' scales may differ from the quantizer's in the last bit (how the converters compute them)
        if not readers or any(r.op_type != "DequantizeLinear" or r.input[0] != q.output[0] or not _per_tensor_u8(g, r)
                              or int(g.const(r.input[2])) != _U8_ZP or abs(float(g.const(r.input[1])) - s) > 1e-6 * s
                              for r in readers):
            return None
        bounds = _value_range(g, q.input[0])
        if bounds is None or bounds[0] < 0 or not s > 0:
            return None
        top = min(bounds[1], 127 * s)
        return (q, top / 255) if top > 0 else None

    def rewrite(self, g: _Graph, got: tuple[Any, float]) -> None:
        q, scale = got
        s, zp = g.add_init(np.array(scale, F32), "s_full"), g.add_init(np.array(0, np.uint8), "zp0")
        for n in (q, *g.readers[q.output[0]]):
            n.input[1], n.input[2] = s, zp


# ------------------------------------------------------------------------------------------------- rule 2
@dataclass
class _Chain:
    conv: Any
    x_dq: Any
    w8: np.ndarray
    s_w: np.ndarray
    k: np.ndarray        # per output channel multiplier (the affine steps)
    c: np.ndarray        # per output channel bias
    post: list[tuple[str, Any]]  # ("clip", (lo, hi)) or ("pick", MaxPool / Resize node), in order
    branches: list[tuple[Any, list[tuple[str, Any]]]]  # the quantizers reached and each one's own steps
    removed: list[Any]


class ConvRequantize:
    """DQ(x_u8) -> Conv(DQ(w8)) -> [BN|Add c|Sub c|Mul m]* -> [HardSigmoid] -> [Relu|Clip|MaxPool|Resize]* -> Q_u8
    ==>  QLinearConv-ready Conv -> Q -> [Clip|MaxPool|Resize]* on uint8 (see the module doc for the maths)."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "Conv"]

    def check(self, g: _Graph, conv: Any) -> _Chain | str:
        x_dq, w_dq = g.producer.get(conv.input[0]), g.producer.get(conv.input[1])
        if x_dq is None or x_dq.op_type != "DequantizeLinear" or len(x_dq.input) < 3:
            return "input not dequantized"
        if not _per_tensor_u8(g, x_dq):
            return "input not a per-tensor uint8 activation"
        if w_dq is None or w_dq.op_type != "DequantizeLinear":
            return "weight not dequantized"
        w8, s_w = g.const(w_dq.input[0]), g.const(w_dq.input[1])
        if w8 is None or w8.dtype != np.int8 or w8.ndim < 3 or s_w is None or (
                len(w_dq.input) > 2 and not _is_zero(g, w_dq.input[2], np.int8)):
            return "weight not a constant int8 tensor with zero point 0"
        cout = w8.shape[0]
        if s_w.size == 1:
            s_w = np.full(cout, s_w.reshape(()), F32)
        elif s_w.size != cout or int(_attr(w_dq, "axis", 1)) != 0:
            return "weight scales not per output channel"
        k = np.ones(cout, np.float64)
        b = g.const(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else np.zeros(cout, F32)
        if b is None:
            return "bias not constant"
        c = b.astype(np.float64).reshape(-1)
        removed: list[Any] = []
        post: list[tuple[str, Any]] = []
        cur = conv.output[0]
        tail = (cout,) + (1,) * (w8.ndim - 2)
        while len(g.readers.get(cur, [])) == 1 and cur not in g.outputs:  # per-channel affine steps first
            n = g.readers[cur][0]
            if n.op_type == "HardSigmoid" and n.input[0] == cur:  # clip(alpha * v + beta, 0, 1): a last affine step
                alpha, beta = float(_attr(n, "alpha", 0.2)), float(_attr(n, "beta", 0.5))
                k, c = k * alpha, c * alpha + beta
                post.append(("clip", (0.0, 1.0)))
                removed.append(n)
                cur = n.output[0]
                break
            if n.op_type in ("Add", "Mul") and len(n.input) == 2 and n.input[1] == cur:
                other = n.input[0]  # constant * x, constant + x (PP-LCNet's learnable affine blocks)
            elif n.input[0] == cur:
                other = n.input[1] if len(n.input) > 1 else ""
            else:
                break
            if n.op_type == "BatchNormalization":
                p = [g.const(i) for i in n.input[1:5]]
                if any(v is None or v.size != cout for v in p) or _attr(n, "training_mode", 0):
                    return "batch norm parameters not constant"
                sc, bb, mean, var = (v.astype(np.float64).reshape(-1) for v in p)  # type: ignore[union-attr]
                kk = sc / np.sqrt(var + float(_attr(n, "epsilon", 1e-5)))
                k, c = k * kk, c * kk + bb - mean * kk
            elif n.op_type in ("Add", "Sub", "Mul"):
                v = g.const(other)
                if v is None or not (v.size == 1 or (v.size == cout and v.shape[-len(tail):] == tail)):
                    return f"{n.op_type} of a non-constant or non-per-channel value"
                v = np.broadcast_to(v.astype(np.float64).reshape(-1), cout)
                if n.op_type == "Mul":
                    k, c = k * v, c * v
                else:
                    c = c + (v if n.op_type == "Add" else -v)
            else:
                break
            removed.append(n)
            cur = n.output[0]
        branches = _walk_to_quantizers(g, cur, post, removed)
        if isinstance(branches, str):
            return _reason("conv", branches)
        w = w8.astype(np.int32)
        neg = (k < 0)
        if np.any(w[neg] == -128):
            return "weight holds -128 where batch norm flips the sign"
        return _Chain(conv, x_dq, w8, s_w.astype(F32).reshape(-1), k, c, post, branches, removed)

    def rewrite(self, g: _Graph, ch: _Chain) -> str | None:
        """None once rewritten; the reason when the int32 bias cannot hold the folded one (nothing changed)."""
        cout = ch.w8.shape[0]
        shape = (cout,) + (1,) * (ch.w8.ndim - 1)
        sign = np.where(ch.k < 0, -1, 1).astype(np.int32)
        s_w = (ch.s_w.astype(np.float64) * np.abs(ch.k)).astype(F32)
        w = ch.w8.astype(np.int32) * sign.reshape(shape)
        s_x = F32(g.const(ch.x_dq.input[1]))
        # a channel of zero weights (scale 0 or batch norm scale 0) is its bias: any positive weight scale, taken
        # so that the int32 bias is about 2^23 (its rounding then moves the value by 2^-24 of it, not by up to
        # s_x / 2, which is most of an output step on a fine grid), 1 for a zero bias
        dead = s_w == 0
        w[dead.reshape(-1)] = 0
        fine = np.abs(ch.c) / (float(s_x) * 2.0**23)
        s_w[dead] = np.where(fine[dead] > 1e-30, fine[dead], 1).astype(F32)
        s_b = (s_x * s_w).astype(F32)
        b32 = np.round(ch.c / s_b.astype(np.float64))
        # a near-dead channel (weight scale ~1e-9 and below: pruned weights) has a bias int32 cannot hold at
        # s_x * s_w; where its weights can move the output by at most NEGLIGIBLE of a step of the output's
        # quantizer, they are dropped and the weight scale raised until the bias fits (the channel is its bias)
        over = np.abs(b32) > 2**31 - 1
        if np.any(over):
            reach = np.abs(w).reshape(cout, -1).sum(1) * s_w.astype(np.float64) * (_max_code(g, ch.x_dq) * float(s_x))
            s_out = float(g.const(ch.branches[0][0].input[1]))
            if np.all(reach[over] <= NEGLIGIBLE * s_out):
                w[over] = 0
                s_w[over] = np.maximum(s_w[over], np.abs(ch.c[over]) / (float(s_x) * 2.0**30)).astype(F32)
                s_b = (s_x * s_w).astype(F32)
                b32 = np.round(ch.c / s_b.astype(np.float64))
        if np.any(np.abs(b32) > 2**31 - 1) or np.any(s_b <= 0):
            return "bias out of int32 range"
        w_dq = g.node("DequantizeLinear", [g.add_init(w.astype(np.int8), "w8"), g.add_init(s_w, "ws"),
                                           g.add_init(np.zeros(cout, np.int8), "wzp")], [g.fresh("w")], axis=0)
        b_dq = g.node("DequantizeLinear", [g.add_init(b32.astype(np.int32), "b32"), g.add_init(s_b, "bs"),
                                           g.add_init(np.zeros(cout, np.int32), "bzp")], [g.fresh("b")], axis=0)
        conv_out = g.fresh("conv")
        attrs = _attrs(ch.conv)
        conv = g.node("Conv", [ch.conv.input[0], w_dq.output[0], b_dq.output[0]], [conv_out], **attrs)
        new = [w_dq, b_dq, conv, *_quantized_tail(g, conv_out, ch.branches, ch.post)]
        g.replace([ch.conv, *ch.removed, *(q for q, _ in ch.branches)], new)
        return None


# ------------------------------------------------------------------------------------------------ rule 2b
class AddRequantize:
    """``Add(DQ(a_u8), DQ(b_u8)) -> [Relu|Clip|Max|Min|MaxPool|Resize]* -> Q_u8``  ==>  ``Add(DQ(a), DQ(b)) -> Q
    -> [Clip|MaxPool|Resize]*`` on uint8, the form ORT's QDQ selectors make a QLinearAdd of (integer inputs, one
    requantization). Exact in real numbers for the same reason as ConvRequantize's tail: Q commutes with clamps
    and max. A residual add quantized on both inputs (pdlite quantize's default; Paddle's PTQ with
    elementwise_add in quantizable_op_type) then stays int8 from conv to conv."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "Add" and len(n.input) == 2 and all(
            getattr(g.producer.get(i), "op_type", None) == "DequantizeLinear" for i in n.input)]

    def check(self, g: _Graph, add: Any) -> tuple[Any, list[tuple[Any, list[tuple[str, Any]]]],
                                                   list[tuple[str, Any]], list[Any]] | str:
        if not all(_u8_activation(g, g.producer.get(i)) for i in add.input[:2]):
            return "add input not a per-tensor uint8 activation"
        post: list[tuple[str, Any]] = []
        removed: list[Any] = []
        branches = _walk_to_quantizers(g, add.output[0], post, removed)
        if isinstance(branches, str):
            return _reason("add", branches)
        return add, branches, post, removed

    def rewrite(self, g: _Graph, got: tuple[Any, list[tuple[Any, list[tuple[str, Any]]]], list[tuple[str, Any]],
                                            list[Any]]) -> None:
        add, branches, post, removed = got
        value = g.fresh("add")
        new = [g.node("Add", list(add.input), [value]), *_quantized_tail(g, value, branches, post)]
        g.replace([add, *removed, *(q for q, _ in branches)], new)


# ------------------------------------------------------------------------------------------------ rule 2c
MS_DOMAIN = "com.microsoft"  # ONNX Runtime's contrib ops (QLinearMul)
_HSIG_STEPS = 254  # hard sigmoid codes: h = q / 254, q = clip(round(x * 254 / 6) + 127, 0, 254)


def _scalar_step(g: _Graph, cur: str, op_type: str) -> tuple[Any, float] | None:
    """The one reader of `cur` when it is `op_type` (Mul / Add) with a constant scalar other input, and that scalar."""
    readers = g.readers.get(cur, [])
    if len(readers) != 1 or cur in g.outputs or readers[0].op_type != op_type or len(readers[0].input) != 2:
        return None
    n = readers[0]
    v = g.const(n.input[1] if n.input[0] == cur else n.input[0])
    return (n, float(v.reshape(()))) if v is not None and v.size == 1 else None


class HardSwishRequantize:
    """``DQ(x_u8) -> HardSwish -> [Mul(m > 0)] -> [Add(c)] -> Q_u8``  ==>  ``QLinearMul(x, 1) -> Clip ->
    QLinearMul(x, h)`` on uint8 codes: ORT runs hard_swish in float between a DequantizeLinear and a
    QuantizeLinear otherwise (about a third of PP-OCRv4 det's int8 run), and has no quantized HardSwish.

    hard_swish(x) = x * h(x), h(x) = clip(x / 6 + 1/2, 0, 1). The first QLinearMul requantizes x's codes to
    h's: q_h = clip(round(x * 254 / 6) + 127, 0, 254) (uint8 saturation, then a Clip of the codes), h' = q_h / 254,
    exact where h is 0 or 1 and within 1/508 of h elsewhere (|x| < 3 + 6/508 there). The second computes
    Q(m * x * h') with the output scale s_out / m and the output zero point moved by round(c / s_out): the affine
    step after the activation (PP-LCNet's learnable affine blocks). So, unlike the exact rules above, this one
    approximates: |m * x * (h' - h)| <= 3.02 * m / 508 and the fraction of c / s_out left out is at most half a
    step; the rule applies only where s_out / m >= 3.02 / 254, which keeps the first term under half a step, so
    every output code is within one of the exact one's (tests/quant/test_qdq_fusion.py checks all 256 input codes).
    Measured on PP-OCRv4 det: the text masks agree with the fp32 model's as well as before the rewrite.

    Cheaper where x's own codes can serve as h's: ``Clip(x_u8, lo, hi) -> QLinearMul(x, h)`` with lo, hi the codes
    of -3 and 3 (zx -+ r, r = round(3 / s_x)) and h' = (clip(q, lo, hi) - lo) / 2r, exact at 0 and 1: no
    requantization (PP-OCRv4 det, `pdlite quantize`d: all 24 of its hard_swish, about 1 ms of 8 at one thread).
    Taken where lo >= 0 and, over all 256 input codes, the pre-rounding output stays within 0.99 of a step of the
    exact one (the offset's rounding included), so each output code is within one of the exact one's as above."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "HardSwish"]

    def check(self, g: _Graph, hs: Any) -> tuple[list[Any], Any, Any, float, int, tuple[int, int, int] | None] | str:
        """(the nodes replaced: hard_swish and its affine steps, x's dequantizer, the quantizer, m, the output zero
        point with the offset c in it, the Clip form's (lo, hi, r) or None) or a reason."""
        dq = g.producer.get(hs.input[0])
        if not _u8_activation(g, dq):
            return "hard_swish input not a per-tensor uint8 activation"
        m, c, nodes, cur = 1.0, 0.0, [hs], hs.output[0]
        for op_type in ("Mul", "Add"):
            step = _scalar_step(g, cur, op_type)
            if step is not None:
                nodes.append(step[0])
                cur = step[0].output[0]
                m, c = (m * step[1], c * step[1]) if op_type == "Mul" else (m, c + step[1])
        if m <= 0:
            return "hard_swish scaled by a factor <= 0"
        post: list[tuple[str, Any]] = []
        q = _walk_to_quantizer(g, cur, post, nodes)
        if isinstance(q, str):
            return _reason("hard_swish", q)
        if post:
            return "hard_swish result goes through a clamp or pool before its quantizer"
        s_out, zq = float(g.const(q.input[1])), int(g.const(q.input[2]))
        zp_out = zq + round(c / s_out)
        if not 0 <= zp_out <= 255:
            return "hard_swish offset moves the zero point out of uint8"
        clip = self.clip_codes(float(g.const(dq.input[1])), int(g.const(dq.input[2])), m, c, s_out, zq, zp_out)
        if clip is None and s_out / m < 3.02 / _HSIG_STEPS:
            return "hard_swish output step finer than its 8-bit hard sigmoid allows"
        return nodes, dq, q, m, zp_out, clip

    @staticmethod
    def clip_codes(s_x: float, z_x: int, m: float, c: float, s_out: float, zq: int,
                   zp_out: int) -> tuple[int, int, int] | None:
        """(lo, hi, r) of the Clip form when every output code stays within one of the exact one's, else None."""
        r = round(3 / s_x)
        lo, hi = z_x - r, min(z_x + r, 255)
        if r < 1 or lo < 0:
            return None
        q = np.arange(256, dtype=np.float64)
        x = (q - z_x) * s_x
        exact = (m * x * np.clip(x / 6 + 0.5, 0, 1) + c) / s_out + zq
        got = x * (np.clip(q, lo, hi) - lo) / (2 * r) * m / s_out + zp_out
        return (lo, hi, r) if np.abs(got - exact).max() <= 0.99 else None

    def rewrite(self, g: _Graph, got: tuple[list[Any], Any, Any, float, int, Any]) -> None:
        nodes, dq, q, m, zp_out, clip = got
        x = list(dq.input[:3])
        s_out = F32(g.const(q.input[1]))
        u8 = lambda v, hint: g.add_init(np.array(v, np.uint8), hint)  # noqa: E731
        f32 = lambda v, hint: g.add_init(np.array(v, F32), hint)  # noqa: E731
        if clip is not None:
            lo, hi, r = clip
            h = g.fresh("hsig")
            g.replace([*nodes, q], [
                g.node("Clip", [x[0], u8(lo, "lo"), u8(hi, "hi")], [h]),
                g.node("QLinearMul", [*x, h, f32(1 / (2 * r), "sh"), u8(lo, "zh"), f32(s_out / F32(m), "so"),
                                      u8(zp_out, "zo")], [q.output[0]], domain=MS_DOMAIN)])
            return
        raw, h = g.fresh("hsig"), g.fresh("hsig")
        new = [g.node("QLinearMul", [*x, u8(1, "one"), f32(1.0, "s1"), u8(0, "z0"), f32(6 / _HSIG_STEPS, "sh"),
                                     u8(_HSIG_STEPS // 2, "zh")], [raw], domain=MS_DOMAIN),
               g.node("Clip", [raw, u8(0, "lo"), u8(_HSIG_STEPS, "hi")], [h]),
               g.node("QLinearMul", [*x, h, f32(1 / _HSIG_STEPS, "sh"), u8(0, "z0"), f32(s_out / F32(m), "so"),
                                     u8(zp_out, "zo")], [q.output[0]], domain=MS_DOMAIN)]
        g.replace([*nodes, q], new)


# ------------------------------------------------------------------------------------------------ rule 2d
_GATE_STEPS = 255  # gate codes: g' = q / 255, q = round(g * 255)
_GATES = ("HardSigmoid", "Sigmoid")  # ops whose values lie in [0, 1]


class GateRequantize:
    """``Mul(DQ(x_u8), g) -> Q_u8`` with g a HardSigmoid / Sigmoid value (a squeeze-excitation gate, per channel)
    ==> ``QLinearMul(x, Q(g, 1/255))`` on the codes: the gate is quantized to 1/255 (|g' - g| <= 1/510, exact at
    0 and 1), so the product moves by at most |x| / 510 <= m * s_in / 510 (m the largest |code - zero point|, 128
    with zero point 128); the rule applies only where that is under half an output step (s_out > m * s_in / 255),
    so every output code is within one of the exact one's.
    Approximate like rule 2c; ORT otherwise dequantizes x, multiplies in float and quantizes again."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "Mul" and len(n.input) == 2 and {
            getattr(g.producer.get(i), "op_type", None) for i in n.input} & set(_GATES)]

    def check(self, g: _Graph, mul: Any) -> tuple[Any, Any, str, Any] | str:
        gate = next(i for i in mul.input if getattr(g.producer.get(i), "op_type", None) in _GATES)
        other = mul.input[1] if mul.input[0] == gate else mul.input[0]
        dq = g.producer.get(other)
        if not _u8_activation(g, dq):
            return "gated value not a per-tensor uint8 activation"
        post: list[tuple[str, Any]] = []
        q = _walk_to_quantizer(g, mul.output[0], post, [])
        if isinstance(q, str):
            return _reason("gated value", q)
        if post:
            return "gated value goes through a clamp or pool before its quantizer"
        if float(g.const(q.input[1])) * 0.5 <= float(g.const(dq.input[1])) * _max_code(g, dq) / (2 * _GATE_STEPS):
            return "gated value's output step finer than its 8-bit gate allows"
        return mul, dq, gate, q

    def rewrite(self, g: _Graph, got: tuple[Any, Any, str, Any]) -> None:
        mul, dq, gate, q = got
        step = g.add_init(np.array(1 / _GATE_STEPS, F32), "sg")
        zero = g.add_init(np.array(0, np.uint8), "z0")
        codes = g.fresh("gate")
        new = [g.node("QuantizeLinear", [gate, step, zero], [codes]),
               g.node("QLinearMul", [*dq.input[:3], codes, step, zero, *q.input[1:3]], [q.output[0]],
                      domain=MS_DOMAIN)]
        g.replace([mul, q], new)
