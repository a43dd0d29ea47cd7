"""The example plugin (examples/plugin_target), pip-installed, adds a target through entry points."""
from __future__ import annotations

import importlib.metadata

import pytest

from tests.conftest import assert_close_rel, load_case, model_dir

REL = 1e-4


def _installed() -> bool:
    return any(ep.name == "demo_target" for ep in importlib.metadata.entry_points(group="pdlite.plugins"))


pytestmark = pytest.mark.skipif(not _installed(), reason="pip install examples/plugin_target (CI does)")


def test_model_runs_on_plugin_target_with_host_fallback():
    import pdlite_demo_target

    from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor
    from pdlite.registries import load_registries

    load_registries()
    demo = TargetType["DemoCPU"]
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("mobilenet_v3_small")))
    cfg.set_valid_places([Place(demo, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)])
    pred = create_paddle_predictor(cfg)
    targets = {}
    for inst in pred.runtime_program.instructions:
        targets.setdefault(inst.op.type, set()).add(inst.kernel_def.key.target)
    assert targets["pool2d"] == {demo}, "the SE blocks' global pools run on the plugin's target"
    assert targets["conv2d"] == {TargetType.Host}, "ops the plugin lacks fall back to host"
    assert "io_copy" in targets, "copies between Host and DemoCPU were inserted"
    pdlite_demo_target.CALLS.clear()
    ins, outs = load_case("mobilenet_v3_small")
    got = pred.predict(ins)
    assert pdlite_demo_target.CALLS.get("pool2d", 0) > 0 and pdlite_demo_target.CALLS.get("io_copy", 0) > 0
    for g, ref in zip(got, outs.values()):
        assert_close_rel(g, ref, REL)


def test_plugins_command_lists_what_was_registered(capsys):
    from pdlite.tools.cli import main

    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "demo_target (pdlite_demo_target:register): loaded" in out
    assert "hard_swish/DemoCPU/FP32/NCHW/def" in out and "pool2d/DemoCPU/FP32/NCHW/def" in out
    assert "io_copy/DemoCPU/Any/Any/host_to_demo" in out
    device = out.split("demo_device (")[1].split("demo_target (")[0]
    assert "demo_reference" in device and "demo_op_census_pass" in device and "onnxruntime" not in device


def test_plugin_device_driver_and_pass():
    """A subgraph device and a pass, both from the plugin package, used through pdlite's own options."""
    import pdlite_demo_target

    from pdlite.lite import CxxConfig, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.set_nnadapter_device_names(["demo_reference"])
    cfg.set_passes(["demo_op_census_pass", *cfg.passes()])
    pdlite_demo_target.CALLS.clear()
    pred = create_paddle_predictor(cfg)
    assert pred.analysis.ctx.meta["demo_op_census"]["conv2d"] > 10
    assert any(i.op.type == "subgraph" for i in pred.runtime_program.instructions)
    ins, outs = load_case("ppocr_cls_v2")
    got = pred.predict(ins)
    assert pdlite_demo_target.CALLS.get("demo_reference_run", 0) >= 1
    for g, ref in zip(got, outs.values()):
        assert_close_rel(g, ref, 1e-3)
