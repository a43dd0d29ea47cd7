"""Predictors, as paddlelite's: `create_paddle_predictor(config)` -> CxxPredictor or LightPredictor."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite import __version__
from pdlite.api.config import CxxConfig
from pdlite.api.tensor import Tensor
from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import Program
from pdlite.errors import ConfigError, InputError
from pdlite.runtime.instruction import check_feed
from pdlite.runtime.profiler import HookChain, PrecisionProfiler, Profiler
from pdlite.runtime.runtime_program import Hook, RuntimeProgram
from pdlite.runtime.threads import set_blas_threads


class PredictorBase:
    """What both predictors share: named input/output tensors around a runtime program."""

    def _setup(self, program: Program, runtime: RuntimeProgram, params: dict[str, Any],
               feed_names: list[str], fetch_names: list[str], delegate: Any = None) -> None:
        self._program = program
        self._runtime = runtime
        self._params = params
        self._feed_names = feed_names
        self._fetch_names = fetch_names
        block = program.main
        self._feed_specs: dict[str, tuple[list[int], np.dtype | None]] = {}
        for n in feed_names:
            v = block.vars.get(n)
            dt = numpy_dtype(v.dtype, f"feed {n!r}") if v is not None and v.dtype is not None else None
            self._feed_specs[n] = (list(v.shape) if v is not None else [], dt)
        self._inputs = [Tensor(n, *reversed(self._feed_specs[n])) for n in feed_names]
        self._outputs = [Tensor(n) for n in fetch_names]
        runtime.prepare(params)
        if delegate is not None:
            from pdlite.delegate.runner import apply_delegate

            self._runtime = apply_delegate(delegate, program, runtime, params, fetch_names)
        config = getattr(self, "config", None)
        options = config.options if config is not None else {}
        self._threads = config.threads() if config is not None else 1
        self.profiler = Profiler() if options.get("profile") else None
        self.precision_profiler = PrecisionProfiler() if options.get("precision_profile") else None
        self._hook: Hook | None = None
        if self.profiler or self.precision_profiler:
            self._hook = HookChain(self.profiler, self.precision_profiler)

    # -- paddlelite API -----------------------------------------------------------------------
    def get_input(self, i: int) -> Tensor:
        if not 0 <= i < len(self._inputs):
            raise InputError(f"get_input({i}): the model has {len(self._inputs)} input(s): {self._feed_names}")
        return self._inputs[i]

    def get_output(self, i: int) -> Tensor:
        if not 0 <= i < len(self._outputs):
            raise InputError(f"get_output({i}): the model has {len(self._outputs)} output(s): {self._fetch_names}")
        return self._outputs[i]

    def get_input_by_name(self, name: str) -> Tensor:
        try:
            return self._inputs[self._feed_names.index(name)]
        except ValueError:
            raise InputError(f"no input named {name!r}; inputs are {self._feed_names}") from None

    def get_output_by_name(self, name: str) -> Tensor:
        try:
            return self._outputs[self._fetch_names.index(name)]
        except ValueError:
            raise InputError(f"no output named {name!r}; outputs are {self._fetch_names}") from None

    def get_input_names(self) -> list[str]:
        return list(self._feed_names)

    def get_output_names(self) -> list[str]:
        return list(self._fetch_names)

    def get_version(self) -> str:
        return __version__

    def run(self) -> None:
        scope: dict[str, Any] = dict(self._params)
        for t in self._inputs:
            data = t.raw()
            if data is None:
                raise InputError(f"input {t.name!r} was not set; call get_input_by_name({t.name!r}).from_numpy(...) "
                                 f"(inputs: {self._feed_names})")
            shape, dtype = self._feed_specs[t.name]
            if isinstance(data, np.ndarray):
                check_feed(t.name, data, shape, dtype)
            scope[t.name] = data
        set_blas_threads(self._threads)
        self._runtime.run(scope, self._hook)
        for t in self._outputs:
            t._set(scope[t.name])

    # -- pdlite conveniences ------------------------------------------------------------------
    def predict(self, feeds: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Set inputs (by name or position), run, and return the outputs as NumPy arrays."""
        if isinstance(feeds, Mapping):
            unknown = set(feeds) - set(self._feed_names)
            if unknown:
                raise InputError(f"unknown input(s) {sorted(unknown)}; inputs are {self._feed_names}")
            for k, v in feeds.items():
                self.get_input_by_name(k).from_numpy(v)
        else:
            feeds = list(feeds)
            if len(feeds) != len(self._inputs):
                raise InputError(f"expected {len(self._inputs)} input(s) {self._feed_names}, got {len(feeds)}")
            for t, v in zip(self._inputs, feeds):
                t.from_numpy(v)
        self.run()
        return [t.numpy() for t in self._outputs]

    def set_hook(self, hook: Hook | None) -> None:
        """Call `hook(instruction, seconds, scope)` after every instruction (profilers use this)."""
        self._hook = hook

    @property
    def runtime_program(self) -> RuntimeProgram:
        return self._runtime

    @property
    def program(self) -> Program:
        return self._program


class CxxPredictor(PredictorBase):
    """The full predictor: loads a Paddle model, runs the analysis phase, then executes."""

    def __init__(self, config: CxxConfig) -> None:
        from pdlite.model_parser import load_model
        from pdlite.optimizer.analysis import analyse

        self.config = config
        src = config.model_source()
        if not any(src.values()):
            raise ConfigError("CxxConfig has no model: call set_model_dir(dir), set_model_file(f) + set_param_file(f), "
                              "or set_model_buffer(model_bytes, params_bytes)")
        model = load_model(**src)
        params = {k: t.array for k, t in model.params.items()}
        self.analysis = analyse(model.program, params, config.valid_places(), config.passes(), config.options)
        self._setup(model.program, self.analysis.runtime, self.analysis.ctx.params, self.analysis.feed_names,
                    self.analysis.fetch_names, config.delegate())

    def save_optimized_model(self, path: str) -> str:
        """Write the optimized model to `path + ".nb"` (as paddlelite does) for MobileConfig; returns that path."""
        from pdlite.model_parser.naive_buffer import save_optimized_model

        out = str(path) + ".nb"
        save_optimized_model(self.analysis, out, {"passes": list(self.config.passes())})
        return out


def create_paddle_predictor(config: Any) -> PredictorBase:
    """A predictor for a CxxConfig (full analysis) or a MobileConfig (optimized model)."""
    if isinstance(config, CxxConfig):
        return CxxPredictor(config)
    try:
        from pdlite.api.mobile import LightPredictor, MobileConfig
    except ImportError:  # pragma: no cover
        MobileConfig = None  # type: ignore[assignment,misc]
    if MobileConfig is not None and isinstance(config, MobileConfig):
        return LightPredictor(config)
    raise ConfigError(f"create_paddle_predictor takes a CxxConfig or a MobileConfig, got {type(config).__name__}")
