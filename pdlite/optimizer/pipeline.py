"""The ordered pass list: the one place that says which passes run, and in which order.

Users print it with `pdlite.optimizer.pipeline.DEFAULT_PASSES` and override it through
`CxxConfig.set_passes(...)`; `graph_visualize` may be inserted anywhere to dump DOT.
"""
from __future__ import annotations

# Passes run in this order. Names refer to pdlite.optimizer.pass_registry.PASSES.
DEFAULT_PASSES: list[str] = [
    "feed_fetch_strip_pass",
    # -- kernel pick and program generation ----------------------------------------------
    "static_kernel_pick_pass",
    "type_target_cast_pass",
]


def default_passes() -> list[str]:
    """A copy of the default pipeline."""
    return list(DEFAULT_PASSES)
