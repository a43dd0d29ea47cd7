"""Paddle's framework.proto (ProgramDesc and friends), built at import time without protoc.

The schema is written out below as plain tables and turned into a
`FileDescriptorProto`, then into message classes in a private descriptor pool (so it
never clashes with paddle's own `framework_pb2` when both are imported). Field
numbers, types, labels and defaults are those of paddle/fluid/framework/framework.proto
(Paddle 2.x/3.x; Paddle 3 renamed `lod_tensor`/`lod_level` to `dense_tensor`/
`legacy_lod_level`, which changes no byte on the wire; we keep the classic names that
Paddle-Lite uses). proto2 semantics: `optional` fields have presence, `required`
fields make parsing fail when missing, repeated scalars are not packed.

Message classes exported: ProgramDesc, BlockDesc, OpDesc, VarDesc, VarTypeMsg (the
`VarType` message), Version, OpVersion, OpVersionMap, Scalar, Complex, OpProto;
nested ones are reachable as attributes (OpDesc.Attr, VarTypeMsg.TensorDesc, ...).
`WIRE` holds the same classes with `string` fields declared `bytes`, for exact I/O.
"""
from __future__ import annotations

from types import SimpleNamespace

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "paddle.framework.proto"
FILE_NAME = "pdlite/paddle_framework.proto"

_F = descriptor_pb2.FieldDescriptorProto
OPT, REQ, REP = _F.LABEL_OPTIONAL, _F.LABEL_REQUIRED, _F.LABEL_REPEATED
_SCALARS = {
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "float": _F.TYPE_FLOAT,
    "double": _F.TYPE_DOUBLE,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}

# enum AttrType (top level)
ATTR_TYPE_VALUES = [
    ("INT", 0), ("FLOAT", 1), ("STRING", 2), ("INTS", 3), ("FLOATS", 4), ("STRINGS", 5),
    ("BOOLEAN", 6), ("BOOLEANS", 7), ("BLOCK", 8), ("LONG", 9), ("BLOCKS", 10), ("LONGS", 11),
    ("FLOAT64S", 12), ("VAR", 13), ("VARS", 14), ("FLOAT64", 15), ("SCALAR", 16), ("SCALARS", 17),
]  # fmt: skip

# enum VarType.Type
VAR_TYPE_VALUES = [
    ("BOOL", 0), ("INT16", 1), ("INT32", 2), ("INT64", 3), ("FP16", 4), ("FP32", 5), ("FP64", 6),
    ("SIZE_T", 19), ("UINT8", 20), ("INT8", 21), ("BF16", 22), ("COMPLEX64", 23), ("COMPLEX128", 24),
    ("FP8_E4M3FN", 32), ("FP8_E5M2", 33), ("UINT16", 36), ("UINT32", 37), ("UINT64", 38),
    ("LOD_TENSOR", 7), ("SELECTED_ROWS", 8), ("FEED_MINIBATCH", 9), ("FETCH_LIST", 10),
    ("STEP_SCOPES", 11), ("LOD_RANK_TABLE", 12), ("LOD_TENSOR_ARRAY", 13), ("PLACE_LIST", 14),
    ("READER", 15), ("RAW", 17), ("TUPLE", 18), ("STRING", 25), ("STRINGS", 26), ("VOCAB", 27),
    ("FEED_LIST", 28), ("PSTRING", 29), ("SPARSE_COO", 30), ("SPARSE_CSR", 31),
]  # fmt: skip

SCALAR_TYPE_VALUES = [("BOOLEAN", 1), ("LONG", 2), ("FLOAT64", 3), ("COMPLEX128", 4)]

# A field: (name, number, label, type, default) where type is a scalar name above,
# ".Full.Name" for a message, or "enum:.Full.Name" for an enum. `default` is the
# proto2 text default or None.
_P = "." + PACKAGE + "."
_MESSAGES: list[tuple] = [
    ("Version", [("version", 1, OPT, "int64", "0")], [], []),
    ("Complex", [("r", 1, REQ, "double", None), ("i", 2, REQ, "double", None)], [], []),
    (
        "Scalar",
        [
            ("type", 1, REQ, "enum:" + _P + "Scalar.Type", None),
            ("b", 2, OPT, "bool", None),
            ("i", 3, OPT, "int64", None),
            ("r", 4, OPT, "double", None),
            ("c", 5, OPT, _P + "Complex", None),
        ],
        [],
        [("Type", SCALAR_TYPE_VALUES)],
    ),
    (
        "OpDesc",
        [
            ("type", 3, REQ, "string", None),
            ("inputs", 1, REP, _P + "OpDesc.Var", None),
            ("outputs", 2, REP, _P + "OpDesc.Var", None),
            ("attrs", 4, REP, _P + "OpDesc.Attr", None),
            ("is_target", 5, OPT, "bool", "false"),
        ],
        [
            (
                "Attr",
                [
                    ("name", 1, REQ, "string", None),
                    ("type", 2, REQ, "enum:" + _P + "AttrType", None),
                    ("i", 3, OPT, "int32", None),
                    ("f", 4, OPT, "float", None),
                    ("s", 5, OPT, "string", None),
                    ("ints", 6, REP, "int32", None),
                    ("floats", 7, REP, "float", None),
                    ("strings", 8, REP, "string", None),
                    ("b", 10, OPT, "bool", None),
                    ("bools", 11, REP, "bool", None),
                    ("block_idx", 12, OPT, "int32", None),
                    ("l", 13, OPT, "int64", None),
                    ("blocks_idx", 14, REP, "int32", None),
                    ("longs", 15, REP, "int64", None),
                    ("float64s", 16, REP, "double", None),
                    ("var_name", 17, OPT, "string", None),
                    ("vars_name", 18, REP, "string", None),
                    ("float64", 19, OPT, "double", None),
                    ("scalar", 20, OPT, _P + "Scalar", None),
                    ("scalars", 21, REP, _P + "Scalar", None),
                ],
            ),
            ("Var", [("parameter", 1, REQ, "string", None), ("arguments", 2, REP, "string", None)]),
        ],
        [],
    ),
    (
        "OpProto",
        [
            ("type", 1, REQ, "string", None),
            ("inputs", 2, REP, _P + "OpProto.Var", None),
            ("outputs", 3, REP, _P + "OpProto.Var", None),
            ("attrs", 4, REP, _P + "OpProto.Attr", None),
            ("comment", 5, REQ, "string", None),
        ],
        [
            (
                "Var",
                [
                    ("name", 1, REQ, "string", None),
                    ("comment", 2, REQ, "string", None),
                    ("duplicable", 3, OPT, "bool", "false"),
                    ("intermediate", 4, OPT, "bool", "false"),
                    ("dispensable", 5, OPT, "bool", "false"),
                    ("extra", 6, OPT, "bool", "false"),
                    ("quant", 7, OPT, "bool", "false"),
                ],
            ),
            (
                "Attr",
                [
                    ("name", 1, REQ, "string", None),
                    ("type", 2, REQ, "enum:" + _P + "AttrType", None),
                    ("comment", 3, REQ, "string", None),
                    ("generated", 4, OPT, "bool", "false"),
                    ("extra", 5, OPT, "bool", "false"),
                    ("quant", 6, OPT, "bool", "false"),
                    ("support_tensor", 7, OPT, "bool", "false"),
                ],
            ),
        ],
        [],
    ),
    (
        "VarType",
        [
            ("type", 1, REQ, "enum:" + _P + "VarType.Type", None),
            ("selected_rows", 2, OPT, _P + "VarType.TensorDesc", None),
            ("lod_tensor", 3, OPT, _P + "VarType.LoDTensorDesc", None),
            ("tensor_array", 4, OPT, _P + "VarType.LoDTensorArrayDesc", None),
            ("reader", 5, OPT, _P + "VarType.ReaderDesc", None),
            ("tuple", 7, OPT, _P + "VarType.Tuple", None),
            ("string", 8, OPT, _P + "VarType.TensorDesc", None),
            ("strings", 9, OPT, _P + "VarType.TensorDesc", None),
            ("vocab", 10, OPT, _P + "VarType.TensorDesc", None),
            ("sparse_coo", 11, OPT, _P + "VarType.TensorDesc", None),
            ("sparse_csr", 12, OPT, _P + "VarType.TensorDesc", None),
        ],
        [
            (
                "TensorDesc",
                [
                    ("data_type", 1, REQ, "enum:" + _P + "VarType.Type", None),
                    ("dims", 2, REP, "int64", None),
                ],
            ),
            (
                "LoDTensorDesc",
                [
                    ("tensor", 1, REQ, _P + "VarType.TensorDesc", None),
                    ("lod_level", 2, OPT, "int32", "0"),
                ],
            ),
            (
                "LoDTensorArrayDesc",
                [
                    ("tensor", 1, REQ, _P + "VarType.TensorDesc", None),
                    ("lod_level", 2, OPT, "int32", "0"),
                ],
            ),
            ("ReaderDesc", [("lod_tensor", 1, REP, _P + "VarType.LoDTensorDesc", None)]),
            ("Tuple", [("element_type", 1, REP, "enum:" + _P + "VarType.Type", None)]),
        ],
        [("Type", VAR_TYPE_VALUES)],
    ),
    (
        "VarDesc",
        [
            ("name", 1, REQ, "string", None),
            ("type", 2, REQ, _P + "VarType", None),
            ("persistable", 3, OPT, "bool", "false"),
            ("need_check_feed", 4, OPT, "bool", "false"),
            ("is_parameter", 5, OPT, "bool", "false"),
            ("stop_gradient", 6, OPT, "bool", "false"),
            ("attrs", 7, REP, _P + "VarDesc.Attr", None),
        ],
        [
            (
                "Attr",
                [
                    ("name", 1, REQ, "string", None),
                    ("type", 2, REQ, "enum:" + _P + "AttrType", None),
                    ("i", 3, OPT, "int32", None),
                    ("s", 4, OPT, "string", None),
                    ("ints", 5, REP, "int32", None),
                ],
            )
        ],
        [],
    ),
    (
        "BlockDesc",
        [
            ("idx", 1, REQ, "int32", None),
            ("parent_idx", 2, REQ, "int32", None),
            ("vars", 3, REP, _P + "VarDesc", None),
            ("ops", 4, REP, _P + "OpDesc", None),
            ("forward_block_idx", 5, OPT, "int32", "-1"),
        ],
        [],
        [],
    ),
    ("OpVersion", [("version", 1, REQ, "int32", None)], [], []),
    (
        "OpVersionMap",
        [("pair", 1, REP, _P + "OpVersionMap.OpVersionPair", None)],
        [
            (
                "OpVersionPair",
                [
                    ("op_name", 1, REQ, "string", None),
                    ("op_version", 2, REQ, _P + "OpVersion", None),
                ],
            )
        ],
        [],
    ),
    (
        "ProgramDesc",
        [
            ("blocks", 1, REP, _P + "BlockDesc", None),
            ("version", 4, OPT, _P + "Version", None),
            ("op_version_map", 5, OPT, _P + "OpVersionMap", None),
        ],
        [],
        [],
    ),
]
_RESERVED = {"ProgramDesc": [(2, 3), (3, 4)]}


def _add_fields(msg: descriptor_pb2.DescriptorProto, fields: list[tuple], strings_as_bytes: bool) -> None:
    for name, number, label, ftype, default in fields:
        f = msg.field.add(name=name, number=number, label=label)
        if ftype in _SCALARS:
            f.type = _SCALARS["bytes" if strings_as_bytes and ftype == "string" else ftype]
        elif ftype.startswith("enum:"):
            f.type = _F.TYPE_ENUM
            f.type_name = ftype[len("enum:") :]
        else:
            f.type = _F.TYPE_MESSAGE
            f.type_name = ftype
        if default is not None:
            f.default_value = default


def _add_enum(container, name: str, values: list[tuple[str, int]]) -> None:
    e = container.enum_type.add(name=name)
    for vname, number in values:
        e.value.add(name=vname, number=number)


def build_file_descriptor(strings_as_bytes: bool = False) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of framework.proto (proto2, package paddle.framework.proto).

    With strings_as_bytes, `string` fields are declared `bytes` (same wire format): the
    parser then sees the exact bytes, even ones that are not valid UTF-8.
    """
    fdp = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto2")
    for name, fields, nested, enums in _MESSAGES:
        msg = fdp.message_type.add(name=name)
        _add_fields(msg, fields, strings_as_bytes)
        for nname, nfields in nested:
            _add_fields(msg.nested_type.add(name=nname), nfields, strings_as_bytes)
        for ename, evalues in enums:
            _add_enum(msg, ename, evalues)
        for start, end in _RESERVED.get(name, []):
            msg.reserved_range.add(start=start, end=end)
    _add_enum(fdp, "AttrType", ATTR_TYPE_VALUES)
    return fdp


def _message_class(desc):
    """Message class for a descriptor: protobuf >= 4.21 has GetMessageClass, older ones GetPrototype."""
    get = getattr(message_factory, "GetMessageClass", None)
    if get is not None:
        cls = get(desc)
    else:  # pragma: no cover - protobuf < 4.21
        cls = message_factory.MessageFactory(desc.file.pool).GetPrototype(desc)
    for nested in desc.nested_types:  # older protobufs do not attach nested classes
        if not hasattr(cls, nested.name):
            setattr(cls, nested.name, _message_class(nested))
    return cls


def _load(fdp: descriptor_pb2.FileDescriptorProto) -> SimpleNamespace:
    """Add `fdp` to a private pool; a namespace of its top-level message classes and DESCRIPTOR."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    fd = pool.FindFileByName(fdp.name)
    ns = SimpleNamespace(DESCRIPTOR=fd)
    for name, desc in fd.message_types_by_name.items():
        setattr(ns, name, _message_class(desc))
    return ns


_SCHEMA = _load(build_file_descriptor())
# The same schema with strings as bytes: what program_io parses and writes with.
WIRE = _load(build_file_descriptor(strings_as_bytes=True))

DESCRIPTOR = _SCHEMA.DESCRIPTOR
Version = _SCHEMA.Version
Complex = _SCHEMA.Complex
Scalar = _SCHEMA.Scalar
OpDesc = _SCHEMA.OpDesc
OpProto = _SCHEMA.OpProto
VarTypeMsg = _SCHEMA.VarType
VarDesc = _SCHEMA.VarDesc
BlockDesc = _SCHEMA.BlockDesc
OpVersion = _SCHEMA.OpVersion
OpVersionMap = _SCHEMA.OpVersionMap
ProgramDesc = _SCHEMA.ProgramDesc
TensorDesc = VarTypeMsg.TensorDesc

# AttrType numbers by name, and the value field each attribute type uses.
ATTR_TYPE = dict(ATTR_TYPE_VALUES)
ATTR_TYPE_NAME = {v: k for k, v in ATTR_TYPE_VALUES}
ATTR_VALUE_FIELD = {
    0: "i", 1: "f", 2: "s", 3: "ints", 4: "floats", 5: "strings", 6: "b", 7: "bools",
    8: "block_idx", 9: "l", 10: "blocks_idx", 11: "longs", 12: "float64s", 13: "var_name",
    14: "vars_name", 15: "float64", 16: "scalar", 17: "scalars",
}  # fmt: skip
