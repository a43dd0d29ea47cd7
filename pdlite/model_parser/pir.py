"""Paddle 3 PIR programs (`inference.json` + `.pdiparams`) read into pdlite's Program.

The JSON (Paddle's pir::ProgramWriter, "magic": "pir") holds one region of one block of
ops. Each op is `{"#": name, "I": operands, "O": results, "A": attrs, "OA": result attrs}`;
names are compressed with a dialect number (`0.` builtin, `1.` pd_op, `2.` cf, `3.` custom
op, `4.` dist), builtin.parameter is compressed to `{"#": "p", "A": [is_distributed,
is_parameter, need_clip, name], "O": value}`. A value is `{"%": id, "TT": type}`; id 0 is the
null value (an absent optional operand); block arguments have negative ids. Types are
`{"#": "0.t_dtensor", "D": [dtype, dims, layout, lod, offset]}`, `0.t_vec` (a vector of
types, made by builtin.combine and taken apart by builtin.split) or scalar types (`0.t_f32`
...). Attributes are `{"#": kind, "D": data}` (`0.a_i32`, `0.a_array`, `1.a_intarray`,
`1.a_scalar`, `1.a_dtype`, ...).

The program is turned into the legacy op set (conv2d, elementwise_add, reshape2, ...) by
the table in `pdlite.model_parser.pir_mapping`, so that the SSA graph, passes and kernels
work unchanged: values become variables (parameters keep their names, feeds get pd_op.data's
`name`, fetched values the fetch op's `name`, others `pir_v<id>`), pd_op.data/pd_op.fetch
become feed/fetch ops with `col` attributes. The `.pdiparams` file holds the parameters
sorted by name, exactly like a legacy combined params file.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.errors import ModelFormatError, PdliteError, UnsupportedOpError

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
    if short in ("t_dtensor", "t_dtensor_array", "t_selected_rows"):
        d = _need(t, "D", list, f"type {tid}")
        if len(d) < 2 or not isinstance(d[1], list):
            raise _Bad(f"type {tid}: data should be [dtype, dims, ...]")
        inner = decode_type(d[0])
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in d[1]):
            raise _Bad(f"type {tid}: dims should be integers, got {d[1]!r}")
        kind = "dtensor" if short == "t_dtensor" else short[2:]
        return PirType(kind, inner.dtype, list(d[1]))
    if short == "t_vec":
        return PirType("vec", elems=[decode_type(e) for e in _need(t, "D", list, "type t_vec")])
    return PirType(tid)


def decode_attr(a: Any) -> Any:
    """A plain Python value for a serialized attribute (lists for arrays, str for dtypes)."""
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
        return d
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
        return decode_type(d)
    if short == "a_place":
        return d
    return d  # unknown attribute kinds are kept raw; only mapped ops read attributes


def _vid(v: Any, what: str) -> int:
    """A value id: key "%" (Paddle >= 3.0), "#" in the first PIR JSON versions."""
    return _need(v, "%" if isinstance(v, dict) and "%" in v else "#", int, what)


def _value(v: Any, what: str) -> tuple[int, PirType]:
    return _vid(v, what), decode_type(_need(v, "TT", dict, what))


def decode_op(o: Any, index: int) -> PirOp:
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
    for key in ("A", "OA"):
        for a in o.get(key, []) if isinstance(o.get(key, []), list) else []:
            attrs[_need(a, "N", str, f"{what} attribute")] = decode_attr(_need(a, "AT", dict, f"{what} attribute"))
    regions = o.get("regions", [])
    return PirOp(full, inputs, [v for v, _ in outs], [t for _, t in outs], attrs, index,
                 len(regions) if isinstance(regions, list) else 0)


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


# ----------------------------------------------------------------------------------- converting


Conversion = Callable[["PirConverter", PirOp], None]


class PirConverter:
    """Builds block 0 of a Program from PIR ops; the mapping functions call its helpers."""

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
        for op in ops:
            for vid, t in zip(op.outputs, op.types):
                if vid in self.types and vid != 0:
                    raise ModelFormatError(f"{source}: op #{op.index} ({op.name}) redefines value %{vid}")
                self.types[vid] = t
            self.uses.update(v for v in op.inputs if v != 0)

    # -- values ---------------------------------------------------------------------------------
    def fail(self, op: PirOp, msg: str) -> PdliteError:
        return ModelFormatError(f"{self.source}: op #{op.index} ({op.name}): {msg}")

    def unsupported(self, op: PirOp, msg: str) -> PdliteError:
        return UnsupportedOpError(f"{self.source}: op #{op.index} ({op.name}): {msg}")

    def claim(self, wanted: str) -> str:
        """A variable name not used yet: `wanted`, else `wanted_1`, `wanted_2`, ..."""
        name, k = wanted, 0
        while name in self._taken:
            k += 1
            name = f"{wanted}_{k}"
        self._taken.add(name)
        return name

    def define(self, op: PirOp, i: int, name: str | None = None, persistable: bool = False) -> str:
        """Name result `i` of `op` and declare its variable (dtype and shape from the PIR type)."""
        vid, t = op.outputs[i], op.types[i]
        if vid in self.names:
            return self.names[vid]
        n = self.claim(name or f"pir_v{vid}")
        self.names[vid] = n
        if t.kind in ("dtensor", "scalar", "dtensor_array", "selected_rows"):
            vt = {"dtensor_array": VarType.LOD_TENSOR_ARRAY, "selected_rows": VarType.SELECTED_ROWS}
            self.block.vars[n] = VarDesc(n, vt.get(t.kind, VarType.LOD_TENSOR), t.dtype, list(t.shape),
                                         persistable=persistable, is_parameter=persistable)
        return n

    def name(self, op: PirOp, vid: int) -> str:
        if vid in self.vec_names:
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

    # -- emitting -------------------------------------------------------------------------------
    def outputs(self, op: PirOp, slots: tuple[str | None, ...]) -> dict[str, list[str]]:
        """Output slots for `op`'s results: result i goes to slots[i]; unused results are left out
        (except the first); a used result without a legacy slot is refused."""
        out: dict[str, list[str]] = {}
        for i, vid in enumerate(op.outputs):
            slot = slots[i] if i < len(slots) else None
            if slot is None:
                if self.used(vid):
                    raise self.unsupported(op, f"result #{i} is used, but pdlite does not compute it")
                continue
            if i == 0 or self.used(vid):
                if op.types[i].kind == "vec":
                    out[slot] = self.define_vector(op, i)
                else:
                    out[slot] = [self.define(op, i)]
        return out

    def define_vector(self, op: PirOp, i: int) -> list[str]:
        """Name the elements of a vector result (taken apart later by builtin.split)."""
        vid, t = op.outputs[i], op.types[i]
        elems = []
        for k, et in enumerate(t.elems):
            n = self.claim(f"pir_v{vid}_{k}")
            self.block.vars[n] = VarDesc(n, VarType.LOD_TENSOR, et.dtype, list(et.shape))
            elems.append(n)
        self.vec_names[vid] = elems
        return elems

    def emit(self, type_: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
             attrs: dict[str, Any] | None = None, droppable: bool = False) -> OpDesc:
        op = OpDesc(type_, {k: v for k, v in inputs.items() if v}, outputs, dict(attrs or {}))
        self.emitted.append((op, droppable))
        return op

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


def convert(ops: list[PirOp], nested: Counter[str], source: str, table: dict[str, Conversion]) -> Program:
    """A Program (block 0 only) for the PIR ops, mapped through `table`; all unknown ops are
    reported together, with their counts."""
    unknown: Counter[str] = Counter()
    for op in ops:
        if _lookup(table, op.name) is None or op.regions:
            unknown[op.name] += 1
    unknown.update({n: c for n, c in nested.items()})
    if unknown:
        listing = ", ".join(f"{n} x{c}" for n, c in sorted(unknown.items()))
        raise UnsupportedOpError(
            f"{source}: {sum(unknown.values())} PIR op(s) of {len(unknown)} type(s) have no pdlite mapping: "
            f"{listing} (control flow and custom ops are not supported)"
        )
    c = PirConverter(ops, source)
    _prename_fetches(c)
    for op in ops:
        fn = _lookup(table, op.name)
        assert fn is not None
        try:
            fn(c, op)
        except PdliteError:
            raise
        except (IndexError, KeyError, TypeError, ValueError, OverflowError) as e:
            raise c.fail(op, f"malformed operands or attributes ({type(e).__name__}: {e})") from None
    block = c.block
    block.ops = c.finish()
    block.vars.setdefault("feed", VarDesc("feed", VarType.FEED_MINIBATCH, None, persistable=True))
    block.vars.setdefault("fetch", VarDesc("fetch", VarType.FETCH_LIST, None, persistable=True))
    return Program([block], extra={"format": "pir-json"})


def _lookup(table: dict[str, Conversion], name: str) -> Conversion | None:
    """The mapping of an op; in-place variants (`relu_`) share their op's mapping."""
    fn = table.get(name)
    if fn is None and name.endswith("_") and not name.endswith("__"):
        fn = table.get(name[:-1])
    return fn


def _prename_fetches(c: PirConverter) -> None:
    """Give a fetched value the fetch op's name when it is an ordinary op result fetched once."""
    producers: dict[int, PirOp] = {v: op for op in c.ops for v in op.outputs}
    fetched = Counter(op.inputs[0] for op in c.ops if op.name == "pd_op.fetch" and op.inputs)
    for op in c.ops:
        if op.name != "pd_op.fetch" or not op.inputs:
            continue
        vid, name = op.inputs[0], op.attrs.get("name")
        prod = producers.get(vid)
        if (not isinstance(name, str) or fetched[vid] != 1 or prod is None
                or prod.name in ("builtin.parameter", "pd_op.data", "pd_op.feed", "builtin.split", "builtin.constant")):
            continue
        i = prod.outputs.index(vid)
        c.define(prod, i, name)


# ---------------------------------------------------------------------------------- loading


def parse_pir_program(data: bytes | str, source: str = "<PIR model buffer>") -> Program:
    """A Program for the PIR JSON document `data`; `source` names it in errors."""
    from pdlite.model_parser.pir_mapping import PIR_OPS

    base, ops, nested = decode_program(data, source)
    version = base.get("version")
    program = convert(ops, nested, source, PIR_OPS)
    program.extra["pir_version"] = version
    if not program.feed_names():
        raise ModelFormatError(f"{source}: the PIR program has no pd_op.data (feed) op")
    if not program.fetch_names():
        raise ModelFormatError(f"{source}: the PIR program has no pd_op.fetch op")
    return program


def _read(path: str | os.PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelFormatError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{what} {path} is a folder, expected a file") from None
    except OSError as e:
        raise ModelFormatError(f"cannot read {what} {path}: {e}") from None


def load_pir(json_path: str | os.PathLike | bytes | None, params_path: str | os.PathLike | bytes | None = None,
             *, json_buffer: bytes | None = None, params_buffer: bytes | None = None) -> Any:
    """Load a PIR model: program from a JSON file or bytes, parameters from a `.pdiparams` file
    or bytes (sorted by name, as Paddle's save_combine writes them). Returns a LoadedModel."""
    from pdlite.model_parser.loader import LoadedModel, load_params_combined

    if isinstance(json_path, (bytes, bytearray, memoryview)):
        json_buffer, json_path = bytes(json_path), None
    if isinstance(params_path, (bytes, bytearray, memoryview)):
        params_buffer, params_path = bytes(params_path), None
    if json_buffer is None:
        if json_path is None:
            raise ModelFormatError("load_pir needs a PIR JSON file or buffer")
        json_buffer = _read(json_path, "PIR model file")
    source = str(json_path) if json_path is not None else "<PIR model buffer>"
    program = parse_pir_program(json_buffer, source)
    wanted = program.persistable_names()
    if params_buffer is None and params_path is not None:
        params_buffer = _read(params_path, "params file")
    if params_buffer is None:
        if wanted:
            expected = Path(json_path).with_suffix(".pdiparams") if json_path is not None else "a params buffer"
            raise ModelFormatError(f"{source}: the program has {len(wanted)} parameters but no params file "
                                   f"was given or found (expected {expected})")
        params = {}
    else:
        psource = str(params_path) if params_path is not None else "<params buffer>"
        params = load_params_combined(program, params_buffer, psource)
    return LoadedModel(program, params, "pir-json", str(json_path) if json_path is not None else None,
                       str(params_path) if params_path is not None else None)
