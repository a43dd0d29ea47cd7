"""pdlite: a Python inference engine for PaddlePaddle models, on Paddle-Lite's architecture.

Loads exported Paddle models (`inference.pdmodel` + `.pdiparams`, `__model__` + `__params__`, non-combined
folders, Paddle 3 PIR `inference.json`, pdlite's optimized `.nb`) and runs them with NumPy and optional native
kernels on the CPU, or on OpenVINO / ONNX Runtime (NNAdapter devices), CUDA (torch) and delegates.

Three ways in:

- `pdlite.lite` (also `pdlite` itself): paddlelite's API. `CxxConfig` / `MobileConfig`, `create_paddle_predictor`,
  `Tensor`, `Opt` (the `.nb` writer)::

      from pdlite.lite import CxxConfig, create_paddle_predictor
      config = CxxConfig()
      config.set_model_dir("model_dir")
      predictor = create_paddle_predictor(config)
      predictor.get_input(0).from_numpy(x)
      predictor.run()
      y = predictor.get_output(0).numpy()

- `pdlite.inference`: paddle.inference's API (`from pdlite import inference` in place of
  `from paddle import inference`): `Config`, `create_predictor`, `Predictor`, `Tensor`.
- `pdlite.apps.ocr.OCR`: PP-OCR end to end (`pip install pdlite[ocr]`): `OCR()("image.png")`.

Errors are `pdlite.errors.PdliteError` subclasses (`ConfigError`, `InputError`, `ModelFormatError`,
`MissingDependencyError`, ...) naming the file, variable, op or option and what was expected. The command line:
`pdlite --help` (run, bench, inspect, ocr, batch, quantize, doctor, ...) and `pdlite-opt`. Documentation: README.md
and docs/ in the source tree; the API reference: docs/api/.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from pdlite.api import *  # noqa: E402,F401,F403
from pdlite.api import __all__ as _api_all  # noqa: E402
from pdlite.errors import PdliteError  # noqa: E402

__all__ = ["PdliteError", "__version__", *_api_all]
del _api_all

_SUBMODULES = ("errors", "inference", "lite")  # imported on first use: `pdlite.inference.Config(...)`


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"pdlite.{name}")
    raise AttributeError(f"module 'pdlite' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names and the submodules users reach (not the names the imports leave behind)."""
    return sorted({*__all__, *_SUBMODULES})
