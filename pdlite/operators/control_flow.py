"""Control-flow and tensor-array ops: while, conditional_block, select_input/output, the array ops.

Paddle's definitions (paddle/fluid/operators/controlflow/*.cc, Paddle-Lite lite/operators/*):
- `while`: runs block `sub_block` as long as `Condition` (a bool [1] tensor the body rewrites) is
  true. `X` are the vars the body reads from outside, `Out` the outside vars it writes.
- `conditional_block`: runs block `sub_block` once when `Cond` holds (`is_scalar_condition`: its
  one element is true; else: every `Cond` tensor is non-empty); otherwise its `Out` vars keep their
  previous values.
- `select_input`: Out = X[Mask]; `select_output`: Out[Mask] = X.
- A tensor array (a LOD_TENSOR_ARRAY var) is a Python list of tensors in the scope. `create_array`
  makes an empty one; `write_to_array` sets element I (growing the array); pdlite gives it the
  array it updates as the extra input `Array` (control_flow_prepare_pass adds it) so that the op is
  a function of its inputs; `read_from_array`, `lod_array_length` and `tensor_array_to_tensor`
  (concatenate or stack along `axis`) read one.

Output shapes of these ops depend on values (the branch taken, the trip count) or are lists, so
none has a shape function: their kernels, and the ops of the sub-blocks they run, decide them.
"""
from __future__ import annotations

from pdlite.operators.registry import OPS, OpDef

# framework.proto AttrType of `sub_block` (BLOCK), for writing the ops back
ATTR_TYPES = {"sub_block": 8}
# ops that run a sub-block
BLOCK_OPS = frozenset({"while", "conditional_block"})


def _add(op_type: str, inputs: tuple[str, ...], outputs: tuple[str, ...], optional_inputs: tuple[str, ...] = (),
         optional_outputs: tuple[str, ...] = (), defaults: dict | None = None, doc: str = "") -> None:
    OPS.add(op_type, OpDef(op_type, inputs, outputs, optional_inputs, optional_outputs, dict(defaults or {}),
                           None, True, doc))


_add("while", ("Condition",), (), ("X",), ("Out", "StepScopes"), {"sub_block": -1, "is_test": True},
     "Runs block sub_block while Condition is true; the body rewrites Condition and the Out vars.")
_add("conditional_block", (), (), ("Cond", "Input"), ("Out", "Scope"),
     {"sub_block": -1, "is_scalar_condition": False},
     "Runs block sub_block once when Cond holds; otherwise Out keeps its previous values.")
_add("select_input", ("X", "Mask"), ("Out",), doc="Out = X[Mask] (Mask: an int32 [1] tensor).")
_add("select_output", ("X", "Mask"), ("Out",), doc="Out[Mask] = X; the other outputs are not written.")
_add("create_array", (), ("Out",), defaults={"dtype": 5}, doc="An empty tensor array.")
_add("write_to_array", ("X", "I"), ("Out",), ("Array",),
     doc="Out = Array with element I set to X (the array grows to I + 1 elements when shorter).")
_add("read_from_array", ("X", "I"), ("Out",), doc="Out = X[I] of the tensor array X.")
_add("lod_array_length", ("X",), ("Out",), doc="Out = the length of the tensor array X, as an int64 [1].")
_add("tensor_array_to_tensor", ("X",), ("Out",), optional_outputs=("OutIndex",),
     defaults={"axis": 0, "use_stack": False},
     doc="Out = concat (or stack, use_stack) of the array's tensors along axis; OutIndex their sizes there.")
