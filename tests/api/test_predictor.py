"""The paddlelite-compatible API end to end on every legacy model, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import ConfigError, InputError, ModelFormatError, UnsupportedOpError
from pdlite.lite import (
    CxxConfig,
    DataLayoutType,
    Place,
    PowerMode,
    PrecisionType,
    TargetType,
    create_paddle_predictor,
)
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir

REL = 1e-4  # max|got - ref| <= 1e-4 * max|ref| (fp32 host vs Paddle Inference, unfused)


def _predictor(name: str, places=None):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    if places:
        cfg.set_valid_places(places)
    return create_paddle_predictor(cfg)


@pytest.mark.parametrize("name", LEGACY_MODELS)
def test_model_matches_paddle_inference(name):
    ins, outs = load_case(name)
    pred = _predictor(name)
    assert pred.get_output_names() == list(outs)
    for i, n in enumerate(pred.get_input_names()):
        pred.get_input(i).from_numpy(ins[n])
    pred.run()
    for i, n in enumerate(pred.get_output_names()):
        assert_close_rel(pred.get_output(i).numpy(), outs[n], REL, f"{name}:{n}")


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_batch_changes_between_runs(name):
    ins1, outs1 = load_case(name)
    ins4, outs4 = load_case(name, "case_b4.npz")
    pred = _predictor(name, [Place(TargetType.X86, PrecisionType.FP32)])
    for ins, outs in ((ins1, outs1), (ins4, outs4), (ins1, outs1)):
        got = pred.predict(ins)
        for g, (n, ref) in zip(got, outs.items()):
            assert_close_rel(g, ref, REL, f"{name}:{n} batch {ref.shape[0]}")


def test_x86_place_and_api_surface():
    name = "ppocr_cls_v2"
    ins, outs = load_case(name)
    pred = _predictor(name, [Place(TargetType.X86, PrecisionType.FP32, DataLayoutType.NCHW)])
    t = pred.get_input_by_name("x")
    t.from_numpy(ins["x"])
    assert t.shape() == list(ins["x"].shape)
    assert t.precision() == PrecisionType.FP32 and t.target() == TargetType.Host
    t.set_lod([[0, 1]])
    assert t.lod() == [[0, 1]]
    pred.run()
    out = pred.get_output_by_name(pred.get_output_names()[0])
    assert_close_rel(out.numpy(), next(iter(outs.values())), REL)
    assert isinstance(pred.get_version(), str)


def test_model_file_param_file_and_buffer():
    d = model_dir("transformer_encoder")
    ins, outs = load_case("transformer_encoder")
    cfg = CxxConfig()
    cfg.set_model_file(str(d / "inference.pdmodel"))
    cfg.set_param_file(str(d / "inference.pdiparams"))
    cfg.set_threads(2)
    cfg.set_power_mode(PowerMode.LITE_POWER_HIGH)
    a = create_paddle_predictor(cfg).predict(ins)[0]
    cfg2 = CxxConfig()
    cfg2.set_model_buffer((d / "inference.pdmodel").read_bytes(), (d / "inference.pdiparams").read_bytes())
    cfg2.set_threads(2)
    b = create_paddle_predictor(cfg2).predict(ins)[0]
    ref = next(iter(outs.values()))
    assert_close_rel(a, ref, REL)
    # the same model and the same config on the same machine: bit-exact (docs/determinism.md)
    np.testing.assert_array_equal(a, b)


def test_missing_feed_wrong_rank_wrong_dtype():
    pred = _predictor("ppocr_cls_v2")
    with pytest.raises(InputError, match="'x' was not set"):
        pred.run()
    with pytest.raises(InputError, match="rank 4"):
        pred.predict({"x": np.zeros((3, 48, 192), np.float32)})
    with pytest.raises(InputError, match="dim 1 must be 3"):
        pred.predict({"x": np.zeros((1, 4, 48, 192), np.float32)})
    with pytest.raises(InputError, match="dtype float32"):
        pred.predict({"x": np.zeros((1, 3, 48, 192), np.float64)})
    with pytest.raises(InputError, match="unknown input"):
        pred.predict({"y": np.zeros((1, 3, 48, 192), np.float32)})
    with pytest.raises(InputError, match="has 1 input"):
        pred.get_input(3)


def test_config_errors():
    with pytest.raises(ConfigError, match="no model"):
        create_paddle_predictor(CxxConfig())
    with pytest.raises(ConfigError):
        CxxConfig().set_threads(0)
    with pytest.raises(ConfigError):
        create_paddle_predictor(object())


def test_missing_model_dir_is_a_clear_error(tmp_path):
    cfg = CxxConfig()
    cfg.set_model_dir(str(tmp_path / "nope"))
    with pytest.raises(ModelFormatError, match="nope"):
        create_paddle_predictor(cfg)


def test_unsupported_ops_listed_at_load_time(tmp_path):
    """Every unsupported op type is listed once, with counts and the targets that have kernels."""
    from pdlite.model_parser import load_model, save_model

    m = load_model(model_dir=str(model_dir("ppocr_cls_v2")))
    n_relu = sum(op.type == "relu" for op in m.program.main.ops)
    for op in m.program.main.ops:
        if op.type == "relu":
            op.type = "my_custom_relu"
        elif op.type == "softmax":
            op.type = "my_custom_softmax"
    save_model(m.program, m.params, str(tmp_path / "inference.pdmodel"), str(tmp_path / "inference.pdiparams"))
    cfg = CxxConfig()
    cfg.set_model_dir(str(tmp_path))
    with pytest.raises(UnsupportedOpError) as e:
        create_paddle_predictor(cfg)
    msg = str(e.value)
    assert f"my_custom_relu x{n_relu}" in msg and "my_custom_softmax x1" in msg
    assert "unknown to pdlite" in msg
