"""Rules 2e-4 of the QDQ rewrites (qdq_fusion/__init__.py): stems as space-to-depth, transposed convs' biases and
2x2 transposed convs as 1x1 convs, float 1x1 convs as matmuls, float weights folded."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pdlite.nnadapter.qdq_fusion.graph import (
    F32,
    _attr,
    _attrs,
    _Graph,
    _is_zero,
    _per_tensor_u8,
    _u8_activation,
    _value_shapes,
)


# ------------------------------------------------------------------------------------------------ rule 2e
class StemSpaceToDepth:
    """A requantized conv with stride 2 on a few input channels reading the codes of a graph input x (a CNN's
    stem on the colour channels), ``Conv(DQ(Q(x)), DQ(w8), b, stride 2, pads)``, becomes
    ``Conv(DQ(Q(SpaceToDepth(Pad(x, 0), 2))), DQ(w8'), b, stride 1)`` with w8'[o, (2 da + db) C + c, ka, kb] =
    w8[o, c, 2 ka + da, 2 kb + db] (0 where that tap lies outside the kernel): Q(0) is the zero point the conv
    pads with, and each output sums the same integer products over the same input pixels, now as 4C channels on
    a half-size grid; exact. ONNX Runtime's QLinearConv on 3 channels runs far below its speed elsewhere
    (PP-OCRv4 det's stem, 3 -> 16 channels at 320x320: 620-700 us; as SpaceToDepth and 12 channels 290-320 us,
    plus ~130 us for the SpaceToDepth). The space-to-depth is on the float input, which every ONNX Runtime
    version runs (uint8 SpaceToDepth came in 2026). Even sizes need no Pad: the stride-1 conv pads the grid
    itself (with the zero point, the code of the 0 a Pad would add), its taps shifted by the padding's parity
    (`_conv_pads`); MobileNetV2's Pad took 68 us of its 2.8 ms int8 run, det's 110-140 us."""

    MAX_CIN = 4

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "Conv" and list(_attr(n, "strides", [1, 1])) == [2, 2]]

    def check(self, g: _Graph, conv: Any) -> tuple[Any, Any, Any, Any, np.ndarray, list[int], tuple[int, int]] | None:
        x_dq, w_dq = g.producer.get(conv.input[0]), g.producer.get(conv.input[1])
        if not _u8_activation(g, x_dq) or w_dq is None or w_dq.op_type != "DequantizeLinear":
            return None
        q = g.producer.get(x_dq.input[0])
        shape = g.input_shapes.get(q.input[0]) if q is not None and q.op_type == "QuantizeLinear" else None
        w8 = g.const(w_dq.input[0])
        if (shape is None or len(shape) != 4 or not all(isinstance(d, int) and d > 0 for d in shape[2:])
                or w8 is None or w8.dtype != np.int8 or w8.ndim != 4 or w8.shape[1] > self.MAX_CIN
                or min(w8.shape[2:]) < 2 or int(_attr(conv, "group", 1)) != 1
                or list(_attr(conv, "dilations", [1, 1])) != [1, 1]
                or _attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET")):
            return None
        pads = [int(p) for p in _attr(conv, "pads", [0, 0, 0, 0])]
        return conv, q, x_dq, w_dq, w8, pads, (int(shape[2]), int(shape[3]))

    def rewrite(self, g: _Graph, got: tuple[Any, Any, Any, Any, np.ndarray, list[int], tuple[int, int]]) -> None:
        conv, q, x_dq, w_dq, w8, pads, (h, w) = got
        o, c, kh, kw = w8.shape
        oh, ow = (h + pads[0] + pads[2] - kh) // 2 + 1, (w + pads[1] + pads[3] - kw) // 2 + 1
        padded = self._conv_pads(h, w, kh, kw, oh, ow, pads)
        if padded is None:  # odd sizes: the input zero-padded to a whole 2 x (out + k2 - 1) grid first
            offs, conv_pads = (0, 0), [0, 0, 0, 0]
            kh2, kw2 = (kh + 1) // 2, (kw + 1) // 2
            # bottom / right padding to the 2 x (out + k2 - 1) grid; negative crops rows no output reads
            pb, pr = 2 * (oh + kh2 - 1) - h - pads[0], 2 * (ow + kw2 - 1) - w - pads[1]
        else:
            offs, conv_pads, (kh2, kw2) = padded
        w2 = np.zeros((o, 4 * c, kh2, kw2), np.int8)
        for i in range(kh):
            for j in range(kw):
                (ka, da), (kb, db) = divmod(i + offs[0], 2), divmod(j + offs[1], 2)
                w2[:, (2 * da + db) * c:(2 * da + db + 1) * c, ka, kb] = w8[:, :, i, j]
        s2d, codes, x = g.fresh("s2d"), g.fresh("q"), g.fresh("x")
        attrs = _attrs(conv, drop=("strides", "pads", "kernel_shape"))
        new = []
        src = q.input[0]
        if padded is None:
            src = g.fresh("pad")
            new.append(g.node("Pad", [q.input[0], g.add_init(np.array([0, 0, pads[0], pads[1], 0, 0, pb, pr],
                                                                       np.int64), "pads")], [src]))
        new += [g.node("SpaceToDepth", [src], [s2d], blocksize=2),
                g.node("QuantizeLinear", [s2d, q.input[1], q.input[2]], [codes]),
                g.node("DequantizeLinear", [codes, x_dq.input[1], x_dq.input[2]], [x]),
                g.node("DequantizeLinear", [g.add_init(w2, "w8"), *w_dq.input[1:]], [g.fresh("w")],
                       axis=_attr(w_dq, "axis", 1))]
        new.append(g.node("Conv", [x, new[-1].output[0], *conv.input[2:]], list(conv.output), strides=[1, 1],
                          pads=conv_pads, **attrs))
        g.replace([conv], new)

    @staticmethod
    def _conv_pads(h: int, w: int, kh: int, kw: int, oh: int, ow: int,
                   pads: list[int]) -> tuple[tuple[int, int], list[int], tuple[int, int]] | None:
        """For even sizes, the stride-1 conv's own padding on the space-to-depth grid instead of a Pad node
        (QLinearConv pads with the zero point, the code of the 0 a Pad would add): the tap offsets (kernel tap
        i reads cell row ka, phase da with i + off = 2 ka + da), its pads (top, left, bottom, right) and kernel
        size; None for odd sizes or where the grid would give another output size."""
        if h % 2 or w % 2:
            return None
        top, left = (pads[0] + 1) // 2, (pads[1] + 1) // 2
        offs = (2 * top - pads[0], 2 * left - pads[1])
        kh2, kw2 = (kh - 1 + offs[0]) // 2 + 1, (kw - 1 + offs[1]) // 2 + 1
        bottom = max(0, oh - 1 - top + kh2 - 1 - (h // 2 - 1))
        right = max(0, ow - 1 - left + kw2 - 1 - (w // 2 - 1))
        if h // 2 + top + bottom - kh2 + 1 != oh or w // 2 + left + right - kw2 + 1 != ow:
            return None
        return offs, [top, left, bottom, right], (kh2, kw2)


# ------------------------------------------------------------------------------------------------ rule 2f
class ConvTransposeBias:
    """``ConvTranspose(x, W) -> Add(b)`` with b a constant scalar or per-output-channel value (how a Paddle
    conv2d_transpose's bias arrives) becomes ``ConvTranspose(x, W, b)``: ONNX Runtime adds the bias to the same
    sums, one pass over the output fewer. Then a batch norm after it is directly after the ConvTranspose, where
    FoldFloatWeights keeps ORT from folding it (PP-OCRv4 det's head: 24 x 160 x 160 outputs)."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "ConvTranspose" and (len(n.input) < 3 or not n.input[2])]

    def check(self, g: _Graph, ct: Any) -> tuple[Any, Any, np.ndarray] | None:
        readers = g.readers.get(ct.output[0], [])
        if len(readers) != 1 or ct.output[0] in g.outputs or readers[0].op_type != "Add":
            return None
        add = readers[0]
        other = add.input[1] if add.input[0] == ct.output[0] else add.input[0]
        b, w, w_dq = g.const(other), g.const(ct.input[1]), g.producer.get(ct.input[1])
        if w is None and w_dq is not None and w_dq.op_type == "DequantizeLinear":
            w = g.const(w_dq.input[0])  # int8 weights, made float by FoldFloatWeights later
        cout = None if w is None or w.ndim != 4 else w.shape[1] * int(_attr(ct, "group", 1))
        if b is None or cout is None or b.dtype != F32 or not (
                b.size == 1 or (b.size == cout and b.ndim >= 3 and b.shape[-3] == cout)):
            return None  # the bias must broadcast per output channel over a 4-D NCHW output
        return ct, add, np.asarray(np.broadcast_to(b.reshape(-1), (cout,)), order="C")

    def rewrite(self, g: _Graph, got: tuple[Any, Any, np.ndarray]) -> None:
        ct, add, b = got
        attrs = _attrs(ct)
        g.replace([ct, add], [g.node("ConvTranspose", [ct.input[0], ct.input[1], g.add_init(b, "ctb")],
                                     list(add.output), **attrs)])


# ------------------------------------------------------------------------------------------------ rule 2g
class ConvTransposeAsConv:
    """A ConvTranspose whose kernel equals its stride (2 x 2, stride 2, no padding: each output pixel gets one
    tap) with a uint8 input and int8 weights, followed by per-channel affine steps and clamps and then one
    quantizer, ``DQ(x_u8) -> ConvTranspose(DQ(w8 [C, O, 2, 2]), b) -> [BN|Add|Sub|Mul]* -> [Relu|Clip]* -> Q``,
    becomes ``Conv 1x1 (DQ(w8'), b') -> [the same steps, their parameters repeated] -> Q`` writing 4 * O channels
    (channel (2 a + b) O + o holds output o's tap (a, b)), then the codes moved to their pixels by transposes
    and reshapes (NHWC, so each move is of 2 O contiguous bytes). The same products and sums; the quantizer is
    elementwise, so it commutes with the move. Rule 2 then makes a QLinearConv of the 1x1 conv: ONNX Runtime
    has no integer ConvTranspose and runs it in float between a DequantizeLinear and the quantizer (PP-OCRv4
    det's head, 24 -> 24 channels to 160 x 160: ConvTranspose, batch norm and relu 0.85 ms in float)."""

    def __init__(self, opsets: list[Any]) -> None:
        self.opsets = opsets  # the model's, for ONNX shape inference
        self.shapes: dict[str, list[Any]] = {}

    def pattern(self, g: _Graph) -> Iterable[Any]:
        found = [n for n in g.nodes if n.op_type == "ConvTranspose"]
        self.shapes = _value_shapes(g, self.opsets) if found else {}  # inferred once, where there is work
        return found

    def check(self, g: _Graph, ct: Any) -> tuple | None:
        """(the ConvTranspose, w8, its per-output-channel scales, its bias, the steps up to the quantizer, the
        quantizer, the input's shape), or None where the rule does not apply."""
        x_dq, w_dq = g.producer.get(ct.input[0]), g.producer.get(ct.input[1])
        if not _u8_activation(g, x_dq) or w_dq is None or w_dq.op_type != "DequantizeLinear":
            return None
        w8, s_w = g.const(w_dq.input[0]), g.const(w_dq.input[1])
        if (w8 is None or w8.dtype != np.int8 or w8.ndim != 4 or w8.shape[2:] != (2, 2) or s_w is None
                or (len(w_dq.input) > 2 and not _is_zero(g, w_dq.input[2], np.int8))):
            return None
        o = w8.shape[1]
        if not (s_w.size == 1 or (s_w.size == o and int(_attr(w_dq, "axis", 1)) % 4 == 1)):
            return None
        if (int(_attr(ct, "group", 1)) != 1 or list(_attr(ct, "strides", [1, 1])) != [2, 2]
                or any(_attr(ct, "pads", [0, 0, 0, 0])) or list(_attr(ct, "dilations", [1, 1])) != [1, 1]
                or any(_attr(ct, "output_padding", [0, 0])) or _attr(ct, "output_shape") is not None
                or _attr(ct, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET")):
            return None
        b = g.const(ct.input[2]) if len(ct.input) > 2 and ct.input[2] else np.zeros(o, F32)
        shape = self.shapes.get(ct.input[0])
        if b is None or b.size != o or shape is None or len(shape) != 4 or not all(
                isinstance(d, int) and d > 0 for d in shape):
            return None
        steps, cur = [], ct.output[0]
        while len(g.readers.get(cur, [])) == 1 and cur not in g.outputs:
            n = g.readers[cur][0]
            if n.op_type == "QuantizeLinear" and n.input[0] == cur:
                return (ct, w8, np.broadcast_to(s_w.reshape(-1), (o,)), b.reshape(-1), steps, n,
                        [int(d) for d in shape]) if _per_tensor_u8(g, n) else None
            if n.op_type == "BatchNormalization" and n.input[0] == cur and len(n.output) == 1:
                if any(g.const(i) is None or g.const(i).size != o for i in n.input[1:5]):
                    return None
            elif n.op_type in ("Add", "Sub", "Mul") and len(n.input) == 2 and cur in n.input:
                v = g.const(n.input[1] if n.input[0] == cur else n.input[0])
                if v is None or not (v.size == 1 or (v.size == o and v.ndim >= 3 and v.shape[-3] == o)) or (
                        n.op_type == "Sub" and n.input[0] != cur):
                    return None
            elif n.op_type == "Clip" and n.input[0] == cur:
                if any(i and g.const(i) is None for i in n.input[1:]):
                    return None
            elif n.op_type != "Relu":
                return None
            steps.append(n)
            cur = n.output[0]
        return None

    def rewrite(self, g: _Graph, got: tuple) -> None:
        ct, w8, s_w, b, steps, q, (n, _, h, w) = got
        o = w8.shape[1]

        def tile(v: np.ndarray, shape: tuple[int, ...] = (-1,)) -> str:  # a per-channel value for 4 * O channels
            return g.add_init(np.tile(v.reshape(-1), 4).reshape(shape), "t4")

        w1 = w8.transpose(2, 3, 1, 0).reshape(4 * o, -1, 1, 1).copy()
        w_out, cur = g.fresh("w"), g.fresh("conv")
        new = [g.node("DequantizeLinear", [g.add_init(w1, "w8"), tile(s_w.astype(F32)),
                                           g.add_init(np.zeros(4 * o, np.int8), "wzp")], [w_out], axis=0),
               g.node("Conv", [ct.input[0], w_out, tile(b.astype(F32))], [cur], kernel_shape=[1, 1])]
        prev = ct.output[0]
        for step in steps:  # the same steps on 4 * O channels, per-channel parameters repeated
            ins = []
            for i in step.input:
                v = g.const(i) if i and i != prev else None
                if i == prev:
                    ins.append(cur)
                elif v is None or (v.size == 1 and step.op_type != "BatchNormalization"):
                    ins.append(i)  # (a batch norm's parameters have one value per channel, one channel or not)
                else:
                    ins.append(tile(v, (4 * o,) if step.op_type == "BatchNormalization" else (1, 4 * o, 1, 1)))
            prev, cur = step.output[0], g.fresh("t4")
            new.append(g.node(step.op_type, ins, [cur], **_attrs(step)))
        codes, nhwc, split, moved, flat = (g.fresh(k) for k in ("q", "nhwc", "split", "moved", "flat"))
        i64 = lambda v: g.add_init(np.array(v, np.int64), "shape")  # noqa: E731
        new += [g.node("QuantizeLinear", [cur, *q.input[1:]], [codes], **_attrs(q)),
                g.node("Transpose", [codes], [nhwc], perm=[0, 2, 3, 1]),
                g.node("Reshape", [nhwc, i64([n * h, w, 2, 2 * o])], [split]),
                g.node("Transpose", [split], [moved], perm=[0, 2, 1, 3]),
                g.node("Reshape", [moved, i64([n, 2 * h, 2 * w, o])], [flat]),
                g.node("Transpose", [flat], list(q.output), perm=[0, 3, 1, 2])]
        g.replace([ct, *steps, q], new)


# ------------------------------------------------------------------------------------------------- rule 3
class PointwiseToMatMul:
    """A 1x1 stride-1 conv that stays float (its value is not quantized right after it: a residual add reads it)
    with a uint8 activation and int8 per-channel weights, ``Conv(DQ(x_u8), DQ(w8))``, becomes
    ``Transpose(MatMul(DQ(Transpose(x_u8)), DQ(w8^T, axis 1)))`` (NCHW -> NHWC and back): the same sums
    (conv 1x1 = matmul over channels; a transpose commutes with the elementwise DQ), which ORT runs as
    MatMulIntegerToFloat (exact int32 sums, scaled once) instead of a float conv behind dequantizing nodes."""

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "Conv"]

    def check(self, g: _Graph, conv: Any) -> str | None:
        x_dq, w_dq = g.producer.get(conv.input[0]), g.producer.get(conv.input[1])
        if x_dq is None or w_dq is None or x_dq.op_type != "DequantizeLinear" or w_dq.op_type != "DequantizeLinear":
            return "not dequantized inputs"
        zp, w8, s_w = g.const(x_dq.input[2]) if len(x_dq.input) > 2 else None, g.const(w_dq.input[0]), \
            g.const(w_dq.input[1])
        if zp is None or zp.dtype != np.uint8 or zp.ndim != 0 or w8 is None or w8.dtype != np.int8 or s_w is None:
            return "not a uint8 activation and int8 weights"
        if w8.ndim != 4 or w8.shape[2:] != (1, 1) or (s_w.size != 1 and int(_attr(w_dq, "axis", 1)) != 0):
            return "not a 1x1 conv with per-output-channel weights"
        if len(w_dq.input) > 2 and not _is_zero(g, w_dq.input[2], np.int8):
            return "weight zero point not 0"
        if (int(_attr(conv, "group", 1)) != 1 or list(_attr(conv, "strides", [1, 1])) != [1, 1]
                or any(_attr(conv, "pads", [0, 0, 0, 0])) or len(conv.input) > 2 and conv.input[2]):
            return "grouped, strided, padded or with a bias"
        after = g.readers.get(conv.output[0], [])
        if after and all(a.op_type == "QuantizeLinear" for a in after):
            return "its value is quantized (QLinearConv)"
        return None

    def rewrite(self, g: _Graph, conv: Any) -> None:
        x_dq, w_dq = g.producer[conv.input[0]], g.producer[conv.input[1]]
        w8, s_w = g.const(w_dq.input[0]), g.const(w_dq.input[1])
        assert w8 is not None and s_w is not None
        cout = w8.shape[0]
        xt, xd, wd, mm = g.fresh("nhwc"), g.fresh("x"), g.fresh("w"), g.fresh("mm")
        new = [g.node("Transpose", [x_dq.input[0]], [xt], perm=[0, 2, 3, 1]),
               g.node("DequantizeLinear", [xt, x_dq.input[1], x_dq.input[2]], [xd]),
               g.node("DequantizeLinear", [g.add_init(np.asarray(w8[:, :, 0, 0].T, order="C"), "w8t"),
                                           g.add_init(np.broadcast_to(s_w.reshape(-1), (cout,)).astype(F32), "ws"),
                                           g.add_init(np.zeros(cout, np.int8), "wzp")], [wd], axis=1),
               g.node("MatMul", [xd, wd], [mm]),
               g.node("Transpose", [mm], [conv.output[0]], perm=[0, 3, 1, 2])]
        i = next(k for k, n in enumerate(g.nodes) if n is conv)
        g.nodes[i:i + 1] = new
        g.index()


class FoldFloatWeights:
    """DQ(w8, s) of a constant read only by convs / matmuls that stay float (no quantizer right after them, so
    ORT makes no QLinear op of them) becomes the float initializer w8 * s: ORT does not constant-fold
    DequantizeLinear, so it would dequantize (and re-pack) the weights on every run. Same float32 products as
    the node.

    With constant weights ORT would fold a following batch norm into them (ConvBNFusion), a reassociation
    Paddle's simulation does not make: activations on a rounding edge of the next quantizer move
    (ptq_det_qdq: 3.4e-2 * max|ref| instead of 1e-2). So the batch norm's scale is read through an exact
    DequantizeLinear (`_exact_dq`), which ORT neither constant-folds nor sees as a constant, and the batch norm
    stays a separate op computing what it computed before."""

    READERS = ("Conv", "ConvTranspose", "MatMul", "Gemm")

    def pattern(self, g: _Graph) -> Iterable[Any]:
        return [n for n in g.nodes if n.op_type == "DequantizeLinear"]

    def check(self, g: _Graph, dq: Any) -> str | None:
        w, s = g.const(dq.input[0]), g.const(dq.input[1])
        zp = g.const(dq.input[2]) if len(dq.input) > 2 and dq.input[2] else np.zeros((), np.int8)
        if w is None or s is None or zp is None or w.dtype != np.int8 or np.any(zp):
            return "not a constant int8 tensor with zero point 0"
        readers = g.readers.get(dq.output[0], [])
        if not readers or dq.output[0] in g.outputs:
            return "no readers"
        for r in readers:
            if r.op_type not in self.READERS or list(r.input).index(dq.output[0]) != 1:
                return f"read by {r.op_type}"
            a_dq = g.producer.get(r.input[0])
            after = g.readers.get(r.output[0], [])
            if (r.op_type == "MatMul" and a_dq is not None and a_dq.op_type == "DequantizeLinear"
                    and not any(a.op_type == "Add" for a in after)):  # MatMul + Add: ORT makes a float Gemm
                return "ORT makes MatMulIntegerToFloat of its reader"
            if after and all(a.op_type == "QuantizeLinear" for a in after):
                return "its reader may become a QLinear op"
            for a in after:
                if a.op_type == "BatchNormalization" and g.const(a.input[1]) is None:
                    return "a batch norm with a non-constant scale follows its reader"
        return None

    def rewrite(self, g: _Graph, dq: Any) -> None:
        w, s = g.const(dq.input[0]), g.const(dq.input[1])
        assert w is not None and s is not None
        if s.ndim == 1:
            axis = int(_attr(dq, "axis", 1)) % w.ndim
            s = s.reshape([-1 if i == axis else 1 for i in range(w.ndim)])
        name = g.add_init(w.astype(F32) * s.astype(F32), "wf")
        for r in g.readers[dq.output[0]]:
            r.input[1] = name
            for a in g.readers.get(r.output[0], []):
                scale = g.const(a.input[1]) if a.op_type == "BatchNormalization" else None
                if scale is not None and a.input[1] in g.inits and np.all(np.isfinite(scale)):
                    a.input[1] = _exact_dq(g, scale)
        g.index()


def _exact_dq(g: _Graph, v: np.ndarray) -> str:
    """A DequantizeLinear computing float32 `v` exactly: v = m * 2^e with m = frexp's mantissa scaled to a
    24-bit integer (int32 codes) and 2^e a per-element scale, so q * scale has no rounding."""
    v32 = np.asarray(v, F32)
    m, e = np.frexp(v32.astype(np.float64).reshape(-1))
    q = np.round(m * 2.0**24).astype(np.int32)
    scale = np.ldexp(np.ones_like(m), e - 24).astype(F32)
    assert np.array_equal((q.astype(F32) * scale).reshape(v32.shape), v32)
    out = g.fresh("exact")
    g.nodes.append(g.node("DequantizeLinear", [g.add_init(q, "m"), g.add_init(scale, "p2"),
                                               g.add_init(np.zeros(q.size, np.int32), "z")], [out], axis=0))
    if v32.shape != (q.size,):
        shaped = g.fresh("exact")
        g.nodes.append(g.node("Reshape", [out, g.add_init(np.asarray(v32.shape, np.int64), "shape")], [shaped]))
        out = shaped
    return out
