"""Op definitions: importing this package registers every op (explicit imports, no scanning)."""
from __future__ import annotations

from pdlite.operators import (  # noqa: F401 (imported to register)
    activation,
    bitwise,
    control_flow,
    creation,
    detection,
    elementwise,
    extra,
    fused,
    linalg,
    manip,
    math,
    nn,
    nn3d,
    pool,
    quant,
    rnn,
    roi,
    squeeze_excitation,
    subgraph,
    tensor,
    type_cast,
    vision,
)
