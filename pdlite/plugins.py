"""Plugins from installed packages: entry-point group `pdlite.plugins`.

Each entry point names a callable (or module) that registers targets, ops, kernels,
passes, converters and drivers through pdlite's own registries. Loaded once, on first use.
"""
from __future__ import annotations

import importlib.metadata
import logging
import warnings
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

GROUP = "pdlite.plugins"


@dataclass
class PluginInfo:
    name: str
    value: str
    loaded: bool = False
    error: str = ""
    registered: dict[str, list[str]] = field(default_factory=dict)


_PLUGINS: dict[str, PluginInfo] = {}
_loaded = False


def _snapshot() -> dict[str, set]:
    from pdlite.kernels.registry import KERNELS
    from pdlite.operators.registry import OPS
    from pdlite.optimizer.pass_registry import PASSES

    snap = {"ops": set(OPS), "kernels": set(map(str, KERNELS)), "passes": set(PASSES)}
    try:
        from pdlite.nnadapter.registry import CONVERTERS, DRIVERS

        snap["converters"] = set(map(str, CONVERTERS))
        snap["drivers"] = set(DRIVERS)
    except ImportError:
        pass
    return snap


def load_plugins(force: bool = False) -> dict[str, PluginInfo]:
    """Load every installed plugin once; a failing plugin is reported with a warning, not fatal."""
    global _loaded
    if _loaded and not force:
        return _PLUGINS
    _loaded = True
    try:
        eps = importlib.metadata.entry_points(group=GROUP)
    except Exception:  # pragma: no cover - broken metadata
        return _PLUGINS
    from pdlite.registries import load_builtin

    load_builtin()  # built-ins first, so they are not credited to a plugin importing them
    for ep in eps:
        if ep.name in _PLUGINS and _PLUGINS[ep.name].loaded:
            continue
        info = PluginInfo(ep.name, ep.value)
        before = _snapshot()
        try:
            obj = ep.load()
            if callable(obj):
                obj()
            info.loaded = True
        except Exception as e:
            info.error = f"{type(e).__name__}: {e}"
            warnings.warn(f"pdlite plugin {ep.name!r} ({ep.value}) failed to load: {info.error}", stacklevel=2)
        after = _snapshot()
        info.registered = {k: sorted(after[k] - before.get(k, set())) for k in after if after[k] - before.get(k, set())}
        _PLUGINS[ep.name] = info
    return _PLUGINS
