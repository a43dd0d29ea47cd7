"""pdlite: a Python inference engine for PaddlePaddle models, on Paddle-Lite's architecture."""
from __future__ import annotations

__version__ = "0.1.0"

from pdlite.api import *  # noqa: E402,F401,F403
from pdlite.api import __all__ as _api_all  # noqa: E402
from pdlite.errors import PdliteError  # noqa: E402

__all__ = ["PdliteError", "__version__", *_api_all]
