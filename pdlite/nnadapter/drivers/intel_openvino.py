"""Device `intel_openvino`: OpenVINO's Python API reads the ONNX model and compiles it for a device.

Context properties (one `KEY=VALUE;...` string, see CxxConfig.set_nnadapter_context_properties):
- INTEL_OPENVINO_SELECT_DEVICE_NAMES: OpenVINO device (default CPU).
- INTEL_OPENVINO_INFERENCE_NUM_THREADS: INFERENCE_NUM_THREADS (default: OpenVINO's, all cores).
- INTEL_OPENVINO_INFERENCE_PRECISION_HINT: f32 (default, matches the host kernels), f16 or bf16.
- INTEL_OPENVINO_PERFORMANCE_HINT: LATENCY (default) or THROUGHPUT.
- INTEL_OPENVINO_SNIPPETS: static (default), all or none: which compiled models use OpenVINO's snippets (its CPU
  plugin's JIT-generated fused subgraphs: attention blocks, eltwise chains; `SNIPPETS_MODE`). A snippet is
  generated for the shapes it runs at, so on a model with dynamic dims every new input shape compiles each
  snippet again: an attention block (Transpose, MatMul, Softmax, MatMul, Transpose) ~0.16 ms per new shape
  against ~0.01 ms as separate ops (OpenVINO 2026.4, 2 threads); the ERNIE-like encoder (~0.25 ms a call) ran
  12 new lengths at 3.3x the cost of the same lengths again with snippets, 1.6x without, and the same lengths
  again ~10% slower without. `static` compiles the models for all shapes (dynamic dims) without snippets and
  those for one shape (a hot signature's, per-shape ones) with them; `all` is OpenVINO's default everywhere.
- INTEL_OPENVINO_CPU_PINNING: off (default) or on: whether OpenVINO pins its CPU threads to cores
  (`ENABLE_CPU_PINNING`, OpenVINO's default for a LATENCY model on Linux). A pinned thread cannot leave a core that
  another process (or another runtime in this process) keeps busy, and waits there: on a shared 2-vCPU machine
  (load ~3-4.7, OpenVINO 2026.4, 2 threads, processes alternating) unpinned PP-OCR cls ran at 0.47-0.60x the
  pinned time in runs of 5 after a pause (compare.py's blocks; a call after idle), MobileNetV3-small at 0.57-0.83x;
  200 runs back to back: PP-OCR cls the same (within 2%, load ~3.5), MobileNetV3-small 0.26x (load ~4.7).
The model cache holds OpenVINO's exported compiled model (`CompiledModel.export_model`). Every TopK is made
stable before compiling (`stable_top_k`: ties in index order, as ONNX and Paddle define it).

Running: each compiled model keeps one infer request. An input array is bound to the request as a shared
(zero-copy) tensor and stays bound while the next run passes the same array object (the request then runs
with no Python-side input handling: `InferRequest.infer(inputs)` costs ~0.1 ms per call on small models, in
its input dispatch); a new array is bound anew, one that cannot be shared (not C-contiguous, read-only, another
dtype) is copied first. Outputs are OpenVINO's copies (`share_outputs` off): a later run never writes into
arrays already returned.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, PdliteError
from pdlite.nnadapter.drivers.base import Driver, int_property, write_atomic
from pdlite.nnadapter.registry import register_driver

PRECISIONS = ("f32", "f16", "bf16")
HINTS = ("LATENCY", "THROUGHPUT")
SNIPPETS = ("static", "all", "none")  # INTEL_OPENVINO_SNIPPETS: the models compiled with OpenVINO's snippets
PINNING = ("off", "on")  # INTEL_OPENVINO_CPU_PINNING


class OpenVINOModel:
    """A compiled model with its one infer request (reused by every run) and the arrays bound to its inputs.

    `order[j]`: which of the ONNX model's inputs (the arrays `run` gets) feeds the compiled model's input j
    (OpenVINO drops ONNX inputs that nothing reads)."""

    __slots__ = ("compiled", "request", "n_inputs", "order", "dtypes", "bound", "held", "tensor")

    def __init__(self, compiled: Any, tensor: Any, onnx_inputs: Sequence[str]) -> None:
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.n_inputs = len(onnx_inputs)
        self.order = []
        for port in compiled.inputs:
            names = port.get_names()
            found = [k for k, n in enumerate(onnx_inputs) if n in names]
            if not found:
                raise PdliteError(f"OpenVINO's compiled input {sorted(names)} is none of the ONNX model's "
                                  f"inputs {list(onnx_inputs)}")
            self.order.append(found[0])
        self.dtypes = [np.dtype(i.get_element_type().to_dtype()) for i in compiled.inputs]
        self.bound: list[Any] = [None] * len(self.order)  # the caller's array bound to each input, if shared
        self.held: list[Any] = [None] * len(self.order)  # the array each input tensor reads (kept alive here)
        self.tensor = tensor  # openvino.Tensor

    def bind(self, inputs: Sequence[np.ndarray]) -> None:
        """Share each input array with the request, unless it is the array already bound there."""
        if len(inputs) != self.n_inputs:
            raise PdliteError(f"the model takes {self.n_inputs} input(s), got {len(inputs)}")
        for i, k in enumerate(self.order):
            a = inputs[k]
            if a is self.bound[i]:
                continue
            arr = a
            if not (type(a) is np.ndarray and a.dtype == self.dtypes[i] and a.flags.c_contiguous
                    and a.flags.writeable):
                arr = np.array(a, dtype=self.dtypes[i], order="C", copy=True)
            self.request.set_input_tensor(i, self.tensor(arr, shared_memory=True))
            self.held[i] = arr
            self.bound[i] = a if arr is a else None  # after a copy, the same array is copied again next run


def onnx_inputs(model: bytes) -> tuple[list[str], bool]:
    """The graph inputs of an ONNX model, in order (initializers listed as inputs by old exporters left out), and
    whether any of them has a dim that is not a fixed size (a model for more than one input shape)."""
    import onnx

    graph = onnx.load_from_string(model).graph
    inits = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    dynamic = any(not d.HasField("dim_value") for i in inputs for d in i.type.tensor_type.shape.dim)
    return [i.name for i in inputs], dynamic


def stable_top_k(model: Any) -> Any:
    """`model` (an openvino.Model read from ONNX) with every TopK stable, as ONNX's TopK is (equal values keep
    their index order, as Paddle's and the host's top_k): OpenVINO's ONNX frontend makes TopK-11 with
    stable=False, and its CPU plugin then orders ties arbitrarily in models with dynamic dims (the indices
    differed from the host's on rounded inputs; static models happened to keep the order)."""
    for op in model.get_ordered_ops():
        if op.get_type_name() == "TopK" and op.get_attributes().get("stable") is False:
            op.set_attribute("stable", True)
    return model


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX-BF16): where OpenVINO's own default
    inference precision is bf16 (`INFERENCE_PRECISION_HINT`; pdlite's default stays f32, Paddle's numbers). Read
    from /proc/cpuinfo's flags; elsewhere (no /proc) from OpenVINO's OPTIMIZATION_CAPABILITIES when it is installed."""
    if _NATIVE_BF16:
        return _NATIVE_BF16[0]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
        found = "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        found = False
        if OpenVINODriver.available():
            import openvino

            found = "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    _NATIVE_BF16.append(found)
    return found


_NATIVE_BF16: list[bool] = []  # native_bf16's answer, once asked


@register_driver("intel_openvino")
class OpenVINODriver(Driver):
    packages = ("openvino",)
    extra = "openvino"
    prefix = "INTEL_OPENVINO_"
    dynamic_int8 = False  # its dynamic models run int8 subgraphs far from Paddle's numbers (Driver.dynamic_int8)
    promote_hot_shapes = True  # its static models run faster than its dynamic ones (Driver.promote_hot_shapes)
    # unpinned threads (the default) hold up where other work shares the cores; on cores left to this process,
    # pinned ones ran MobileNetV3-small 12-16% faster (quiet re-runs): `auto` measures both
    auto_variants = {"pinned": {"INTEL_OPENVINO_CPU_PINNING": "on"}}
    properties = {
        "INTEL_OPENVINO_SELECT_DEVICE_NAMES": "OpenVINO device to compile for (default CPU)",
        "INTEL_OPENVINO_INFERENCE_NUM_THREADS": "CPU threads (default: OpenVINO's choice)",
        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT": "f32 (default), f16 or bf16",
        "INTEL_OPENVINO_PERFORMANCE_HINT": "LATENCY (default) or THROUGHPUT",
        "INTEL_OPENVINO_SNIPPETS": "static (default: OpenVINO's snippets only in models compiled for one shape; "
                                   "a model with dynamic dims would compile them again at every new shape), "
                                   "all or none",
        "INTEL_OPENVINO_CPU_PINNING": "off (default: threads free to move off a core kept busy elsewhere) or on "
                                      "(OpenVINO's default: pinned to cores)",
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
        pinning = mine.get("INTEL_OPENVINO_CPU_PINNING", "off").lower() or "off"
        if pinning not in PINNING:
            raise ConfigError(f"INTEL_OPENVINO_CPU_PINNING={pinning!r}: expected one of {PINNING}")
        if device.upper() == "CPU":  # (a CPU plugin property: other devices refuse it)
            cfg["ENABLE_CPU_PINNING"] = pinning == "on"
        return device, cfg

    @classmethod
    def snippets(cls, props: Mapping[str, str]) -> str:
        """INTEL_OPENVINO_SNIPPETS's value (static, all or none)."""
        mode = cls.own_properties(props).get("INTEL_OPENVINO_SNIPPETS", "static").lower() or "static"
        if mode not in SNIPPETS:
            raise ConfigError(f"INTEL_OPENVINO_SNIPPETS={mode!r}: expected one of {SNIPPETS}")
        return mode

    def cache_token(self, props: Mapping[str, str]) -> str:
        return f"snippets={self.snippets(props)};topk=stable"

    def build(self, model: bytes, props: Mapping[str, str], cache_path: str | None = None) -> OpenVINOModel:
        device, cfg = self.config(props)
        names, dynamic = onnx_inputs(model)
        mode = self.snippets(props)
        if mode == "none" or (mode == "static" and dynamic):
            cfg["SNIPPETS_MODE"] = "DISABLE"
        if cache_path and os.path.isfile(cache_path):
            with open(cache_path, "rb") as f:
                return OpenVINOModel(self._core.import_model(f.read(), device, cfg), self._ov.Tensor, names)
        compiled = self._core.compile_model(stable_top_k(self._core.read_model(model)), device, cfg)
        if cache_path:
            blob = compiled.export_model()
            write_atomic(cache_path, blob.getvalue() if hasattr(blob, "getvalue") else bytes(blob))
        return OpenVINOModel(compiled, self._ov.Tensor, names)

    def run(self, compiled: OpenVINOModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        compiled.bind(inputs)
        return list(compiled.request.infer().to_tuple())
