"""ProgramDesc protobuf bytes <-> pdlite.core.program dataclasses, byte-exact both ways.

`parse_program` turns a `.pdmodel` / `__model__` into a `Program`; `serialize_program`
writes it back. Attributes become plain Python values (int, float, str, bool, lists; the
block index for BLOCK attrs, a list of them for BLOCKS; bool/int/float/complex for
SCALAR) and `OpDesc.attr_types` keeps each one's AttrType. What the dataclasses do not
hold goes into their `extra` dicts so that parse -> serialize gives the original bytes:

- VarDesc.extra: "explicit" (flags written though false), "lod_level_set" (lod_level
  written though 0), "attrs" (raw VarDesc.Attr messages), "raw_type" (an unusual VarType
  message with the values it was read as), "unknown" (fields this schema does not know);
- OpDesc.extra: "is_target", "raw_attrs" ({name: (bytes, value, type)} for attrs not in
  Paddle's usual form), "slot_unknown", "unknown";
- Program.extra: "forward_block_idx_set", "block_unknown", "version_field_absent",
  "op_version_map_present", "raw_version", "raw_op_version_map", "unknown".

Raw pieces are only used while the values they were read as are unchanged. Strings are
decoded as UTF-8 with surrogateescape, so even invalid bytes round-trip.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError, EncodeError

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.errors import ModelFormatError
from pdlite.model_parser import framework_proto as fp
from pdlite.model_parser.lod_tensor import MAX_RANK

W = fp.WIRE
A = fp.ATTR_TYPE  # AttrType numbers by name
_VALUE_FIELD = fp.ATTR_VALUE_FIELD
_REPEATED = {A[n] for n in ("INTS", "FLOATS", "STRINGS", "BOOLEANS", "BLOCKS", "LONGS", "FLOAT64S", "VARS", "SCALARS")}
_STR = {A["STRING"], A["VAR"]}
_STRS = {A["STRINGS"], A["VARS"]}
_CONV = {
    A["INT"]: int, A["FLOAT"]: float, A["BOOLEAN"]: bool, A["BLOCK"]: int, A["LONG"]: int, A["FLOAT64"]: float,
    A["INTS"]: int, A["FLOATS"]: float, A["BOOLEANS"]: bool, A["BLOCKS"]: int, A["LONGS"]: int,
    A["FLOAT64S"]: float,
}  # fmt: skip
_SCALAR_FIELD = {1: "b", 2: "i", 3: "r", 4: "c"}
_TENSOR_SUB = {
    VarType.LOD_TENSOR: "lod_tensor",
    VarType.LOD_TENSOR_ARRAY: "tensor_array",
    VarType.SELECTED_ROWS: "selected_rows",
}
_FLAGS = ("persistable", "need_check_feed", "is_parameter", "stop_gradient")
_EMPTY_VAR_NAMES = {"", "@EMPTY@"}
_DECODE_ERRORS = (DecodeError, ValueError, RuntimeError, RecursionError, OverflowError)


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _b(s: str | bytes) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape")


def _enum(x: int) -> VarType | int:
    try:
        return VarType(x)
    except ValueError:
        return x


# ---------------------------------------------------------------- unknown fields


def _unknown_bytes(m) -> bytes:
    """The fields of `m` (this level only) that the schema does not know, as wire bytes."""
    c = type(m)()
    c.CopyFrom(m)
    for fd, _ in c.ListFields():
        c.ClearField(fd.name)
    return c.SerializePartialToString()


def _has_unknown(m) -> bool:
    """Whether `m` or any message inside it holds fields the schema does not know."""
    c = type(m)()
    c.CopyFrom(m)
    c.DiscardUnknownFields()
    return c.ByteSize() != m.ByteSize()


# ---------------------------------------------------------------- attributes


def _scalar_value(sc) -> bool | int | float | complex:
    if sc.type == 1:
        return sc.b
    if sc.type == 2:
        return sc.i
    if sc.type == 3:
        return sc.r
    return complex(sc.c.r, sc.c.i)


def _scalar_to_msg(sc, v: Any) -> None:
    if isinstance(v, (bool, np.bool_)):
        sc.type, sc.b = 1, bool(v)
    elif isinstance(v, numbers.Integral):
        sc.type, sc.i = 2, int(v)
    elif isinstance(v, numbers.Real):
        sc.type, sc.r = 3, float(v)
    elif isinstance(v, numbers.Complex):
        sc.type = 4
        sc.c.r, sc.c.i = float(v.real), float(v.imag)
    else:
        raise TypeError(f"{v!r} is not a bool, int, float or complex scalar")


def _scalar_canonical(sc) -> bool:
    return [fd.name for fd, _ in sc.ListFields()] == ["type", _SCALAR_FIELD[sc.type]]


def attr_value(a) -> Any:
    """The Python value of an OpDesc.Attr message (WIRE schema)."""
    t = a.type
    v = getattr(a, _VALUE_FIELD[t])
    if t in _STR:
        return _s(v)
    if t in _STRS:
        return [_s(x) for x in v]
    if t == A["SCALAR"]:
        return _scalar_value(v)
    if t == A["SCALARS"]:
        return [_scalar_value(x) for x in v]
    if t in _REPEATED:
        return list(v)
    return v


def _attr_canonical(a) -> bool:
    """Whether the attr holds exactly its type's value field (as Paddle writes it)."""
    t = a.type
    f = _VALUE_FIELD[t]
    names = [fd.name for fd, _ in a.ListFields()]
    if names[2:] != [f] and not (t in _REPEATED and len(names) == 2):
        return False
    if t == A["SCALAR"]:
        return _scalar_canonical(a.scalar)
    if t == A["SCALARS"]:
        return all(_scalar_canonical(x) for x in a.scalars)
    return True


def infer_attr_type(value: Any) -> int:
    """AttrType for a Python value when an attr has none recorded (BLOCK(S) must be given)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (bool, np.bool_)):
        return A["BOOLEAN"]
    if isinstance(value, numbers.Integral):
        return A["INT"] if -(2**31) <= int(value) < 2**31 else A["LONG"]
    if isinstance(value, numbers.Real):
        return A["FLOAT"]
    if isinstance(value, numbers.Complex):
        return A["SCALAR"]
    if isinstance(value, (str, bytes)):
        return A["STRING"]
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, (bool, np.bool_)) for x in value) and value:
            return A["BOOLEANS"]
        if all(isinstance(x, numbers.Integral) for x in value):
            return A["INTS"] if all(-(2**31) <= int(x) < 2**31 for x in value) else A["LONGS"]
        if all(isinstance(x, numbers.Real) for x in value):
            return A["FLOATS"]
        if all(isinstance(x, (str, bytes)) for x in value):
            return A["STRINGS"]
    raise ModelFormatError(f"cannot tell the Paddle attribute type of {value!r}; set attr_types")


def _attr_to_msg(a, name: str, value: Any, t: int) -> None:
    a.name = _b(name)
    a.type = t
    f = _VALUE_FIELD[t]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if t in _STR:
        setattr(a, f, _b(value))
    elif t in _STRS:
        getattr(a, f).extend([_b(x) for x in value])
    elif t == A["SCALAR"]:
        _scalar_to_msg(a.scalar, value)
    elif t == A["SCALARS"]:
        for x in value:
            _scalar_to_msg(a.scalars.add(), x)
    elif t in _REPEATED:
        conv = _CONV[t]
        getattr(a, f).extend([conv(x) for x in value])
    else:
        setattr(a, f, _CONV[t](value))


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (ValueError, TypeError):
        return False


# ---------------------------------------------------------------- variables


def _var_from_msg(m, unknowns: bool) -> VarDesc:
    vt = m.type
    t = _enum(vt.type)
    sub = _TENSOR_SUB.get(t)
    extra: dict[str, Any] = {}
    dtype, shape, lod_level = None, [], 0
    canonical = all(fd.name in ("type", sub) for fd, _ in vt.ListFields())
    if sub is not None and vt.HasField(sub):
        if sub == "selected_rows":
            td = vt.selected_rows
        else:
            ld = getattr(vt, sub)
            td = ld.tensor
            lod_level = ld.lod_level
            if lod_level == 0 and ld.HasField("lod_level"):
                extra["lod_level_set"] = True
        dtype, shape = _enum(td.data_type), list(td.dims)
    if not canonical or (unknowns and _has_unknown(vt)):
        extra["raw_type"] = (vt.SerializeToString(), (t, dtype, shape, lod_level))
    explicit = tuple(f for f in _FLAGS if m.HasField(f) and not getattr(m, f))
    if explicit:
        extra["explicit"] = explicit
    if len(m.attrs):
        extra["attrs"] = [a.SerializeToString() for a in m.attrs]
    if unknowns and (u := _unknown_bytes(m)):
        extra["unknown"] = u
    return VarDesc(
        name=_s(m.name),
        type=t,
        dtype=dtype,
        shape=shape,
        lod_level=lod_level,
        persistable=m.persistable,
        need_check_feed=m.need_check_feed,
        stop_gradient=m.stop_gradient,
        is_parameter=m.is_parameter,
        extra=extra,
    )


def _var_to_msg(m, v: VarDesc) -> None:
    m.name = _b(v.name)
    raw = v.extra.get("raw_type")
    if raw is not None and _same(raw[1], (v.type, v.dtype, v.shape, v.lod_level)):
        m.type.CopyFrom(W.VarType.FromString(raw[0]))
    else:
        m.type.type = int(v.type)
        sub = _TENSOR_SUB.get(v.type)
        if sub is not None and v.dtype is not None:
            if sub == "selected_rows":
                td = m.type.selected_rows
            else:
                ld = getattr(m.type, sub)
                td = ld.tensor
                if v.lod_level or v.extra.get("lod_level_set"):
                    ld.lod_level = int(v.lod_level)
            td.data_type = int(v.dtype)
            td.dims.extend([int(d) for d in v.shape])
    explicit = v.extra.get("explicit", ())
    for f in _FLAGS:
        val = getattr(v, f)
        if val or f in explicit:
            setattr(m, f, bool(val))
    for raw_attr in v.extra.get("attrs", ()):
        m.attrs.add().MergeFromString(raw_attr)
    if v.extra.get("unknown"):
        m.MergeFromString(v.extra["unknown"])


# ---------------------------------------------------------------- ops


def _slots_from_msg(vars_, kind: str, where: str, unknowns: bool, slot_unknown: dict) -> dict[str, list[str]]:
    slots: dict[str, list[str]] = {}
    for var in vars_:
        slot = _s(var.parameter)
        if slot in slots:
            raise ModelFormatError(f"{where}: {kind} slot {slot!r} appears twice")
        slots[slot] = [_s(x) for x in var.arguments]
        if unknowns and (u := _unknown_bytes(var)):
            slot_unknown[(kind, slot)] = u
    return slots


def _op_from_msg(m, where: str, unknowns: bool) -> OpDesc:
    slot_unknown: dict = {}
    inputs = _slots_from_msg(m.inputs, "inputs", where, unknowns, slot_unknown)
    outputs = _slots_from_msg(m.outputs, "outputs", where, unknowns, slot_unknown)
    attrs: dict[str, Any] = {}
    attr_types: dict[str, int] = {}
    raw_attrs: dict[str, tuple] = {}
    for a in m.attrs:
        name = _s(a.name)
        if name in attrs:
            raise ModelFormatError(f"{where}: attribute {name!r} appears twice")
        value = attr_value(a)
        attrs[name], attr_types[name] = value, a.type
        if not _attr_canonical(a) or (unknowns and _has_unknown(a)):
            raw_attrs[name] = (a.SerializeToString(), value, a.type)
    extra: dict[str, Any] = {}
    if m.HasField("is_target"):
        extra["is_target"] = m.is_target
    if raw_attrs:
        extra["raw_attrs"] = raw_attrs
    if slot_unknown:
        extra["slot_unknown"] = slot_unknown
    if unknowns and (u := _unknown_bytes(m)):
        extra["unknown"] = u
    return OpDesc(_s(m.type), inputs, outputs, attrs, attr_types, extra)


def _op_to_msg(m, op: OpDesc, where: str) -> None:
    slot_unknown = op.extra.get("slot_unknown", {})
    for kind, slots in (("inputs", op.inputs), ("outputs", op.outputs)):
        field = getattr(m, kind)
        for slot, args in slots.items():
            var = field.add()
            var.parameter = _b(slot)
            var.arguments.extend([_b(x) for x in args])
            if (kind, slot) in slot_unknown:
                var.MergeFromString(slot_unknown[(kind, slot)])
    m.type = _b(op.type)
    raw_attrs = op.extra.get("raw_attrs", {})
    for name, value in op.attrs.items():
        t = op.attr_types.get(name)
        if t is None:
            try:
                t = infer_attr_type(value)
            except ModelFormatError as e:
                raise ModelFormatError(f"{where}: attribute {name!r}: {e}") from None
        a = m.attrs.add()
        raw = raw_attrs.get(name)
        if raw is not None and raw[2] == t and _same(raw[1], value):
            a.MergeFromString(raw[0])
            continue
        try:
            _attr_to_msg(a, name, value, t)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            tname = fp.ATTR_TYPE_NAME.get(t, t)
            raise ModelFormatError(f"{where}: cannot write attribute {name!r}={value!r} as {tname}: {e}") from None
    if "is_target" in op.extra:
        m.is_target = bool(op.extra["is_target"])
    if op.extra.get("unknown"):
        m.MergeFromString(op.extra["unknown"])


# ---------------------------------------------------------------- program


def check_var_ranks(prog: Program, source: str) -> None:
    """No variable declares more dims than a tensor can have (MAX_RANK)."""
    for i, b in enumerate(prog.blocks):
        for v in b.vars.values():
            if len(v.shape) > MAX_RANK:
                raise ModelFormatError(f"{source}: block {i}: variable {v.name!r} declares {len(v.shape)} dims "
                                       f"(at most {MAX_RANK})")


def _check_program(prog: Program, source: str) -> None:
    """Structural checks: block indices and parents, BLOCK attrs, ops' variables declared, ranks."""
    check_var_ranks(prog, source)
    n = len(prog.blocks)
    for i, b in enumerate(prog.blocks):
        if b.idx != i:
            raise ModelFormatError(f"{source}: block at position {i} says its idx is {b.idx}")
        if not -1 <= b.parent_idx < n or b.parent_idx == i:
            raise ModelFormatError(f"{source}: block {i} has invalid parent_idx {b.parent_idx} ({n} blocks)")
        if not -1 <= b.forward_block_idx < n:
            raise ModelFormatError(f"{source}: block {i} has invalid forward_block_idx {b.forward_block_idx}")
    scopes: list[list[int]] = []
    for i in range(n):
        chain, j = [], i
        while j != -1:
            if j in chain:
                raise ModelFormatError(f"{source}: block {i}: parent_idx chain {chain + [j]} loops")
            chain.append(j)
            j = prog.blocks[j].parent_idx
        scopes.append(chain)
    for i, b in enumerate(prog.blocks):
        for k, op in enumerate(b.ops):
            where = f"{source}: block {i}, op #{k} ({op.type or '<empty type>'})"
            if not op.type:
                raise ModelFormatError(f"{where}: empty op type")
            for name, t in op.attr_types.items():
                idx = op.attrs[name]
                if t == A["BLOCK"]:
                    idx = [idx]
                if t in (A["BLOCK"], A["BLOCKS"]) and not all(0 <= x < n for x in idx):
                    raise ModelFormatError(f"{where}: attribute {name!r} refers to block {idx}, program has {n}")
            for kind, slots in (("input", op.inputs), ("output", op.outputs)):
                for slot, names in slots.items():
                    for name in names:
                        if name in _EMPTY_VAR_NAMES or any(name in prog.blocks[j].vars for j in scopes[i]):
                            continue
                        raise ModelFormatError(
                            f"{where}: {kind} {slot} refers to variable {name!r}, declared in no enclosing block"
                        )


def parse_program(data: bytes | bytearray | memoryview, source: str = "<model buffer>") -> Program:
    """Parse ProgramDesc protobuf bytes; `source` names the file in errors."""
    msg = W.ProgramDesc()
    try:
        msg.ParseFromString(bytes(data))
    except _DECODE_ERRORS as e:
        raise ModelFormatError(f"{source}: not a valid Paddle ProgramDesc protobuf ({e})") from None
    if not msg.IsInitialized():  # upb does not check proto2 `required` fields while parsing
        missing = msg.FindInitializationErrors()
        raise ModelFormatError(
            f"{source}: not a valid Paddle ProgramDesc: required fields missing: "
            + ", ".join(missing[:5])
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        )
    if not len(msg.blocks):
        raise ModelFormatError(f"{source}: the program has no blocks (block 0 is missing)")
    unknowns = _has_unknown(msg)
    prog = Program(blocks=[])
    extra = prog.extra
    for i, bm in enumerate(msg.blocks):
        block = BlockDesc(idx=bm.idx, parent_idx=bm.parent_idx, forward_block_idx=bm.forward_block_idx)
        if bm.HasField("forward_block_idx") and bm.forward_block_idx == -1:
            extra.setdefault("forward_block_idx_set", []).append(i)
        for vm in bm.vars:
            v = _var_from_msg(vm, unknowns)
            if v.name in block.vars:
                raise ModelFormatError(f"{source}: block {i} declares variable {v.name!r} twice")
            block.vars[v.name] = v
        for k, om in enumerate(bm.ops):
            block.ops.append(_op_from_msg(om, f"{source}: block {i}, op #{k} ({_s(om.type)})", unknowns))
        if unknowns and (u := _unknown_bytes(bm)):
            extra.setdefault("block_unknown", {})[i] = u
        prog.blocks.append(block)
    if msg.HasField("version"):
        prog.version = msg.version.version
        if not msg.version.HasField("version"):
            extra["version_field_absent"] = True
        if unknowns and _has_unknown(msg.version):
            extra["raw_version"] = (msg.version.SerializeToString(), prog.version)
    if msg.HasField("op_version_map"):
        pairs = [(_s(p.op_name), p.op_version.version) for p in msg.op_version_map.pair]
        prog.op_version_map = pairs
        if not pairs:
            extra["op_version_map_present"] = True
        if unknowns and _has_unknown(msg.op_version_map):
            extra["raw_op_version_map"] = (msg.op_version_map.SerializeToString(), list(pairs))
    if unknowns and (u := _unknown_bytes(msg)):
        extra["unknown"] = u
    _check_program(prog, source)
    return prog


def serialize_program(program: Program) -> bytes:
    """ProgramDesc protobuf bytes of `program` (the exact input bytes for a parsed, unchanged one)."""
    msg = W.ProgramDesc()
    extra = program.extra
    fbi_set = set(extra.get("forward_block_idx_set", ()))
    block_unknown = extra.get("block_unknown", {})
    for i, b in enumerate(program.blocks):
        bm = msg.blocks.add()
        bm.idx, bm.parent_idx = b.idx, b.parent_idx
        for name, v in b.vars.items():
            try:
                _var_to_msg(bm.vars.add(), v)
            except (TypeError, ValueError, OverflowError) as e:
                raise ModelFormatError(f"block {i}: cannot write variable {name!r}: {e}") from None
        for k, op in enumerate(b.ops):
            _op_to_msg(bm.ops.add(), op, f"block {i}, op #{k} ({op.type})")
        if b.forward_block_idx != -1 or i in fbi_set:
            bm.forward_block_idx = b.forward_block_idx
        if i in block_unknown:
            bm.MergeFromString(block_unknown[i])
    if program.version is not None:
        raw = extra.get("raw_version")
        if raw is not None and raw[1] == program.version:
            msg.version.CopyFrom(W.Version.FromString(raw[0]))
        elif program.version != 0 or not extra.get("version_field_absent"):
            msg.version.version = int(program.version)
        else:
            msg.version.SetInParent()
    if program.op_version_map or extra.get("op_version_map_present"):
        raw = extra.get("raw_op_version_map")
        if raw is not None and raw[1] == list(program.op_version_map):
            msg.op_version_map.CopyFrom(W.OpVersionMap.FromString(raw[0]))
        else:
            msg.op_version_map.SetInParent()
            for name, version in program.op_version_map:
                pair = msg.op_version_map.pair.add()
                pair.op_name = _b(name)
                pair.op_version.version = int(version)
    if extra.get("unknown"):
        msg.MergeFromString(extra["unknown"])
    try:
        return msg.SerializeToString()
    except EncodeError as e:  # pragma: no cover - every required field is always set above
        raise ModelFormatError(f"cannot serialize program: {e}") from None
