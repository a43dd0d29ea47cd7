"""Host target kernels: plain vectorised NumPy with Paddle's exact semantics.

Importing this package registers every host kernel (explicit imports, no scanning).
"""
from __future__ import annotations

from pdlite.kernels.host import (  # noqa: F401 (imported to register)
    activation,
    attention,
    bitwise,
    control_flow,
    conv,
    conv3d,
    creation,
    detection,
    elementwise,
    extra,
    fused,
    grid_sample,
    interp,
    linalg,
    manip,
    math,
    nms,
    norm,
    pool,
    pool3d,
    proposals,
    quant,
    quant_int8,
    rnn,
    roi,
    squeeze_excitation,
    tensor,
    type_cast,
    vision,
)
