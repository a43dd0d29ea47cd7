"""Every built-in pass. Importing this package registers them (explicit imports)."""
from __future__ import annotations

from pdlite.optimizer.passes import (  # noqa: F401
    activation_fuse,
    constant_folding,
    conv_fuse,
    eliminate,
    fc_fuse,
    feed_fetch,
    graph_visualize,
    kernel_pick,
    memory_optimize,
    scale_fuse,
    subgraph,
    type_cast,
)
