"""pdlite/nnadapter/qdq_openvino.py: ConvTransposes of few output channels get float weights for OpenVINO.

Checked: which ConvTransposes the rewrite takes (fewer than THIN_CHANNELS output channels, weights from an int8
initializer's DequantizeLinear, per tensor or per channel) and leaves (24 output channels; a DequantizeLinear
also read elsewhere stays for that reader); that the float weights are exactly the DequantizeLinear's values
and the outputs (ONNX Runtime without graph optimisations: the reference semantics) are bit for bit those of the
original graph; that the rewrite is intel_openvino's, and OpenVINO's outputs of the rewritten graph stay within
the device tolerance (tests/quant/test_quant_devices.py's 2e-2 * max|ref|) of the original's. (Paddle's PTQ leaves
conv2d_transpose weights float, as in the committed PP-OCR det fixture; `pdlite quantize` quantizes them.)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.quant._util import max_rel_err

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pdlite.nnadapter.qdq_openvino import THIN_CHANNELS, float_thin_deconv_weights  # noqa: E402

REL = 2e-2


def _graph(per_channel: bool, also_output: bool = False) -> Any:
    """x -> Q -> DQ -> three ConvTransposes (2x2 stride 2): 24 -> 1 channel ("thin"), 24 -> 3 channels in 3
    groups ("grouped", 3 outputs: thin), 24 -> 24 channels ("wide"); `also_output`: the thin one's dequantized
    weights are a graph output too."""
    rng = np.random.default_rng(5)
    vals = {"sx": np.float32(0.05), "zx": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    for name, shape, group in (("thin", (24, 1, 2, 2), 1), ("grouped", (24, 1, 2, 2), 3), ("wide", (24, 24, 2, 2), 1)):
        cout = shape[1] * group
        vals[name + "_w8"] = rng.integers(-127, 128, shape).astype(np.int8)
        if per_channel:  # ConvTranspose weights (Cin, Cout / group, kh, kw): channels along axis 1
            vals[name + "_s"] = rng.uniform(0.001, 0.01, shape[1]).astype(np.float32)
            vals[name + "_z"] = np.zeros(shape[1], np.int8)
        else:
            vals[name + "_s"] = np.float32(0.004)
            vals[name + "_z"] = np.int8(0)
        nodes += [helper.make_node("DequantizeLinear", [name + "_w8", name + "_s", name + "_z"], [name + "_wd"],
                                   axis=1),
                  helper.make_node("ConvTranspose", ["xd", name + "_wd"], [name], strides=[2, 2], group=group)]
        assert (cout < THIN_CHANNELS) == (name != "wide")
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("thin", "grouped", "wide")]
    if also_output:
        outputs.append(helper.make_tensor_value_info("thin_wd", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "deconvs", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [1, 24, 6, 7])],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in vals.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _run(model: Any, x: np.ndarray) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _weights_of(model: Any) -> dict[str, str]:
    """ConvTranspose output -> what its weights input is: "float" (an initializer) or the producing op type."""
    inits = {i.name for i in model.graph.initializer}
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    return {n.output[0]: "float" if n.input[1] in inits else producer[n.input[1]]
            for n in model.graph.node if n.op_type == "ConvTranspose"}


@pytest.mark.parametrize("per_channel", [False, True])
def test_thin_deconvs_read_the_dequantized_values(per_channel: bool) -> None:
    original = _graph(per_channel)
    model = _graph(per_channel)
    assert float_thin_deconv_weights(model) == 2
    assert _weights_of(model) == {"thin": "float", "grouped": "float", "wide": "DequantizeLinear"}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    o = {i.name: numpy_helper.to_array(i) for i in original.graph.initializer}
    for name in ("thin", "grouped"):
        assert name + "_w8" not in inits, "the int8 initializer nothing reads any more is dropped"
        s = o[name + "_s"].reshape(1, -1, 1, 1) if per_channel else o[name + "_s"]
        assert np.array_equal(inits[name + "_wd.float"], o[name + "_w8"].astype(np.float32) * s)
    assert sum(n.op_type == "DequantizeLinear" for n in model.graph.node) == 2  # x's and the wide one's
    x = np.random.default_rng(6).normal(0, 2, (1, 24, 6, 7)).astype(np.float32)
    for got, ref in zip(_run(model, x), _run(original, x)):
        assert np.array_equal(got, ref)


def test_dequantized_weights_read_elsewhere_keep_their_node() -> None:
    model = _graph(True, also_output=True)
    assert float_thin_deconv_weights(model) == 2
    assert _weights_of(model)["thin"] == "float"
    assert any(n.op_type == "DequantizeLinear" and n.output[0] == "thin_wd" for n in model.graph.node)
    x = np.random.default_rng(7).normal(0, 2, (1, 24, 6, 7)).astype(np.float32)
    for got, ref in zip(_run(model, x), _run(_graph(True, also_output=True), x)):
        assert np.array_equal(got, ref)


def test_openvino_gets_the_rewrite_and_runs_it(tmp_path: Path) -> None:
    """The rewrite is intel_openvino's (and not onnxruntime's); OpenVINO runs the rewritten graph within REL of
    the original (which it runs in int8)."""
    from pdlite.nnadapter.convert import DEVICE_REWRITES

    assert float_thin_deconv_weights in DEVICE_REWRITES["intel_openvino"]
    assert float_thin_deconv_weights not in DEVICE_REWRITES["onnxruntime"]
    pytest.importorskip("openvino")
    from pdlite.nnadapter.registry import get_driver
    from pdlite.registries import load_registries

    load_registries()
    driver = get_driver("intel_openvino")()
    x = np.random.default_rng(8).normal(0, 2, (1, 24, 6, 7)).astype(np.float32)
    outs = []
    for i, rewrite in enumerate((False, True)):
        model = _graph(True)
        if rewrite:
            float_thin_deconv_weights(model)
        compiled = driver.build(model.SerializeToString(), {}, str(tmp_path / f"m{i}.xml"))
        outs.append(driver.run(compiled, [x]))
    for got, ref in zip(*outs):
        assert max_rel_err(np.asarray(got), np.asarray(ref)) <= REL
