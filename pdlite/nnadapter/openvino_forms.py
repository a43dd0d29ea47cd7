"""Graph forms for OpenVINO's models with dynamic dims (convert.DEVICE_REWRITES["intel_openvino"]).

OpenVINO's CPU plugin prepares some nodes again for every new input shape: a oneDNN primitive (JIT code) per shape
for each MatMul of two computed inputs (attention's q.k^T and p.v: brgemm) and for each FullyConnected that has an
activation fused into it (an inner product with the activation as a post-op). A FullyConnected with nothing fused
(constant weights, optional bias) runs on its MLAS executor instead, whose packed weights serve every number of rows.
Measured with oneDNN's verbose log (ONEDNN_VERBOSE=profile_create; OpenVINO 2026.4, 2 threads, a fresh process,
tests/fixtures/dynamic/ernie_like): of 12 new sequence lengths, 12 inner-product and 24 matmul primitives were
created, ~0.9 ms and ~1 ms each, against ~0.25 ms for a whole call at a length seen before. (oneDNN keeps its
primitives in a cache of the process, so a second compiled model of the same graph, as `nnadapter_shapes.py`'s
fresh predictors are, finds them there.)

``separate_fc_activations``: in a model with dynamic dims, the activation that reads a fully connected layer
(x = MatMul(a, constant W) [+ constant bias]) is written in a form OpenVINO does not fuse into the FullyConnected,
which then stays on MLAS: a new input shape costs no primitive for it (the activation runs as eltwise kernels, which
do not depend on the shape). An exact GELU (pdlite's gelu: x/2 * (1 + erf(x/sqrt 2))) becomes x/2 + x/2 *
erf(x/sqrt 2) (the same function; the two differ by float32 rounding, ~1e-7 of the values; OpenVINO's GeluFusion
does not recognise it), a Relu becomes Max(x, 0) (the same values). ERNIE-like encoder, 12 new lengths then the same
again: see BENCHMARKS.md (helper 37B); a FullyConnected + Relu on 12 new lengths, fresh process, 1 thread: 4.0 ms
fused (the same again 0.89 ms) against 1.15 ms as MLAS + Max (again 0.65 ms). Models with static dims (the
per-shape models of a hot signature) keep the fused forms.

Not done, measured: OpenVINO's ScaledDotProductAttention (opset 13) is decomposed back into MatMul / Softmax /
MatMul by the CPU plugin for a model without state (its SDPA node is kept for LLM-style stateful models only), so
emitting it changes nothing; bounded dims ([1, 1..N]) changed nothing; the attention MatMuls on oneDNN's gemm-based
matmul (rt_info PrimitivesPriority "cpu:gemm", honoured after an IR round trip) made their primitives ~60x cheaper
to create but the same lengths again 1.11x the time (BENCHMARKS.md, helper 37B).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

_HALF_SQRT2 = 1.0 / math.sqrt(2.0)
_FLOAT = 1  # onnx.TensorProto.FLOAT


def has_dynamic_dims(model: Any) -> bool:
    """Whether any graph input (initializers excepted) of an ONNX model has a dim that is not a fixed size."""
    inits = {t.name for t in model.graph.initializer}
    return any(not d.HasField("dim_value") for i in model.graph.input if i.name not in inits
               for d in i.type.tensor_type.shape.dim)


class _Index:
    """Producers, consumers and scalar initializer values of an ONNX graph."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.graph = graph
        self.producer = {o: n for n in graph.node for o in n.output}
        self.consumers: dict[str, list[Any]] = {}
        for n in graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in graph.output}
        self.inits = {t.name: t for t in graph.initializer}
        self._np = numpy_helper

    def scalar(self, name: str) -> float | None:
        """The value of a one-element float initializer, else None."""
        t = self.inits.get(name)
        if t is None:
            return None
        a = self._np.to_array(t)
        return float(a.reshape(())) if a.size == 1 and a.dtype.kind == "f" else None

    def only_consumer(self, name: str) -> Any | None:
        """The one node that reads `name` (not a graph output), else None."""
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and name not in self.outputs else None

    def split_scalar(self, node: Any, value: float) -> str | None:
        """For a binary node with a scalar initializer `value` on one side: the other input."""
        if len(node.input) != 2:
            return None
        for k in (0, 1):
            v = self.scalar(node.input[k])
            if v is not None and np.isclose(v, value, rtol=1e-6, atol=0.0):
                return node.input[1 - k]
        return None

    def fc_weights(self, name: str) -> Any | None:
        """The weights initializer when `name` is MatMul(a, constant) or that plus a constant (a fully connected
        layer, bias optional), else None."""
        node = self.producer.get(name)
        if node is not None and node.op_type == "Add":
            other = [i for i in node.input if i not in self.inits]
            if len(other) != 1 or len(node.input) != 2:
                return None
            node = self.producer.get(other[0])
        return self.inits.get(node.input[1]) if node is not None and node.op_type == "MatMul" else None

    def is_fc(self, name: str) -> bool:
        return self.fc_weights(name) is not None


def _match_gelu(ix: _Index, erf: Any) -> tuple[str, Any, Any, Any] | None:
    """(x, add, half, final) of pdlite's exact GELU around this Erf node, with x a fully connected layer's output:
    final = Mul(half = Mul(x, 0.5), add = Add(Erf(Mul(x, 1/sqrt 2)), 1)); None if it is not that."""
    scaled = ix.producer.get(erf.input[0])
    if scaled is None or scaled.op_type != "Mul" or ix.only_consumer(scaled.output[0]) is not erf:
        return None
    x = ix.split_scalar(scaled, _HALF_SQRT2)
    add = ix.only_consumer(erf.output[0])
    if x is None or add is None or add.op_type != "Add" or ix.split_scalar(add, 1.0) != erf.output[0]:
        return None
    final = ix.only_consumer(add.output[0])
    if final is None or final.op_type != "Mul" or len(final.input) != 2:
        return None
    other = final.input[1] if final.input[0] == add.output[0] else final.input[0]
    half = ix.producer.get(other)
    if half is None or half.op_type != "Mul" or ix.split_scalar(half, 0.5) != x or not ix.is_fc(x):
        return None
    return x, add, half, final


def separate_fc_activations(model: Any, properties: Mapping[str, str] | None = None) -> int:
    """In place on an ONNX model with dynamic dims: each exact GELU of a fully connected layer's output rewritten
    as half + half * erf (half = x/2), each Relu of one as Max(x, 0), forms OpenVINO does not fuse into the
    FullyConnected (module docstring). Returns how many were rewritten; a model with static dims is left as it is.
    (`properties`: the device's context properties, as convert.DEVICE_REWRITES pass them; none changes this
    rewrite.)"""
    if not has_dynamic_dims(model):
        return 0
    from onnx import helper, numpy_helper

    ix = _Index(model.graph)
    done = 0
    zero = ""
    for relu in [n for n in model.graph.node if n.op_type == "Relu"]:
        weights = ix.fc_weights(relu.input[0])
        if weights is None or weights.data_type != _FLOAT:  # (the zero below is float32)
            continue
        if not zero:
            zero = relu.output[0] + ".zero"
            model.graph.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), zero))
        relu.op_type = "Max"
        relu.input.append(zero)
        done += 1
    for erf in [n for n in model.graph.node if n.op_type == "Erf"]:
        found = _match_gelu(ix, erf)
        if found is None:
            continue
        _, add, half, final = found
        prod = final.output[0] + ".gelu_prod"
        nodes = list(model.graph.node)
        at = nodes.index(final)
        new = [helper.make_node("Mul", [half.output[0], erf.output[0]], [prod], name=prod),
               helper.make_node("Add", [half.output[0], prod], list(final.output), name=final.name or prod + ".sum")]
        nodes[at:at + 1] = new
        nodes.remove(add)
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        done += 1
    return done
