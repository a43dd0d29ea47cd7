"""Configurations, as paddlelite's: CxxConfig (full analysis) and MobileConfig (optimized model)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pdlite.core.types import DataLayoutType, Place, PowerMode, PrecisionType, TargetType
from pdlite.errors import ConfigError


class ConfigBase:
    def __init__(self) -> None:
        self._threads = 1
        self._power_mode = PowerMode.LITE_POWER_NO_BIND
        self._options: dict[str, Any] = {}

    def set_threads(self, threads: int) -> None:
        if int(threads) < 1:
            raise ConfigError(f"set_threads: threads must be >= 1, got {threads}")
        self._threads = int(threads)

    def threads(self) -> int:
        return self._threads

    def set_power_mode(self, mode: PowerMode | int) -> None:
        self._power_mode = PowerMode(mode)

    def power_mode(self) -> PowerMode:
        return self._power_mode

    def set_delegate(self, delegate: Any) -> None:
        """Hand runs of kernels to a `pdlite.delegate.Delegate` (None: pdlite's own kernels only)."""
        from pdlite.delegate import Delegate

        if delegate is not None and not isinstance(delegate, Delegate):
            raise ConfigError(f"set_delegate: expected a pdlite.delegate.Delegate, got {type(delegate).__name__}")
        self._delegate = delegate

    def delegate(self) -> Any:
        return getattr(self, "_delegate", None)

    def enable_profiler(self, on: bool = True) -> None:
        """Time every op; read `predictor.profiler.table()` after runs."""
        self._options["profile"] = bool(on)

    def enable_precision_profiler(self, on: bool = True) -> None:
        """Record statistics of every op's outputs; read `predictor.precision_profiler.table()`."""
        self._options["precision_profile"] = bool(on)

    # pdlite extensions: free-form options read by passes, kernels and tools
    def set_option(self, key: str, value: Any) -> None:
        self._options[key] = value

    def option(self, key: str, default: Any = None) -> Any:
        return self._options.get(key, default)

    @property
    def options(self) -> dict[str, Any]:
        return self._options

    # CUDA target (kernels on torch; see docs/cuda.md)
    def set_cuda_device(self, device: str) -> None:
        """The torch device of the CUDA kernels: "cuda", "cuda:1", or "cpu" (same kernels on torch's CPU)."""
        if not isinstance(device, str) or device.split(":")[0] not in ("cuda", "cpu"):
            raise ConfigError(f"set_cuda_device: give 'cuda', 'cuda:<index>' or 'cpu', got {device!r}")
        self._options["cuda_device"] = device

    def set_cuda_graph(self, on: bool = True) -> None:
        """Capture the device part of the program in a CUDA graph and replay it (recaptured per input shapes)."""
        self._options["cuda_graph"] = bool(on)

    def set_cuda_device_outputs(self, on: bool = True) -> None:
        """Leave fetched results on the device: outputs' `raw()` are torch tensors (`numpy()` still copies)."""
        self._options["cuda_device_outputs"] = bool(on)

    # -- NNAdapter (subgraphs on other runtimes; see docs/nnadapter.md) --------------------------
    def set_nnadapter_device_names(self, names: Sequence[str]) -> None:
        """Devices that run the supported subgraphs, in preference order ("intel_openvino", "onnxruntime")."""
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"set_nnadapter_device_names: give a list of device names, got {names!r}")
        self._options["nnadapter_device_names"] = list(names)

    def nnadapter_device_names(self) -> list[str]:
        return list(self._options.get("nnadapter_device_names", []))

    def set_nnadapter_context_properties(self, properties: str) -> None:
        """Device settings as "KEY=VALUE;KEY=VALUE", e.g. "INTEL_OPENVINO_INFERENCE_NUM_THREADS=2"."""
        from pdlite.nnadapter.options import parse_context_properties

        parse_context_properties(properties)  # refuse malformed text now
        self._options["nnadapter_context_properties"] = str(properties)

    def nnadapter_context_properties(self) -> str:
        return str(self._options.get("nnadapter_context_properties", ""))

    def set_nnadapter_model_cache_dir(self, model_cache_dir: str | os.PathLike) -> None:
        """Keep compiled device models in this folder and reuse them across predictors."""
        self._options["nnadapter_model_cache_dir"] = os.fspath(model_cache_dir)

    def set_nnadapter_subgraph_partition_config_path(self, path: str | os.PathLike) -> None:
        """A file of ops to keep off the device: lines `op_type` or `op_type:in_var,...:out_var,...`."""
        self._options["nnadapter_subgraph_partition_config_path"] = os.fspath(path)

    def set_nnadapter_subgraph_partition_config_buffer(self, text: str) -> None:
        """The partition config's text itself (same format as the file)."""
        self._options["nnadapter_subgraph_partition_config_buffer"] = str(text)


class CxxConfig(ConfigBase):
    """Config of the full predictor: loads any Paddle model format and runs the analysis phase."""

    def __init__(self) -> None:
        super().__init__()
        self._model_dir = ""
        self._model_file = ""
        self._param_file = ""
        self._model_buffer: bytes | None = None
        self._param_buffer: bytes | None = None
        self._valid_places: list[Place] = [Place(TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW)]
        self._passes: list[str] | None = None

    # -- model --------------------------------------------------------------------------------
    def set_model_dir(self, model_dir: str | os.PathLike) -> None:
        self._model_dir = os.fspath(model_dir)

    def model_dir(self) -> str:
        return self._model_dir

    def set_model_file(self, path: str | os.PathLike) -> None:
        self._model_file = os.fspath(path)

    def model_file(self) -> str:
        return self._model_file

    def set_param_file(self, path: str | os.PathLike) -> None:
        self._param_file = os.fspath(path)

    def param_file(self) -> str:
        return self._param_file

    def set_model_buffer(self, model_buffer: bytes, param_buffer: bytes | None = None) -> None:
        if not isinstance(model_buffer, (bytes, bytearray, memoryview)):
            raise ConfigError(f"set_model_buffer: model_buffer must be bytes, got {type(model_buffer).__name__}")
        self._model_buffer = bytes(model_buffer)
        self._param_buffer = bytes(param_buffer) if param_buffer is not None else None

    def is_model_from_memory(self) -> bool:
        return self._model_buffer is not None

    # -- places and passes --------------------------------------------------------------------
    def set_valid_places(self, places: Sequence[Place]) -> None:
        places = list(places)
        if not places or not all(isinstance(p, Place) for p in places):
            raise ConfigError("set_valid_places: give a non-empty list of pdlite.Place")
        self._valid_places = places

    def valid_places(self) -> list[Place]:
        return list(self._valid_places)

    def set_passes(self, passes: Sequence[str]) -> None:
        """Override the analysis pipeline (an ordered list of pass names; see `pdlite.default_passes()`)."""
        self._passes = list(passes)

    def passes(self) -> list[str]:
        from pdlite.optimizer.pipeline import default_passes

        return list(self._passes) if self._passes is not None else default_passes()

    def set_graph_debug(self, on: bool = True) -> None:
        """Lint the graph after every pass and name the pass that broke it."""
        self._options["graph_debug"] = bool(on)

    def model_source(self) -> dict[str, Any]:
        return dict(model_dir=self._model_dir or None, model_file=self._model_file or None,
                    param_file=self._param_file or None, model_buffer=self._model_buffer,
                    param_buffer=self._param_buffer)
