"""Rewrites of the converted ONNX graph so that int8 convolutions really run in int8 on ONNX Runtime's CPU
provider: quantize each conv's output right after the conv, as ORT's QDQ selectors need to make a
QLinearConv (DQ(x) -> Conv(DQ(w), DQ(bias int32)) -> Q), while computing the same numbers as Paddle's program.

Paddle's QDQ programs quantize op inputs only: ``DQ(x) -> conv(DQ(w)) -> batch_norm -> [relu|relu6] ->
[max pool] -> Q(s_out) -> DQ -> next conv``. ORT runs that as a float conv behind dequantizing nodes (slower
than fp32). The rewrites, in order, all exact in real numbers but rules 1b, 2c and 2d (and rule 2 on near-dead
channels, within 1e-3 of an output step):

0. ``MergeQuantizers``: quantizers of the same value with the same constant scale and zero point (Paddle
   writes one per quantized reader) become one, so that the value's one quantizer can move (rules 2, 2b).
1. ``ActivationsToUint8``: an activation quantizer ``Q(x, s, zp=0) -> int8`` whose readers are all
   DequantizeLinear becomes ``Q(x, s, zp=128) -> uint8`` and its readers ``DQ(q, s, 128)``. With
   q8 = clip(round(x / s), -128, 127), q_u8 = clip(round(x / s) + 128, 0, 255) = q8 + 128, so
   DQ gives (q_u8 - 128) * s = q8 * s: the same values. (ORT's x86 QDQ fusions take uint8 activations
   with int8 weights; int8 activations are fused on ARM only.)
1b. ``FullRangeQuantizers`` (ONNX Runtime's default, context property ONNXRUNTIME_INT8_GRID=full; not exact):
   the uint8 quantizer ``Q(v, s, 128)`` of a value v that is never negative (produced by Relu, a Clip from 0 or
   more, HardSigmoid, through max pools / nearest resizes) and read only by DequantizeLinear becomes
   ``Q(v, top / 255, 0)``, top = min(v's upper bound, 127 s), its readers likewise: Paddle's range [0, top] on a
   twice finer grid, whose ends are uint8's, so rule 2 leaves no Clip of the codes after a requantized relu /
   relu6 conv. Each value moves by at most s / 2 + top / 510 from Paddle's (half a step of each grid).
2. ``ConvRequantize``: ``DQ(x_u8) -> Conv(DQ(w8, s_w), b) -> [BatchNormalization | Add(c) | Sub(c) | Mul(m)]*
   -> [HardSigmoid] -> [Relu | Clip(lo, hi) | Max(lo) | Min(hi) | MaxPool | nearest Resize]* -> Q(s_out)`` becomes
   ``Conv(DQ(x_u8), DQ(w8', s_w'), DQ(b32, s_x * s_w')) -> Q(s_out) -> [Clip | MaxPool | Resize]* (uint8)``:
   - the affine steps (constant scalars or per-channel values; batch norm y = k * conv + (beta - k * mean),
     k = gamma / sqrt(var + eps); PP-LCNet's learnable affine blocks m * x + c) compose into one y = k * conv + c
     per output channel, folded into the conv: s_w' = |k| * s_w, w8' = sign(k) * w8 (w8 never holds -128
     there), bias c (starting from the conv's b, each step mapping k, c to k * m, c * m or adding its constant);
     a HardSigmoid, clip(alpha * v + beta, 0, 1), is a last affine step (alpha, beta) and a Clip(0, 1) (a
     squeeze-excitation gate's conv);
   - the bias becomes int32 b32 = round(c / (s_x * s_w')) read through DQ with scale s_x * s_w' (what
     QLinearConv needs); it moves by at most half of s_x * s_w', one product step of the accumulator;
   - Q is monotone non-decreasing, so it commutes with clamps and max: Q(clip(v, lo, hi)) =
     clip(Q(v), Q(lo), Q(hi)) (Relu: lo = 0, Q(0) = zero point) and Q(maxpool(v)) = maxpool(Q(v)); it is
     elementwise, so it commutes with ops that only pick elements (nearest Resize). The activation, pooling
     and upsampling are applied to the quantized tensor instead; an upsampling by 2^k as k Resizes by 2
     between reshapes that merge batch and channels (`_resize_by_twos`: ORT then keeps it in NCHW, 10x faster);
   - a channel whose bias int32 cannot hold at s_x * s_w' (pruned weights: scales of 1e-9 and below) drops its
     weights where they can move the output by at most 1e-3 of an output step (NEGLIGIBLE) and takes a weight
     scale at which its bias fits: the channel is its bias;
   It applies only where the conv's value reaches nothing but quantizers of one scale and zero point, each
   directly or through the clamps / pools / resizes above (a feature pyramid's sum read by its own quantizer and,
   upsampled, by the next level's: one quantizer then serves both); a float reader, such as a residual add,
   keeps the float conv; `check` names the reason otherwise.
2b. ``AddRequantize``: ``Add(DQ(a_u8), DQ(b_u8)) -> [Relu | Clip | Max | Min | MaxPool | Resize]* -> Q(s_out)``
   (a residual add quantized on both inputs: `pdlite quantize`'s default, or Paddle's PTQ with elementwise_add
   in quantizable_op_type) becomes ``Add -> Q(s_out) -> [Clip | MaxPool | Resize]*``, which ORT runs as QLinearAdd;
   the same commuting argument as rule 2's tail, and the same fan-out to quantizers of one scale. Together with
   rule 2 a ResNet / MobileNetV2 block stays uint8 from conv to conv.
2c. ``HardSwishRequantize``: ``DQ(x_u8) -> HardSwish -> [Mul(m)] -> [Add(c)] -> Q(s_out)`` becomes
   Q(m * x * h) as a QLinearMul (ONNX Runtime's contrib op) on the codes, with the offset c in the output zero
   point and h the hard sigmoid as codes: x's own codes clipped to those of -3 and 3 where that is close enough,
   else x's codes requantized to an 8-bit hard sigmoid (one more QLinearMul and a Clip). Not exact: h is on a
   grid and c rounded to a whole step, each output code within one of the exact one's (the class doc bounds
   it); it applies only where that bound holds. ORT has no quantized HardSwish and otherwise runs it in float
   between a DequantizeLinear and a QuantizeLinear.
2d. ``GateRequantize``: ``Mul(DQ(x_u8), HardSigmoid | Sigmoid) -> Q(s_out)`` (a squeeze-excitation gate) becomes
   a QLinearMul of x's codes and the gate quantized to 1/255: not exact either, each output code within one.
2e. ``StemSpaceToDepth``: a requantized stride-2 conv on at most 4 channels of a graph input's codes (a CNN's
   stem) reads SpaceToDepth(Pad(x)) codes instead, as a stride-1 conv on 4x the channels with the kernel's taps
   rearranged (zeros where a tap falls outside it): the same integer sums; ORT's QLinearConv on 3 channels is
   slow.
2f. ``ConvTransposeBias``: ``ConvTranspose -> Add(constant per output channel)`` becomes the ConvTranspose's
   bias (a Paddle conv2d_transpose's bias add), so a batch norm after it sits where rule 4 protects it.
2g. ``ConvTransposeAsConv`` (2f and 2g run before rule 2): a 2x2 stride-2 ConvTranspose quantized after
   its per-channel steps becomes a 1x1 conv on 4x the channels (rule 2 then makes it a QLinearConv) and a move of
   the codes to their pixels (transposes and reshapes): the same products and sums.
3. ``PointwiseToMatMul``: a 1x1 conv left float (its value feeds a residual add) becomes a MatMul over
   channels between transposes, which ORT runs as MatMulIntegerToFloat (exact int32 sums, scaled once).
4. ``FoldFloatWeights``: the int8 weights of convs / matmuls left float become float initializers w8 * s
   (ORT never constant-folds DequantizeLinear), with the following batch norm kept a separate op.

What stays different from Paddle's fp32 simulation is what was already there (ties to even, one float
rounding of the scales) plus the bias rounding and the float order of the requantization and of the integer
matmuls, rule 1b's finer grid (ONNXRUNTIME_INT8_GRID=paddle leaves it out), and rules 2c / 2d's 8-bit hard
sigmoid and gate: an activation on a rounding edge may move one step
(after rules 2c and 2d, any hard_swish or gated output), covered by the device tests' tolerance
(tests/quant/test_quant_devices.py). The rewrites are for ONNX Runtime only (convert.DEVICE_REWRITES):
OpenVINO already runs Paddle's layout in int8 and was slower with them.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pdlite.errors import ConfigError
from pdlite.nnadapter.qdq_fusion.graph import _U8_ZP, INT8_GRID, FusionReport, _Graph
from pdlite.nnadapter.qdq_fusion.requantize import (
    MS_DOMAIN,
    ActivationsToUint8,
    AddRequantize,
    ConvRequantize,
    FullRangeQuantizers,
    GateRequantize,
    HardSwishRequantize,
    MergeQuantizers,
)
from pdlite.nnadapter.qdq_fusion.rewrites import (
    ConvTransposeAsConv,
    ConvTransposeBias,
    FoldFloatWeights,
    PointwiseToMatMul,
    StemSpaceToDepth,
)


def _apply(rule: Any, g: _Graph, report: FusionReport) -> int:
    """Run a rule with refusal reasons (check: its match or a reason; rewrite: None, or a reason when it could
    not after all) over its pattern; the refusals go to `report`, the count of rewrites is returned."""
    done = 0
    for node in rule.pattern(g):
        got = rule.check(g, node)
        why = got if isinstance(got, str) else rule.rewrite(g, got)
        if why is None:
            done += 1
        else:
            report.refuse(why)
    return done


def _apply_where(rule: Any, g: _Graph) -> int:
    """Run a rule without refusal reasons (check: what its rewrite needs, or None where it does not apply) over
    its pattern; the count of rewrites."""
    done = 0
    for node in rule.pattern(g):
        got = rule.check(g, node)
        if got is not None:
            rule.rewrite(g, got)
            done += 1
    return done




def fuse_for_onnxruntime(model: Any, properties: Mapping[str, str] | None = None) -> FusionReport:
    """`fuse_qdq` as the onnxruntime device applies it (convert.DEVICE_REWRITES): with rule 1b unless the context
    property ONNXRUNTIME_INT8_GRID is `paddle`."""
    grid = (properties or {}).get(INT8_GRID, "full").lower()
    if grid not in ("full", "paddle"):
        raise ConfigError(f"{INT8_GRID}={grid!r}: expected 'full' (the default) or 'paddle'")
    return fuse_qdq(model, full_range=grid == "full")


def fuse_qdq(model: Any, log: Callable[[str], None] | None = None, full_range: bool = True) -> FusionReport:
    """Apply the rewrites to `model` (an onnx ModelProto, changed in place); returns what changed. `full_range`
    False keeps Paddle's grid for never-negative values too (no rule 1b)."""
    g = _Graph(model.graph)
    report = FusionReport()
    if not any(n.op_type == "QuantizeLinear" for n in g.nodes):
        return report
    g.commit()  # drop the dead Casts of quantizer outputs first: they would read the uint8 codes
    merge = MergeQuantizers()
    for same in merge.pattern(g):
        merge.rewrite(g, same)
        report.merged += len(same) - 1
    to_u8 = ActivationsToUint8()
    zp = None
    for unit in to_u8.pattern(g):
        if to_u8.check(g, unit) is None:
            zp = zp or g.add_init(np.array(_U8_ZP, np.uint8), "zp_u8")
            to_u8.rewrite(g, unit, zp)
            report.uint8 += len(unit[0])
    g.index()
    if full_range:
        report.full_range = _apply_where(FullRangeQuantizers(), g)
        g.index()
    report.transpose_biases = _apply_where(ConvTransposeBias(), g)
    report.transposed_convs = _apply_where(ConvTransposeAsConv(list(model.opset_import)), g)
    report.convs = _apply(ConvRequantize(), g, report)
    report.adds = _apply(AddRequantize(), g, report)
    report.hard_swish = _apply(HardSwishRequantize(), g, report)
    report.gates = _apply(GateRequantize(), g, report)
    report.stems = _apply_where(StemSpaceToDepth(), g)
    pointwise = PointwiseToMatMul()
    for conv in pointwise.pattern(g):
        if pointwise.check(g, conv) is None:
            pointwise.rewrite(g, conv)
            report.matmuls += 1
    fold = FoldFloatWeights()
    for dq in fold.pattern(g):
        if fold.check(g, dq) is None:
            fold.rewrite(g, dq)
            report.float_weights += 1
    g.commit()
    if (report.hard_swish or report.gates) and not any(o.domain == MS_DOMAIN for o in model.opset_import):
        from onnx import helper

        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    if log is not None:
        log(f"qdq_fusion: {report.merged} duplicate quantizers merged, {report.uint8} activation quantizers to "
            f"uint8, {report.convs} convs, {report.adds} adds, {report.hard_swish} hard_swish and "
            f"{report.gates} gates requantized, "
            f"{report.full_range} quantizers of never-negative values to the full uint8 range, "
            f"{report.matmuls} 1x1 convs as matmuls, {report.float_weights} float weights, {report.stems} stems as "
            f"space-to-depth, {report.transpose_biases} transposed-conv biases, {report.transposed_convs} transposed convs "
            f"as 1x1 convs; left alone: {report.refused}")
    return report
