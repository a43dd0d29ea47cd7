"""PIR (Paddle 3 `inference.json`) models: parsing, params order, errors, and end-to-end numbers.

References: case.npz files made by Paddle Inference 3.3.1 (switch_ir_optim(False), 1 thread) on
the same files: the shared mobilenet_v3_small_pir and the fixtures of tests/fixtures/pir
(tools/make_pir_fixtures.py). Model-level tolerance: max|got - ref| <= 1e-4 * max|ref|.
"""
from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pdlite.errors import ModelFormatError, PdliteError, UnsupportedOpError
from pdlite.model_parser import load_model
from pdlite.model_parser.lod_tensor import read_lod_tensor, write_lod_tensor
from pdlite.model_parser.pir import load_pir, parse_pir_program
from tests.conftest import REPO, assert_close_rel, load_case, model_dir

PIR_FIXTURES = REPO / "tests" / "fixtures" / "pir"
FIXTURE_NAMES = ["conv", "pool", "resize_act", "tensor_ops", "transformer", "dynamic_shape", "array_slice"]
REL = 1e-4


def _mnv3() -> Path:
    return model_dir("mobilenet_v3_small_pir")


def _fixture(name: str) -> Path:
    d = PIR_FIXTURES / name
    if not (d / "inference.json").is_file():
        pytest.skip(f"{d} is missing (run tools/make_pir_fixtures.py)")
    return d


def _case(d: Path, case: str = "case.npz") -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    z = np.load(d / case)
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            {k[4:]: z[k] for k in z.files if k.startswith("out:")})


def _doc(d: Path) -> dict:
    return json.loads((d / "inference.json").read_text())


def _ops(doc: dict) -> list[dict]:
    return doc["program"]["regions"][0]["blocks"][0]["ops"]


def _predictor(**source):
    from pdlite.api.config import CxxConfig
    from pdlite.api.predictor import create_paddle_predictor

    config = CxxConfig()
    if "model_dir" in source:
        config.set_model_dir(source["model_dir"])
    if "model_file" in source:
        config.set_model_file(source["model_file"])
        config.set_param_file(source["param_file"])
    if "model_buffer" in source:
        config.set_model_buffer(source["model_buffer"], source["param_buffer"])
    return create_paddle_predictor(config)


def _check(pred, ins: dict[str, np.ndarray], outs: dict[str, np.ndarray], what: str) -> None:
    assert pred.get_input_names() == list(ins), what
    assert pred.get_output_names() == list(outs), what
    got = pred.predict(ins)
    for (name, ref), g in zip(outs.items(), got):
        assert_close_rel(g, ref, REL, f"{what} {name}")


# ------------------------------------------------------------------------------ parsing only


def test_mobilenet_program_structure():
    d = _mnv3()
    m = load_pir(d / "inference.json", d / "inference.pdiparams")
    p = m.program
    assert m.format == "pir-json"
    assert p.feed_names() == ["x"] and p.fetch_names() == ["fetch_name_0"]
    counts = Counter(op.type for op in p.main.ops)
    # 224 PIR ops minus 19 full_int_array / 1 full folded into attributes; 1 feed + 1 fetch added
    assert counts["conv2d"] + counts["depthwise_conv2d"] == 52
    assert counts["batch_norm"] == 34 and counts["hard_swish"] == 19 and counts["hard_sigmoid"] == 9
    assert counts["reshape2"] == 18 and counts["pool2d"] == 10 and counts["dropout"] == 1
    assert "assign_value" not in counts and "fill_constant" not in counts  # all constants were folded
    # every parameter is read, with the shape its builtin.parameter type declares
    assert len(m.params) == 210
    for name, t in m.params.items():
        assert list(p.main.vars[name].shape) == t.shape, name
        assert p.main.vars[name].persistable
    hs = next(op for op in p.main.ops if op.type == "hard_sigmoid")
    assert hs.attrs["slope"] == pytest.approx(1 / 6, rel=1e-6) and hs.attrs["offset"] == 0.5
    pool = next(op for op in p.main.ops if op.type == "pool2d")
    assert pool.attrs["ksize"] == [1, 1] and pool.attrs["adaptive"] is True
    bn = next(op for op in p.main.ops if op.type == "batch_norm")
    assert bn.inputs["Mean"][0].endswith(".w_1") and bn.inputs["Variance"][0].endswith(".w_2")
    assert bn.inputs["Scale"][0].endswith(".w_0") and bn.inputs["Bias"][0].endswith(".b_0")


def test_params_are_sorted_by_name_not_in_program_order(tmp_path):
    """The .pdiparams holds the parameters sorted by name; the builtin.parameter order does not fit."""
    d = _mnv3()
    data = (d / "inference.pdiparams").read_bytes()
    tensors, pos = [], 0
    while pos < len(data):
        t, pos = read_lod_tensor(data, pos, "params", "?")
        tensors.append(t)
    params = [op for op in _ops(_doc(d)) if op["#"] == "p"]
    names = [op["A"][3] for op in params]
    shapes = {op["A"][3]: op["O"]["TT"]["D"][1] for op in params}
    assert len(tensors) == len(names) == 210
    assert [t.shape for t in tensors] == [shapes[n] for n in sorted(names)]
    assert [t.shape for t in tensors] != [shapes[n] for n in names]
    # re-written in program order, the file no longer loads
    by_name = dict(zip(sorted(names), tensors))
    bad = tmp_path / "bad.pdiparams"
    bad.write_bytes(b"".join(write_lod_tensor(by_name[n]) for n in names))
    with pytest.raises(ModelFormatError, match="bad.pdiparams.*shape"):
        load_pir(d / "inference.json", bad)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_feeds_fetches_and_params(name):
    d = _fixture(name)
    m = load_pir(d / "inference.json", d / "inference.pdiparams")
    ins, outs = _case(d)
    assert m.program.feed_names() == list(ins)
    assert m.program.fetch_names() == list(outs)
    assert sorted(m.params) == m.program.persistable_names()
    for n in ins:
        v = m.program.main.vars[n]
        assert v.shape[0] == -1 and len(v.shape) == ins[n].ndim
        assert all(d in (-1, g) for d, g in zip(v.shape, ins[n].shape))


def test_loader_finds_pir_in_folder_file_and_buffer():
    d = _mnv3()
    by_dir = load_model(model_dir=d)
    by_file = load_model(model_file=d / "inference.json", param_file=d / "inference.pdiparams")
    by_file_default_params = load_model(model_file=d / "inference.json")
    by_buf = load_model(model_buffer=(d / "inference.json").read_bytes(),
                        param_buffer=(d / "inference.pdiparams").read_bytes())
    for m in (by_dir, by_file, by_file_default_params, by_buf):
        assert m.format == "pir-json"
        assert m.program.fetch_names() == ["fetch_name_0"] and len(m.params) == 210
    assert np.array_equal(by_dir.params["conv2d_0.w_0"].array, by_buf.params["conv2d_0.w_0"].array)


# ------------------------------------------------------------------------------ errors


def test_unknown_ops_are_listed_with_counts(tmp_path):
    d = _fixture("tensor_ops")
    doc = _doc(d)
    ops = _ops(doc)
    renamed = 0
    for op in ops:
        if op["#"] == "1.scale":
            op["#"] = "1.my_scale"
            renamed += 1
    next(op for op in ops if op["#"] == "1.abs")["#"] = "3.custom_abs"
    path = tmp_path / "inference.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UnsupportedOpError) as e:
        load_pir(path, d / "inference.pdiparams")
    msg = str(e.value)
    assert str(path) in msg
    assert f"pd_op.my_scale x{renamed}" in msg and "custom_op.custom_abs x1" in msg and renamed == 2


def test_unknown_ops_inside_regions_are_counted():
    """Control flow converts (pir_control_flow); an unknown op inside a region is still reported up
    front with the others, and cf.yield is not one of them."""
    doc = {"base_code": {"magic": "pir", "version": 4}, "program": {"regions": [{"#": "region_0", "blocks": [
        {"#": "block_0", "args": [], "ops": [
            {"#": "1.if", "I": [], "O": [], "A": [], "regions": [{"#": "region_1", "blocks": [
                {"#": "block_1", "args": [], "ops": [{"#": "3.my_op", "I": [], "O": [], "A": []},
                                                     {"#": "2.yield", "I": [], "O": [], "A": []}]}]}]}]}]}]}}
    with pytest.raises(UnsupportedOpError, match=r"1 PIR op\(s\) of 1 type\(s\) have no pdlite mapping: "
                                                 r"custom_op\.my_op x1"):
        parse_pir_program(json.dumps(doc), "cf.json")


def test_if_with_a_missing_region_is_a_format_error():
    doc = {"base_code": {"magic": "pir", "version": 4}, "program": {"regions": [{"#": "region_0", "blocks": [
        {"#": "block_0", "args": [], "ops": [
            {"#": "1.data", "I": [], "O": [{"%": 1, "TT": {"#": "0.t_dtensor", "D": [{"#": "0.t_bool"}, [1], "NCHW", [], 0]}}],
             "A": [{"N": "name", "AT": {"#": "0.a_str", "D": "c"}}]},
            {"#": "1.if", "I": [{"%": 1}], "O": [], "A": [], "regions": [{"#": "region_1", "blocks": [
                {"#": "block_1", "args": [], "ops": [{"#": "2.yield", "I": [], "O": [], "A": []}]}]}]}]}]}]}}
    with pytest.raises(ModelFormatError, match=r"cf\.json: op #1 \(pd_op\.if\): expected region #1"):
        parse_pir_program(json.dumps(doc), "cf.json")


@pytest.mark.parametrize("text, expected", [
    ("", "not valid JSON"),
    ("{\"base_code\": {\"magic\": \"pir\"", "not valid JSON"),
    ("[1, 2, 3]", "expected a JSON object"),
    ("{\"base_code\": {\"magic\": \"xyz\"}, \"program\": {}}", "magic should be 'pir'"),
    ("{\"base_code\": {\"magic\": \"pir\"}, \"program\": {\"regions\": []}}", "1 top-level region"),
    ("{\"base_code\": {\"magic\": \"pir\"}, \"program\": {\"regions\": [{\"blocks\": [{\"ops\": [{\"#\": 3}]}]}]}}",
     "op #0: '#' should be str"),
    ("{\"base_code\": {\"magic\": \"pir\"}, \"program\": {\"regions\": [{\"blocks\": [{\"ops\": []}]}]}}",
     "no pd_op.fetch"),
])
def test_malformed_json_names_file_and_expectation(text, expected):
    with pytest.raises(ModelFormatError, match="bad.json") as e:
        parse_pir_program(text.encode(), "bad.json")
    assert expected in str(e.value)


def test_operand_used_before_definition():
    doc = _doc(_fixture("pool"))
    ops = _ops(doc)
    conv = next(op for op in ops if op["#"] == "1.conv2d")
    conv["I"][0]["%"] = 99999
    with pytest.raises(ModelFormatError, match=r"pd_op\.conv2d.*%99999 is used before it is defined"):
        parse_pir_program(json.dumps(doc), "pool.json")


def test_missing_truncated_or_foreign_params(tmp_path):
    d = _fixture("conv")
    with pytest.raises(ModelFormatError, match="no params file"):
        load_pir(d / "inference.json", None)
    with pytest.raises(ModelFormatError, match="params file not found"):
        load_pir(d / "inference.json", tmp_path / "nope.pdiparams")
    with pytest.raises(ModelFormatError, match="PIR model file not found"):
        load_pir(tmp_path / "nope.json", d / "inference.pdiparams")
    data = (d / "inference.pdiparams").read_bytes()
    cut = tmp_path / "cut.pdiparams"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="cut.pdiparams"):
        load_pir(d / "inference.json", cut)
    with pytest.raises(ModelFormatError, match="left over"):
        load_pir(d / "inference.json", data + data[:100])
    with pytest.raises(ModelFormatError):
        load_pir(d / "inference.json", (PIR_FIXTURES / "pool" / "inference.pdiparams").read_bytes())


def test_fuzzed_json_only_raises_pdlite_errors():
    """Truncations, byte flips and type-confused subtrees: parse or raise a PdliteError, nothing else."""
    d = _fixture("resize_act")
    raw = (d / "inference.json").read_bytes()
    rng = random.Random(7)
    for _ in range(150):
        data = bytearray(raw)
        mode = rng.randrange(3)
        if mode == 0:
            data = data[: rng.randrange(len(data))]
        elif mode == 1:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            doc = json.loads(raw)
            _mutate(doc, rng)
            data = bytearray(json.dumps(doc).encode())
        try:
            parse_pir_program(bytes(data), "fuzz.json")
        except PdliteError:
            pass


def _mutate(node, rng: random.Random, depth: int = 0) -> None:
    """Replace one random subtree of a JSON document with a value of another kind."""
    junk = [None, -1, 0, 3.5, "x", [], {}, [1, "a"], {"#": "0.a_i32"}, {"%": 12345}, True]
    path = []
    while isinstance(node, (dict, list)) and node and depth < 40:
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        k = rng.choice(keys)
        path.append((node, k))
        node = node[k]
        depth += 1
        if rng.random() < 0.15:
            break
    if path:
        parent, k = path[-1]
        parent[k] = rng.choice(junk)


# ------------------------------------------------------------------------------ end to end


def test_shape64_kernel_matches_numpy():
    from pdlite.core.program import OpDesc
    from pdlite.kernels.host.creation import Shape64

    x = np.zeros((2, 3, 5), np.float32)
    out = Shape64(OpDesc("shape64", {"Input": ["x"]}, {"Out": ["y"]})).run({"Input": [x]})["Out"][0]
    assert out.dtype == np.int64 and out.tolist() == [2, 3, 5]


@pytest.mark.parametrize("attrs, expected", [
    ({"shape": [3], "dtype": 3, "int64_values": [2, -1, 2**40]}, np.array([2, -1, 2**40], np.int64)),
    ({"shape": [2, 2], "dtype": 5, "fp32_values": [0.5, 1, 2, 3]}, np.array([[0.5, 1], [2, 3]], np.float32)),
    ({"shape": [2], "dtype": 2, "values": [7, 8]}, np.array([7, 8], np.int32)),
    ({"shape": [0], "dtype": 3}, np.zeros([0], np.int64)),
])
def test_assign_value_kernel_matches_numpy(attrs, expected):
    from pdlite.core.program import OpDesc
    from pdlite.kernels.host.creation import AssignValue
    from pdlite.operators.registry import OPS, ShapeContext

    op = OPS["assign_value"].attach(OpDesc("assign_value", {}, {"Out": ["c"]}, attrs))
    assert OPS["assign_value"].infer_shape(ShapeContext(op, {})) == {"Out": [expected.shape]}
    out = AssignValue(op).run({})["Out"][0]
    assert out.dtype == expected.dtype and np.array_equal(out, expected)


def test_assign_value_shape_must_match_values():
    from pdlite.core.program import OpDesc
    from pdlite.operators.registry import OPS, ShapeContext

    op = OPS["assign_value"].attach(OpDesc("assign_value", {}, {"Out": ["c"]}, {"shape": [4], "int64_values": [1]}))
    with pytest.raises(PdliteError, match="needs 4 values"):
        OPS["assign_value"].infer_shape(ShapeContext(op, {}))


def _max_pool_ref(x: np.ndarray, k, s, p, out, adaptive: bool) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's MaxPool2dWithIndexFunctor written as plain loops (first maximum wins)."""
    n, c, h, w = x.shape
    o = np.zeros((n, c, *out), x.dtype)
    m = np.zeros((n, c, *out), np.int32)
    for i in range(out[0]):
        for j in range(out[1]):
            if adaptive:
                hs, he = i * h // out[0], -(-(i + 1) * h // out[0])
                ws, we = j * w // out[1], -(-(j + 1) * w // out[1])
            else:
                hs, ws = i * s[0] - p[0], j * s[1] - p[1]
                he, we = min(hs + k[0], h), min(ws + k[1], w)
                hs, ws = max(hs, 0), max(ws, 0)
            for b in range(n):
                for ch in range(c):
                    best, idx = -np.inf, -1
                    for hh in range(hs, he):
                        for ww in range(ws, we):
                            if x[b, ch, hh, ww] > best:
                                best, idx = x[b, ch, hh, ww], hh * w + ww
                    o[b, ch, i, j], m[b, ch, i, j] = best, idx
    return o, m


@pytest.mark.parametrize("hw, attrs, out", [
    ((12, 20), {"ksize": [3, 4], "adaptive": True}, (3, 4)),
    ((7, 9), {"ksize": [2, 2], "adaptive": True}, (2, 2)),
    ((5, 5), {"ksize": [5, 3], "adaptive": True}, (5, 3)),
    ((7, 9), {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, (4, 5)),
    ((7, 9), {"ksize": [3, 3], "strides": [2, 2], "ceil_mode": True}, (3, 4)),
    ((6, 6), {"ksize": [1, 1], "global_pooling": True}, (1, 1)),
])
def test_max_pool2d_with_index_matches_loops(hw, attrs, out):
    from pdlite.core.program import OpDesc
    from pdlite.kernels.host.pool import MaxPool2dWithIndex
    from pdlite.operators.registry import OPS, ShapeContext

    x = np.random.default_rng(3).normal(size=(2, 3, *hw)).astype(np.float32)
    op = OPS["max_pool2d_with_index"].attach(
        OpDesc("max_pool2d_with_index", {"X": ["x"]}, {"Out": ["y"], "Mask": ["m"]}, attrs))
    assert OPS["max_pool2d_with_index"].infer_shape(ShapeContext(op, {"X": [x]}))["Out"] == [(2, 3, *out)]
    got = MaxPool2dWithIndex(op).run({"X": [x]})
    k = attrs["ksize"] if not attrs.get("global_pooling") else list(hw)
    ref_o, ref_m = _max_pool_ref(x, k, attrs.get("strides", [1, 1]), attrs.get("paddings", [0, 0]), out,
                                 attrs.get("adaptive", False))
    assert np.array_equal(got["Out"][0], ref_o) and np.array_equal(got["Mask"][0], ref_m)


def test_mobilenet_v3_small_pir_matches_paddle():
    d = _mnv3()
    ins, outs = load_case("mobilenet_v3_small_pir")
    pred = _predictor(model_dir=d)
    _check(pred, ins, outs, "mobilenet_v3_small_pir")
    # batch change on the same predictor: both rows give the batch-1 reference
    x = ins["x"]
    got = pred.predict({"x": np.concatenate([x, x])})[0]
    assert got.shape == (2, 100)
    for row in got:
        assert_close_rel(row[None], outs["fetch_name_0"], REL, "mobilenet_v3_small_pir batch 2")


def test_mobilenet_v3_small_pir_from_files_and_buffer_agree():
    d = _mnv3()
    ins, outs = load_case("mobilenet_v3_small_pir")
    by_file = _predictor(model_file=str(d / "inference.json"), param_file=str(d / "inference.pdiparams"))
    _check(by_file, ins, outs, "set_model_file")
    by_buf = _predictor(model_buffer=(d / "inference.json").read_bytes(),
                        param_buffer=(d / "inference.pdiparams").read_bytes())
    assert np.array_equal(by_buf.predict(ins)[0], by_file.predict(ins)[0])


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_matches_paddle_batch_1_and_2(name):
    d = _fixture(name)
    pred = _predictor(model_dir=d)
    for case in ("case.npz", "case_b2.npz"):
        ins, outs = _case(d, case)
        _check(pred, ins, outs, f"{name}/{case}")


def test_opt_to_naive_buffer_and_back(tmp_path):
    if importlib.util.find_spec("pdlite.api.opt") is None or importlib.util.find_spec("pdlite.api.mobile") is None:
        pytest.skip("pdlite.api.opt / pdlite.api.mobile are not in this tree")
    from pdlite.api.mobile import MobileConfig
    from pdlite.api.opt import Opt
    from pdlite.api.predictor import create_paddle_predictor

    for name, d, (ins, outs) in [("mobilenet_v3_small_pir", _mnv3(), load_case("mobilenet_v3_small_pir")),
                                 ("transformer", _fixture("transformer"), _case(_fixture("transformer")))]:
        opt = Opt()
        opt.set_model_dir(d)
        opt.set_valid_places("host")
        opt.set_optimize_out(tmp_path / name)
        path = opt.run()
        assert Path(path).is_file() and path.endswith(".nb")
        config = MobileConfig()
        config.set_model_from_file(path)
        _check(create_paddle_predictor(config), ins, outs, f"{name} .nb")


# Legacy zoo models re-saved as PIR by Paddle's program translator (pd_op.feed, dynamic reshapes
# through shape/slice/combine ...): PIR programs that jit.save did not write. Their references are
# the legacy case.npz (Paddle's PIR and legacy executors agree to ~1e-5 on these).
TRANSLATED = ["ppocr_cls_v2", "ppocr_det_v4", "transformer_encoder", "mobilenet_v3_small", "mobilenet_v1",
              "mobilenet_v2", "resnet18"]


@pytest.fixture(scope="module")
def translated_models(tmp_path_factory) -> dict[str, Path]:
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("paddle is not installed (needed to translate legacy models to PIR)")
    root = tmp_path_factory.mktemp("pir_translated")
    pairs = {n: d for n in TRANSLATED if (d := _find(n)) is not None}
    args = [str(a) for n, d in pairs.items() for a in (d, root / n)]
    subprocess.run([sys.executable, str(REPO / "tools" / "make_pir_fixtures.py"), "--from-legacy", *args],
                   check=True, capture_output=True, timeout=300)
    return {n: root / n for n in pairs}


def _find(name: str) -> Path | None:
    from tests.conftest import find_model

    return find_model(name)


@pytest.mark.parametrize("name", TRANSLATED)
def test_translated_legacy_models_match_paddle(name, translated_models):
    if name not in translated_models:
        pytest.skip(f"model {name} not found")
    ins, outs = load_case(name)
    pred = _predictor(model_dir=translated_models[name])
    assert pred.get_input_names() == list(ins)
    got = pred.predict(ins)
    assert len(got) == len(outs)
    for (fetch, ref), g in zip(outs.items(), got):
        assert_close_rel(g, ref, REL, f"{name} (PIR translation) {fetch}")


def test_special_float_attributes_decode():
    """JSON has no inf / nan: Paddle writes such float attributes as {"VD": "INF" | "-INF" | "NaN"}."""
    from pdlite.model_parser.pir_decode import decode_attr

    assert decode_attr({"#": "0.a_f32", "VD": "INF"}) == float("inf")
    assert decode_attr({"#": "0.a_f64", "VD": "-INF"}) == float("-inf")
    assert np.isnan(decode_attr({"#": "0.a_f32", "VD": "NaN"}))
    with pytest.raises(Exception, match="should be a number"):
        parse_pir_program(json.dumps({"base_code": {"magic": "pir"}, "program": {"regions": [{"blocks": [{"ops": [
            {"#": "1.full", "I": [], "O": [], "A": [{"N": "value", "AT": {"#": "0.a_f32", "VD": "HUGE"}}]}]}]}]}}),
            "bad.json")
