"""OpenVINO's inference precision from each config style: paddlelite-style context properties, Paddle Inference's
enable_openvino_engine(precision) and enable_mkldnn_bfloat16(); the driver's compile config."""
from __future__ import annotations

import pytest

from pdlite import inference
from pdlite.apps.ocr.engine import CLS_MODEL_DIR
from pdlite.errors import ConfigError
from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver
from pdlite.nnadapter.options import parse_context_properties

HINT = "INTEL_OPENVINO_INFERENCE_PRECISION_HINT"


def _props(config: inference.Config) -> dict[str, str]:
    return parse_context_properties(config.to_lite().nnadapter_context_properties())


def test_paddle_inference_bf16_reaches_the_openvino_context() -> None:
    c = inference.Config(str(CLS_MODEL_DIR))
    c.enable_mkldnn_bfloat16()
    assert c.mkldnn_bfloat16_enabled()
    assert HINT not in _props(c)  # the host alone: it computes in fp32
    c.enable_openvino_engine()
    assert _props(c)[HINT] == "bf16"
    c.enable_openvino_engine(inference.PrecisionType.Half)  # a precision given wins
    assert _props(c)[HINT] == "f16"
    plain = inference.Config(str(CLS_MODEL_DIR))
    plain.enable_openvino_engine()
    assert HINT not in _props(plain) and not plain.mkldnn_bfloat16_enabled()  # fp32: Paddle's numbers
    onednn = inference.Config(str(CLS_MODEL_DIR))
    onednn.enable_onednn_bfloat16()
    onednn.enable_openvino_engine()
    assert _props(onednn)[HINT] == "bf16"


def test_driver_compile_config_carries_the_precision() -> None:
    assert OpenVINODriver.config({HINT: "bf16"})[1]["INFERENCE_PRECISION_HINT"] == "bf16"
    assert OpenVINODriver.config({})[1]["INFERENCE_PRECISION_HINT"] == "f32"  # pdlite's default: fp32
    with pytest.raises(ConfigError, match=f"{HINT}='int3'"):
        OpenVINODriver.config({HINT: "int3"})
