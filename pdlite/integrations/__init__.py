"""Integrations of pdlite with other systems (Ray, ...), each an optional extra.

Like `pdlite.apps`, they sit above the API and use only its public surface (`pdlite.api`:
configs, `create_paddle_predictor`, `predictor.predict`), never engine internals.

- `pdlite.integrations.ray`: batch inference over a Ray Dataset (`pip install pdlite[ray]`),
  see docs/batch.md.
- `pdlite.integrations.mlserver`, `pdlite.integrations.ray_serve`: online serving on MLServer and Ray Serve
  (KServe V2 protocol; `pip install pdlite[serve]`), sharing `pdlite.integrations.serving`; see docs/serving.md.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pdlite.api import create_paddle_predictor
from pdlite.api.from_path import configured


def predictor_from_path(model: str | os.PathLike, params: str | os.PathLike | None = None, threads: int = 1,
                        options: Mapping[str, Any] | None = None) -> Any:
    """A predictor for MODEL: an optimized `.nb` file, a model folder (legacy or PIR, any layout), or a
    program file with its PARAMS file. `threads` is the predictor's compute thread count; `options`
    are pdlite options (`config.set_option`)."""
    return create_paddle_predictor(configured(model, params, threads, dict(options or {})))
