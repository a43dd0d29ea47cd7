"""The graph view and shared steps of the QDQ rewrites for ONNX Runtime (qdq_fusion/__init__.py says what
they do and why): an editable index of the ONNX graph, its readers and constants, the per-step walks from a
conv or add to the quantizers of its result, and the fusion report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

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



def _quant_params_key(g: _Graph, q: Any) -> tuple[str, ...]:
    """(scale bytes, zero point bytes + dtype, axis) of a quantizer with constant parameters; "" where not constant."""
    s = g.const(q.input[1])
    zp = g.const(q.input[2]) if len(q.input) > 2 and q.input[2] else np.zeros((), np.uint8)
    if s is None or zp is None:
        return ("",)
    return (s.tobytes().hex() + str(s.shape), zp.tobytes().hex() + str(zp.dtype) + str(zp.shape),
            str(_attr(q, "axis", 1)))


def _quantize_bound(v: float | None, s: Any, zp: int, none: int) -> int:
    """The uint8 code (zero point `zp`) of float bound `v` under scale `s`, as QuantizeLinear computes it;
    `none` when there is no bound."""
    if v is None or np.isinf(v):
        return none if v is None else (0 if v < 0 else 255)
    return int(np.clip(np.rint(F32(v) / F32(s)) + zp, 0, 255))

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
