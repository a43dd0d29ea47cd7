"""Op definitions: importing this package registers every op (explicit imports, no scanning)."""
from __future__ import annotations

from pdlite.operators import (  # noqa: F401 (imported to register)
    activation,
    creation,
    elementwise,
    extra,
    fused,
    math,
    nn,
    pir_ops,
    tensor,
    type_cast,
)
