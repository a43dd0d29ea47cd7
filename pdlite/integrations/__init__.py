"""Integrations of pdlite with other systems (Ray, ...), each an optional extra.

Like `pdlite.apps`, they sit above the API and use only its public surface (`pdlite.api`:
configs, `create_paddle_predictor`, `predictor.predict`), never engine internals.

- `pdlite.integrations.ray`: batch inference over a Ray Dataset (`pip install pdlite[ray]`),
  see docs/batch.md.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pdlite.api import CxxConfig, MobileConfig, create_paddle_predictor
from pdlite.errors import ConfigError


def predictor_from_path(model: str | os.PathLike, params: str | os.PathLike | None = None, threads: int = 1,
                        options: Mapping[str, Any] | None = None) -> Any:
    """A predictor for MODEL: an optimized `.nb` file, a model folder (legacy or PIR, any layout), or a
    program file with its PARAMS file. `threads` is the predictor's compute thread count; `options`
    are pdlite options (`config.set_option`)."""
    path = os.fspath(model)
    if params is not None and not os.path.isfile(path):
        raise ConfigError(f"params {os.fspath(params)!r} given with model {path!r}: a params file goes with a "
                          "program file (a model folder or a .nb holds its own)")
    if params is not None and path.endswith(".nb"):
        raise ConfigError(f"params {os.fspath(params)!r} given with the optimized model {path!r}, which holds its own")
    if path.endswith(".nb"):
        if not os.path.isfile(path):
            raise ConfigError(f"model {path!r} not found (an optimized .nb file)")
        cfg: Any = MobileConfig()
        cfg.set_model_from_file(path)
    elif os.path.isdir(path):
        cfg = CxxConfig()
        cfg.set_model_dir(path)
    elif os.path.isfile(path) and params is not None:
        cfg = CxxConfig()
        cfg.set_model_file(path)
        cfg.set_param_file(os.fspath(params))
    elif os.path.isfile(path):
        raise ConfigError(f"model {path!r} is a program file: give its folder, or the params file too")
    else:
        raise ConfigError(f"model {path!r} not found (give a model folder or an optimized .nb file)")
    cfg.set_threads(threads)
    for k, v in (options or {}).items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)
