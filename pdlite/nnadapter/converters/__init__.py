"""Paddle op -> ONNX converters, one module per op family (importing this package registers them)."""
from __future__ import annotations

from pdlite.nnadapter.converters import (  # noqa: F401
    activation,
    conv,
    elementwise,
    indexing,
    interp,
    math,
    norm,
    pool,
    quant,
    tensor,
)
