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
