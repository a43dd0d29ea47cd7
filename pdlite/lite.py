"""`from pdlite.lite import *` gives paddlelite's names, so demo code runs unchanged."""
from __future__ import annotations

from pdlite.api import *  # noqa: F401,F403
from pdlite.api import __all__  # noqa: F401
