"""Op definitions: importing this package registers every op (explicit imports, no scanning)."""
from __future__ import annotations
from pdlite.operators import activation, elementwise  # noqa: F401,E402
from pdlite.operators import type_cast  # noqa: F401,E402
