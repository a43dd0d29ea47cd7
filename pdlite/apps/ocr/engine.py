"""The three networks on pdlite's public API: one predictor per model, on the host or an NNAdapter device."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

from pdlite.errors import ConfigError
from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

MODELS_DIR = Path(__file__).resolve().parent / "models"
DET_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_det_infer"
REC_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_rec_infer"
CLS_MODEL_DIR = MODELS_DIR / "ch_ppocr_mobile_v2.0_cls_infer"
REC_CHAR_DICT_PATH = MODELS_DIR / "ppocr_keys_v1.txt"

DEVICES = ("host", "intel_openvino", "onnxruntime")
# the Python package each NNAdapter device runs on, and the property that sets its CPU threads
_DEVICE_PACKAGE = {"intel_openvino": "openvino", "onnxruntime": "onnxruntime"}
_THREADS_PROPERTY = {"intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS",
                     "onnxruntime": "ONNXRUNTIME_INTRA_OP_NUM_THREADS"}


def installed_devices() -> list[str]:
    """The devices whose runtime package is importable here (the host always is)."""
    return ["host"] + [d for d, pkg in _DEVICE_PACKAGE.items()
                       if importlib.util.find_spec(pkg) is not None and importlib.util.find_spec("onnx") is not None]


class Model:
    """A Paddle inference model (folder with inference.pdmodel/.pdiparams) run by a pdlite predictor."""

    def __init__(self, model_dir: str | os.PathLike, device: str = "host", threads: int = 1,
                 what: str = "model") -> None:
        model_dir = Path(model_dir)
        if not (model_dir / "inference.pdmodel").is_file() and not (model_dir / "inference.json").is_file():
            raise ConfigError(f"{what} folder {str(model_dir)!r} has no inference.pdmodel (a Paddle inference model "
                              "saved with paddle.jit.save / export_model.py)")
        if device not in DEVICES:
            raise ConfigError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
        config = CxxConfig()
        config.set_model_dir(str(model_dir))
        config.set_threads(threads)
        if device != "host":
            config.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
            config.set_nnadapter_device_names([device])
            config.set_nnadapter_context_properties(f"{_THREADS_PROPERTY[device]}={int(threads)}")
        self.device = device
        self.predictor = create_paddle_predictor(config)
        self._input = self.predictor.get_input(0)
        self._output = self.predictor.get_output(0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self._input.from_numpy(x)
        self.predictor.run()
        return self._output.numpy()
