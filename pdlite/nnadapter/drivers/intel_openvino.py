"""Device `intel_openvino`: OpenVINO's Python API reads the ONNX model and compiles it for a device.

Context properties (one `KEY=VALUE;...` string, see CxxConfig.set_nnadapter_context_properties):
- INTEL_OPENVINO_SELECT_DEVICE_NAMES: OpenVINO device (default CPU).
- INTEL_OPENVINO_INFERENCE_NUM_THREADS: INFERENCE_NUM_THREADS (default: OpenVINO's, all cores).
- INTEL_OPENVINO_INFERENCE_PRECISION_HINT: f32 (default, matches the host kernels), f16 or bf16.
- INTEL_OPENVINO_PERFORMANCE_HINT: LATENCY (default) or THROUGHPUT.
The model cache holds OpenVINO's exported compiled model (`CompiledModel.export_model`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError
from pdlite.nnadapter.drivers.base import Driver, int_property, write_atomic
from pdlite.nnadapter.registry import register_driver

PRECISIONS = ("f32", "f16", "bf16")
HINTS = ("LATENCY", "THROUGHPUT")


class OpenVINOModel:
    """A compiled model with its one infer request (reused by every run)."""

    __slots__ = ("compiled", "request", "n_outputs")

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.n_outputs = len(compiled.outputs)


@register_driver("intel_openvino")
class OpenVINODriver(Driver):
    packages = ("openvino",)
    extra = "openvino"
    prefix = "INTEL_OPENVINO_"
    properties = {
        "INTEL_OPENVINO_SELECT_DEVICE_NAMES": "OpenVINO device to compile for (default CPU)",
        "INTEL_OPENVINO_INFERENCE_NUM_THREADS": "CPU threads (default: OpenVINO's choice)",
        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT": "f32 (default), f16 or bf16",
        "INTEL_OPENVINO_PERFORMANCE_HINT": "LATENCY (default) or THROUGHPUT",
    }

    def __init__(self) -> None:
        self.require()
        import openvino

        self._ov = openvino
        self._core = openvino.Core()

    @classmethod
    def config(cls, props: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
        """(OpenVINO device, compile config) from this device's context properties."""
        mine = cls.own_properties(props)
        device = mine.get("INTEL_OPENVINO_SELECT_DEVICE_NAMES", "CPU") or "CPU"
        precision = mine.get("INTEL_OPENVINO_INFERENCE_PRECISION_HINT", "f32").lower()
        if precision not in PRECISIONS:
            raise ConfigError(f"INTEL_OPENVINO_INFERENCE_PRECISION_HINT={precision!r}: expected one of {PRECISIONS}")
        hint = mine.get("INTEL_OPENVINO_PERFORMANCE_HINT", "LATENCY").upper()
        if hint not in HINTS:
            raise ConfigError(f"INTEL_OPENVINO_PERFORMANCE_HINT={hint!r}: expected one of {HINTS}")
        cfg: dict[str, Any] = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": hint}
        threads = int_property(mine, "INTEL_OPENVINO_INFERENCE_NUM_THREADS")
        if threads:
            cfg["INFERENCE_NUM_THREADS"] = threads
        return device, cfg

    def build(self, model: bytes, props: Mapping[str, str], cache_path: str | None = None) -> OpenVINOModel:
        device, cfg = self.config(props)
        if cache_path and os.path.isfile(cache_path):
            with open(cache_path, "rb") as f:
                return OpenVINOModel(self._core.import_model(f.read(), device, cfg))
        compiled = self._core.compile_model(self._core.read_model(model), device, cfg)
        if cache_path:
            blob = compiled.export_model()
            write_atomic(cache_path, blob.getvalue() if hasattr(blob, "getvalue") else bytes(blob))
        return OpenVINOModel(compiled)

    def run(self, compiled: OpenVINOModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        res = compiled.request.infer(inputs, share_inputs=True)
        return list(res.to_tuple())
