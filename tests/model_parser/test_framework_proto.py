"""framework.proto as pdlite builds it: wire-level checks, and field-by-field equality with Paddle's own."""
from __future__ import annotations

import importlib.util
import os

import pytest

from pdlite.model_parser import framework_proto as fp
from tests.model_parser.conftest import LAYOUTS, legacy_model

# Paddle 3 renamed LoDTensor to DenseTensor in framework.proto (same numbers, same wire bytes).
PADDLE3_NAMES = {
    "lod_tensor": "dense_tensor",
    "lod_level": "legacy_lod_level",
    "LoDTensorDesc": "DenseTensorDesc",
    "LoDTensorArrayDesc": "DenseTensorArrayDesc",
    "LOD_TENSOR": "DENSE_TENSOR",
    "LOD_TENSOR_ARRAY": "DENSE_TENSOR_ARRAY",
}


def _paddle_framework_pb2():
    """Paddle's generated framework_pb2, loaded from its file without importing (slow) paddle itself."""
    spec = importlib.util.find_spec("paddle")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("paddle is not installed")
    path = os.path.join(spec.submodule_search_locations[0], "base", "proto", "framework_pb2.py")
    if not os.path.exists(path):
        pytest.skip(f"paddle has no {path}")
    s = importlib.util.spec_from_file_location("_paddle_framework_pb2_for_tests", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def _same_name(mine: str, theirs: str) -> bool:
    return mine == theirs or PADDLE3_NAMES.get(mine) == theirs


def _same_type_name(mine: str, theirs: str) -> bool:
    a, b = mine.split("."), theirs.split(".")
    return len(a) == len(b) and all(_same_name(x, y) for x, y in zip(a, b))


def _compare_enum(mine, theirs, where: str) -> None:
    m = {v.number: v.name for v in mine.value}
    t = {v.number: v.name for v in theirs.value}
    assert set(m) == set(t), f"{where}: enum numbers differ: only mine {set(m) - set(t)}, only Paddle {set(t) - set(m)}"
    for n in m:
        assert _same_name(m[n], t[n]), f"{where}: enum value {n} is {m[n]} here, {t[n]} in Paddle"


def _compare_message(mine, theirs, where: str) -> None:
    mf = {f.number: f for f in mine.field}
    tf = {f.number: f for f in theirs.field}
    assert set(mf) == set(tf), f"{where}: field numbers differ: mine {sorted(mf)}, Paddle {sorted(tf)}"
    for n, f in mf.items():
        g = tf[n]
        w = f"{where}.{f.name} (= {n})"
        assert _same_name(f.name, g.name), f"{w}: named {g.name} in Paddle"
        assert f.label == g.label, f"{w}: label {f.label} != Paddle's {g.label}"
        assert f.type == g.type, f"{w}: type {f.type} != Paddle's {g.type}"
        assert _same_type_name(f.type_name, g.type_name), f"{w}: type {f.type_name} != Paddle's {g.type_name}"
        assert f.default_value == g.default_value, f"{w}: default {f.default_value!r} != {g.default_value!r}"
        assert f.HasField("default_value") == g.HasField("default_value"), f"{w}: default presence differs"
        assert f.options.packed == g.options.packed, f"{w}: packed differs"
    assert [(r.start, r.end) for r in mine.reserved_range] == [(r.start, r.end) for r in theirs.reserved_range]
    mn = {m.name: m for m in mine.nested_type}
    tn = {m.name: m for m in theirs.nested_type}
    assert len(mn) == len(tn), f"{where}: nested messages {sorted(mn)} vs Paddle {sorted(tn)}"
    for name, m in mn.items():
        match = [t for t in tn if _same_name(name, t)]
        assert match, f"{where}: nested message {name} missing in Paddle"
        _compare_message(m, tn[match[0]], f"{where}.{name}")
    me = {e.name: e for e in mine.enum_type}
    te = {e.name: e for e in theirs.enum_type}
    assert set(me) == set(te), f"{where}: nested enums {sorted(me)} vs Paddle {sorted(te)}"
    for name, e in me.items():
        _compare_enum(e, te[name], f"{where}.{name}")


def test_descriptor_matches_paddle_field_by_field():
    from google.protobuf import descriptor_pb2

    pb2 = _paddle_framework_pb2()
    theirs = descriptor_pb2.FileDescriptorProto()
    pb2.DESCRIPTOR.CopyToProto(theirs)
    mine = descriptor_pb2.FileDescriptorProto()
    fp.DESCRIPTOR.CopyToProto(mine)
    assert mine.package == theirs.package == "paddle.framework.proto"
    assert mine.syntax in ("proto2", "") and theirs.syntax in ("proto2", "")
    tm = {m.name: m for m in theirs.message_type}
    assert sorted(m.name for m in mine.message_type) == sorted(tm)
    for m in mine.message_type:
        _compare_message(m, tm[m.name], m.name)
    assert len(mine.enum_type) == len(theirs.enum_type) == 1
    _compare_enum(mine.enum_type[0], theirs.enum_type[0], "AttrType")


def test_wire_schema_differs_only_in_string_fields():
    from google.protobuf import descriptor_pb2

    a = fp.build_file_descriptor()
    b = fp.build_file_descriptor(strings_as_bytes=True)
    string, byts = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    n_strings = 0

    def walk(x, y):
        nonlocal n_strings
        for f, g in zip(x.field, y.field, strict=True):
            assert (f.name, f.number, f.label, f.type_name) == (g.name, g.number, g.label, g.type_name)
            if f.type == string:
                n_strings += 1
                assert g.type == byts
            else:
                assert f.type == g.type
        for xn, yn in zip(x.nested_type, y.nested_type, strict=True):
            walk(xn, yn)

    for x, y in zip(a.message_type, b.message_type, strict=True):
        walk(x, y)
    assert n_strings == 18  # OpDesc 1+5+2, OpProto 2+2+2, VarDesc 1+2, OpVersionPair 1


@pytest.mark.parametrize(
    "make, expected",
    [
        # tag = field_number << 3 | wire_type; values chosen to show each field's number and encoding
        (lambda: fp.OpDesc.Attr(name="a", type=8, block_idx=3), b"\x0a\x01a\x10\x08\x60\x03"),
        (lambda: fp.OpDesc.Attr(name="a", type=9, l=-1), b"\x0a\x01a\x10\x09\x68" + b"\xff" * 9 + b"\x01"),
        (lambda: fp.OpDesc.Attr(name="a", type=11, longs=[1, 2]), b"\x0a\x01a\x10\x0b\x78\x01\x78\x02"),
        (lambda: fp.OpDesc.Attr(name="a", type=10, blocks_idx=[1]), b"\x0a\x01a\x10\x0a\x70\x01"),
        (lambda: fp.OpDesc.Attr(name="a", type=6, b=True), b"\x0a\x01a\x10\x06\x50\x01"),
        (lambda: fp.OpDesc.Attr(name="a", type=13, var_name="v"), b"\x0a\x01a\x10\x0d\x8a\x01\x01v"),
        (lambda: fp.OpDesc.Attr(name="a", type=15, float64=1.0), b"\x0a\x01a\x10\x0f\x99\x01" + b"\0" * 6 + b"\xf0?"),
        (
            lambda: fp.OpDesc.Attr(name="a", type=16, scalar=fp.Scalar(type=2, i=5)),
            b"\x0a\x01a\x10\x10\xa2\x01\x04\x08\x02\x18\x05",
        ),
        (lambda: fp.OpDesc.Attr(name="a", type=3, ints=[1, -1]), b"\x0a\x01a\x10\x03\x30\x01\x30" + b"\xff" * 9 + b"\x01"),
        (lambda: fp.TensorDesc(data_type=5, dims=[-1, 3]), b"\x08\x05\x10" + b"\xff" * 9 + b"\x01\x10\x03"),
        (lambda: fp.BlockDesc(idx=1, parent_idx=0, forward_block_idx=2), b"\x08\x01\x10\x00\x28\x02"),
        (lambda: fp.ProgramDesc(version=fp.Version(version=7)), b"\x22\x02\x08\x07"),
        (lambda: fp.OpDesc(type="t", is_target=False), b"\x1a\x01t\x28\x00"),
        (lambda: fp.VarDesc(name="v", type=fp.VarTypeMsg(type=7), persistable=False), b"\x0a\x01v\x12\x02\x08\x07\x18\x00"),
    ],
)
def test_wire_encoding_of_fields(make, expected):
    assert make().SerializeToString() == expected


def test_proto2_semantics():
    from google.protobuf.message import EncodeError

    assert fp.BlockDesc().forward_block_idx == -1  # proto2 default
    b = fp.BlockDesc(idx=0, parent_idx=-1)
    assert not b.HasField("forward_block_idx")
    b.forward_block_idx = -1
    assert b.HasField("forward_block_idx")  # presence, even at the default value
    partial = fp.BlockDesc.FromString(b"\x08\x00")  # required `parent_idx` missing
    assert not partial.IsInitialized() and partial.FindInitializationErrors() == ["parent_idx"]
    with pytest.raises(EncodeError):
        partial.SerializeToString()
    # unknown value of a closed (proto2) enum: not stored in the field, so the required field is missing
    assert not fp.TensorDesc.FromString(b"\x08\x63").IsInitialized()
    assert fp.ATTR_TYPE["SCALARS"] == 17 and fp.ATTR_VALUE_FIELD[17] == "scalars"


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_real_program_reserializes_exactly_through_the_schema(name):
    path = legacy_model(name) / LAYOUTS[name][0]
    data = path.read_bytes()
    msg = fp.ProgramDesc.FromString(data)
    assert msg.blocks[0].idx == 0 and len(msg.blocks[0].ops) > 10
    assert msg.SerializeToString() == data
    assert fp.WIRE.ProgramDesc.FromString(data).SerializeToString() == data
