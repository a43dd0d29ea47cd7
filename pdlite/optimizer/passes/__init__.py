"""Every built-in pass. Importing this package registers them (explicit imports)."""
from __future__ import annotations

from pdlite.optimizer.passes import (  # noqa: F401
    feed_fetch,
    graph_visualize,
    kernel_pick,
    type_cast,
)
