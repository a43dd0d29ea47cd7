"""Optimized models (.nb) that hold NNAdapter subgraphs: the light predictor re-binds them to a device."""
from __future__ import annotations

import pytest

from pdlite.api.mobile import MobileConfig
from pdlite.lite import CxxConfig, create_paddle_predictor
from tests.conftest import assert_close_rel, load_case, model_dir

pytest.importorskip("onnx")


@pytest.mark.parametrize("saved_with, run_with", [("onnxruntime", None), ("onnxruntime", "intel_openvino")])
def test_nb_with_subgraphs_runs_on_a_device(tmp_path, saved_with, run_with):
    pytest.importorskip("onnxruntime")
    if run_with:
        pytest.importorskip("openvino")
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.set_nnadapter_device_names([saved_with])
    path = create_paddle_predictor(cfg).save_optimized_model(str(tmp_path / "m"))
    mc = MobileConfig()
    mc.set_model_from_file(path)
    if run_with:
        mc.set_nnadapter_device_names([run_with])
    pred = create_paddle_predictor(mc)
    subs = [i for i in pred.runtime_program.instructions if i.op.type == "subgraph"]
    assert subs and all(i.kernel.device == (run_with or saved_with) for i in subs)
    ins, outs = load_case("ppocr_cls_v2")
    for g, ref in zip(pred.predict(ins), outs.values()):
        assert_close_rel(g, ref, 1e-3)
