"""Host target kernels: plain vectorised NumPy with Paddle's exact semantics.

Importing this package registers every host kernel (explicit imports, no scanning).
"""
from __future__ import annotations

from pdlite.kernels.host import (  # noqa: F401 (imported to register)
    activation,
    conv,
    creation,
    elementwise,
    extra,
    fused,
    interp,
    math,
    norm,
    pir_ops,
    pool,
    tensor,
    type_cast,
)
