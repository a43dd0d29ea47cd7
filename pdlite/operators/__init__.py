"""Op definitions: importing this package registers every op (explicit imports, no scanning)."""
from __future__ import annotations
from pdlite.operators import activation, elementwise  # noqa: F401,E402
from pdlite.operators import type_cast  # noqa: F401,E402
from pdlite.operators import nn  # noqa: F401,E402
from pdlite.operators import pir_ops  # noqa: F401,E402
from pdlite.operators import fused  # noqa: F401,E402
from pdlite.operators import creation, math, tensor  # noqa: F401,E402
from pdlite.operators import extra  # noqa: F401,E402
