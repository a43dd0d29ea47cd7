"""The Python API, compatible with paddlelite's."""
from __future__ import annotations

from pdlite.api.config import CLPrecisionType, CLTuneMode, CxxConfig
from pdlite.api.mobile import LightPredictor, MobileConfig
from pdlite.api.opt import Opt
from pdlite.api.predictor import CxxPredictor, create_paddle_predictor
from pdlite.api.tensor import Tensor
from pdlite.core.types import DataLayoutType, Place, PowerMode, PrecisionType, TargetType

__all__ = [
    "CLPrecisionType",
    "CLTuneMode",
    "CxxConfig",
    "CxxPredictor",
    "DataLayoutType",
    "LightPredictor",
    "MobileConfig",
    "Opt",
    "Place",
    "PowerMode",
    "PrecisionType",
    "TargetType",
    "Tensor",
    "create_paddle_predictor",
]
