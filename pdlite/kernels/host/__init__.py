"""Host target kernels: plain vectorised NumPy with Paddle's exact semantics.

Importing this package registers every host kernel (explicit imports, no scanning).
"""
from __future__ import annotations
from pdlite.kernels.host import activation, elementwise  # noqa: F401,E402
from pdlite.kernels.host import type_cast  # noqa: F401,E402
from pdlite.kernels.host import conv, interp, norm, pool  # noqa: F401,E402
from pdlite.kernels.host import pir_ops  # noqa: F401,E402
from pdlite.kernels.host import fused  # noqa: F401,E402
from pdlite.kernels.host import creation, math, tensor  # noqa: F401,E402
from pdlite.kernels.host import extra  # noqa: F401,E402
