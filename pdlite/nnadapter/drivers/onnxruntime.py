"""Device `onnxruntime`: an ONNX Runtime InferenceSession (CUDA provider first when it is installed).

Context properties:
- ONNXRUNTIME_INTRA_OP_NUM_THREADS / ONNXRUNTIME_INTER_OP_NUM_THREADS: session threads
  (default: ONNX Runtime's choice).
- ONNXRUNTIME_EXECUTION_PROVIDERS: comma-separated providers, in priority order (default
  CUDAExecutionProvider when available, then CPUExecutionProvider).
- ONNXRUNTIME_GRAPH_OPTIMIZATION_LEVEL: disable, basic, extended or all (default all).
- ONNXRUNTIME_INT8_GRID: full (default) or paddle. An int8 (QDQ) model's never-negative activations (relu, relu6
  outputs) quantized on the full uint8 range [0, top] instead of Paddle's int8 grid, which leaves half of the
  codes unused: the same range on a twice finer grid, so the requantized convs need no clamp of their codes
  (MobileNetV2 int8 1.8x -> 1.9x fp32's speed); `paddle` keeps Paddle's grid (outputs closer to Paddle's fp32
  simulation of the quantized program, each activation within one step). pdlite/nnadapter/qdq_fusion/, rule 1b.
- ONNXRUNTIME_SPINNING: short (default), run, always or off. ONNX Runtime's pool threads spin while they wait for
  work: between the ops of a run that saves wake-ups, but by default they keep spinning after the run returns,
  taking cores from whatever runs next in the process: another predictor's session (PP-OCR's det, cls and rec on
  onnxruntime at 2 threads: 2.5-2.8 s per pass over the example images against 1.6-1.7 s), the host kernels, the
  `auto` device's measurements. `short` lets a waiting thread spin at most 300 us, then sleep
  (`session.intra_op.spin_duration_us`): runs back to back as fast as with `always` (0.97-1.03x on
  MobileNetV3-small, MobileNetV2 and PP-OCR det at 2 threads, worker-process A/B runs), ~2 ms of CPU per idle
  100 ms instead of ~45. `run` stops the threads when a run ends (`session.force_spinning_stop`): as idle, but
  the next run wakes them (the 1.2 ms MobileNetV3-small 2.7-3.0x slower, det and MobileNetV2 within 5%).
  `always` is ONNX Runtime's default, `off` never spins (12-68% slower runs). ONNX Runtime before 1.26 has no
  spin duration: there `short` is `run`.
The model cache holds the session's optimized model (ONNX Runtime writes it while building, under a temporary
name renamed into place; a cached one is loaded with graph optimizations off, since they were already applied).
"""
from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError
from pdlite.nnadapter.drivers.base import Driver, int_property
from pdlite.nnadapter.qdq_fusion import INT8_GRID
from pdlite.nnadapter.registry import register_driver

LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}
SPIN_US = "300"  # ONNXRUNTIME_SPINNING=short: the longest a pool thread spins waiting for work before it sleeps
SPINNING = {"short": {"session.intra_op.spin_duration_us": SPIN_US, "session.inter_op.spin_duration_us": SPIN_US},
            "run": {"session.force_spinning_stop": "1"}, "always": {},  # ONNXRUNTIME_SPINNING -> session config
            "off": {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}}


def _version(text: str) -> tuple[int, ...]:
    """(major, minor) of a version string such as '1.32.0' or '1.26.0.dev2026'."""
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        parts.append(int(digits or 0))
    return tuple(parts)


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
        INT8_GRID: "full (default: int8 models' relu outputs on the whole uint8 range, a finer grid than Paddle's, "
                   "no clamps) or paddle (Paddle's int8 grid)",
        "ONNXRUNTIME_SPINNING": "short (default: pool threads spin at most 300 us waiting for work, then sleep), "
                                "run (they stop when a run ends), always (ONNX Runtime's default: they keep "
                                "spinning after it) or off",
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
        spinning = mine.get("ONNXRUNTIME_SPINNING", "short").lower()
        if spinning not in SPINNING:
            raise ConfigError(f"ONNXRUNTIME_SPINNING={spinning!r}: expected one of {list(SPINNING)}")
        if spinning == "short" and _version(self._ort.__version__) < (1, 26):  # no spin_duration_us before 1.26
            spinning = "run"
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
        if not cache_path:
            return OrtModel(self._ort.InferenceSession(model, so, providers=providers))
        # ONNX Runtime writes the optimized model while building: into a temporary name, renamed when whole
        os.makedirs(os.path.dirname(cache_path) or ".", exist_ok=True)
        tmp = f"{cache_path}.tmp-{os.getpid()}-{threading.get_ident()}.onnx"
        so.optimized_model_filepath = tmp
        try:
            session = self._ort.InferenceSession(model, so, providers=providers)
            os.replace(tmp, cache_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return OrtModel(session)

    def run(self, compiled: OrtModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return compiled.session.run(compiled.outputs, dict(zip(compiled.inputs, inputs)))
