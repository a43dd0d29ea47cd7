"""Device `onnxruntime`: an ONNX Runtime InferenceSession (CUDA provider first when it is installed).

Context properties:
- ONNXRUNTIME_INTRA_OP_NUM_THREADS / ONNXRUNTIME_INTER_OP_NUM_THREADS: session threads
  (default: ONNX Runtime's choice).
- ONNXRUNTIME_EXECUTION_PROVIDERS: comma-separated providers, in priority order (default
  CUDAExecutionProvider when available, then CPUExecutionProvider).
- ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL: disable, basic, extended or all (default all).
- ONNXRUNTIME_SPINNING: run (default), always or off. ONNX Runtime's pool threads spin while they wait for work:
  between the ops of a run that saves wake-ups, but by default they keep spinning after the run returns, taking
  cores from whatever runs next in the process: another predictor's session (PP-OCR's det, cls and rec on
  onnxruntime at 2 threads: 2.5-2.8 s per pass over the example images, 1.6-1.9 s with `run`), the host
  kernels, the `auto` device's measurements. `run` stops them when a run ends
  (`session.force_spinning_stop`; runs back to back on one session: 0.99-1.01x of `always` on PP-OCR det and
  MobileNetV2, 1.00-1.06x on the 1 ms MobileNetV3-small, worker-process A/B runs at 2 threads),
  `always` is ONNX Runtime's default, `off` never spins (12-68% slower runs).
The model cache holds the session's optimized model (ONNX Runtime writes it while building;
a cached one is loaded with graph optimizations off, since they were already applied).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError
from pdlite.nnadapter.drivers.base import Driver, int_property
from pdlite.nnadapter.registry import register_driver

LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}
SPINNING = {"run": {"session.force_spinning_stop": "1"}, "always": {},  # ONNXRUNTIME_SPINNING -> session config
            "off": {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}}


class OrtModel:
    """A session with its input and output names in the model's order."""

    __slots__ = ("session", "inputs", "outputs")

    def __init__(self, session: Any) -> None:
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]
        self.outputs = [o.name for o in session.get_outputs()]


@register_driver("onnxruntime")
class OnnxRuntimeDriver(Driver):
    packages = ("onnxruntime",)
    extra = "onnx"
    prefix = "ONNXRUNTIME_"
    properties = {
        "ONNXRUNTIME_INTRA_OP_NUM_THREADS": "threads inside an op (default: ONNX Runtime's choice)",
        "ONNXRUNTIME_INTER_OP_NUM_THREADS": "threads across ops (default: ONNX Runtime's choice)",
        "ONNXRUNTIME_EXECUTION_PROVIDERS": "comma-separated providers (default: CUDA if available, then CPU)",
        "ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL": "disable, basic, extended or all (default all)",
        "ONNXRUNTIME_SPINNING": "run (default: pool threads spin during a run, stop when it ends), always "
                                "(ONNX Runtime's default: they keep spinning after it) or off",
    }

    def __init__(self) -> None:
        self.require()
        import onnxruntime

        self._ort = onnxruntime

    def providers(self, props: Mapping[str, str]) -> list[str]:
        mine = self.own_properties(props)
        available = self._ort.get_available_providers()
        given = mine.get("ONNXRUNTIME_EXECUTION_PROVIDERS", "")
        if given:
            wanted = [p.strip() for p in given.split(",") if p.strip()]
            missing = [p for p in wanted if p not in available]
            if missing:
                raise ConfigError(f"ONNXRUNTIME_EXECUTION_PROVIDERS: {missing} not available; "
                                  f"this onnxruntime has {available}")
            return wanted
        return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]

    def cache_token(self, props: Mapping[str, str]) -> str:
        return ",".join(self.providers(props))

    def session_options(self, props: Mapping[str, str]) -> Any:
        mine = self.own_properties(props)
        so = self._ort.SessionOptions()
        level = mine.get("ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL", "all").lower()
        if level not in LEVELS:
            raise ConfigError(f"ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL={level!r}: expected one of {list(LEVELS)}")
        so.graph_optimization_level = getattr(self._ort.GraphOptimizationLevel, LEVELS[level])
        intra = int_property(mine, "ONNXRUNTIME_INTRA_OP_NUM_THREADS")
        inter = int_property(mine, "ONNXRUNTIME_INTER_OP_NUM_THREADS")
        if intra:
            so.intra_op_num_threads = intra
        if inter:
            so.inter_op_num_threads = inter
        spinning = mine.get("ONNXRUNTIME_SPINNING", "run").lower()
        if spinning not in SPINNING:
            raise ConfigError(f"ONNXRUNTIME_SPINNING={spinning!r}: expected one of {list(SPINNING)}")
        for key, value in SPINNING[spinning].items():
            so.add_session_config_entry(key, value)
        so.log_severity_level = 3
        return so

    def build(self, model: bytes, props: Mapping[str, str], cache_path: str | None = None) -> OrtModel:
        so = self.session_options(props)
        providers = self.providers(props)
        if cache_path and os.path.isfile(cache_path):
            so.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            return OrtModel(self._ort.InferenceSession(cache_path, so, providers=providers))
        if cache_path:
            os.makedirs(os.path.dirname(cache_path) or ".", exist_ok=True)
            so.optimized_model_filepath = cache_path
        return OrtModel(self._ort.InferenceSession(model, so, providers=providers))

    def run(self, compiled: OrtModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return compiled.session.run(compiled.outputs, dict(zip(compiled.inputs, inputs)))
