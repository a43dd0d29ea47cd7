"""The `subgraph` op: a group of ops moved into their own block and run as one (NNAdapter's unit).

Slots: `Inputs` (every var the ops read from outside, parameters included) and `Outputs` (every
var they write that is read outside or fetched). Attributes (Paddle-Lite's): `sub_block`, the
index of the block holding the original ops; `input_data_names`, the non-parameter inputs;
`output_data_names`, the outputs. It has no shape function of its own: its output shapes are
those of its block's ops, and its kernel checks them.
"""
from __future__ import annotations

from pdlite.operators.registry import OPS, OpDef

# framework.proto AttrType values of the attributes, for writing the op back to a model file
ATTR_TYPES = {"sub_block": 8, "input_data_names": 5, "output_data_names": 5, "nnadapter_device": 2}

OPS.add("subgraph", OpDef(
    "subgraph",
    inputs=(),
    outputs=(),
    optional_inputs=("Inputs",),
    optional_outputs=("Outputs",),
    defaults={"sub_block": -1, "input_data_names": [], "output_data_names": []},
    infer_shape=None,
    doc="A group of ops run as one by a device (its ops are kept in block `sub_block`).",
))
