"""Every built-in device-neutral pass. Importing this package registers them (explicit imports).

Device passes live with their device layer (NNAdapter's subgraph_detect_pass in
`pdlite.nnadapter.subgraph_pass`) and reach the pipeline through the pass registry."""
from __future__ import annotations

from pdlite.optimizer.passes import (  # noqa: F401
    activation_fuse,
    attention_fuse,
    constant_folding,
    conv_fuse,
    eliminate,
    fake_to_qdq,
    fc_fuse,
    feed_fetch,
    graph_visualize,
    kernel_pick,
    layer_norm_fuse,
    memory_optimize,
    quant_chain,
    quant_codes,
    quant_int8,
    quant_state,
    scale_fuse,
    se_fuse,
    type_cast,
    weight_quant,
)
