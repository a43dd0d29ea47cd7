"""The form of the graphs pdlite converts for a model whose dims stay open, as OpenVINO compiles it.

OpenVINO's CPU plugin prepares each node of a model with dynamic dims again for every input shape it has not
run (docs/nnadapter.md, "What a new shape costs"), so the converted graph must not add nodes to that work: on
the ERNIE-like encoder (batch and length open) every linear layer compiles to a FullyConnected (weights
constant), the only MatMuls are (at most) the attention's two per layer, the only shape computation is the position ids'
length (one ShapeOf; every Reshape target a constant with 0 / -1), and the model is one OpenVINO 2024.0's ONNX
frontend reads too (no Reshape to the empty shape). Outputs at three lengths match the host within 1e-4.
"""
from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from pdlite import CxxConfig, create_paddle_predictor

REPO = Path(__file__).resolve().parents[2]
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
REL = 1e-4


def _predictor(device: str):
    cfg = CxxConfig()
    cfg.set_model_dir(str(ERNIE))
    if device != "host":
        cfg.set_nnadapter_device_names([device])
        cfg.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_NUM_THREADS=2")
    return create_paddle_predictor(cfg)


def test_ernie_like_compiles_to_fully_connected_and_attention_matmuls_only(monkeypatch) -> None:
    pytest.importorskip("onnx", reason="needs pip install pdlite[openvino]")
    ov = pytest.importorskip("openvino", reason="needs pip install pdlite[openvino]")
    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver

    built: list[bytes] = []
    build = OpenVINODriver.build

    def capture(self, model, props, cache_path=None):
        built.append(model)
        return build(self, model, props, cache_path)

    monkeypatch.setattr(OpenVINODriver, "build", capture)
    pred, host = _predictor("intel_openvino"), _predictor("host")
    rng = np.random.default_rng(37)
    for b, n in ((1, 9), (2, 23), (1, 41)):
        feeds = {"input_ids": rng.integers(1, 400, (b, n)).astype(np.int64),
                 "token_type_ids": rng.integers(0, 2, (b, n)).astype(np.int64)}
        for g, w in zip(pred.predict(feeds), host.predict(feeds)):
            assert g.shape == w.shape and float(np.max(np.abs(g - w))) <= REL * float(np.max(np.abs(w))), (b, n)
    assert len(built) == 1, "one model for every length and batch"

    import onnx

    graph = onnx.load_from_string(built[0]).graph
    empty = {t.name for t in graph.initializer if len(t.dims) == 1 and t.dims[0] == 0}
    assert not [n.name for n in graph.node if n.op_type == "Reshape" and n.input[1] in empty]
    consts = {t.name for t in graph.initializer}
    reshapes = [n for n in graph.node if n.op_type == "Reshape"]
    assert reshapes and all(n.input[1] in consts for n in reshapes), "every Reshape target a constant"
    core = ov.Core()
    compiled = core.compile_model(core.read_model(built[0], b""), "CPU",
                                  {"INFERENCE_NUM_THREADS": 2, "SNIPPETS_MODE": "DISABLE"})
    types = collections.Counter(op.get_rt_info()["layerType"].astype(str)
                                for op in compiled.get_runtime_model().get_ordered_ops())
    layers = 2  # encoder layers of the fixture (README.txt): 4 linear layers each, pooler and classifier
    assert types["FullyConnected"] == 4 * layers + 2, types
    assert types["MatMul"] <= 2 * layers, types  # the attention's (fewer if OpenVINO fuses attention)
    assert types["ShapeOf"] <= 1 and types["Concatenation"] == 0, types
