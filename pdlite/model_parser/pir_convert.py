"""PIR ops -> pdlite's op set: the converter, the mapping registry and the one mapping idiom.

pdlite has one op set, Paddle's legacy (ProgramDesc) ops as described in `pdlite.operators`.
A PIR program is another front end onto it: each PIR op (`pd_op.*`, `builtin.*`) is translated
by the conversion registered for it in `PIR_OPS` (see pdlite.model_parser.pir_mapping) into
legacy ops with legacy slots and attributes, so graph, passes, kernels and converters never
see PIR. Where an op's PIR attributes differ from its legacy ones (names, IntArray / Scalar
operands, dtype names, enum spellings), its mapping entry is the one place that converts them.

Values become variables: parameters keep their names, feeds get pd_op.data's `name`, fetched
values the fetch op's `name`, others `pir_v<id>`. Vector values (builtin.combine, or a vector
result of a multi-output op) are lists of variables, taken apart by builtin.split and
builtin.slice. Constants (pd_op.full, pd_op.full_int_array, combines of them) are tracked, so
IntArray / Scalar operands fold into the legacy attributes; constant ops nobody else reads
are dropped.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.core.registry import Registry
from pdlite.errors import ModelFormatError, PdliteError, UnsupportedOpError
from pdlite.model_parser.pir_decode import DTYPE_NAMES, DType, Opaque, PirOp, PirType, walk
from pdlite.operators.registry import OPS

Conversion = Callable[["PirConverter", PirOp], None]
Slots = tuple[str | None, ...]

# PIR op name -> conversion; conversions carry `produces` (the legacy op types they emit).
PIR_OPS: Registry[str, Conversion] = Registry("PIR op mapping")


def register_pir(*names: str, produces: tuple[str, ...] | str = ()) -> Callable[[Conversion], Conversion]:
    """Register a conversion function for PIR op `names`, emitting legacy ops `produces`."""

    def deco(fn: Conversion) -> Conversion:
        fn.produces = (produces,) if isinstance(produces, str) else tuple(produces)  # type: ignore[attr-defined]
        for n in names:
            PIR_OPS.add(n, fn)
        return fn

    return deco


def lookup(name: str) -> Conversion | None:
    """The mapping of a PIR op; an in-place variant (`relu_`, `share_data_`) falls back to its base op."""
    fn = PIR_OPS.get(name)
    if fn is None and name.endswith("_") and not name.endswith("__"):
        fn = PIR_OPS.get(name[:-1])
    return fn


# ----------------------------------------------------------------------------------- converter


class PirConverter:
    """Builds block 0 of a Program from PIR ops; the conversions call its helpers."""

    def __init__(self, ops: list[PirOp], source: str) -> None:
        self.source = source
        self.ops = ops
        self.block = BlockDesc()
        self.names: dict[int, str] = {}
        self.vec_names: dict[int, list[str]] = {}  # vector value -> its elements' variable names
        self.vec_ids: dict[int, list[int]] = {}  # vector made by builtin.combine -> element value ids
        self.types: dict[int, PirType] = {}
        self.consts: dict[int, np.ndarray] = {}
        self.uses: Counter[int] = Counter()
        self.emitted: list[tuple[OpDesc, bool]] = []  # (op, droppable when its outputs are unused)
        self._taken: set[str] = {"feed", "fetch"}
        self.n_feeds = 0
        self.blocks: list[BlockDesc] = [self.block]  # block 0, then the sub-blocks of regions
        self.current = 0  # the block being converted
        for op in walk(ops):
            for vid, t in [*zip(op.outputs, op.types), *(a for b in op.blocks for a in b.args)]:
                if vid in self.types and vid != 0:
                    raise ModelFormatError(f"{source}: op #{op.index} ({op.name}) redefines value %{vid}")
                self.types[vid] = t
            self.uses.update(v for v in op.inputs if v != 0)

    # -- errors ---------------------------------------------------------------------------------
    def fail(self, op: PirOp, msg: str) -> PdliteError:
        return ModelFormatError(f"{self.source}: op #{op.index} ({op.name}): {msg}")

    def unsupported(self, op: PirOp, msg: str) -> PdliteError:
        return UnsupportedOpError(f"{self.source}: op #{op.index} ({op.name}): {msg}")

    # -- values ---------------------------------------------------------------------------------
    def claim(self, wanted: str) -> str:
        """A variable name not used yet: `wanted`, else `wanted_1`, `wanted_2`, ..."""
        name, k = wanted, 0
        while name in self._taken:
            k += 1
            name = f"{wanted}_{k}"
        self._taken.add(name)
        return name

    def declare(self, name: str, t: PirType, persistable: bool = False) -> None:
        vt = {"dtensor_array": VarType.LOD_TENSOR_ARRAY, "selected_rows": VarType.SELECTED_ROWS}
        self.block.vars[name] = VarDesc(name, vt.get(t.kind, VarType.LOD_TENSOR), t.dtype, list(t.shape),
                                        persistable=persistable, is_parameter=persistable)

    def define(self, op: PirOp, i: int, name: str | None = None, persistable: bool = False) -> str:
        """Name result `i` of `op` and declare its variable (dtype and shape from the PIR type)."""
        vid, t = op.outputs[i], op.types[i]
        if vid in self.names:
            return self.names[vid]
        n = self.claim(name or f"pir_v{vid}")
        self.names[vid] = n
        if t.kind in ("dtensor", "scalar", "dtensor_array", "selected_rows"):
            self.declare(n, t, persistable)
        return n

    def define_vector(self, op: PirOp, i: int) -> list[str]:
        """Name the elements of a vector result (taken apart later by builtin.split / builtin.slice)."""
        vid, t = op.outputs[i], op.types[i]
        if vid not in self.vec_names:
            elems = []
            for k, et in enumerate(t.elems):
                n = self.claim(f"pir_v{vid}_{k}")
                self.declare(n, et)
                elems.append(n)
            self.vec_names[vid] = elems
        return list(self.vec_names[vid])

    def alias(self, vid: int, name: str, const: np.ndarray | None = None) -> None:
        """Value `vid` is the variable `name` (builtin.split / slice results, share_data_)."""
        self.names[vid] = name
        if const is not None:
            self.consts[vid] = const

    def name(self, op: PirOp, vid: int) -> str:
        if vid in self.vec_names and vid not in self.names:
            raise self.unsupported(op, f"operand %{vid} is a vector (builtin.combine) where a tensor is expected")
        try:
            return self.names[vid]
        except KeyError:
            raise self.fail(op, f"operand %{vid} is used before it is defined") from None

    def names_of(self, op: PirOp, vid: int) -> list[str]:
        """Variable names of a tensor operand ([name]) or of a vector operand's elements."""
        if vid in self.vec_names:
            return list(self.vec_names[vid])
        return [self.name(op, vid)]

    def is_vector(self, vid: int) -> bool:
        return vid in self.vec_names

    def const(self, vid: int) -> np.ndarray | None:
        """The value of an operand computed from constants only (full, full_int_array, combine of those)."""
        if vid in self.consts:
            return self.consts[vid]
        if vid in self.vec_ids:
            parts = [self.const(e) for e in self.vec_ids[vid]]
            if any(p is None for p in parts):
                return None
            return np.concatenate([p.reshape(-1) for p in parts]) if parts else np.zeros([0], np.int64)
        return None

    def used(self, vid: int) -> bool:
        return self.uses[vid] > 0

    def var_dtype(self, name: str) -> int:
        v = self.block.vars.get(name)
        return int(v.dtype) if v is not None and v.dtype is not None else -1

    # -- emitting -------------------------------------------------------------------------------
    def outputs(self, op: PirOp, slots: Slots, required: tuple[str, ...] = ()) -> dict[str, list[str]]:
        """Output slots for `op`'s results: result i goes to slots[i]; unused results are left out
        (except the first and those in `required`, the legacy op's required output slots, e.g.
        matrix_nms's Index when return_index=False); a used result without a legacy slot is refused."""
        out: dict[str, list[str]] = {}
        for i, vid in enumerate(op.outputs):
            slot = slots[i] if i < len(slots) else None
            if slot is None:
                if self.used(vid):
                    raise self.unsupported(op, f"result #{i} is used, but pdlite does not compute it")
                continue
            if i == 0 or slot in required or self.used(vid):
                if op.types[i].kind == "vec":
                    out[slot] = self.define_vector(op, i)
                else:
                    out[slot] = [self.define(op, i)]
        return out

    def temp(self, like: str, dtype: int | None = None) -> str:
        """A new intermediate variable (for ops a conversion adds), typed like `like`."""
        n = self.claim(f"{like}_pir")
        v = self.block.vars.get(like)
        self.block.vars[n] = VarDesc(n, VarType.LOD_TENSOR, dtype if dtype is not None else (v.dtype if v else None))
        return n

    def emit(self, type_: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
             attrs: dict[str, Any] | None = None, droppable: bool = False) -> OpDesc:
        op = OpDesc(type_, {k: v for k, v in inputs.items() if v}, outputs, dict(attrs or {}))
        self.emitted.append((op, droppable))
        return op

    def convert_op(self, op: PirOp) -> None:
        fn = lookup(op.name)
        if fn is None:
            raise self.unsupported(op, "no pdlite mapping")
        try:
            fn(self, op)
        except PdliteError:
            raise
        except (IndexError, KeyError, TypeError, ValueError, OverflowError, AttributeError) as e:
            raise self.fail(op, f"malformed operands or attributes ({type(e).__name__}: {e})") from None

    # -- regions (pdlite.model_parser.pir_control_flow) ------------------------------------------
    def begin_block(self) -> tuple[Any, ...]:
        """Start a sub-block of the current block: later emits go to it until `end_block`."""
        idx = len(self.blocks)
        self.blocks.append(BlockDesc(idx, self.current))
        saved = (self.emitted, self.current, set(self.names.values()) | {n for v in self.vec_names.values() for n in v})
        self.emitted, self.current = [], idx
        return saved

    def end_block(self, saved: tuple[Any, ...]) -> tuple[BlockDesc, list[str], list[str]]:
        """Finish the sub-block: (block, outer vars it reads, outer vars it writes), in first-use order."""
        ops = self.finish()
        block = self.blocks[self.current]
        block.ops = ops
        outer = saved[2]
        reads: dict[str, None] = {}
        writes: dict[str, None] = {}
        for op in ops:
            # write_to_array updates its array in place: it reads it too
            for n in op.input_names() + (op.output_names() if op.type == "write_to_array" else []):
                if n in outer:
                    reads[n] = None
            for n in op.output_names():
                if n in outer:
                    writes[n] = None
            for n in op.input_names() + op.output_names():
                if n in self.block.vars:
                    block.vars[n] = self.block.vars[n]
        self.emitted, self.current = saved[0], saved[1]
        return block, list(reads), list(writes)

    def finish(self) -> list[OpDesc]:
        """The emitted ops minus droppable ones (constants folded into attributes) nobody reads."""
        read: set[str] = set()
        for op, _ in self.emitted:
            read.update(op.input_names())
        kept = []
        for op, droppable in self.emitted:
            if droppable and not any(n in read for n in op.output_names()):
                for n in op.output_names():
                    self.block.vars.pop(n, None)
                continue
            kept.append(op)
        return kept


def convert(ops: list[PirOp], nested: Counter[str], source: str) -> Program:
    """A Program (block 0 only) for the PIR ops, mapped through `PIR_OPS`; all unknown ops are
    reported together, with their counts."""
    unknown: Counter[str] = Counter()
    for op in walk(ops):
        if op.name != "cf.yield" and (lookup(op.name) is None or op.regions and not getattr(
                lookup(op.name), "regions", False)):
            unknown[op.name] += 1
    if unknown:
        listing = ", ".join(f"{n} x{c}" for n, c in sorted(unknown.items()))
        raise UnsupportedOpError(
            f"{source}: {sum(unknown.values())} PIR op(s) of {len(unknown)} type(s) have no pdlite mapping: "
            f"{listing} (custom ops are not supported)"
        )
    c = PirConverter(ops, source)
    _prename_fetches(c)
    for op in ops:
        c.convert_op(op)
    block = c.block
    block.ops = c.finish()
    block.vars.setdefault("feed", VarDesc("feed", VarType.FEED_MINIBATCH, None, persistable=True))
    block.vars.setdefault("fetch", VarDesc("fetch", VarType.FETCH_LIST, None, persistable=True))
    return Program(c.blocks, extra={"format": "pir-json"})


_NOT_RENAMED = ("builtin.parameter", "builtin.constant", "pd_op.data", "pd_op.feed", "builtin.split",
                "builtin.slice", "builtin.combine", "pd_op.share_data_", "pd_op.share_data")


def _prename_fetches(c: PirConverter) -> None:
    """Give a fetched value the fetch op's name when it is an ordinary op result fetched once."""
    producers: dict[int, PirOp] = {v: op for op in c.ops for v in op.outputs}
    fetched = Counter(op.inputs[0] for op in c.ops if op.name == "pd_op.fetch" and op.inputs)
    for op in c.ops:
        if op.name != "pd_op.fetch" or not op.inputs:
            continue
        vid, name = op.inputs[0], op.attrs.get("name")
        prod = producers.get(vid)
        if (not isinstance(name, str) or fetched[vid] != 1 or prod is None or prod.name in _NOT_RENAMED
                or prod.types[prod.outputs.index(vid)].kind == "vec"):
            continue
        c.define(prod, prod.outputs.index(vid), name)


# ------------------------------------------------------------------------- mapping helpers


def operand(op: PirOp, i: int) -> int:
    return op.inputs[i] if i < len(op.inputs) else 0


def vartype(c: PirConverter, op: PirOp, name: Any, what: str = "dtype") -> int:
    """VarType number of a dtype attribute value ("float32" -> 5); "Undefined" -> -1."""
    if name is None or str(name).lower().startswith("undefined"):
        return -1
    try:
        return int(DTYPE_NAMES[str(name)])
    except KeyError:
        raise c.fail(op, f"attribute {what!r}: unknown data type {name!r}") from None


def _plain(v: Any) -> bool:
    """An attribute value a legacy op can hold: bool / int / float / str, or a list of those."""
    if isinstance(v, list):
        return all(_plain(x) and not isinstance(x, list) for x in v)
    return isinstance(v, (bool, int, float, str)) and not isinstance(v, Opaque)


def legacy_attrs(c: PirConverter, op: PirOp, rename: dict[str, Any] | None = None) -> dict[str, Any]:
    """The op's attributes for its legacy op: every plain PIR attribute under its own name (dtypes as
    VarType numbers), renamed by `rename` ({pir: legacy} or {pir: (legacy, convert)}; legacy None
    drops it). Places and types are left out."""
    rename = rename or {}
    out: dict[str, Any] = {}
    for k, v in op.attrs.items():
        if isinstance(v, DType):
            v = vartype(c, op, v, k)
        elif not _plain(v):
            continue
        spec = rename.get(k, k)
        if spec is None:
            continue
        if isinstance(spec, tuple):
            spec, fn = spec
            v = fn(v)
        out[spec] = v
    return out


def const_ints(c: PirConverter, op: PirOp, i: int) -> list[int] | None:
    """Operand i as a list of ints when it is a constant (None when it is computed)."""
    v = c.const(operand(op, i))
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def const_scalar(c: PirConverter, op: PirOp, i: int) -> Any:
    v = c.const(operand(op, i))
    if v is None:
        return None
    flat = np.asarray(v).reshape(-1)
    if flat.size != 1:
        raise c.fail(op, f"operand #{i} should hold one value, holds {flat.size}")
    return flat[0].item()


@dataclass(frozen=True)
class IntArg:
    """An IntArray operand: folded into `attr` when constant, else fed to the legacy slot `tensor`
    (one 1-D tensor) or `tensors` (a vector of scalar tensors, from builtin.combine)."""

    attr: str
    tensor: str | None = None
    tensors: str | None = None


@dataclass(frozen=True)
class ScalarArg:
    """A Scalar operand: folded into `attr` (through `conv`) when constant, else fed to `tensor`."""

    attr: str
    tensor: str | None = None
    conv: Callable[[Any], Any] = float


def int_arg(c: PirConverter, op: PirOp, i: int, spec: IntArg, attrs: dict[str, Any],
            ins: dict[str, list[str]]) -> None:
    vid = operand(op, i)
    if vid == 0:
        return
    ints = const_ints(c, op, i)
    if ints is not None:
        attrs[spec.attr] = ints
        return
    if c.is_vector(vid):  # an IntArray from a vector of tensors: the concatenation of their values
        names = c.names_of(op, vid)
        if spec.tensors is not None and all(_one_value(c, n) for n in names):
            ins[spec.tensors] = names
            return
        if spec.tensor is not None:
            ins[spec.tensor] = names if len(names) == 1 and not _one_value(c, names[0]) else [_pack(c, op, vid)]
            return
        if spec.tensors is not None:
            ins[spec.tensors] = names
            return
    elif spec.tensor is not None:
        ins[spec.tensor] = [c.name(op, vid)]
        return
    elif spec.tensors is not None and (parts := _unpack(c, op, vid)) is not None:
        ins[spec.tensors] = parts
        return
    raise c.unsupported(op, f"{spec.attr} must be a constant (pd_op.full_int_array / pd_op.full)")


def _unpack(c: PirConverter, op: PirOp, vid: int) -> list[str] | None:
    """A 1-D int tensor of static length n (e.g. set_value's starts from `paddle.stack`) as n one-value
    tensors, for a legacy slot that only takes a tensor list (split, num=n); None when n is not known."""
    name = c.name(op, vid)
    v = c.block.vars.get(name)
    if v is None or len(v.shape) != 1 or int(v.shape[0]) < 1:
        return None
    n = int(v.shape[0])
    if n == 1:
        return [name]
    parts = [c.temp(name) for _ in range(n)]
    for p in parts:
        c.block.vars[p].shape = [1]
    c.emit("split", {"X": [name]}, {"Out": parts}, {"axis": 0, "num": n, "sections": []})
    return parts


def _one_value(c: PirConverter, name: str) -> bool:
    """Whether a variable's PIR type says it holds one value (0-D or [1])."""
    v = c.block.vars.get(name)
    return v is not None and list(v.shape) in ([], [1])


def _pack(c: PirConverter, op: PirOp, vid: int) -> str:
    """One 1-D int tensor from a vector of int tensors: the concatenation of their values (0-D ones
    reshaped to [1])."""
    parts = []
    for n in c.names_of(op, vid):
        v = c.block.vars.get(n)
        if v is not None and len(v.shape) == 0:
            r = c.temp(n)
            c.emit("reshape2", {"X": [n]}, {"Out": [r]}, {"shape": [1]})
            n = r
        parts.append(n)
    out = c.temp(parts[0] if parts else "pir_pack")
    c.emit("concat", {"X": parts}, {"Out": [out]}, {"axis": 0})
    return out


def scalar_arg(c: PirConverter, op: PirOp, i: int, spec: ScalarArg, attrs: dict[str, Any],
               ins: dict[str, list[str]]) -> None:
    vid = operand(op, i)
    if vid == 0:
        return
    v = const_scalar(c, op, i)
    if v is not None:
        attrs[spec.attr] = spec.conv(v)
    elif spec.tensor is not None:
        ins[spec.tensor] = [c.name(op, vid)]
    else:
        raise c.unsupported(op, f"{spec.attr} must be a constant (pd_op.full)")


def inputs(c: PirConverter, op: PirOp, slots: Slots) -> dict[str, list[str]]:
    """Input slots: operand i -> slots[i] (tensor or vector operands; null operands left out)."""
    return {s: c.names_of(op, v) for s, v in zip(slots, op.inputs) if s is not None and v != 0}


def op_map(legacy: str, ins: Slots = ("X",), outs: Slots = ("Out",), attrs: dict[str, Any] | None = None,
           fixed: dict[str, Any] | None = None, args: dict[int, IntArg | ScalarArg] | None = None) -> Conversion:
    """The one-op mapping: operand i -> input slot ins[i]; result i -> output slot outs[i];
    attributes copied under their own names unless renamed by `attrs`, then `fixed` attributes
    (defaults the folded operands may override), then the IntArray / Scalar operands of `args`
    (operand index -> IntArg / ScalarArg)."""
    args = dict(args or {})

    def conv(c: PirConverter, op: PirOp) -> None:
        a = legacy_attrs(c, op, attrs)
        a.update(fixed or {})
        slots = tuple(None if i in args else s for i, s in enumerate(ins))
        i_ = inputs(c, op, slots)
        for idx, spec in args.items():
            if isinstance(spec, IntArg):
                int_arg(c, op, idx, spec, a, i_)
            else:
                scalar_arg(c, op, idx, spec, a, i_)
        opdef = OPS.get(legacy)
        c.emit(legacy, i_, c.outputs(op, outs, opdef.outputs if opdef is not None else ()), a)

    conv.__doc__ = f"-> {legacy}"
    conv.produces = (legacy,)  # type: ignore[attr-defined]
    return conv


def produced_by(fn: Conversion) -> tuple[str, ...]:
    """The legacy op types a conversion emits."""
    return tuple(getattr(fn, "produces", ()))
