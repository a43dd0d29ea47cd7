"""OpenVINO's graph forms for models with dynamic dims (pdlite/nnadapter/openvino_forms.py).

`separate_fc_activations` rewrites, in a model with dynamic dims, pdlite's exact GELU of a fully connected layer
(x/2 * (1 + erf(x/sqrt 2)), x = MatMul with constant weights [+ bias]) as x/2 + x/2 * erf(x/sqrt 2) and its Relu as
Max(x, 0), so OpenVINO does not fuse them into the FullyConnected (which then needs no new oneDNN primitive per
input shape); anything else is left alone. Outputs are compared with NumPy (math.erf) at 1e-5 of max|ref| (fp32
arithmetic reordered), and the ERNIE-like fixture on intel_openvino with the host at every length of a stream at
1e-4 of max|host|.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.nnadapter._models import need

REPO = Path(__file__).resolve().parents[2]
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
D, N = 8, 16


def _fc_model(length: int | str = "L", scale: float = 1.0 / math.sqrt(2.0), fc: bool = True,
              erf_read_twice: bool = False, act: str = "gelu"):
    """x [1, length, D] -> MatMul W1 (+ b1) -> pdlite's exact gelu (scale: the erf's input factor; act="relu": a
    Relu) -> MatMul W2. fc=False: the activation reads Sigmoid(x) instead of a fully connected layer;
    erf_read_twice: the erf's output is also a graph output."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(37)
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("w1", rng.standard_normal((D, N)).astype(np.float32)), ("b1", rng.standard_normal(N).astype(np.float32)),
        ("w2", rng.standard_normal((N, D)).astype(np.float32)), ("c", np.float32(scale)),
        ("one", np.float32(1.0)), ("half", np.float32(0.5)))]
    pre = ([helper.make_node("MatMul", ["x", "w1"], ["mm"]), helper.make_node("Add", ["mm", "b1"], ["h"])] if fc
           else [helper.make_node("Sigmoid", ["x"], ["h"])])
    gelu = [helper.make_node("Mul", ["h", "c"], ["s"]), helper.make_node("Erf", ["s"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["h", "half"], ["hh"]),
            helper.make_node("Mul", ["hh", "a"], ["g"])]
    nodes = [*pre, *(gelu if act == "gelu" else [helper.make_node("Relu", ["h"], ["g"])]),
             helper.make_node("MatMul", ["g", "w2"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if erf_read_twice:
        outs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "fc_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length, D])],
                          outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model, x: np.ndarray, act: str) -> np.ndarray:
    from onnx import numpy_helper

    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    h = x.astype(np.float64) @ w["w1"] + w["b1"]
    g = 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0))) if act == "gelu" else np.maximum(h, 0.0)
    return g @ w["w2"]


def _fused_into_fc(compiled) -> bool:
    """Whether OpenVINO's runtime model has a node of the activation (the gelu's erf, its products; the relu, g)
    inside a FullyConnected node (fused as a post-op: OpenVINO names the fused gelu after its last node, g)."""
    gelu = {"s", "e", "a", "hh", "g"}
    for op in compiled.compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) == "FullyConnected" and gelu & set(
                info["originalLayersNames"].astype(str).split(",")):
            return True
    return False


@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_fc_activation_separated_in_a_dynamic_model(act: str) -> None:
    """The rewrite is emitted once (no Add(erf, 1) left; no Relu left), and OpenVINO then keeps the activation out of
    the FullyConnected (the control, the model as converted: fused) with the same outputs at changing lengths."""
    need("intel_openvino")
    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver
    from pdlite.nnadapter.openvino_forms import separate_fc_activations

    model = _fc_model(act=act)
    original = model.SerializeToString()
    assert separate_fc_activations(model) == 1
    assert not [n for n in model.graph.node if n.op_type == "Add" and "e" in n.input and "one" in n.input]
    assert not [n for n in model.graph.node if n.op_type == "Relu"]
    drv = OpenVINODriver()
    props = {"INTEL_OPENVINO_INFERENCE_NUM_THREADS": "1"}
    control, separated = drv.build(original, props), drv.build(model.SerializeToString(), props)
    assert _fused_into_fc(control), "the control: OpenVINO fuses the converted gelu into the FullyConnected"
    assert not _fused_into_fc(separated)
    rng = np.random.default_rng(0)
    for length in (3, 17, 40, 9):
        x = rng.standard_normal((1, length, D)).astype(np.float32)
        want = _reference(model, x, act)
        for compiled in (control, separated):
            got = drv.run(compiled, [x])[0]
            assert got.shape == want.shape
            assert float(np.max(np.abs(got - want))) <= 1e-5 * float(np.max(np.abs(want))), length


@pytest.mark.parametrize("case", ["static dims", "another erf factor", "not a fully connected layer",
                                  "erf read elsewhere", "relu, static dims", "relu, not a fully connected layer"])
def test_fc_activation_left_alone_when_the_pattern_differs(case: str) -> None:
    pytest.importorskip("onnx", reason="needs pip install pdlite[onnx]")
    from pdlite.nnadapter.openvino_forms import separate_fc_activations

    model = {"static dims": lambda: _fc_model(length=12),
             "another erf factor": lambda: _fc_model(scale=0.6),
             "not a fully connected layer": lambda: _fc_model(fc=False),
             "erf read elsewhere": lambda: _fc_model(erf_read_twice=True),
             "relu, static dims": lambda: _fc_model(length=12, act="relu"),
             "relu, not a fully connected layer": lambda: _fc_model(fc=False, act="relu")}[case]()
    before = model.SerializeToString()
    assert separate_fc_activations(model) == 0
    assert model.SerializeToString() == before


def test_ernie_on_openvino_in_the_separated_form_matches_the_host(monkeypatch) -> None:
    """The ERNIE-like fixture on intel_openvino: the model it compiles for all lengths has its two FFN gelus in the
    separated form (two Erf nodes, no Add(erf, 1)), and every length of a stream gives the host's outputs."""
    need("intel_openvino")
    from onnx import load_from_string

    from pdlite import CxxConfig, create_paddle_predictor
    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver

    built: list[bytes] = []
    build = OpenVINODriver.build
    monkeypatch.setattr(OpenVINODriver, "build", lambda self, m, props, cache_path=None: (
        built.append(m), build(self, m, props, cache_path))[1])

    def predictor(device: str):
        cfg = CxxConfig()
        cfg.set_model_dir(str(ERNIE))
        cfg.set_threads(1)
        if device != "host":
            cfg.set_nnadapter_device_names([device])
            cfg.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_NUM_THREADS=1")
        return create_paddle_predictor(cfg)

    host, dev = predictor("host"), predictor("intel_openvino")
    rng = np.random.default_rng(41)
    for n in (6, 23, 11, 48):
        feed = {"input_ids": rng.integers(1, 400, (1, n)).astype(np.int64),
                "token_type_ids": (rng.uniform(size=(1, n)) > 0.5).astype(np.int64)}
        for got, want in zip(dev.predict(feed), host.predict(feed)):
            assert got.shape == want.shape
            assert float(np.max(np.abs(got - want))) <= 1e-4 * float(np.max(np.abs(want))), n
    assert len(built) == 1, "one model for all lengths"
    graph = load_from_string(built[0]).graph
    producer = {o: node for node in graph.node for o in node.output}
    erfs = [node.output[0] for node in graph.node if node.op_type == "Erf"]
    assert len(erfs) == 2
    for node in graph.node:
        if node.op_type == "Add":
            assert not any(i in erfs for i in node.input), "an Add(erf, 1) left: the fused form"
    assert sum(producer.get(node.input[1]) is not None and producer[node.input[1]].op_type == "Erf"
               for node in graph.node if node.op_type == "Mul" and len(node.input) == 2) == 2
