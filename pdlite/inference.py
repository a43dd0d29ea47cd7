"""`from pdlite import inference` gives paddle.inference's names, so deploy scripts run with that one line changed."""
from __future__ import annotations

from pdlite.api.inference import *  # noqa: F401,F403
from pdlite.api.inference import __all__  # noqa: F401
