"""The three networks on pdlite's public API: one predictor per model, on the host, an NNAdapter device, or
`auto`: each network decides for itself, call by call, on its own stream of inputs (pdlite/api/auto_online.py:
new input shapes priced, exploration bounded to a share of the stream's time, so a short run stays on the host;
what it learnt cached per model content and threads under the user cache dir, so the next run starts there)."""
from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.api.auto import apply_device, copy_config
from pdlite.errors import ConfigError
from pdlite.lite import CxxConfig, create_paddle_predictor
from pdlite.nnadapter.options import format_context_properties, parse_context_properties, with_thread_counts

MODELS_DIR = Path(__file__).resolve().parent / "models"
DET_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_det_infer"
REC_MODEL_DIR = MODELS_DIR / "ch_PP-OCRv4_rec_infer"
CLS_MODEL_DIR = MODELS_DIR / "ch_ppocr_mobile_v2.0_cls_infer"
REC_CHAR_DICT_PATH = MODELS_DIR / "ppocr_keys_v1.txt"

DEVICES = ("host", "intel_openvino", "onnxruntime", "auto")
PRECISIONS = ("auto", "f32", "bf16", "f16")  # OpenVINO's inference precision in the OCR app (OCR(precision=...))
PRECISION_HINT = "INTEL_OPENVINO_INFERENCE_PRECISION_HINT"


def precision_context(context: Mapping[str, str] | None, precision: str, device: str) -> dict[str, str]:
    """`context` with OpenVINO's inference precision for the OCR app's networks: "auto" is OpenVINO's own default
    on this CPU (bf16 where it computes bfloat16 natively, as RapidOCR on OpenVINO runs; else f32), for the devices
    that may run OpenVINO (intel_openvino, auto). A precision given in `context` wins; the host computes in f32."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    out = dict(context or {})
    if PRECISION_HINT in out or device not in ("intel_openvino", "auto"):
        return out
    if precision == "auto":
        from pdlite.nnadapter.drivers.intel_openvino import native_bf16

        precision = "bf16" if native_bf16() else "f32"
    if precision != "f32":
        out[PRECISION_HINT] = precision
    return out


class Model:
    """A Paddle inference model (folder with inference.pdmodel/.pdiparams) run by a pdlite predictor.

    With device="auto" the predictor runs each call where pdlite's online auto says it is cheapest, new input
    shapes included (`set_nnadapter_device_names(["auto"])`; what it learnt is cached per model content and
    threads).
    `context`: NNAdapter context properties for the devices (docs/nnadapter.md), e.g.
    {"INTEL_OPENVINO_INFERENCE_PRECISION_HINT": "bf16"}; they override the thread counts set from `threads`."""

    def __init__(self, model_dir: str | os.PathLike, device: str = "host", threads: int = 1,
                 what: str = "model", context: Mapping[str, str] | None = None) -> None:
        model_dir = Path(model_dir)
        if not (model_dir / "inference.pdmodel").is_file() and not (model_dir / "inference.json").is_file():
            raise ConfigError(f"{what} folder {str(model_dir)!r} has no inference.pdmodel (a Paddle inference model "
                              "saved with paddle.jit.save / export_model.py)")
        if device not in DEVICES:
            raise ConfigError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
        self.config = CxxConfig()
        self.config.set_model_dir(str(model_dir))
        self.config.set_threads(threads)
        for k, v in (context or {}).items():
            if not k or any(c in f"{k}{v}" for c in ";="):
                raise ConfigError(f"context property {k!r}={v!r}: expected a NAME and a VALUE without ';' or '='")
        props = with_thread_counts(context or {}, threads)  # a thread count given in `context` wins
        self.config.set_nnadapter_context_properties(format_context_properties(props))
        if device == "auto":  # decided call by call on this network's inputs (measured, cached per model content)
            self.config.set_nnadapter_device_names(["auto"])
        else:
            apply_device(self.config, device)
        self._device = device
        self.predictor = create_paddle_predictor(self.config)
        self._input = self.predictor.get_input(0)
        self._output = self.predictor.get_output(0)
        self.kept: list[np.ndarray] | None = None  # a list: every input is kept there (OCR's auto placement)
        self.note = ""  # how its device was chosen (the OCR app's auto placement)

    def on(self, device: str) -> Model:
        """The same network (its config copied: model buffers shared, nothing read again) on another device."""
        new = copy.copy(self)
        new.config = copy_config(self.config)
        apply_device(new.config, device)
        new._device, new.kept, new.note = device, None, ""
        new.predictor = create_paddle_predictor(new.config)
        new._input = new.predictor.get_input(0)
        new._output = new.predictor.get_output(0)
        return new

    def precision(self) -> str:
        """OpenVINO's inference precision on this network ("" elsewhere)."""
        if not self.device.startswith("intel_openvino"):
            return ""
        props = parse_context_properties(self.config.nnadapter_context_properties())
        return props.get(PRECISION_HINT, "f32")

    @property
    def choice(self) -> Any:
        """What `auto` chose (an AutoChoice), once it has; None otherwise."""
        return getattr(self.predictor, "auto_choice", None)

    @property
    def device(self) -> str:
        return self.choice.device if self.choice is not None else self._device

    def placement(self) -> str:
        """Where its calls ran: the device, or with auto each candidate's calls (most first), e.g.
        "intel_openvino (auto: intel_openvino 40, host 12 calls)"."""
        c = self.choice
        if c is None:
            where = " ".join(filter(None, (self._device, self.precision())))
            return f"{where} ({self.note})" if self.note else where
        calls = sorted(c.calls.items(), key=lambda kv: -kv[1])
        ran = ", ".join(f"{d} {n}" for d, n in calls)
        return f"{c.device} (auto: {ran} calls)" if ran else c.device

    def clone(self) -> Model:
        """The same network on a clone of the predictor (shared program, kernels and weights, its own inputs and
        outputs; with auto, what auto learnt is shared): clones run at the same time on other threads."""
        new = copy.copy(self)
        new.kept = None
        new.predictor = self.predictor.clone()
        new._input = new.predictor.get_input(0)
        new._output = new.predictor.get_output(0)
        return new

    def __call__(self, x: np.ndarray, keep: bool = True) -> np.ndarray:
        if keep and self.kept is not None:
            self.kept.append(np.array(x))
        self._input.from_numpy(x)
        self.predictor.run()
        return self._output.numpy()
