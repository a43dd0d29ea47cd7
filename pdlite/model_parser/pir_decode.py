"""Decoding Paddle 3 PIR JSON (`inference.json`) into plain op records (PirOp, PirType).

The JSON (Paddle's pir::ProgramWriter, "magic": "pir") holds one region of one block of
ops. Each op is `{"#": name, "I": operands, "O": results, "A": attrs, "OA": result attrs}`;
names are compressed with a dialect number (`0.` builtin, `1.` pd_op, `2.` cf, `3.` custom
op, `4.` dist), builtin.parameter is compressed to `{"#": "p", "A": [is_distributed,
is_parameter, need_clip, name], "O": value}`. A value is `{"%": id, "TT": type}`; id 0 is the
null value (an absent optional operand); block arguments have negative ids. Types are
`{"#": "0.t_dtensor", "D": [dtype, dims, layout, lod, offset]}`, `0.t_vec` (a vector of
types, made by builtin.combine and taken apart by builtin.split / builtin.slice) or scalar
types (`0.t_f32` ...). Attributes are `{"#": kind, "D": data}` (`0.a_i32`, `0.a_array`,
`1.a_intarray`, `1.a_scalar`, `1.a_dtype`, ...).

This module only decodes; pdlite.model_parser.pir_convert turns the ops into a Program.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pdlite.core.dtypes import VarType
from pdlite.errors import ModelFormatError

DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "dist_op"}

# phi::DataTypeToString names and builtin scalar type names -> VarType
DTYPE_NAMES = {
    "bool": VarType.BOOL, "int8": VarType.INT8, "uint8": VarType.UINT8, "int16": VarType.INT16,
    "int32": VarType.INT32, "int64": VarType.INT64, "float16": VarType.FP16, "bfloat16": VarType.BF16,
    "float32": VarType.FP32, "float64": VarType.FP64, "complex64": VarType.COMPLEX64,
    "complex128": VarType.COMPLEX128, "float8_e4m3fn": VarType.FP8_E4M3FN, "float8_e5m2": VarType.FP8_E5M2,
}  # fmt: skip
SCALAR_TYPES = {
    "t_bool": VarType.BOOL, "t_i8": VarType.INT8, "t_ui8": VarType.UINT8, "t_i16": VarType.INT16,
    "t_i32": VarType.INT32, "t_i64": VarType.INT64, "t_index": VarType.INT64, "t_f16": VarType.FP16,
    "t_bf16": VarType.BF16, "t_f32": VarType.FP32, "t_f64": VarType.FP64, "t_c64": VarType.COMPLEX64,
    "t_c128": VarType.COMPLEX128, "t_f8e4m3fn": VarType.FP8_E4M3FN, "t_f8e5m2": VarType.FP8_E5M2,
}  # fmt: skip


_SPECIAL_FLOATS = ("inf", "-inf", "nan")  # a float attribute {"#": "0.a_f32", "VD": "INF" | "-INF" | "NaN"}


class DType(str):
    """A dtype attribute's value ("float32"), told apart from string attributes."""


class Opaque:
    """An attribute pdlite never reads (a place, a type): kept out of the legacy attributes."""

    def __init__(self, kind: str, data: Any) -> None:
        self.kind, self.data = kind, data

    def __repr__(self) -> str:
        return f"Opaque({self.kind}, {self.data!r})"


class _Bad(Exception):
    """Internal: a structural problem, turned into a ModelFormatError naming the file and op."""


# ------------------------------------------------------------------------------------ decoding


@dataclass
class PirType:
    """A value's type: a dense tensor (dtype, dims), a vector of types, or something else (kind)."""

    kind: str  # "dtensor", "vec", "null", "scalar" or the raw type name
    dtype: VarType | None = None
    shape: list[int] = field(default_factory=list)
    elems: list[PirType] = field(default_factory=list)


@dataclass
class PirOp:
    """One operation: full name ("pd_op.conv2d"), operand ids, result ids and types, attributes."""

    name: str
    inputs: list[int]
    outputs: list[int]
    types: list[PirType]
    attrs: dict[str, Any]
    index: int
    regions: int = 0
    # one entry per region (pd_op.if: then, else; pd_op.while: the body): its block's arguments
    # (value id, type) and ops, the last of which is cf.yield
    blocks: list[PirBlock] = field(default_factory=list)


@dataclass
class PirBlock:
    """The one block of a region: arguments (negative value ids) and ops."""

    args: list[tuple[int, PirType]]
    ops: list[PirOp]


def walk(ops: list[PirOp]) -> list[PirOp]:
    """`ops` and, depth first, the ops of their regions."""
    out: list[PirOp] = []
    for op in ops:
        out.append(op)
        for b in op.blocks:
            out.extend(walk(b.ops))
    return out


def _need(obj: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _Bad(f"{what}: missing key {key!r}")
    v = obj[key]
    if not isinstance(v, kind) or isinstance(v, bool) and kind is int:
        raise _Bad(f"{what}: {key!r} should be {getattr(kind, '__name__', kind)}, got {type(v).__name__}")
    return v


def decode_type(t: Any) -> PirType:
    tid = _need(t, "#", str, "type")
    short = tid.split(".", 1)[-1]
    if tid == "NULL":
        return PirType("null")
    if short in SCALAR_TYPES:
        return PirType("scalar", SCALAR_TYPES[short])
    if short in ("t_dtensor", "t_dtensor_array", "t_dense_tensor_array", "t_selected_rows"):
        d = _need(t, "D", list, f"type {tid}")
        if len(d) < 2 or not isinstance(d[1], list):
            raise _Bad(f"type {tid}: data should be [dtype, dims, ...]")
        inner = decode_type(d[0])
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in d[1]):
            raise _Bad(f"type {tid}: dims should be integers, got {d[1]!r}")
        kind = {"t_dtensor": "dtensor", "t_dense_tensor_array": "dtensor_array"}.get(short, short[2:])
        return PirType(kind, inner.dtype, list(d[1]))
    if short == "t_vec":
        return PirType("vec", elems=[decode_type(e) for e in _need(t, "D", list, "type t_vec")])
    return PirType(tid)


def decode_attr(a: Any) -> Any:
    """A plain Python value for a serialized attribute (lists for arrays, DType for dtypes,
    Opaque for places, types and unknown kinds)."""
    aid = _need(a, "#", str, "attribute")
    short = aid.split(".", 1)[-1]
    d = a.get("D") if isinstance(a, dict) else None
    if short == "a_array":
        if not isinstance(d, list):
            raise _Bad(f"attribute {aid}: data should be a list")
        return [decode_attr(x) for x in d]
    if short == "a_bool":
        if not isinstance(d, bool):
            raise _Bad(f"attribute {aid}: data should be true/false, got {d!r}")
        return d
    if short in ("a_i32", "a_i64", "a_index"):
        if not isinstance(d, int) or isinstance(d, bool):
            raise _Bad(f"attribute {aid}: data should be an integer, got {d!r}")
        return d
    if short in ("a_f32", "a_f64"):
        vd = a.get("VD") if isinstance(a, dict) and "D" not in a else None
        if isinstance(vd, str) and vd.lower() in _SPECIAL_FLOATS:  # JSON has no inf / nan: Paddle writes "VD"
            return float(vd)
        if not isinstance(d, (int, float)) or isinstance(d, bool):
            raise _Bad(f"attribute {aid}: data should be a number, got {d!r}")
        return float(d)
    if short in ("a_str", "a_tensorname", "a_layout"):
        if not isinstance(d, str):
            raise _Bad(f"attribute {aid}: data should be a string, got {d!r}")
        return d
    if short == "a_dtype":
        if not isinstance(d, str):
            raise _Bad(f"attribute {aid}: data should be a dtype name, got {d!r}")
        return DType(d)
    if short == "a_intarray":
        if not isinstance(d, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in d):
            raise _Bad(f"attribute {aid}: data should be a list of integers, got {d!r}")
        return list(d)
    if short == "a_scalar":
        if not isinstance(d, list) or len(d) < 2 or not isinstance(d[0], str):
            raise _Bad(f"attribute {aid}: data should be [dtype, value], got {d!r}")
        if d[0] in ("complex64", "complex128") and len(d) >= 3:
            return complex(d[1], d[2])
        return d[1]
    if short in ("a_c64", "a_c128"):
        if not isinstance(d, list) or len(d) != 2:
            raise _Bad(f"attribute {aid}: data should be [real, imag], got {d!r}")
        return complex(d[0], d[1])
    if short == "a_type":
        return Opaque(short, decode_type(d))
    return Opaque(short, d)  # places and unknown kinds: kept, but never copied to a legacy op


def _vid(v: Any, what: str) -> int:
    """A value id: key "%" (Paddle >= 3.0), "#" in the first PIR JSON versions."""
    return _need(v, "%" if isinstance(v, dict) and "%" in v else "#", int, what)


def _value(v: Any, what: str) -> tuple[int, PirType]:
    return _vid(v, what), decode_type(_need(v, "TT", dict, what))


def decode_op(o: Any, index: int, depth: int = 0) -> PirOp:
    what = f"op #{index}"
    name = _need(o, "#", str, what)
    if name == "p":  # compressed builtin.parameter
        attrs = _need(o, "A", list, f"{what} (builtin.parameter)")
        if len(attrs) < 4 or not isinstance(attrs[3], str):
            raise _Bad(f"{what} (builtin.parameter): attributes should be [.., .., .., name]")
        vid, t = _value(_need(o, "O", dict, what), f"{what} result")
        return PirOp("builtin.parameter", [], [vid], [t], {"parameter_name": attrs[3]}, index)
    dialect, _, short = name.partition(".")
    full = f"{DIALECTS.get(dialect, dialect)}.{short}" if short else name
    what = f"{what} ({full})"
    inputs = [_vid(x, f"{what} operand") for x in _need(o, "I", list, what)]
    outs = [_value(x, f"{what} result") for x in _need(o, "O", list, what)]
    attrs: dict[str, Any] = {}
    for key in ("A", "OA"):  # OA: result attributes (stop_gradient, persistable), checked but not kept
        for a in o.get(key, []) if isinstance(o.get(key, []), list) else []:
            v = decode_attr(_need(a, "AT", dict, f"{what} attribute"))
            if key == "A":
                attrs[_need(a, "N", str, f"{what} attribute")] = v
    regions = o.get("regions", [])
    regions = regions if isinstance(regions, list) else []
    if regions and depth > 64:
        raise _Bad("regions nested more than 64 deep")
    blocks = []
    for k, region in enumerate(regions):
        rblocks = _need(region, "blocks", list, f"{what} region {k}")
        if len(rblocks) != 1:
            raise _Bad(f"{what} region {k}: expected 1 block, found {len(rblocks)}")
        args = [_value(a, f"{what} region {k} argument") for a in rblocks[0].get("args", []) or []]
        blocks.append(PirBlock(args, [decode_op(x, i, depth + 1)
                                      for i, x in enumerate(_all_ops(rblocks[0], f"{what} region {k}"))]))
    return PirOp(full, inputs, [v for v, _ in outs], [t for _, t in outs], attrs, index, len(regions), blocks)


def _all_ops(block: Any, what: str) -> list[Any]:
    return _need(block, "ops", list, what)


def decode_program(data: bytes | str, source: str) -> tuple[dict[str, Any], list[PirOp], Counter[str]]:
    """(base_code, top-level ops, names of ops inside nested regions) of a PIR JSON document."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ModelFormatError(f"{source}: not valid JSON ({e}); expected a Paddle 3 PIR program") from None
    try:
        if not isinstance(doc, dict) or "program" not in doc:
            raise _Bad("expected a JSON object with 'base_code' and 'program' (a Paddle 3 PIR program)")
        base = doc.get("base_code", {})
        if not isinstance(base, dict) or base.get("magic") != "pir":
            raise _Bad(f"base_code.magic should be 'pir', got {base!r:.80}")
        regions = _need(doc["program"], "regions", list, "program")
        if len(regions) != 1:
            raise _Bad(f"the program should have 1 top-level region, found {len(regions)}")
        blocks = _need(regions[0], "blocks", list, "region 0")
        if len(blocks) != 1:
            raise _Bad(f"the top-level region should have 1 block, found {len(blocks)}")
        raw = _all_ops(blocks[0], "block 0")
        ops = [decode_op(o, i) for i, o in enumerate(raw)]
        nested: Counter[str] = Counter()
        for o in raw:
            _count_nested(o, nested, 0)
        return base, ops, nested
    except _Bad as e:
        raise ModelFormatError(f"{source}: malformed PIR program: {e}") from None


def _count_nested(o: dict[str, Any], acc: Counter[str], depth: int) -> None:
    if depth > 64:
        raise _Bad("regions nested more than 64 deep")
    for region in o.get("regions", []) or []:
        for block in _need(region, "blocks", list, "region"):
            for inner in _all_ops(block, "block"):
                name = _need(inner, "#", str, "op")
                d, _, s = name.partition(".")
                acc[f"{DIALECTS.get(d, d)}.{s}" if s else name] += 1
                _count_nested(inner, acc, depth + 1)
