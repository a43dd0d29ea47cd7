"""PIR control flow and tensor arrays -> the legacy ops of pdlite/operators/control_flow.py.

One op description, two front ends: a PIR region becomes a legacy sub-block, so the same
`while` / `conditional_block` kernels run both formats.

- `pd_op.while(cond, carried...)`: the carried tensors get variables V (initialised by `assign`;
  a carried tensor array is its operand's variable, updated in place by the body)
  and a condition variable C; the body's block arguments are V; its `cf.yield(next_cond,
  next...)` becomes assigns to temporaries, then to C and V (all yields read before any is
  written); a `while` op runs the block (X: C, V and the outer vars the body reads; Out: C, V and
  the outer vars it writes); the results are V.
- `pd_op.if(cond)`: each region becomes a block run by a `conditional_block` (the else block under
  `logical_not(cond)`), whose `cf.yield` values are assigned to the branch's output variables; a
  `select_input` per result picks the taken branch's (Mask = cast(cond, int32)), as Paddle's
  legacy `cond` does.
- Arrays: `create_array`, `array_length` -> lod_array_length, `array_read` -> read_from_array,
  `array_write_` -> write_to_array (in place: its result is the array variable itself, so a body
  writing an outer array writes that variable), `array_to_tensor` -> tensor_array_to_tensor.
"""
from __future__ import annotations

from pdlite.core.dtypes import VarType
from pdlite.core.program import VarDesc
from pdlite.model_parser.pir_convert import PirConverter, legacy_attrs, register_pir
from pdlite.model_parser.pir_decode import PirOp


def _region(fn):  # conversions that convert their own regions
    fn.regions = True
    return fn


def _block_ops(c: PirConverter, op: PirOp, k: int) -> list[str]:
    """Convert region k's ops into the current block; the names its cf.yield yields."""
    if k >= len(op.blocks):
        raise c.fail(op, f"expected region #{k}, the op has {len(op.blocks)}")
    yields: list[str] | None = None
    for inner in op.blocks[k].ops:
        if inner.name == "cf.yield":
            yields = [c.name(inner, v) for v in inner.inputs]
            continue
        c.convert_op(inner)
    if yields is None:
        raise c.fail(op, f"region #{k} does not end with cf.yield")
    return yields


def _var(c: PirConverter, like: str, wanted: str) -> str:
    n = c.claim(wanted)
    v = c.block.vars.get(like)
    c.block.vars[n] = VarDesc(n, v.type if v else VarType.LOD_TENSOR, v.dtype if v else None,
                              list(v.shape) if v else [])
    return n


@register_pir("pd_op.while", produces=("assign", "while"))
@_region
def _while(c: PirConverter, op: PirOp) -> None:
    if not op.inputs or len(op.outputs) != len(op.inputs) - 1:
        raise c.fail(op, f"expected a condition and one operand per result, got {len(op.inputs)} operands "
                         f"and {len(op.outputs)} results")
    cond = c.name(op, op.inputs[0])
    cvar = _var(c, cond, "pir_while_cond")
    c.emit("assign", {"X": [cond]}, {"Out": [cvar]})
    carried, arrays = [], set()
    for i, vid in enumerate(op.inputs[1:]):
        if op.types[i].kind == "dtensor_array":  # arrays are updated in place: the loop runs on the operand's
            v = c.name(op, vid)
            c.alias(op.outputs[i], v)
            arrays.add(v)
        elif op.types[i].kind == "dtensor":
            v = c.define(op, i)
            c.emit("assign", {"X": [c.name(op, vid)]}, {"Out": [v]})
        else:
            raise c.unsupported(op, f"loop-carried value #{i} is a {op.types[i].kind}; pdlite carries tensors "
                                    "and tensor arrays")
        carried.append(v)
    saved = c.begin_block()
    args = op.blocks[0].args if op.blocks else []
    if len(args) != len(carried):
        raise c.fail(op, f"the body has {len(args)} arguments for {len(carried)} carried values")
    for (vid, _), v in zip(args, carried):
        c.alias(vid, v)
    yields = _block_ops(c, op, 0)
    if len(yields) != len(carried) + 1:
        raise c.fail(op, f"the body yields {len(yields)} values, expected {len(carried) + 1}")
    pairs = []
    for y, dst in zip(yields, [cvar, *carried]):
        if dst in arrays:
            if y != dst:
                raise c.unsupported(op, f"the body yields another array ({y}) for the carried array {dst}")
            continue
        t = _var(c, y, f"{y}_next")
        c.emit("assign", {"X": [y]}, {"Out": [t]})
        pairs.append((t, dst))
    for t, dst in pairs:
        c.emit("assign", {"X": [t]}, {"Out": [dst]})
    block, reads, writes = c.end_block(saved)
    xs = list(dict.fromkeys([cvar, *carried, *reads]))
    outs = list(dict.fromkeys([cvar, *carried, *writes]))
    c.emit("while", {"Condition": [cvar], "X": xs}, {"Out": outs}, {"sub_block": block.idx, "is_test": True})


@register_pir("pd_op.if", produces=("conditional_block", "logical_not", "cast", "select_input", "assign"))
@_region
def _if(c: PirConverter, op: PirOp) -> None:
    cond = c.name(op, op.inputs[0])
    for i, t in enumerate(op.types):
        if t.kind != "dtensor":
            raise c.unsupported(op, f"result #{i} is a {t.kind}; pdlite's pd_op.if yields tensors only")
    branches = []
    for k in range(2):
        saved = c.begin_block()
        yields = _block_ops(c, op, k)
        if len(yields) != len(op.outputs):
            raise c.fail(op, f"region #{k} yields {len(yields)} values for {len(op.outputs)} results")
        outs = []
        for y in yields:
            o = _var(c, y, f"pir_if{op.outputs[0] if op.outputs else op.index}_{'then' if k == 0 else 'else'}")
            c.emit("assign", {"X": [y]}, {"Out": [o]})
            outs.append(o)
        block, reads, writes = c.end_block(saved)
        branches.append((block, reads, list(dict.fromkeys([*outs, *writes])), outs))
    not_cond = _var(c, cond, f"{cond}_not")
    c.emit("logical_not", {"X": [cond]}, {"Out": [not_cond]})
    for (block, reads, outs, _), cnd in zip(branches, (cond, not_cond)):
        c.emit("conditional_block", {"Cond": [cnd], "Input": reads}, {"Out": outs},
               {"sub_block": block.idx, "is_scalar_condition": True})
    if op.outputs:
        mask = _var(c, cond, f"{cond}_mask")
        c.block.vars[mask].dtype = VarType.INT32
        c.emit("cast", {"X": [cond]}, {"Out": [mask]}, {"in_dtype": int(VarType.BOOL), "out_dtype": int(VarType.INT32)})
        for i in range(len(op.outputs)):
            c.emit("select_input", {"X": [branches[1][3][i], branches[0][3][i]], "Mask": [mask]},
                   {"Out": [c.define(op, i)]})


@register_pir("pd_op.create_array", produces="create_array")
def _create_array(c: PirConverter, op: PirOp) -> None:
    c.emit("create_array", {}, {"Out": [c.define(op, 0)]}, {"dtype": int(VarType.FP32)})


@register_pir("pd_op.array_length", produces="lod_array_length")
def _array_length(c: PirConverter, op: PirOp) -> None:
    c.emit("lod_array_length", {"X": [c.name(op, op.inputs[0])]}, {"Out": [c.define(op, 0)]})


@register_pir("pd_op.array_read", produces="read_from_array")
def _array_read(c: PirConverter, op: PirOp) -> None:
    c.emit("read_from_array", {"X": [c.name(op, op.inputs[0])], "I": [c.name(op, op.inputs[1])]},
           {"Out": [c.define(op, 0)]})


@register_pir("pd_op.array_write_", produces="write_to_array")
def _array_write(c: PirConverter, op: PirOp) -> None:
    arr = c.name(op, op.inputs[0])
    c.emit("write_to_array", {"X": [c.name(op, op.inputs[1])], "I": [c.name(op, op.inputs[2])]}, {"Out": [arr]})
    if op.outputs:
        c.alias(op.outputs[0], arr)


@register_pir("pd_op.array_to_tensor", "pd_op.tensor_array_to_tensor", produces="tensor_array_to_tensor")
def _array_to_tensor(c: PirConverter, op: PirOp) -> None:
    c.emit("tensor_array_to_tensor", {"X": [c.name(op, op.inputs[0])]},
           c.outputs(op, ("Out", "OutIndex")), legacy_attrs(c, op))


@register_pir("pd_op.select_input", produces="select_input")
def _select_input(c: PirConverter, op: PirOp) -> None:
    """Operands (mask, inputs...), as Paddle's SelectInputOp; Out = inputs[mask]."""
    c.emit("select_input", {"X": [c.name(op, v) for v in op.inputs[1:]], "Mask": [c.name(op, op.inputs[0])]},
           {"Out": [c.define(op, 0)]})


@register_pir("pd_op.select_output", produces="select_output")
def _select_output(c: PirConverter, op: PirOp) -> None:
    """Operands (mask, x), as Paddle's SelectOutputOp; results[mask] = x."""
    c.emit("select_output", {"X": [c.name(op, op.inputs[1])], "Mask": [c.name(op, op.inputs[0])]},
           {"Out": [c.define(op, i) for i in range(len(op.outputs))]})
