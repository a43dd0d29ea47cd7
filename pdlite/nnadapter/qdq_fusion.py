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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.errors import ConfigError

F32 = np.float32
_U8_ZP = 128
INT8_GRID = "ONNXRUNTIME_INT8_GRID"  # context property: full (default: rule 1b) or paddle (Paddle's grid)
NEGLIGIBLE = 1e-3  # of an output quantization step: what a near-dead channel's dropped weights may move


class _Graph:
    """A mutable view of an ONNX GraphProto: nodes in order, producers, readers, constants."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.graph = graph
        self.nh = numpy_helper
        self.nodes: list[Any] = list(graph.node)
        self.inits: dict[str, Any] = {t.name: t for t in graph.initializer}
        self.outputs = {o.name for o in graph.output}
        self.input_shapes = {i.name: [d.dim_value if d.HasField("dim_value") else d.dim_param
                                      for d in i.type.tensor_type.shape.dim] for i in graph.input}
        self._values: dict[str, np.ndarray] = {}  # initializers decoded once (they are never changed)
        self._n = 0
        self.index()

    def index(self) -> None:
        self.producer: dict[str, Any] = {}
        self.readers: dict[str, list[Any]] = {}
        for n in self.nodes:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                if i:
                    self.readers.setdefault(i, []).append(n)

    def fresh(self, hint: str) -> str:
        names = set(self.inits) | set(self.producer)
        while True:
            self._n += 1
            name = f"_qdq.{hint}.{self._n}"
            if name not in names:
                return name

    def const(self, name: str) -> np.ndarray | None:
        """The value of `name` when it is an initializer, or a Reshape / Identity of constants."""
        if name in self.inits:
            if name not in self._values:
                self._values[name] = self.nh.to_array(self.inits[name])
            return self._values[name]
        n = self.producer.get(name)
        if n is None:
            return None
        if n.op_type == "Identity":
            return self.const(n.input[0])
        if n.op_type == "Reshape":
            v, s = self.const(n.input[0]), self.const(n.input[1])
            if v is not None and s is not None and not np.any(s == 0):
                return v.reshape([int(d) for d in s])
        return None

    def add_init(self, value: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.inits[name] = self.nh.from_array(np.asarray(value, order="C"), name)
        return name

    def node(self, op_type: str, inputs: list[str], outputs: list[str], domain: str | None = None,
             **attrs: Any) -> Any:
        from onnx import helper

        return helper.make_node(op_type, inputs, outputs, name=self.fresh(f"n.{op_type}"), domain=domain,
                                **{k: v for k, v in attrs.items() if v is not None})

    def replace(self, old: list[Any], new: list[Any]) -> None:
        """Put `new` where the first of `old` was, drop `old`, re-index."""
        gone = {id(n) for n in old}
        at = next(i for i, n in enumerate(self.nodes) if id(n) in gone)
        self.nodes = [n for n in self.nodes[:at] if id(n) not in gone] + new + [
            n for n in self.nodes[at:] if id(n) not in gone]
        self.index()

    def commit(self) -> None:
        """Drop dead nodes and unused initializers, sort the nodes topologically, write the graph back."""
        live = set(self.outputs)
        kept: list[Any] = []
        for n in reversed(_topo(self.nodes, set(self.inits) | {i.name for i in self.graph.input})):
            if any(o in live for o in n.output):
                kept.append(n)
                live.update(i for i in n.input if i)
        kept.reverse()
        del self.graph.node[:]
        self.graph.node.extend(kept)
        del self.graph.initializer[:]
        self.graph.initializer.extend(t for k, t in self.inits.items() if k in live)
        self.nodes = kept
        self.index()


def _topo(nodes: list[Any], ready: set[str]) -> list[Any]:
    """`nodes` in an order where each node follows its inputs' producers (stable otherwise)."""
    have = set(ready)
    have.add("")
    out: list[Any] = []
    pending = list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(i in have for i in n.input):
                out.append(n)
                have.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):  # inputs produced nowhere (graph inputs not listed): keep order
            out.extend(rest)
            break
        pending = rest
    return out


def _attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _attrs(node: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """All of `node`'s attributes but those named in `drop` (name -> value), to copy onto the node replacing it."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in drop}


def _is_zero(g: _Graph, name: str | None, dtype: Any) -> bool:
    v = g.const(name) if name else None
    return v is not None and v.dtype == dtype and not np.any(v)


def _per_tensor_u8(g: _Graph, n: Any) -> bool:
    """Whether quantizer / dequantizer `n` has a constant per-tensor scale and uint8 zero point."""
    if len(n.input) < 3:
        return False
    zp, s = g.const(n.input[2]), g.const(n.input[1])
    return zp is not None and zp.dtype == np.uint8 and zp.ndim == 0 and s is not None and s.ndim == 0


def _max_code(g: _Graph, dq: Any) -> int:
    """The largest |code - zero point| of per-tensor uint8 (de)quantizer `dq`'s codes."""
    zp = int(g.const(dq.input[2]))
    return max(zp, 255 - zp)


def _u8_activation(g: _Graph, dq: Any) -> bool:
    """Whether `dq` is a DequantizeLinear of per-tensor uint8 codes with constant scale and zero point."""
    return dq is not None and dq.op_type == "DequantizeLinear" and _per_tensor_u8(g, dq)


@dataclass
class FusionReport:
    """What `fuse_qdq` rewrote, and why it left convs and adds alone (reason -> count)."""

    uint8: int = 0
    merged: int = 0
    convs: int = 0
    adds: int = 0
    hard_swish: int = 0
    gates: int = 0
    matmuls: int = 0
    float_weights: int = 0
    stems: int = 0
    full_range: int = 0
    transpose_biases: int = 0
    transposed_convs: int = 0
    refused: dict[str, int] = field(default_factory=dict)

    @property
    def modified(self) -> bool:
        return bool(self.uint8 or self.merged or self.full_range or self.convs or self.adds or self.hard_swish
                    or self.gates or self.matmuls or self.float_weights or self.stems or self.transpose_biases
                    or self.transposed_convs)

    def refuse(self, why: str) -> None:
        self.refused[why] = self.refused.get(why, 0) + 1


def _post_step(g: _Graph, n: Any) -> tuple[str, Any] | str:
    """Node `n` (reading the value on its first input) as a step that commutes with a later quantizer:
    ("clip", (lo, hi)) for Relu / Clip / Max / Min with constant bounds, ("pick", n) for MaxPool and nearest
    Resize (they pick input elements, which Q maps one by one); else a reason."""
    if n.op_type == "Relu":
        return ("clip", (0.0, None))
    if n.op_type == "Clip":
        lo = g.const(n.input[1]) if len(n.input) > 1 and n.input[1] else None
        hi = g.const(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if (len(n.input) > 1 and n.input[1] and lo is None) or (len(n.input) > 2 and n.input[2] and hi is None):
            return "Clip bounds not constant"
        return ("clip", (None if lo is None else float(lo), None if hi is None else float(hi)))
    if n.op_type in ("Max", "Min") and len(n.input) == 2:  # round_type 1 clips to [-s, s] first
        v = g.const(n.input[1])
        if v is None or v.size != 1:
            return f"{n.op_type} with a non-constant or non-scalar bound"
        return ("clip", (float(v.reshape(())), None) if n.op_type == "Max" else (None, float(v.reshape(()))))
    if n.op_type == "MaxPool" and len(n.output) == 1:
        return ("pick", n)
    if n.op_type == "Resize" and _attr(n, "mode", b"nearest") in (b"nearest", "nearest"):
        return ("pick", n)
    return f"goes through {n.op_type} before its quantizer"


def _code_steps(post: list[tuple[str, Any]], s_q: Any, zp: int) -> list[tuple[str, Any]]:
    """`post` as steps on uint8 codes of scale `s_q` and zero point `zp`: clamps as code bounds (consecutive
    overlapping clamps merged; none where the bounds are 0 and 255: uint8 saturation), max pools and resizes as
    they are."""
    steps: list[tuple[str, Any]] = []
    for kind, arg in post:
        if kind == "clip":
            arg = (_quantize_bound(arg[0], s_q, zp, 0), _quantize_bound(arg[1], s_q, zp, 255))
            if steps and steps[-1][0] == "clip" and max(arg[0], steps[-1][1][0]) <= min(arg[1], steps[-1][1][1]):
                arg = (max(arg[0], steps[-1][1][0]), min(arg[1], steps[-1][1][1]))
                steps.pop()
            if arg == (0, 255):
                continue
        steps.append((kind, arg))
    return steps


def _emit_steps(g: _Graph, cur: str, steps: list[tuple[str, Any]], final: str) -> list[Any]:
    """Nodes applying code `steps` to `cur`, the last one writing `final`."""
    new = []
    for i, (kind, arg) in enumerate(steps):
        out = final if i == len(steps) - 1 else g.fresh("q")
        if kind == "clip":
            new.append(g.node("Clip", [cur, g.add_init(np.array(arg[0], np.uint8), "lo"),
                                       g.add_init(np.array(arg[1], np.uint8), "hi")], [out]))
        else:
            by_twos = _resize_by_twos(g, cur, arg, out) if arg.op_type == "Resize" else None
            new += by_twos or [g.node(arg.op_type, [cur, *arg.input[1:]], [out], **_attrs(arg))]
        cur = out
    return new


def _resize_by_twos(g: _Graph, cur: str, node: Any, out: str) -> list[Any] | None:
    """Nearest Resize `node` of codes `cur` by 2^k on H and W (asymmetric coordinates, floor: whole pixels
    repeated) as ``Reshape(N * C, 1, H, W) -> k x Resize(x2) -> Reshape(N, C, 2^k H, 2^k W)`` writing `out`; None
    for other resizes. Exact: the same elements picked. ONNX Runtime's layout pass cannot move a Resize between
    reshapes that merge batch and channels into its NHWC region, and its uint8 upsampling by 2 in NCHW runs an
    order of magnitude faster than its NHWC one (PP-OCRv4 det, 96 x 40 x 40 -> 80 x 80: 45 us against 530),
    by 4 and 8 fastest as repeated 2s; the transposes around it cost less than that."""
    if (_attr(node, "mode", b"nearest") not in (b"nearest", "nearest")
            or _attr(node, "coordinate_transformation_mode", b"half_pixel") not in (b"asymmetric", "asymmetric")
            or _attr(node, "nearest_mode", b"round_prefer_floor") not in (b"floor", "floor")
            or len(node.input) < 3 or not node.input[2] or (len(node.input) > 3 and node.input[3])):
        return None
    sc = g.const(node.input[2])
    if sc is None or sc.shape != (4,) or sc[0] != 1 or sc[1] != 1 or sc[2] != sc[3]:
        return None
    f = int(sc[2])
    twos = f.bit_length() - 1
    if f != sc[2] or f < 2 or f != 1 << twos:
        return None
    shape, target, flat = g.fresh("shape"), g.fresh("shape"), g.fresh("flat")
    attrs = _attrs(node)
    new = [g.node("Shape", [cur], [shape]),
           g.node("Mul", [shape, g.add_init(np.array([1, 1, f, f], np.int64), "factor")], [target]),
           g.node("Reshape", [cur, g.add_init(np.array([-1, 1, 0, 0], np.int64), "nc1hw")], [flat])]
    two = g.add_init(np.array([1, 1, 2, 2], F32), "x2")
    for _ in range(twos):
        up = g.fresh("up")
        new.append(g.node("Resize", [flat, "", two], [up], **attrs))
        flat = up
    new.append(g.node("Reshape", [flat, target], [out]))
    return new


def _quantized_tail(g: _Graph, value: str, branches: list[tuple[Any, list[tuple[str, Any]]]],
                    post: list[tuple[str, Any]]) -> list[Any]:
    """Nodes computing each branch's ``q(own(post(value)))`` as ``own'(post'(Q(value)))``: one quantizer (the
    branches' quantizers share its scale and zero point) right after `value`, then the shared steps `post` and
    each branch's own steps on the codes (clamps as code bounds, max pools and resizes as they are), each
    branch's last step writing its quantizer's output."""
    q0 = branches[0][0]
    s_q, zp = F32(g.const(q0.input[1])), int(g.const(q0.input[2]))
    shared = _code_steps(post, s_q, zp)
    own = [(q, _code_steps(p, s_q, zp)) for q, p in branches]
    plain = [q for q, steps in own if not steps]  # at most one: rule 0 merged equal quantizers of one value
    end = plain[0].output[0] if plain else g.fresh("q")
    codes = g.fresh("q") if shared else end
    new = [g.node("QuantizeLinear", [value, q0.input[1], q0.input[2]], [codes]), *_emit_steps(g, codes, shared, end)]
    for q, steps in own:
        new += _emit_steps(g, end, steps, q.output[0])
    return new


def _reason(what: str, why: str) -> str:
    """A `_walk_to_quantizer` reason about the value of `what` ("conv", "add") as a sentence about it."""
    if why.startswith("result"):
        return f"{what} {why}"
    if why.startswith("goes"):
        return f"{what} result {why}"
    return f"{what}: {why}"


def _commuting_steps(g: _Graph, cur: str, post: list[tuple[str, Any]], removed: list[Any]) -> str:
    """From value `cur` along single readers that commute with a later quantizer (their steps appended to `post`,
    their nodes to `removed`); the value where that stops."""
    while len(g.readers.get(cur, [])) == 1 and cur not in g.outputs:
        n = g.readers[cur][0]
        step = _post_step(g, n) if n.op_type != "QuantizeLinear" and n.input[0] == cur else "a quantizer or not input 0"
        if isinstance(step, str):
            break
        post.append(step)
        removed.append(n)
        cur = n.output[0]
    return cur


def _fan_out_reason(readers: list[Any]) -> str:
    return "result read " + ("by float ops" if any(r.op_type != "QuantizeLinear" for r in readers)
                             else "by several quantizers")


def _walk_to_quantizer(g: _Graph, cur: str, post: list[tuple[str, Any]], removed: list[Any]) -> Any | str:
    """From value `cur` through single-reader commuting steps (appended to `post`, their nodes to `removed`)
    to the one uint8 per-tensor QuantizeLinear reading the result; the quantizer, or a reason."""
    cur = _commuting_steps(g, cur, post, removed)
    readers = g.readers.get(cur, [])
    if cur in g.outputs or not readers:
        return "result is a graph output"
    if len(readers) != 1:
        return _fan_out_reason(readers)
    n = readers[0]
    if n.op_type == "QuantizeLinear":
        return n if _per_tensor_u8(g, n) else "its quantizer is not per-tensor uint8"
    if n.input[0] != cur:
        return f"result is input #{list(n.input).index(cur)} of {n.op_type}"
    return _post_step(g, n)  # the reason the steps stopped there


def _walk_to_quantizers(g: _Graph, cur: str, post: list[tuple[str, Any]],
                        removed: list[Any]) -> list[tuple[Any, list[tuple[str, Any]]]] | str:
    """`_walk_to_quantizer`, and where the value fans out (after the single-reader steps appended to `post`):
    every reader a uint8 per-tensor quantizer, or commuting steps on a single path to one (a feature pyramid's
    sum read by the next level's upsample and by its own quantizer), all with the same scale and zero point,
    so that one quantizer of the value serves them all. The branches as (quantizer, its own steps), their
    nodes appended to `removed`; or a reason."""
    cur = _commuting_steps(g, cur, post, removed)
    readers = g.readers.get(cur, [])
    if len(readers) < 2 or cur in g.outputs:
        q = _walk_to_quantizer(g, cur, post, removed)
        return q if isinstance(q, str) else [(q, [])]
    branches: list[tuple[Any, list[tuple[str, Any]]]] = []
    nodes: list[Any] = []
    for n in readers:
        own: list[tuple[str, Any]] = []
        step = _post_step(g, n) if n.op_type != "QuantizeLinear" and n.input[0] == cur else None
        if n.op_type == "QuantizeLinear":
            q: Any = n if _per_tensor_u8(g, n) else "not per-tensor uint8"
        elif step is not None and not isinstance(step, str):
            own.append(step)
            nodes.append(n)
            q = _walk_to_quantizer(g, n.output[0], own, nodes)
        else:
            q = "float"
        if isinstance(q, str):
            return _fan_out_reason(readers)
        branches.append((q, own))
    if len({_quant_params_key(g, q) for q, _ in branches}) != 1:
        return "result read by several quantizers"
    removed.extend(nodes)
    return branches


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


def _quant_params_key(g: _Graph, q: Any) -> tuple[str, ...]:
    """(scale bytes, zero point bytes + dtype, axis) of a quantizer with constant parameters; "" where not constant."""
    s = g.const(q.input[1])
    zp = g.const(q.input[2]) if len(q.input) > 2 and q.input[2] else np.zeros((), np.uint8)
    if s is None or zp is None:
        return ("",)
    return (s.tobytes().hex() + str(s.shape), zp.tobytes().hex() + str(zp.dtype) + str(zp.shape),
            str(_attr(q, "axis", 1)))


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


def _quantize_bound(v: float | None, s: Any, zp: int, none: int) -> int:
    """The uint8 code (zero point `zp`) of float bound `v` under scale `s`, as QuantizeLinear computes it;
    `none` when there is no bound."""
    if v is None or np.isinf(v):
        return none if v is None else (0 if v < 0 else 255)
    return int(np.clip(np.rint(F32(v) / F32(s)) + zp, 0, 255))


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


def _value_shapes(g: _Graph, opsets: list[Any]) -> dict[str, list[Any]]:
    """Every value's shape as ONNX shape inference gives it (dims as ints, or names where unknown); empty where
    the inference fails."""
    from onnx import helper, shape_inference

    graph = helper.make_graph(g.nodes, "shapes", list(g.graph.input), list(g.graph.output), list(g.inits.values()))
    try:
        inferred = shape_inference.infer_shapes(helper.make_model(graph, opset_imports=opsets)).graph
    except Exception:  # a graph ONNX's inference cannot follow: no shapes, so rule 2g leaves it alone
        return {}
    return {v.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim]
            for v in [*inferred.value_info, *inferred.input] if v.type.tensor_type.HasField("shape")}


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
