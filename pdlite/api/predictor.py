"""Predictors, as paddlelite's: `create_paddle_predictor(config)` -> CxxPredictor or LightPredictor."""
from __future__ import annotations

import os
from typing import Any

from pdlite.api.base import PredictorBase
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
        # `set_nnadapter_device_names(["auto"])`: built for the host (the reference); each call then runs where
        # the online policy says (pdlite/api/auto_online.py: new shapes priced, devices checked, cached by content)
        base: CxxConfig | None = None
        if config.nnadapter_device_names() == [AUTO]:
            from pdlite.api.auto import apply_device, copy_config

            base = copy_config(config)
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
        self.analysis = analyse(model.program, params, config.analysis_places(), config.passes(), config.options)
        self._setup(model.program, self.analysis.runtime, self.analysis.ctx.params, self.analysis.feed_names,
                    self.analysis.fetch_names, config.delegate())
        picked = {i.kernel_def.key.target for i in self.analysis.runtime.instructions if i.kernel_def is not None}
        warn_host_fallback(config.valid_places(), picked)
        self._auto: Any = None
        if base is not None:
            from pdlite.api.auto_online import AutoRunner

            self._auto = AutoRunner(base, self.clone(), CxxPredictor)

    @property
    def auto_choice(self) -> Any:
        """With the auto device: where its calls go now (an AutoChoice, pdlite/api/auto.py), once it ran; else None."""
        if self._auto is None or not self._auto.policy.calls:
            return None
        return self._auto.choice()

    def run(self) -> None:
        """Run the model on the inputs set through get_input(i) / get_input_by_name(name); read the outputs with
        get_output(i) (with the `auto` device: on the device measured fastest for this input shape)."""
        if self._auto is not None:
            self._auto.run(self, PredictorBase.run)
        else:
            super().run()

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
