"""ProgramDesc bytes <-> Program: exact round trips, attribute values and types, validation errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.errors import ModelFormatError
from pdlite.model_parser import framework_proto as fp
from pdlite.model_parser import parse_program, serialize_program
from pdlite.model_parser.program_io import infer_attr_type
from tests.model_parser.conftest import LAYOUTS, legacy_model

A = fp.ATTR_TYPE


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_real_model_round_trip_is_byte_exact(name):
    d = legacy_model(name)
    data = (d / LAYOUTS[name][0]).read_bytes()
    prog = parse_program(data, str(d))
    assert serialize_program(prog) == data
    # the feed/fetch targets are those of the reference case
    case = d / "case.npz"
    if case.exists():
        z = np.load(case)
        assert prog.feed_names() == sorted(k[3:] for k in z.files if k.startswith("in:"))
        assert prog.fetch_names() == sorted(k[4:] for k in z.files if k.startswith("out:"))
    # order is kept: the first op is the feed, vars appear as in the file
    msg = fp.ProgramDesc.FromString(data)
    assert [v.name for v in msg.blocks[0].vars] == list(prog.main.vars)
    assert [o.type for o in msg.blocks[0].ops] == [o.type for o in prog.main.ops]
    for om, op in zip(msg.blocks[0].ops, prog.main.ops):
        assert [v.parameter for v in om.inputs] == list(op.inputs)
        assert [v.parameter for v in om.outputs] == list(op.outputs)
        assert [a.name for a in om.attrs] == list(op.attrs)


def test_real_model_values():
    d = legacy_model("mobilenet_v3_small")
    prog = parse_program((d / "inference.pdmodel").read_bytes())
    assert prog.version == 3003001 and len(prog.op_version_map) == 76
    feed = prog.main.vars["feed"]
    assert feed.type == VarType.FEED_MINIBATCH and feed.dtype is None and feed.persistable
    x = prog.main.vars["x"]
    assert (x.type, x.dtype, x.shape, x.persistable) == (VarType.LOD_TENSOR, VarType.FP32, [-1, 3, 224, 224], False)
    conv = next(op for op in prog.main.ops if op.type == "conv2d")
    assert conv.attrs["strides"] == [2, 2] and conv.attr_types["strides"] == A["INTS"]
    assert conv.attrs["data_format"] == "NCHW" and conv.attr_types["data_format"] == A["STRING"]
    assert conv.attrs["groups"] == 1 and conv.attr_types["groups"] == A["INT"]
    w = prog.main.vars[conv.input("Filter")]
    assert w.persistable and w.shape == [16, 3, 3, 3] and w.dtype == VarType.FP32
    bn = next(op for op in prog.main.ops if op.type == "batch_norm")
    assert math.isclose(bn.attrs["epsilon"], 1e-3, rel_tol=1e-6) and isinstance(bn.attrs["is_test"], bool)


# ------------------------------------------------------------------ attributes of every type

ALL_ATTRS = {
    "i": (A["INT"], -7),
    "f": (A["FLOAT"], 0.5),
    "s": (A["STRING"], "héllo"),
    "ints": (A["INTS"], [1, -2, 2**31 - 1]),
    "floats": (A["FLOATS"], [0.25, -1.5]),
    "strings": (A["STRINGS"], ["a", "", "ü"]),
    "b": (A["BOOLEAN"], True),
    "bools": (A["BOOLEANS"], [True, False, True]),
    "block": (A["BLOCK"], 1),
    "l": (A["LONG"], -(2**40)),
    "blocks": (A["BLOCKS"], [1, 0]),
    "longs": (A["LONGS"], [2**40, -1]),
    "f64s": (A["FLOAT64S"], [0.1, 1e300]),
    "var": (A["VAR"], "x"),
    "vars": (A["VARS"], ["x", "y"]),
    "f64": (A["FLOAT64"], 0.1),
    "scalar_b": (A["SCALAR"], False),
    "scalar_i": (A["SCALAR"], 3),
    "scalar_f": (A["SCALAR"], 2.5),
    "scalar_c": (A["SCALAR"], 1.5 - 2j),
    "scalars": (A["SCALARS"], [True, 4, 0.5, 1j]),
    "empty_ints": (A["INTS"], []),
}


def _program_with(attrs: dict[str, tuple[int, object]]) -> Program:
    main = BlockDesc(idx=0, parent_idx=-1)
    for n in ("x", "y"):
        main.vars[n] = VarDesc(n, shape=[2, 3])
    main.vars["w"] = VarDesc("w", dtype=VarType.INT64, shape=[4], persistable=True, lod_level=1)
    main.vars["arr"] = VarDesc("arr", type=VarType.LOD_TENSOR_ARRAY, dtype=VarType.FP16, shape=[-1], lod_level=2)
    main.vars["rows"] = VarDesc("rows", type=VarType.SELECTED_ROWS, dtype=VarType.FP64, shape=[10, 2])
    op = OpDesc(
        "custom",
        inputs={"X": ["x", "w"], "Empty": []},
        outputs={"Out": ["y"]},
        attrs={k: v for k, (_, v) in attrs.items()},
        attr_types={k: t for k, (t, _) in attrs.items()},
    )
    main.ops.append(op)
    sub = BlockDesc(idx=1, parent_idx=0, forward_block_idx=0)
    sub.vars["z"] = VarDesc("z", dtype=VarType.BF16, stop_gradient=True, need_check_feed=True, is_parameter=True)
    sub.ops.append(OpDesc("scale", {"X": ["x"]}, {"Out": ["z"]}, {"scale": 2.0}, {"scale": A["FLOAT"]}))
    return Program(blocks=[main, sub], version=5, op_version_map=[("custom", 2)])


def test_every_attr_type_round_trips():
    prog = _program_with(ALL_ATTRS)
    data = serialize_program(prog)
    back = parse_program(data, "mem")
    op = back.main.ops[0]
    for name, (t, v) in ALL_ATTRS.items():
        assert op.attr_types[name] == t, name
        got = op.attrs[name]
        if t == A["FLOATS"] or t == A["FLOAT"]:
            assert np.allclose(got, v) and np.float32(got).tolist() == got, name
        else:
            assert got == v and type(got) is type(v), name
    assert op.inputs == {"X": ["x", "w"], "Empty": []} and op.outputs == {"Out": ["y"]}
    v = back.main.vars
    assert (v["w"].dtype, v["w"].shape, v["w"].lod_level, v["w"].persistable) == (VarType.INT64, [4], 1, True)
    assert (v["arr"].type, v["arr"].dtype, v["arr"].lod_level) == (VarType.LOD_TENSOR_ARRAY, VarType.FP16, 2)
    assert (v["rows"].type, v["rows"].dtype, v["rows"].shape) == (VarType.SELECTED_ROWS, VarType.FP64, [10, 2])
    z = back.blocks[1].vars["z"]
    assert (z.dtype, z.stop_gradient, z.need_check_feed, z.is_parameter) == (VarType.BF16, True, True, True)
    assert back.blocks[1].parent_idx == 0 and back.blocks[1].forward_block_idx == 0
    assert back.version == 5 and back.op_version_map == [("custom", 2)]
    assert serialize_program(back) == data


def test_attr_bytes_match_paddle_reading():
    """Paddle's own framework_pb2 reads what we write with the same values."""
    from tests.model_parser.test_framework_proto import _paddle_framework_pb2

    pb2 = _paddle_framework_pb2()
    data = serialize_program(_program_with(ALL_ATTRS))
    msg = pb2.ProgramDesc.FromString(data)
    attrs = {a.name: a for a in msg.blocks[0].ops[0].attrs}
    assert attrs["block"].block_idx == 1 and list(attrs["blocks"].blocks_idx) == [1, 0]
    assert attrs["l"].l == -(2**40) and list(attrs["longs"].longs) == [2**40, -1]
    assert attrs["var"].var_name == "x" and list(attrs["vars"].vars_name) == ["x", "y"]
    assert attrs["f64"].float64 == 0.1 and list(attrs["f64s"].float64s) == [0.1, 1e300]
    assert attrs["scalar_c"].scalar.type == 4 and attrs["scalar_c"].scalar.c.i == -2.0
    assert [s.type for s in attrs["scalars"].scalars] == [1, 2, 3, 4]
    assert msg.blocks[0].vars[2].type.dense_tensor.legacy_lod_level == 1
    assert msg.SerializeToString() == data


_ATTR_VALUES = {
    A["INT"]: st.integers(-(2**31), 2**31 - 1),
    A["FLOAT"]: st.floats(width=32, allow_nan=False),
    A["STRING"]: st.text(max_size=8),
    A["INTS"]: st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
    A["FLOATS"]: st.lists(st.floats(width=32, allow_nan=False), max_size=5),
    A["STRINGS"]: st.lists(st.text(max_size=5), max_size=4),
    A["BOOLEAN"]: st.booleans(),
    A["BOOLEANS"]: st.lists(st.booleans(), max_size=5),
    A["LONG"]: st.integers(-(2**63), 2**63 - 1),
    A["LONGS"]: st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    A["FLOAT64S"]: st.lists(st.floats(allow_nan=False), max_size=5),
    A["FLOAT64"]: st.floats(allow_nan=False),
    A["SCALAR"]: st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False)),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(min_size=1, max_size=6), st.sampled_from(sorted(_ATTR_VALUES)), max_size=6).flatmap(
    lambda names: st.fixed_dictionaries({n: st.tuples(st.just(t), _ATTR_VALUES[t]) for n, t in names.items()})
))  # fmt: skip
def test_attrs_round_trip_hypothesis(attrs):
    prog = _program_with(attrs)
    data = serialize_program(prog)
    back = parse_program(data)
    op = back.main.ops[0]
    assert list(op.attrs) == list(attrs)
    for name, (t, v) in attrs.items():
        assert op.attr_types[name] == t
        assert op.attrs[name] == v
    assert serialize_program(back) == data


def test_attr_type_inferred_when_missing():
    prog = _program_with({})
    op = prog.main.ops[0]
    op.attrs.update(flag=True, n=3, big=2**40, x=0.5, s="a", ints=[1, 2], fl=[1.0, 2], ss=["a"], bs=[True], c=1j)
    op.attrs["np"] = np.int64(4)
    back = parse_program(serialize_program(prog)).main.ops[0]
    expected = dict(flag="BOOLEAN", n="INT", big="LONG", x="FLOAT", s="STRING", ints="INTS", fl="FLOATS",
                    ss="STRINGS", bs="BOOLEANS", c="SCALAR", np="INT")  # fmt: skip
    assert {k: fp.ATTR_TYPE_NAME[t] for k, t in back.attr_types.items()} == expected
    assert back.attrs["np"] == 4 and back.attrs["fl"] == [1.0, 2.0]
    with pytest.raises(ModelFormatError, match="attr_types"):
        infer_attr_type(None)
    op.attrs["bad"] = object()
    with pytest.raises(ModelFormatError, match=r"op #0 \(custom\).*'bad'"):
        serialize_program(prog)


def test_bad_attr_value_names_op_and_attr():
    prog = _program_with({"i": (A["INT"], 2**40)})
    with pytest.raises(ModelFormatError, match=r"block 0, op #0 \(custom\): cannot write attribute 'i'.* as INT"):
        serialize_program(prog)


def test_edited_program_serializes_the_edit():
    d = legacy_model("transformer_encoder")
    data = (d / "inference.pdmodel").read_bytes()
    prog = parse_program(data)
    op = next(o for o in prog.main.ops if o.type == "scale")
    op.attrs["scale"] = 3.0
    prog.main.vars["token_ids"].shape = [1, 32]
    back = parse_program(serialize_program(prog))
    assert next(o for o in back.main.ops if o.type == "scale").attrs["scale"] == 3.0
    assert back.main.vars["token_ids"].shape == [1, 32]
    assert serialize_program(back) != data


# ------------------------------------------------------------------ fields beyond the dataclasses


def _exotic_program_bytes() -> bytes:
    """A program using proto features the dataclasses do not model directly (built with the schema)."""
    p = fp.ProgramDesc()
    b = p.blocks.add(idx=0, parent_idx=-1, forward_block_idx=-1)  # explicit default
    v = b.vars.add(name="x", persistable=False, stop_gradient=False)  # explicit false flags
    v.type.type = 7
    v.type.lod_tensor.tensor.data_type = 5
    v.type.lod_tensor.lod_level = 0  # explicit default
    v.attrs.add(name="va", type=0, i=3)
    r = b.vars.add(name="reader")
    r.type.type = 15
    r.type.reader.lod_tensor.add().tensor.data_type = 5
    t = b.vars.add(name="tup")
    t.type.type = 18
    t.type.tuple.element_type.extend([5, 3])
    odd = b.vars.add(name="odd")  # a FETCH_LIST that also carries a tensor desc
    odd.type.type = 10
    odd.type.lod_tensor.tensor.data_type = 2
    op = b.ops.add(type="weird", is_target=False)
    op.inputs.add(parameter="X", arguments=["x"])
    op.attrs.add(name="two_fields", type=0, i=1, f=2.0)  # not Paddle's usual form
    op.attrs.add(name="no_value", type=0)
    op.attrs.add(name="sc", type=16).scalar.CopyFrom(fp.Scalar(type=2, i=3, r=1.0))
    op.attrs.add(name="bad_utf8", type=2, s="placeholder")
    p.version.SetInParent()  # present, empty
    p.op_version_map.SetInParent()
    data = p.SerializeToString()
    return data.replace(b"placeholder", b"pl\xffceh\xc3lder")  # same length: invalid UTF-8


def test_extra_fields_round_trip_exactly():
    data = _exotic_program_bytes()
    prog = parse_program(data, "exotic")
    assert serialize_program(prog) == data
    op = prog.main.ops[0]
    assert op.attrs["two_fields"] == 1 and op.attrs["no_value"] == 0 and op.attrs["sc"] == 3
    assert isinstance(op.attrs["bad_utf8"], str) and op.attrs["bad_utf8"].startswith("pl")
    assert prog.version == 0 and prog.op_version_map == []
    assert prog.main.vars["reader"].type == VarType.READER and prog.main.vars["tup"].type == VarType.TUPLE
    # editing a value drops the odd raw form and writes Paddle's usual one
    op.attrs["two_fields"] = 5
    out = fp.WIRE.ProgramDesc.FromString(serialize_program(prog))
    a = next(a for a in out.blocks[0].ops[0].attrs if a.name == b"two_fields")
    assert a.i == 5 and not a.HasField("f")


def test_unknown_fields_are_kept():
    """Fields a newer Paddle might add (unknown here) survive parse -> serialize at every level."""
    d = legacy_model("transformer_encoder")
    p = fp.ProgramDesc.FromString((d / "inference.pdmodel").read_bytes())
    unknown_varint = b"\xf8\x06\x2a"  # field 111, varint 42
    p.MergeFromString(unknown_varint)
    b0 = p.blocks[0]
    b0.MergeFromString(unknown_varint)
    b0.vars[3].MergeFromString(unknown_varint)
    b0.vars[4].type.MergeFromString(unknown_varint)
    b0.ops[2].MergeFromString(unknown_varint)
    b0.ops[2].inputs[0].MergeFromString(unknown_varint)
    b0.ops[3].attrs[1].MergeFromString(unknown_varint)
    p.version.MergeFromString(unknown_varint)
    p.op_version_map.pair[0].MergeFromString(unknown_varint)
    data = p.SerializeToString()
    prog = parse_program(data)
    assert serialize_program(prog) == data


# ------------------------------------------------------------------ errors


def _minimal() -> fp.ProgramDesc:
    p = fp.ProgramDesc()
    b = p.blocks.add(idx=0, parent_idx=-1)
    v = b.vars.add(name="x")
    v.type.type = 7
    v.type.lod_tensor.tensor.data_type = 5
    op = b.ops.add(type="relu")
    op.inputs.add(parameter="X", arguments=["x"])
    op.outputs.add(parameter="Out", arguments=["x"])
    return p


def _edit(fn) -> bytes:
    p = _minimal()
    fn(p)
    return p.SerializePartialToString()


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "no blocks"),
        (b"\xff\xff\xff", "not a valid Paddle ProgramDesc"),
        (b"{\"program\": 1}", "not a valid Paddle ProgramDesc"),
        (_edit(lambda p: p.blocks[0].ClearField("parent_idx")), r"required fields missing: blocks\[0\].parent_idx"),
        (_edit(lambda p: setattr(p.blocks[0], "idx", 3)), "position 0 says its idx is 3"),
        (_edit(lambda p: p.blocks.add(idx=1, parent_idx=1)), "block 1 has invalid parent_idx 1"),
        (_edit(lambda p: p.blocks.add(idx=1, parent_idx=7)), "block 1 has invalid parent_idx 7"),
        (_edit(lambda p: [p.blocks.add(idx=1, parent_idx=2), p.blocks.add(idx=2, parent_idx=1)]), "loops"),
        (_edit(lambda p: p.blocks[0].vars.add().CopyFrom(p.blocks[0].vars[0])), "variable 'x' twice"),
        (_edit(lambda p: p.blocks[0].ops[0].inputs[0].arguments.append("ghost")), r"op #0 \(relu\).*'ghost'"),
        (_edit(lambda p: p.blocks[0].ops[0].inputs.add(parameter="X")), "slot 'X' appears twice"),
        (_edit(lambda p: p.blocks[0].ops[0].attrs.add(name="sub", type=8, block_idx=4)), "refers to block"),
        (_edit(lambda p: p.blocks[0].ops[0].attrs.add(name="subs", type=10, blocks_idx=[0, 1])), "refers to block"),
        (_edit(lambda p: [p.blocks[0].ops[0].attrs.add(name="a", type=0) for _ in range(2)]), "'a' appears twice"),
        (_edit(lambda p: setattr(p.blocks[0].ops[0], "type", "")), "empty op type"),
        (_edit(lambda p: setattr(p.blocks[0], "forward_block_idx", 9)), "invalid forward_block_idx 9"),
    ],
)
def test_invalid_programs_raise_model_format_error(data, message):
    with pytest.raises(ModelFormatError, match=message) as e:
        parse_program(data, "some/dir/model.pdmodel")
    assert "some/dir/model.pdmodel" in str(e.value)


def test_sub_block_may_use_parent_vars():
    def add_sub(p):
        sub = p.blocks.add(idx=1, parent_idx=0)
        op = sub.ops.add(type="relu")
        op.inputs.add(parameter="X", arguments=["x"])
        p.blocks[0].ops[0].attrs.add(name="sub_block", type=8, block_idx=1)

    prog = parse_program(_edit(add_sub))
    assert prog.main.ops[0].attrs["sub_block"] == 1 and prog.blocks[1].ops[0].input("X") == "x"
