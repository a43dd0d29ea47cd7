"""The three networks on pdlite's public API: one predictor per model, on the host, an NNAdapter device, or
`auto` (pdlite.api.auto: every installed device measured on the model's first real input, the fastest kept)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.api.auto import apply_device, choose_device, installed_devices
from pdlite.errors import ConfigError
from pdlite.lite import CxxConfig, create_paddle_predictor

MODELS_DIR = Path(__file__).resolve().parent / "models"
DET_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_det_infer"
REC_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_rec_infer"
CLS_MODEL_DIR = MODELS_DIR / "ch_ppocr_mobile_v2.0_cls_infer"
REC_CHAR_DICT_PATH = MODELS_DIR / "ppocr_keys_v1.txt"

DEVICES = ("host", "intel_openvino", "onnxruntime", "auto")
AUTO_CANDIDATES = ("host", "intel_openvino", "onnxruntime")  # auto measures these (when installed), no others
# each NNAdapter driver reads the properties with its own prefix
_THREAD_PROPERTIES = ("INTEL_OPENVINO_INFERENCE_NUM_THREADS", "ONNXRUNTIME_INTRA_OP_NUM_THREADS")


class Model:
    """A Paddle inference model (folder with inference.pdmodel/.pdiparams) run by a pdlite predictor.

    With device="auto" the predictor is made on the first call, on the device `choose_device` finds fastest
    for that input (the choice is cached by pdlite per model, shapes and threads)."""

    def __init__(self, model_dir: str | os.PathLike, device: str = "host", threads: int = 1,
                 what: str = "model") -> None:
        model_dir = Path(model_dir)
        if not (model_dir / "inference.pdmodel").is_file() and not (model_dir / "inference.json").is_file():
            raise ConfigError(f"{what} folder {str(model_dir)!r} has no inference.pdmodel (a Paddle inference model "
                              "saved with paddle.jit.save / export_model.py)")
        if device not in DEVICES:
            raise ConfigError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
        self.config = CxxConfig()
        self.config.set_model_dir(str(model_dir))
        self.config.set_threads(threads)
        self.config.set_nnadapter_context_properties(";".join(f"{p}={int(threads)}" for p in _THREAD_PROPERTIES))
        self.device = device
        self.choice: Any = None  # the AutoChoice, with device="auto"
        self.predictor: Any = None
        self._input_name: str | None = None
        if device != "auto":
            self._create(device)

    def _create(self, device: str) -> None:
        apply_device(self.config, device)
        self.device = device
        self.predictor = create_paddle_predictor(self.config)
        self._input = self.predictor.get_input(0)
        self._output = self.predictor.get_output(0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.predictor is None:  # auto: choose on this input
            names = create_paddle_predictor(self.config).get_input_names()
            installed = installed_devices()
            cands = [d for d in AUTO_CANDIDATES if d == "host" or d in installed]
            self.choice = choose_device(self.config, {names[0]: x}, create_paddle_predictor, candidates=cands)
            self._create(self.choice.device)
        self._input.from_numpy(x)
        self.predictor.run()
        return self._output.numpy()
