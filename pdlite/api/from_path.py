"""A config from a path, as the CLI and the integrations take models: folder, program file or `.nb`."""
from __future__ import annotations

import os
from typing import Any

from pdlite.api.config import CxxConfig
from pdlite.api.mobile import MobileConfig
from pdlite.errors import ConfigError


def config_for(model: str | os.PathLike, params: str | os.PathLike | None = None) -> CxxConfig | MobileConfig:
    """A config for MODEL: an optimized `.nb` (MobileConfig), a model folder of any layout (legacy or PIR), or a
    program file (`.pdmodel`, `__model__`, `.json`) with PARAMS, found beside it when not given."""
    path = os.fspath(model)
    if params is not None and (path.endswith(".nb") or os.path.isdir(path)):
        raise ConfigError(f"params {os.fspath(params)!r} given with model {path!r}: a params file goes with a "
                          "program file (a model folder or a .nb holds its own)")
    if path.endswith(".nb"):
        if not os.path.isfile(path):
            raise ConfigError(f"model {path!r} not found (an optimized .nb file)")
        mc = MobileConfig()
        mc.set_model_from_file(path)
        return mc
    cfg = CxxConfig()
    if os.path.isdir(path):
        cfg.set_model_dir(path)
    elif os.path.isfile(path):
        cfg.set_model_file(path)
        if params is None:
            stem, _ = os.path.splitext(path)
            for cand in (stem + ".pdiparams", os.path.join(os.path.dirname(path), "__params__"),
                         os.path.join(os.path.dirname(path), "params")):
                if os.path.isfile(cand):
                    params = cand
                    break
        if params is not None:
            cfg.set_param_file(os.fspath(params))
    else:
        raise ConfigError(f"model {path!r} not found (give a model folder, a program file or a .nb file)")
    return cfg


def configured(model: str | os.PathLike, params: str | os.PathLike | None = None, threads: int = 1,
               options: dict[str, Any] | None = None) -> CxxConfig | MobileConfig:
    """`config_for` with the thread count and pdlite options (`config.set_option`) set."""
    cfg = config_for(model, params)
    cfg.set_threads(threads)
    for k, v in (options or {}).items():
        cfg.set_option(k, v)
    return cfg
