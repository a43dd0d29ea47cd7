"""The deployment side, as paddlelite's: MobileConfig and the LightPredictor over an optimized `.nb`.

The light predictor runs no analysis: it rebuilds one instruction per stored op from the
kernel key `pdlite-opt` (or `CxxPredictor.save_optimized_model`) picked, and takes the
params as views into the file's buffer.
"""
from __future__ import annotations

import os
from typing import Any

from pdlite.api.base import PredictorBase
from pdlite.api.config import ConfigBase, model_and_params
from pdlite.core.types import Place
from pdlite.errors import ConfigError, ModelFormatError
from pdlite.model_parser.naive_buffer import MAGIC as NB_MAGIC
from pdlite.model_parser.naive_buffer import NaiveBufferModel, load_naive_buffer, load_naive_buffer_bytes
from pdlite.registries import load_registries
from pdlite.runtime.build import runtime_from_keys


class MobileConfig(ConfigBase):
    """Config of the light predictor: an optimized model (`.nb`) from a file or from memory.

    pdlite options (`set_option`): "mmap" (bool, default False) maps the file instead of reading
    it; "verify_checksum" (bool, default True) checks the params' crc32 on load.
    """

    def __init__(self) -> None:
        super().__init__()
        self._model_file = ""
        self._model_buffer: bytes | None = None

    def set_model_from_file(self, path: str | os.PathLike) -> None:
        """The optimized .nb model file (written by pdlite-opt or Opt / save_optimized_model)."""
        self._model_file = os.fspath(path)
        self._model_buffer = None

    def model_from_file(self) -> str:
        """The .nb file set with set_model_from_file ('' when the model comes from a buffer)."""
        return self._model_file

    def set_model_from_buffer(self, buffer: bytes | bytearray | memoryview) -> None:
        """The optimized model as the .nb file's bytes (replaces a file set before); ConfigError for other types."""
        if not isinstance(buffer, (bytes, bytearray, memoryview)):
            raise ConfigError(f"set_model_from_buffer: expected the .nb file's bytes, got {type(buffer).__name__}")
        self._model_buffer = bytes(buffer)
        self._model_file = ""

    def is_model_from_memory(self) -> bool:
        """True when the model was given as bytes (set_model_from_buffer)."""
        return self._model_buffer is not None

    def set_model_dir(self, model_dir: str | os.PathLike) -> None:
        """Old paddlelite API: a folder holding `model.nb` (or the `.nb` file itself)."""
        p = os.fspath(model_dir)
        self._model_dir = p
        self.set_model_from_file(os.path.join(p, "model.nb") if os.path.isdir(p) else p)

    def model_dir(self) -> str:
        """paddlelite's model folder of a MobileConfig ('' unless set; .nb models are single files)."""
        return getattr(self, "_model_dir", "")

    def set_model_buffer(self, model_buffer: bytes, *args: Any) -> None:
        """paddlelite's deprecated set_model_buffer(model, model_size, params, params_size) (or (model, params)):
        an optimized `.nb` in `model`, or a Paddle program and its params, optimized for the host here."""
        model, params = model_and_params(model_buffer, args, "MobileConfig.set_model_buffer")
        if model[:len(NB_MAGIC)] != NB_MAGIC:
            model = optimize_to_nb(model, params, self.options)
        self.set_model_from_buffer(model)

    def load(self) -> NaiveBufferModel:
        """Read and check the configured `.nb` (ModelFormatError when it is not a valid one)."""
        load_registries()  # plugins may add the targets the stored kernel keys name
        verify = bool(self.option("verify_checksum", True))
        if self._model_buffer is not None:
            return load_naive_buffer_bytes(self._model_buffer, verify=verify)
        if not self._model_file:
            raise ConfigError("MobileConfig has no model: call set_model_from_file(path.nb) or "
                              "set_model_from_buffer(bytes)")
        return load_naive_buffer(self._model_file, use_mmap=bool(self.option("mmap", False)), verify=verify)


def optimize_to_nb(model: bytes, params: bytes | None, options: dict[str, Any]) -> bytes:
    """A Paddle program (+ params) in memory, analysed for the host and written as `.nb` bytes."""
    import tempfile

    from pdlite.model_parser import load_model
    from pdlite.model_parser.naive_buffer import save_optimized_model
    from pdlite.optimizer.analysis import analyse
    from pdlite.optimizer.pipeline import default_passes

    loaded = load_model(model_buffer=model, param_buffer=params)
    arrays = {k: t.array for k, t in loaded.params.items()}
    analysis = analyse(loaded.program, arrays, [Place()], default_passes(), dict(options))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.nb")
        save_optimized_model(analysis, path, {"passes": default_passes(), "source": "<model buffer>"})
        with open(path, "rb") as f:
            return f.read()


class LightPredictor(PredictorBase):
    """Runs an optimized model: instructions rebuilt from the stored kernel keys, no passes."""

    def __init__(self, config: MobileConfig) -> None:
        if not isinstance(config, MobileConfig):
            raise ConfigError(f"LightPredictor takes a MobileConfig, got {type(config).__name__}")
        self.config = config
        self.model = config.load()
        for n in self.model.feed_names:
            if n not in self.model.program.main.vars:
                raise ModelFormatError(f"{self.model.source}: feed {n!r} has no variable in block 0")
        load_registries({k.target for k in self.model.kernel_keys})
        runtime = runtime_from_keys(self.model.program, self.model.kernel_keys, self.model.release, config.options,
                                    source=self.model.source, writer=self.model.pdlite_version)
        self._setup(self.model.program, runtime, self.model.params, list(self.model.feed_names),
                    list(self.model.fetch_names), config.delegate())
