"""Predictors, as paddlelite's: `create_paddle_predictor(config)` -> CxxPredictor or LightPredictor."""
from __future__ import annotations

import os
import threading
from typing import Any

from pdlite.api.base import PER_PREDICTOR, PredictorBase
from pdlite.api.config import CxxConfig, warn_host_fallback
from pdlite.api.mobile import LightPredictor, MobileConfig
from pdlite.errors import ConfigError

__all__ = ["CxxPredictor", "LightPredictor", "PredictorBase", "create_paddle_predictor"]

AUTO = "auto"  # the device name that asks pdlite to measure and pick (pdlite/api/auto.py)


class CxxPredictor(PredictorBase):
    """The full predictor: loads a Paddle model, runs the analysis phase, then executes."""

    def __init__(self, config: CxxConfig) -> None:
        from pdlite.model_parser import load_model
        from pdlite.optimizer.analysis import analyse

        self.config = config
        # `set_nnadapter_device_names(["auto"])`: built for the host now, the device picked on the first run's
        # real inputs (pdlite/api/auto.py: measured, checked against the host, cached per model and shape)
        self._auto: CxxConfig | None = None
        self._auto_lock = threading.Lock()  # shared by clones: one picks (the others then hit the cache)
        if config.nnadapter_device_names() == [AUTO]:
            from pdlite.api.auto import apply_device, copy_config

            self._auto = copy_config(config)
            config = copy_config(config)
            apply_device(config, "host")
        elif AUTO in config.nnadapter_device_names():
            raise ConfigError(f"set_nnadapter_device_names: 'auto' picks one device by itself; give ['auto'] alone, "
                              f"got {config.nnadapter_device_names()}")
        src = config.model_source()
        if not any(src.values()):
            raise ConfigError("CxxConfig has no model: call set_model_dir(dir), set_model_file(f) + set_param_file(f), "
                              "or set_model_buffer(model_bytes, params_bytes)")
        model = load_model(**src)
        params = {k: t.array for k, t in model.params.items()}
        self.analysis = analyse(model.program, params, config.valid_places(), config.passes(), config.options)
        self.auto_choice: Any = None  # the AutoChoice once the auto device was picked
        self._setup(model.program, self.analysis.runtime, self.analysis.ctx.params, self.analysis.feed_names,
                    self.analysis.fetch_names, config.delegate())
        picked = {i.kernel_def.key.target for i in self.analysis.runtime.instructions if i.kernel_def is not None}
        warn_host_fallback(config.valid_places(), picked)

    def run(self) -> None:
        if self._auto is not None:
            self._resolve_auto()
        super().run()

    def _resolve_auto(self) -> None:
        """Pick the auto device on this thread's inputs; rebuild on it unless the host won (clones decide alone)."""
        with self._auto_lock:
            if self._auto is not None:
                self._pick_auto(self._auto)

    def _pick_auto(self, base: CxxConfig) -> None:
        from pdlite.api.auto import apply_device, choose_device

        feeds = {t.name: t.numpy() for t in self._inputs if t.raw() is not None}
        if len(feeds) < len(self._inputs):
            return  # base.run() reports the missing input
        choice = choose_device(base, feeds, CxxPredictor, keep=True)
        chosen, choice.predictor = choice.predictor, None
        if choice.device != "host":
            if chosen is None:  # a cached choice: build it
                cfg = base
                apply_device(cfg, choice.device)
                chosen = CxxPredictor(cfg)
            inputs, outputs = self._inputs, self._outputs
            self.__dict__.update({k: v for k, v in chosen.__dict__.items() if k not in PER_PREDICTOR})
            self._inputs, self._outputs = inputs, outputs
        self.auto_choice = choice
        self._auto = None

    def save_optimized_model(self, path: str) -> str:
        """Write the optimized model to `path + ".nb"` (as paddlelite does) for MobileConfig; returns that path."""
        from pdlite.model_parser.naive_buffer import save_optimized_model

        out = str(path) + ".nb"
        save_optimized_model(self.analysis, out, {"passes": list(self.config.passes())})
        return out

    def save_optimized_pb_model(self, output_dir: str) -> str:
        """paddlelite's protobuf form: `output_dir/inference.pdmodel` + `.pdiparams` (pdlite's fused ops kept,
        so pdlite loads it; Paddle may not). Returns the .pdmodel path."""
        from pdlite.api.opt import save_optimized_protobuf

        os.makedirs(output_dir, exist_ok=True)
        return save_optimized_protobuf(self.analysis, os.path.join(output_dir, "inference"))[0]

    def Synchronize(self) -> None:  # noqa: N802 - paddlelite's name
        """Runs are synchronous (outputs are on the host when run() returns): nothing to wait for."""


def create_paddle_predictor(config: Any) -> PredictorBase:
    """A predictor for a CxxConfig (full analysis) or a MobileConfig (optimized model)."""
    if isinstance(config, CxxConfig):
        return CxxPredictor(config)
    if isinstance(config, MobileConfig):
        return LightPredictor(config)
    raise ConfigError(f"create_paddle_predictor takes a CxxConfig or a MobileConfig, got {type(config).__name__}")
