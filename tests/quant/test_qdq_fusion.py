"""pdlite/nnadapter/qdq_fusion/: the rewrites that let ONNX Runtime run Paddle's QDQ convolutions as QLinearConv.

Checked: what each rule rewrites and what it refuses (counts and reasons); that ONNX Runtime's optimized model
(the file it writes while building) then holds one QLinearConv per requantized conv; and the numbers:
- a synthetic chain (batch norm with negative and zero scales, a bias add, relu6, max pool, a zero weight
  scale), and hypothesis-drawn chains of affine steps (batch norm, constant Mul / Add / Sub in either input
  order) and quantizer-commuting ops (Relu, Clip, Max, Min, MaxPool, nearest Resize): the rewritten model's
  quantized output equals the original QDQ model's within one quantization step, on at least 99% of the
  elements exactly, all but one on small outputs (the int32 bias moves by <= half a product step, so only values
  on a rounding edge may flip);
- committed fixtures converted for `onnxruntime`: within 2e-2 * max|Paddle Inference's fp32 simulation| and
  the same top-1 for classifiers (per time step for the recogniser), the device tolerance of
  tests/quant/test_quant_devices.py; the batch norms after convs that stay float are not folded by ORT.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.quant._util import ROOT, case, max_rel_err

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pdlite.nnadapter.qdq_fusion import fuse_qdq  # noqa: E402

REL = 2e-2


def _init(name: str, v: np.ndarray) -> Any:
    return numpy_helper.from_array(np.asarray(v, order="C"), name)


def _conv_bn(rng: np.random.Generator, cin: int, cout: int, w_min: int = -127) -> tuple[dict[str, Any], list[Any]]:
    """The head both test graphs start with, x -> Q(sx) -> DQ -> Conv(DQ(w8, sw per channel), pads 1) -> BN -> "bn":
    its initializer values by name (seeded draws in the order w8, sw, g, b, m, v) and its nodes."""
    vals = {
        "sx": np.float32(0.02), "zx": np.int8(0), "w8": rng.integers(w_min, 128, (cout, cin, 3, 3)).astype(np.int8),
        "sw": rng.uniform(0.002, 0.01, cout).astype(np.float32), "zw": np.zeros(cout, np.int8),
        "g": rng.uniform(0.5, 1.5, cout).astype(np.float32), "b": rng.normal(0, 0.3, cout).astype(np.float32),
        "m": rng.normal(0, 0.2, cout).astype(np.float32), "v": rng.uniform(0.5, 2, cout).astype(np.float32),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w8", "sw", "zw"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["cv"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["cv", "g", "b", "m", "v"], ["bn"], epsilon=1e-5),
    ]
    return vals, nodes


def _model(name: str, nodes: list[Any], vals: dict[str, Any], x_shape: list[int], outputs: list[Any]) -> Any:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], outputs,
                              [_init(k, v) for k, v in vals.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _chain(rng: np.random.Generator, *, w_min: int = -127, float_reader: bool = False, min_max: bool = False) -> Any:
    """x -> Q -> DQ -> Conv(DQ(w8) per channel) -> BN -> Add(c) -> Clip(0, 6) -> MaxPool -> Q -> DQ -> y;
    `min_max`: Max(0) -> Min(6) instead of the Clip (the form of Paddle's round_type 1 clip before a quantizer)."""
    cin, cout = 4, 6
    vals, nodes = _conv_bn(rng, cin, cout, w_min)
    vals["sw"][2] = 0.0                                           # a zero weight scale
    vals["g"][[1, 4]] *= -1                                       # batch norm flips the sign of two channels
    vals["g"][5] = 0.0                                            # and zeroes one
    vals.update(c=rng.normal(0, 0.2, (1, cout, 1, 1)).astype(np.float32), lo=np.float32(0), hi=np.float32(6),
                so=np.float32(0.025), zo=np.int8(0))
    nodes += [
        helper.make_node("Add", ["bn", "c"], ["ad"]),
        *([helper.make_node("Max", ["ad", "lo"], ["r0"]), helper.make_node("Min", ["r0", "hi"], ["r6"])] if min_max
          else [helper.make_node("Clip", ["ad", "lo", "hi"], ["r6"])]),
        helper.make_node("MaxPool", ["r6"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["mp", "so", "zo"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, cout, 8, 8])]
    if float_reader:
        nodes.append(helper.make_node("Relu", ["bn"], ["side"]))
        outputs.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, [2, cout, 16, 16]))
    return _model("chain", nodes, vals, [2, cin, 16, 16], outputs)


def _session(model: Any, optimized: Path | None = None) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if optimized is not None:
        so.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _ops(path: Path) -> Counter[str]:
    return _kinds(onnx.load(str(path)))


def _fused(original: Any, full_range: bool = False) -> tuple[Any, Any]:
    """A copy of `original` rewritten by fuse_qdq (the original left as it is), and fuse_qdq's report. Rule 1b
    (`full_range`) moves values to a finer grid, so the tests of the rules that keep Paddle's numbers go without it."""
    fused = onnx.load_from_string(original.SerializeToString())
    return fused, fuse_qdq(fused, full_range=full_range)


def _kinds(model: Any) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node)


def _same_codes(original: Any, fused: Any, x: np.ndarray, scale: float, optimized: Path | None = None,
                copies: int = 1) -> np.ndarray:
    """Run both models on `x`; assert that the fused one's output is within one quantization step (`scale`) of the
    original's, exactly on >= 99% of the conv's values, or all but one where there are under 100 of them (the
    int32 bias moves values on a rounding edge only: hypothesis found a 5x4x4 output with one such flip); each
    value lands in `copies` output elements (nearest Resize after the conv). With `optimized`, also that ONNX
    Runtime's optimized model (written there) holds one QLinearConv. The original's output."""
    ref = _session(original).run(None, {"x": x})[0]
    got = _session(fused, optimized).run(None, {"x": x})[0]
    if optimized is not None:
        assert _ops(optimized)["QLinearConv"] == 1
    steps = np.abs(got - ref) / np.float32(scale)
    inexact = int((steps >= 1e-3).sum())
    allowed = copies * max(1.0, 0.01 * steps.size / copies)
    assert steps.max() <= 1.0 + 1e-4 and inexact <= allowed, (steps.max(), inexact, steps.size, copies)
    return ref


@pytest.mark.parametrize("min_max", [False, True], ids=["clip", "max_min"])
def test_conv_chain_becomes_qlinearconv_with_the_same_numbers(min_max: bool, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    original = _chain(rng, min_max=min_max)
    fused, report = _fused(original)
    assert (report.uint8, report.convs, report.refused) == (2, 1, {})
    kinds = _kinds(fused)
    assert kinds["BatchNormalization"] == kinds["Add"] == kinds["MaxPool"] - 1 == 0
    assert kinds["Clip"] == 1 and kinds["Conv"] == 1 and kinds["QuantizeLinear"] == 2  # Max -> Min: one Clip
    assert kinds["Max"] == kinds["Min"] == 0
    onnx.checker.check_model(fused, full_check=True)
    ref = _same_codes(original, fused, rng.normal(0, 1.2, (2, 4, 16, 16)).astype(np.float32), 0.025, tmp_path / "o.onnx")
    assert ref.min() >= 0 and ref.max() <= 6 and np.ptp(ref) > 1  # relu6 did act, the test is not trivial


def test_gate_conv_with_hard_sigmoid_becomes_qlinearconv_with_the_same_numbers(tmp_path: Path) -> None:
    """x -> Q -> DQ -> Conv -> BN -> HardSigmoid -> Q -> DQ -> y (a squeeze-excitation gate's conv): the hard
    sigmoid's alpha and beta fold into the conv like the batch norm, its clip to [0, 1] runs on the codes."""
    rng = np.random.default_rng(7)
    vals, nodes = _conv_bn(rng, 4, 6)
    vals.update(so=np.float32(1 / 127), zo=np.int8(0))
    nodes += [helper.make_node("HardSigmoid", ["bn"], ["hs"], alpha=1 / 6, beta=0.5),
              helper.make_node("QuantizeLinear", ["hs", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    original = _model("gate", nodes, vals, [2, 4, 16, 16], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                         [2, 6, 16, 16])])
    fused, report = _fused(original)
    assert (report.uint8, report.convs, report.refused) == (2, 1, {}), report
    kinds = _kinds(fused)
    assert kinds["HardSigmoid"] == kinds["BatchNormalization"] == 0 and kinds["Clip"] == 1, kinds
    onnx.checker.check_model(fused, full_check=True)
    ref = _same_codes(original, fused, rng.normal(0, 1.5, (2, 4, 16, 16)).astype(np.float32), 1 / 127,
                      tmp_path / "o.onnx")
    assert ref.min() == 0 and ref.max() == 1 and np.ptp(ref) > 0.5  # both clips of the hard sigmoid acted


def _with_init(model: Any, name: str, value: np.ndarray) -> Any:
    """`model` with initializer `name` set to `value`."""
    old = next(i for i in model.graph.initializer if i.name == name)
    model.graph.initializer.remove(old)
    model.graph.initializer.append(_init(name, value))
    return model


@pytest.mark.parametrize("so", [0.025, 0.06], ids=["top_127s", "top_6"])
def test_never_negative_value_is_quantized_on_the_full_uint8_range(so: float, tmp_path: Path) -> None:
    """Rule 1b: the relu6 chain's output quantizer Q(s, 128) becomes Q(top / 255, 0), top = min(6, 127 s): no Clip
    of the codes is left (uint8 saturation clamps), ORT runs one QLinearConv, and the output is the exact relu6
    value quantized on that grid (its codes equal on >= 99% of the elements, all within one step: the int32 bias
    rounding moves values on a rounding edge only), with more distinct levels than Paddle's grid gives."""
    rng = np.random.default_rng(0)
    original = _with_init(_chain(rng), "so", np.float32(so))
    fused, report = _fused(original, full_range=True)
    assert (report.full_range, report.convs, report.refused) == (1, 1, {}), report
    assert _kinds(fused)["Clip"] == 0, _kinds(fused)
    onnx.checker.check_model(fused, full_check=True)
    exact = onnx.load_from_string(original.SerializeToString())  # the float value before the output quantizer
    del exact.graph.node[-2:]
    del exact.graph.output[:]
    exact.graph.output.append(helper.make_tensor_value_info("mp", TensorProto.FLOAT, [2, 6, 8, 8]))
    x = rng.normal(0, 1.2, (2, 4, 16, 16)).astype(np.float32)
    got = _session(fused, tmp_path / "o.onnx").run(None, {"x": x})[0]
    assert _ops(tmp_path / "o.onnx")["QLinearConv"] == 1 and _ops(tmp_path / "o.onnx")["Clip"] == 0
    v = _session(exact).run(None, {"x": x})[0]
    top = min(6.0, 127 * so)
    step = np.float32(top / 255)
    want = np.clip(np.rint(v / step), 0, 255) * step
    off = np.abs(got - want) / step
    assert off.max() <= 1 + 1e-4 and (off < 1e-3).mean() >= 0.99, (off.max(), (off < 1e-3).mean())
    assert abs(got.max() - top) < 1e-5 and got.min() == 0  # both clamps acted, by saturation
    ref = _session(original).run(None, {"x": x})[0]
    assert len(np.unique(got)) > len(np.unique(ref))


def test_full_range_leaves_values_that_may_be_negative_and_follows_the_property() -> None:
    """Rule 1b leaves a quantizer alone where the value may be negative (a Clip from -1; x itself), and runs on
    onnxruntime unless ONNXRUNTIME_INT8_GRID=paddle; another value is refused with a ConfigError naming it."""
    from pdlite.errors import ConfigError
    from pdlite.nnadapter.qdq_fusion import INT8_GRID, fuse_for_onnxruntime

    below = _with_init(_chain(np.random.default_rng(0)), "lo", np.float32(-1))
    assert fuse_qdq(below).full_range == 0
    assert fuse_for_onnxruntime(_chain(np.random.default_rng(0))).full_range == 1
    assert fuse_for_onnxruntime(_chain(np.random.default_rng(0)), {INT8_GRID: "paddle"}).full_range == 0
    with pytest.raises(ConfigError, match="ONNXRUNTIME_INT8_GRID='coarse'"):
        fuse_for_onnxruntime(_chain(np.random.default_rng(0)), {INT8_GRID: "coarse"})


def test_refusals_name_the_reason() -> None:
    rng = np.random.default_rng(1)
    m = _chain(rng, float_reader=True)
    report = fuse_qdq(m)
    assert report.convs == 0 and report.refused == {"conv result read by float ops": 1}
    m = _chain(np.random.default_rng(2), w_min=-128)
    w8 = numpy_helper.to_array(next(i for i in m.graph.initializer if i.name == "w8")).copy()
    w8[1, 0, 0, 0] = -128  # channel 1 is sign-flipped by the batch norm: -(-128) is not int8
    report = fuse_qdq(_with_init(m, "w8", w8))
    assert report.convs == 0 and report.refused == {"weight holds -128 where batch norm flips the sign": 1}



def _residual(rng: np.random.Generator) -> Any:
    """x -> Q -> DQ -> Conv(DQ(w8)) -> BN -> Q(sa) -> DQ -> Add <- DQ <- Q(sx) <- x (a second quantizer of x, as
    Paddle writes one per quantized reader) -> Relu -> Q(so) -> DQ -> y: a residual block with its add quantized."""
    c = 4
    vals, nodes = _conv_bn(rng, c, c)
    vals.update(sa=np.float32(0.03), za=np.int8(0), so=np.float32(0.04), zo=np.int8(0))
    nodes += [
        helper.make_node("QuantizeLinear", ["bn", "sa", "za"], ["aq"]),
        helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]),
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq2"]),
        helper.make_node("DequantizeLinear", ["xq2", "sx", "zx"], ["xd2"]),
        helper.make_node("Add", ["ad", "xd2"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "so", "zo"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"]),
    ]
    return _model("residual", nodes, vals, [2, c, 8, 8], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                     [2, c, 8, 8])])


def test_quantized_residual_add_becomes_qlinearadd_with_the_same_numbers(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    original = _residual(rng)
    fused, report = _fused(original)
    assert (report.merged, report.uint8, report.convs, report.adds, report.refused) == (1, 3, 1, 1, {}), report
    kinds = _kinds(fused)
    assert kinds["Relu"] == kinds["BatchNormalization"] == 0 and kinds["Clip"] == 1 and kinds["QuantizeLinear"] == 3
    onnx.checker.check_model(fused, full_check=True)
    x = rng.normal(0, 1.0, (2, 4, 8, 8)).astype(np.float32)
    ref = _session(original).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "opt.onnx").run(None, {"x": x})[0]
    optimized = _ops(tmp_path / "opt.onnx")
    assert optimized["QLinearConv"] == 1 and optimized["QLinearAdd"] == 1, optimized
    steps = np.abs(got - ref) / np.float32(0.04)
    assert steps.max() <= 1.0 + 1e-5 and (steps < 1e-3).mean() >= 0.97, (steps.max(), (steps < 1e-3).mean())
    assert ref.min() == 0 and np.ptp(ref) > 1  # the relu did act


def test_add_read_in_float_stays_float() -> None:
    m = _residual(np.random.default_rng(5))
    m.graph.node.append(helper.make_node("Relu", ["sum"], ["side"]))
    m.graph.output.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, [2, 4, 8, 8]))
    report = fuse_qdq(m)
    assert report.adds == 0 and report.refused == {"add result read by float ops": 1}


def _convert(model_dir: Path, device: str | None, ins: dict[str, np.ndarray],
             properties: dict[str, str] | None = None) -> Any:
    """The whole program (feed/fetch removed) converted as the subgraph kernel does, for `device` with its context
    `properties`."""
    from pdlite.model_parser.loader import load_model
    from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops

    m = load_model(model_dir)
    block = m.program.main
    params = {k: np.asarray(getattr(v, "array", v)) for k, v in m.params.items()}
    info = TensorInfo.from_vars(block.vars, params)
    inputs = [GraphInput(n, ins[n].shape, ins[n].dtype) for n in m.program.feed_names()]
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    return convert_ops(ops, inputs, m.program.fetch_names(), info, block.vars, device=device, properties=properties)


# (convs requantized, float 1x1 convs as matmuls); the others stay float where Paddle's program puts a
# non-monotone op (hard_swish), an average pool, a resize or a residual add between a conv and the next
# quantizer, or reads the conv's value in float
FIXTURES = {"ptq_cnn_qdq": (8, 1), "ptq_ppocr_cls_qdq": (15, 28), "ptq_det_qdq": (3, 2), "ptq_rec_qdq": (4, 2),
            "ptq_res_qdq": (6, 0)}
# residual adds that become integer adds (ptq_res_qdq: Paddle's PTQ with elementwise_add; its last add feeds the
# average pool in float)
ADDS = {"ptq_res_qdq": 1}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_on_onnxruntime_runs_qlinearconv_within_tolerance(name: str, tmp_path: Path) -> None:
    """On Paddle's grid (ONNXRUNTIME_INT8_GRID=paddle), so the outputs are held to the simulation's numbers; the
    default full grid's are checked in tests/quant/test_quant_devices.py."""
    from pdlite.nnadapter.qdq_fusion import INT8_GRID
    from pdlite.nnadapter.registry import get_driver
    from pdlite.registries import load_registries

    ins, ref, _ = case(ROOT / name)
    neutral = _convert(ROOT / name, None, ins)
    assert not any(n.op_type == "QuantizeLinear" and n.input[2].startswith("_qdq") for n in neutral.graph.node)
    report = fuse_qdq(neutral, full_range=False)
    assert (report.convs, report.matmuls, report.adds) == (*FIXTURES[name], ADDS.get(name, 0)), report
    model = _convert(ROOT / name, "onnxruntime", ins, {INT8_GRID: "paddle"})  # convert_ops applies the rewrite
    assert _kinds(model) == _kinds(neutral)
    load_registries()
    driver = get_driver("onnxruntime")()
    props = {"ONNXRUNTIME_INTRA_OP_NUM_THREADS": "1"}
    compiled = driver.build(model.SerializeToString(), props, str(tmp_path / "optimized.onnx"))
    optimized = _ops(tmp_path / "optimized.onnx")
    assert optimized["QLinearConv"] == report.convs and optimized["QLinearAdd"] == report.adds
    assert optimized["MatMulIntegerToFloat"] >= report.matmuls
    # the float convs' batch norms stay separate ops (not folded into the now constant float weights)
    assert optimized["BatchNormalization"] == _kinds(model)["BatchNormalization"]
    got = driver.run(compiled, [ins[n] for n in compiled.inputs])
    for (k, r), g in zip(ref.items(), got):
        err = max_rel_err(np.asarray(g), r)
        assert err <= REL, f"{name}: {k}: max|got-ref| = {err:.3g} * max|ref|"
        if name != "ptq_det_qdq":
            assert np.array_equal(np.asarray(g).argmax(-1), r.argmax(-1)), "top-1 changed"


def test_openvino_gets_the_device_neutral_model() -> None:
    """OpenVINO already runs Paddle's QDQ layout in int8 and was slower with the rewrite (BENCHMARKS.md); its own
    rewrite (qdq_openvino.py) only gives thin ConvTransposes float weights."""
    from pdlite.nnadapter.convert import DEVICE_REWRITES
    from pdlite.nnadapter.qdq_fusion import fuse_for_onnxruntime

    assert DEVICE_REWRITES["onnxruntime"] == (fuse_for_onnxruntime,)
    assert fuse_for_onnxruntime not in DEVICE_REWRITES["intel_openvino"]


def test_predictor_on_onnxruntime_runs_qlinearconv(tmp_path: Path) -> None:
    """Through the public API: the subgraph kernel converts for its device, so the session ONNX Runtime builds
    (its optimized model is what the model cache keeps) runs QLinearConv, and the outputs stay within REL."""
    from pdlite import CxxConfig, create_paddle_predictor

    name = "ptq_cnn_qdq"
    ins, ref, _ = case(ROOT / name)
    cfg = CxxConfig()
    cfg.set_model_dir(ROOT / name)
    cfg.set_nnadapter_device_names(["onnxruntime"])
    cfg.set_nnadapter_model_cache_dir(str(tmp_path))
    pred = create_paddle_predictor(cfg)
    got = pred.predict({k: v.copy() for k, v in ins.items()})
    cached = sorted(tmp_path.glob("*.onnxruntime"))
    assert cached, "no model in the cache dir"
    assert sum(_ops(p)["QLinearConv"] for p in cached) == FIXTURES[name][0]
    for (k, r), g in zip(ref.items(), got):
        assert max_rel_err(np.asarray(g), r) <= REL, k


def _affine_chain(rng: np.random.Generator) -> Any:
    """x -> Q -> DQ -> Conv -> BN -> Mul(m, .) (per channel, one negative) -> Add(c0, .) (scalar) -> Resize
    (nearest, x2) -> Q -> DQ -> HardSwish -> y: PP-LCNet's learnable affine block before a non-monotone
    activation, quantized on the activation's input, with an upsampling between."""
    cin, cout = 4, 6
    vals, nodes = _conv_bn(rng, cin, cout)
    k = rng.uniform(0.5, 1.5, (1, cout, 1, 1)).astype(np.float32)
    k[0, 3] *= -1
    vals.update(lab_k=k, c0=np.float32(0.3), roi=np.zeros(0, np.float32), scales=np.array([1, 1, 2, 2], np.float32),
                so=np.float32(0.03), zo=np.int8(0))
    nodes += [
        helper.make_node("Mul", ["lab_k", "bn"], ["mu"]),
        helper.make_node("Add", ["c0", "mu"], ["ad"]),
        helper.make_node("Resize", ["ad", "roi", "scales"], ["up"], mode="nearest"),
        helper.make_node("QuantizeLinear", ["up", "so", "zo"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["yd"]),
        helper.make_node("HardSwish", ["yd"], ["y"]),
    ]
    return _model("affine", nodes, vals, [2, cin, 8, 8], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                          [2, cout, 16, 16])])


def test_affine_steps_and_nearest_resize_fold_into_qlinearconv(tmp_path: Path) -> None:
    """Constant Mul / Add steps (either input order, a negative per-channel factor) fold into the conv's weight
    scales, signs and bias; the nearest Resize runs on the uint8 codes after the quantizer: one QLinearConv, the
    same numbers within one quantization step (>= 99% exactly)."""
    rng = np.random.default_rng(5)
    original = _affine_chain(rng)
    fused, report = _fused(original)
    assert (report.uint8, report.convs, report.refused) == (2, 1, {"hard_swish result is a graph output": 1}), report
    kinds = _kinds(fused)
    assert kinds["BatchNormalization"] == kinds["Mul"] == kinds["Add"] == 0 and kinds["Resize"] == 1
    resize = next(n for n in fused.graph.node if n.op_type == "Resize")
    assert next(n for n in fused.graph.node if n.output[0] == resize.input[0]).op_type == "QuantizeLinear"
    onnx.checker.check_model(fused, full_check=True)
    x = rng.normal(0, 1.2, (2, 4, 8, 8)).astype(np.float32)
    ref = _session(original).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "opt.onnx").run(None, {"x": x})[0]
    assert _ops(tmp_path / "opt.onnx")["QLinearConv"] == 1
    codes = lambda y: np.rint(y / np.float32(0.03))  # noqa: E731  HardSwish is 1-Lipschitz-ish: compare inputs
    ref_in = _session(_with_output(original, "yd")).run(None, {"x": x})[1]
    got_in = _session(_with_output(fused, "yd")).run(None, {"x": x})[1]
    steps = np.abs(codes(got_in) - codes(ref_in))
    assert steps.max() <= 1 and (steps == 0).mean() >= 0.99, (steps.max(), (steps == 0).mean())
    assert np.abs(got - ref).max() <= 0.03 * 1.5
    assert (ref_in < 0).any() and (ref_in > 0).any()  # both signs reach the quantizer: the test is not trivial


def _hard_swish_chain(sx: float, so: float, m: float | None = None, c: float | None = None) -> Any:
    """x -> Q(sx) -> DQ -> HardSwish -> [Mul(., m)] -> [Add(c, .)] -> Q(so) -> DQ -> y on a [1, 1, 16, 16] input:
    hard_swish quantized on its input, then PP-LCNet's learnable affine block, then the next op's quantizer."""
    vals = {"sx": np.float32(sx), "zx": np.int8(0), "so": np.float32(so), "zo": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("HardSwish", ["xd"], ["h"])]
    cur = "h"
    if m is not None:
        vals["m"] = np.float32(m)
        nodes.append(helper.make_node("Mul", [cur, "m"], ["hm"]))
        cur = "hm"
    if c is not None:
        vals["c"] = np.float32(c)
        nodes.append(helper.make_node("Add", ["c", cur], ["hc"]))
        cur = "hc"
    nodes += [helper.make_node("QuantizeLinear", [cur, "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    return _model("hard_swish", nodes, vals, [1, 1, 16, 16],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 16, 16])])


@pytest.mark.parametrize("sx, so, m, c, form", [
    (0.05, 0.045, None, None, "clip"), (0.129, 0.0422, 0.409, -0.874, "clip"), (0.0519, 0.0512, 1.136, 0.179, "clip"),
    (0.0388, 0.0765, 4.767, 1.356, "clip"), (1.2423, 0.6716, 0.633, -0.547, "clip"), (0.0473, 0.0481, None, None, "clip"),
    (0.02, 0.02, None, None, "mul"), (0.015, 0.031, 0.8, 0.2, "mul"), (0.0212, 0.0161, 1.2, None, "mul")],
    ids=["plain", "det_a", "det_b", "det_c", "coarse_input", "uneven_clip", "fine_input", "fine_affine", "fine_scaled"])
def test_quantized_hard_swish_runs_on_uint8_codes_within_one_step(sx: float, so: float, m: float | None,
                                                                  c: float | None, form: str, tmp_path: Path) -> None:
    """hard_swish between a uint8 input and a quantizer (affine block or not; scales from PP-OCRv4 det's int8
    model and finer ones) becomes Clip -> QLinearMul on x's own codes where those serve as the hard sigmoid's, else
    QLinearMul -> Clip -> QLinearMul: over all 256 input codes every output code is within one of the QDQ
    model's (the 8-bit hard sigmoid and the rounded offset, see HardSwishRequantize), and without an offset all
    are equal where both hard sigmoids are 0 or 1 and nearly all in between."""
    original = _hard_swish_chain(sx, so, m, c)
    fused, report = _fused(original)
    assert (report.uint8, report.hard_swish, report.refused) == (2, 1, {}), report
    kinds = _kinds(fused)
    muls = 1 if form == "clip" else 2
    assert kinds["QLinearMul"] == muls and kinds["Clip"] == 1, kinds
    assert kinds["HardSwish"] == kinds["Mul"] == kinds["Add"] == 0, kinds
    x = ((np.arange(256, dtype=np.float32) - 128) * np.float32(sx)).reshape(1, 1, 16, 16)
    ref = _session(original).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "opt.onnx").run(None, {"x": x})[0]
    optimized = _ops(tmp_path / "opt.onnx")
    assert optimized["QLinearMul"] == muls and optimized["HardSigmoid"] == optimized["HardSwish"] == 0, optimized
    steps = np.rint(np.abs(got - ref) / np.float32(so))
    assert steps.max() <= 1, steps.max()
    if c is None:  # no offset: exact where the hard sigmoids are 0 or 1, nearly all equal in between
        edge = max(3.02, (round(3 / sx) + 0.5) * sx) if form == "clip" else 3.02
        share = 0.95 if form == "clip" else 0.9  # the requantized hard sigmoid moves more codes on fine inputs
        assert not steps[np.abs(x) >= edge].any() and (steps == 0).mean() >= share, (steps == 0).mean()
    assert len(np.unique(ref)) > 40  # the codes span the hard_swish curve: the test is not trivial


def test_hard_swish_refusals_name_the_reason() -> None:
    cases = {"hard_swish output step finer than its 8-bit hard sigmoid allows": _hard_swish_chain(0.02, 0.005),
             "hard_swish offset moves the zero point out of uint8": _hard_swish_chain(0.05, 0.05, c=7.0),
             "hard_swish scaled by a factor <= 0": _hard_swish_chain(0.05, 0.05, m=-0.5)}
    side = _hard_swish_chain(0.05, 0.05)
    side.graph.node.append(helper.make_node("Relu", ["h"], ["side"]))
    side.graph.output.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 1, 16, 16]))
    cases["hard_swish result read by float ops"] = side
    for why, model in cases.items():
        report = fuse_qdq(model)
        assert report.hard_swish == 0 and report.refused == {why: 1}, (why, report)
        assert _kinds(model)["HardSwish"] == 1


def _gate_chain(sx: float, so: float, swish: bool = False) -> Any:
    """x -> Q(sx) -> DQ -> xd; Mul(xd, HardSigmoid(GlobalAveragePool(xd))) (a squeeze-excitation gate per channel)
    or, with `swish`, Mul(Sigmoid(xd), xd) -> Q(so) -> DQ -> y, on [1, 4, 8, 8]."""
    vals = {"sx": np.float32(sx), "zx": np.int8(0), "so": np.float32(so), "zo": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    if swish:
        nodes += [helper.make_node("Sigmoid", ["xd"], ["g"]), helper.make_node("Mul", ["g", "xd"], ["gx"])]
    else:
        nodes += [helper.make_node("GlobalAveragePool", ["xd"], ["p"]),
                  helper.make_node("HardSigmoid", ["p"], ["g"], alpha=0.2, beta=0.5),
                  helper.make_node("Mul", ["xd", "g"], ["gx"])]
    nodes += [helper.make_node("QuantizeLinear", ["gx", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    return _model("gate", nodes, vals, [1, 4, 8, 8], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                      [1, 4, 8, 8])])


@pytest.mark.parametrize("sx, so, swish", [(0.05, 0.05, False), (0.0589, 0.0562, False), (0.0974, 0.0545, False),
                                           (0.04, 0.03, True)], ids=["se", "se_det_a", "se_det_b", "swish"])
def test_gated_value_runs_as_qlinearmul_within_one_step(sx: float, so: float, swish: bool, tmp_path: Path) -> None:
    """A uint8 value times a HardSigmoid / Sigmoid gate, then quantized (squeeze-excitation; swish), becomes one
    QLinearMul with the gate quantized to 1/255: every output code within one of the QDQ model's, most equal."""
    original = _gate_chain(sx, so, swish)
    fused, report = _fused(original)
    assert (report.uint8, report.gates, report.refused) == (2, 1, {}), report
    kinds = _kinds(fused)
    assert kinds["QLinearMul"] == 1 and kinds["Mul"] == 0, kinds
    x = np.random.default_rng(7).normal(0, 40 * sx, (1, 4, 8, 8)).astype(np.float32) + np.float32(
        [[[[-1.0]], [[0.0]], [[1.0]], [[3.0]]]])  # channels with gates from near 0 to near 1
    ref = _session(original).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "opt.onnx").run(None, {"x": x})[0]
    assert _ops(tmp_path / "opt.onnx")["QLinearMul"] == 1
    steps = np.rint(np.abs(got - ref) / np.float32(so))
    assert steps.max() <= 1 and (steps == 0).mean() >= 0.9, (steps.max(), (steps == 0).mean())
    assert len(np.unique(ref)) > 40


def test_gate_refusals_name_the_reason() -> None:
    report = fuse_qdq(_gate_chain(0.1, 0.04))
    assert report.gates == 0 and report.refused == {"gated value's output step finer than its 8-bit gate allows": 1}
    side = _gate_chain(0.05, 0.05)
    side.graph.node.append(helper.make_node("Relu", ["gx"], ["side"]))
    side.graph.output.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 4, 8, 8]))
    report = fuse_qdq(side)
    assert report.gates == 0 and report.refused == {"gated value result read by float ops": 1}


def _with_output(model: Any, name: str) -> Any:
    m = onnx.load_from_string(model.SerializeToString())
    m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return m


def test_concatenated_quantizers_become_uint8_together(tmp_path: Path) -> None:
    """A Concat of quantizers read only by DequantizeLinear (how converters/quant.py quantizes a concat) turns
    uint8 as one unit, so the conv reading it can run as QLinearConv; same numbers within one step."""
    rng = np.random.default_rng(6)
    vals, nodes = _conv_bn(rng, 4, 6)
    nodes[0:2] = [
        helper.make_node("Relu", ["x"], ["xr"]),
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q0"]),
        helper.make_node("QuantizeLinear", ["xr", "sx", "zx"], ["q1"]),
        helper.make_node("Concat", ["q0", "q1"], ["xq"], axis=1),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
    ]
    vals["w8"] = rng.integers(-127, 128, (6, 8, 3, 3)).astype(np.int8)
    vals.update(so=np.float32(0.05), zo=np.int8(0))
    nodes += [helper.make_node("QuantizeLinear", ["bn", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    original = _model("concat", nodes, vals, [2, 4, 8, 8], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                           [2, 6, 8, 8])])
    fused, report = _fused(original)
    assert (report.uint8, report.convs, report.refused) == (3, 1, {}), report
    concat = next(n for n in fused.graph.node if n.op_type == "Concat")
    assert all(next(n for n in fused.graph.node if n.output[0] == i).input[2] != "zx" for i in concat.input)
    onnx.checker.check_model(fused, full_check=True)
    _same_codes(original, fused, rng.normal(0, 1.2, (2, 4, 8, 8)).astype(np.float32), 0.05, tmp_path / "opt.onnx")


_STEPS = ("bn", "mul", "mul_first", "add", "add_first", "sub", "relu", "clip", "max", "min", "maxpool", "resize")


def _random_chain(rng: np.random.Generator, steps: list[str]) -> tuple[Any, int]:
    """x -> Q -> DQ -> Conv -> `steps` -> Q -> DQ -> y with random constants (negative factors included); the
    affine steps come first, as ConvRequantize reads them, then the commuting ones. The model and its output
    quantizer's scale."""
    cin, cout = 3, 5
    vals, nodes = _conv_bn(rng, cin, cout)
    nodes = nodes[:-1]  # no batch norm unless drawn
    cur, size = "cv", 8
    affine = [s for s in steps if s in ("bn", "mul", "mul_first", "add", "add_first", "sub")]
    commuting = [s for s in steps if s not in affine]
    for i, s in enumerate(affine + commuting):
        out = f"s{i}"
        if s == "bn":
            vals["g"] = rng.uniform(-1.5, 1.5, cout).astype(np.float32)
            nodes.append(helper.make_node("BatchNormalization", [cur, "g", "b", "m", "v"], [out], epsilon=1e-5))
        elif s in ("mul", "mul_first", "add", "add_first", "sub"):
            shape = (1, cout, 1, 1) if rng.random() < 0.5 else ()
            v = rng.uniform(-1.5, 1.5, shape).astype(np.float32)
            vals[f"k{i}"] = v
            ins = [f"k{i}", cur] if s.endswith("_first") else [cur, f"k{i}"]
            nodes.append(helper.make_node({"mul": "Mul", "add": "Add", "sub": "Sub"}[s.split("_")[0]], ins, [out]))
        elif s == "relu":
            nodes.append(helper.make_node("Relu", [cur], [out]))
        elif s in ("clip", "max", "min"):
            lo, hi = sorted(rng.uniform(-2, 2, 2).astype(np.float32))
            vals[f"lo{i}"], vals[f"hi{i}"] = np.float32(lo), np.float32(hi)
            ins = {"clip": [cur, f"lo{i}", f"hi{i}"], "max": [cur, f"lo{i}"], "min": [cur, f"hi{i}"]}[s]
            nodes.append(helper.make_node(s.capitalize(), ins, [out]))
        elif s == "maxpool":
            nodes.append(helper.make_node("MaxPool", [cur], [out], kernel_shape=[2, 2], strides=[2, 2]))
            size //= 2
        else:
            vals[f"roi{i}"], vals[f"sc{i}"] = np.zeros(0, np.float32), np.array([1, 1, 2, 2], np.float32)
            nodes.append(helper.make_node("Resize", [cur, f"roi{i}", f"sc{i}"], [out], mode="nearest"))
            size *= 2
        cur = out
    vals.update(so=np.float32(rng.uniform(0.01, 0.05)), zo=np.int8(0))
    nodes += [helper.make_node("QuantizeLinear", [cur, "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, size, size])
    return _model("random", nodes, vals, [1, cin, 8, 8], [y]), float(vals["so"])


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.sampled_from(_STEPS), max_size=5), seed=st.integers(0, 2**16))
def test_random_chains_fold_into_one_qlinearconv_with_the_same_numbers(steps: list[str], seed: int) -> None:
    """Any mix of affine steps and quantizer-commuting ops between a conv and its quantizer: one QLinearConv,
    nothing else float between it and the quantizer, the same codes as the original model within one step on
    >= 99% of the elements exactly (the int32 bias rounding may move values on a rounding edge)."""
    rng = np.random.default_rng(seed)
    original, so = _random_chain(rng, steps)
    fused, report = _fused(original)
    # several chained affine steps can scale the bias past int32 (e.g. four batch norms): a correct refusal, not
    # a chain this test is about
    assume(report.refused != {"bias out of int32 range": 1})
    assert report.convs == 1 and report.refused == {}, (steps, report)
    kinds = _kinds(fused)
    assert kinds["BatchNormalization"] == kinds["Mul"] == kinds["Add"] == kinds["Sub"] == kinds["Relu"] == 0
    _same_codes(original, fused, rng.normal(0, 1.5, (1, 3, 8, 8)).astype(np.float32), so,
                copies=4 ** steps.count("resize"))


def _fan_out(rng: np.random.Generator, s_up: float) -> Any:
    """x -> Q -> DQ -> Conv -> BN -> Q(sa) -> DQ -> Add <- DQ <- Q <- x -> sum, read by Q(so) -> DQ -> y and by
    Resize (nearest, x2) -> Q(s_up) -> DQ -> up: a feature pyramid's sum, quantized for its own conv and upsampled
    for the next level (PP-OCRv4 det's neck); with s_up == so one quantizer serves both."""
    m = _residual(rng)
    g = m.graph
    for n in list(g.node):
        if n.op_type == "Relu" or n.output[0] in ("yq", "y"):
            g.node.remove(n)
    g.initializer.extend([_init("roi", np.zeros(0, np.float32)), _init("scales", np.array([1, 1, 2, 2], np.float32)),
                          _init("s_up", np.float32(s_up))])
    g.node.extend([helper.make_node("QuantizeLinear", ["sum", "so", "zo"], ["yq"]),
                   helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"]),
                   helper.make_node("Resize", ["sum", "roi", "scales"], ["r"], mode="nearest"),
                   helper.make_node("QuantizeLinear", ["r", "s_up", "zo"], ["uq"]),
                   helper.make_node("DequantizeLinear", ["uq", "s_up", "zo"], ["up"])])
    g.output.append(helper.make_tensor_value_info("up", TensorProto.FLOAT, [2, 4, 16, 16]))
    return m


def test_sum_read_by_two_quantizers_of_one_scale_is_quantized_once(tmp_path: Path) -> None:
    """The add's value reaches two quantizers of the same scale, one through a nearest Resize: one QuantizeLinear
    right after the add (a QLinearAdd in ORT), the Resize on its codes, so the upsampled output is exactly the
    upsample of the other; both within one step of the original's (Q commutes with picking elements; ORT's
    QLinearAdd rounds through its own fixed-point scale, which moved 5% of these values by one step, as it does
    for rule 2b's adds)."""
    rng = np.random.default_rng(11)
    original = _fan_out(rng, 0.04)
    fused, report = _fused(original)
    assert (report.adds, report.refused) == (1, {}), report
    kinds = _kinds(fused)
    assert kinds["QuantizeLinear"] == 3 and kinds["Resize"] == 1, kinds  # x, the conv's value, the sum
    resize = next(n for n in fused.graph.node if n.op_type == "Resize")
    assert next(n for n in fused.graph.node if n.output[0] == resize.input[0]).op_type == "QuantizeLinear"
    onnx.checker.check_model(fused, full_check=True)
    x = rng.normal(0, 1.0, (2, 4, 8, 8)).astype(np.float32)
    ref = _session(original).run(None, {"x": x})
    got = _session(fused, tmp_path / "opt.onnx").run(None, {"x": x})
    assert _ops(tmp_path / "opt.onnx")["QLinearAdd"] == 1
    for r, g in zip(ref, got):
        steps = np.abs(g - r) / np.float32(0.04)
        assert steps.max() <= 1.0 + 1e-5 and (steps < 1e-3).mean() >= 0.9, (steps.max(), (steps < 1e-3).mean())
    assert np.array_equal(got[1], got[0].repeat(2, 2).repeat(2, 3))  # the upsample of the very same codes
    assert np.ptp(ref[0]) > 1


def test_sum_read_by_quantizers_of_different_scales_stays_float() -> None:
    report = fuse_qdq(_fan_out(np.random.default_rng(12), 0.05))
    assert report.adds == 0 and report.refused == {"add result read by several quantizers": 1}, report


def _near_dead(beta: float, s_dead: float) -> tuple[Any, dict[str, Any]]:
    """`_chain` whose channel 0 has weight scale `s_dead` and batch norm bias `beta` (a pruned channel: its bias
    needs more than int32 at s_x * s_w); no zero-scale channel."""
    m = _chain(np.random.default_rng(13))
    vals = {i.name: numpy_helper.to_array(i).copy() for i in m.graph.initializer}
    vals["sw"][0], vals["sw"][2], vals["b"][0], vals["g"][5] = s_dead, 0.004, beta, 1.0
    del m.graph.initializer[:]
    m.graph.initializer.extend(_init(k, v) for k, v in vals.items())
    return m, vals


def test_near_dead_channel_drops_its_weights_to_fit_the_bias(tmp_path: Path) -> None:
    """Weight scale 1e-12 (the pruned channels of PP-OCRv4 det: 1e-9 .. 1e-37): the bias b / (s_x * s_w) leaves
    int32, the weights can move the output by ~1e-8 of a step: the channel becomes its bias (weights 0, the
    scale raised until the bias fits) and the conv a QLinearConv; the numbers stay the original's."""
    original, vals = _near_dead(0.5, 1e-12)
    fused, report = _fused(original)
    assert (report.convs, report.refused) == (1, {}), report
    x = np.random.default_rng(14).normal(0, 1.2, (2, 4, 16, 16)).astype(np.float32)
    ref = _same_codes(original, fused, x, 0.025, tmp_path / "o.onnx")
    assert np.ptp(ref[:, 0]) == 0 and ref[:, 0].max() > 0  # channel 0 is its (positive) bias, as in the original


def test_channel_whose_weights_matter_keeps_the_int32_refusal() -> None:
    """A bias too large for int32 on a channel with ordinary weights (their reach is many output steps): refused."""
    original, _ = _near_dead(1e6, 1e-3)
    report = fuse_qdq(original)
    assert report.convs == 0 and report.refused == {"bias out of int32 range": 1}, report


def _stem(k: int, pads: list[int], size: tuple[int, int]) -> Any:
    """x (1 x 3 x H x W) -> Q -> DQ -> Conv(3 -> 8, k x k, stride 2, pads) -> Q -> DQ -> y: a CNN's stem."""
    rng = np.random.default_rng(k * 100 + sum(pads) * 10 + size[0])
    vals = {"sx": np.float32(0.02), "zx": np.int8(0), "w8": rng.integers(-127, 128, (8, 3, k, k)).astype(np.int8),
            "sw": rng.uniform(0.002, 0.01, 8).astype(np.float32), "zw": np.zeros(8, np.int8),
            "b": rng.normal(0, 0.2, 8).astype(np.float32), "so": np.float32(0.05), "zo": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w8", "sw", "zw"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "b"], ["cv"], pads=pads, strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["cv", "so", "zo"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    out = [(n + pads[i] + pads[i + 2] - k) // 2 + 1 for i, n in enumerate(size)]
    return _model("stem", nodes, vals, [1, 3, *size], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                    [1, 8, *out])])


@pytest.mark.parametrize("k,pads,size", [(3, [1, 1, 1, 1], (16, 16)), (3, [1, 1, 1, 1], (17, 15)),
                                         (7, [3, 3, 3, 3], (20, 21)), (2, [0, 0, 0, 0], (9, 8)),
                                         (3, [0, 0, 1, 1], (16, 16)), (3, [1, 0, 0, 1], (11, 12)),
                                         (7, [3, 3, 3, 3], (20, 22)), (2, [0, 0, 0, 0], (8, 10)),
                                         (5, [2, 1, 2, 1], (14, 12)), (3, [1, 0, 0, 1], (12, 12)),
                                         (3, [0, 0, 0, 0], (16, 14))])
def test_stem_runs_as_space_to_depth_with_the_same_codes(k: int, pads: list[int], size: tuple[int, int],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stride-2 conv on the input's 3 channels becomes SpaceToDepth + a stride-1 conv on 12 channels (a
    QLinearConv): the same integer sums, so the codes equal those of the fused model without this rule, for odd
    and even sizes, asymmetric pads and kernels 2, 3, 5, 7. Even sizes need no Pad node (the conv pads the grid
    with the zero point itself); odd ones are padded to a whole grid first."""
    import pdlite.nnadapter.qdq_fusion as qf

    original = _stem(k, pads, size)
    fused, report = _fused(original)
    assert (report.convs, report.stems, report.refused) == (1, 1, {}), report
    kinds = _kinds(fused)
    assert kinds["SpaceToDepth"] == 1 and kinds["Pad"] == (size[0] % 2 or size[1] % 2), kinds
    conv = next(n for n in fused.graph.node if n.op_type == "Conv")
    assert list(next(a.ints for a in conv.attribute if a.name == "strides")) == [1, 1]
    onnx.checker.check_model(fused, full_check=True)
    monkeypatch.setattr(qf.StemSpaceToDepth, "check", lambda self, g, conv: None)
    plain, plain_report = _fused(original)
    assert plain_report.stems == 0
    x = np.random.default_rng(1).normal(0, 1.5, (1, 3, *size)).astype(np.float32)
    want = _session(plain).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "o.onnx").run(None, {"x": x})[0]
    assert _ops(tmp_path / "o.onnx")["QLinearConv"] == 1
    assert got.shape == want.shape and np.array_equal(got, want)
    assert np.ptp(want) > 1


def test_conv_transpose_bias_add_becomes_its_bias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ConvTranspose(DQ(x), DQ(w8)) -> Add(b per channel) -> BN -> Relu -> Q -> DQ -> y (PP-OCRv4 det's head): the
    Add becomes the ConvTranspose's bias, the batch norm stays a separate op in ORT (FoldFloatWeights keeps ORT
    from folding it into the weights), and the output equals the one without this rule."""
    import pdlite.nnadapter.qdq_fusion as qf

    rng = np.random.default_rng(15)
    c = 4
    vals = {"sx": np.float32(0.02), "zx": np.int8(0), "w8": rng.integers(-127, 128, (c, c, 2, 2)).astype(np.int8),
            "sw": np.float32(0.01), "zw": np.int8(0), "b": rng.normal(0, 0.3, (1, c, 1, 1)).astype(np.float32),
            "g": rng.uniform(0.5, 1.5, c).astype(np.float32), "bb": rng.normal(0, 0.3, c).astype(np.float32),
            "m": rng.normal(0, 0.2, c).astype(np.float32), "v": rng.uniform(0.5, 2, c).astype(np.float32),
            "so": np.float32(0.03), "zo": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w8", "sw", "zw"], ["wd"]),
             helper.make_node("ConvTranspose", ["xd", "wd"], ["ct"], strides=[2, 2], kernel_shape=[2, 2]),
             helper.make_node("Add", ["ct", "b"], ["ad"]),
             helper.make_node("BatchNormalization", ["ad", "g", "bb", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "so", "zo"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    original = _model("ct", nodes, vals, [1, c, 8, 8], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                   [1, c, 16, 16])])
    monkeypatch.setattr(qf.ConvTransposeAsConv, "check", lambda self, g, ct: None)  # keep it transposed
    fused, report = _fused(original)
    assert report.transpose_biases == 1, report
    kinds = _kinds(fused)
    assert kinds["Add"] == 0 and len(next(n for n in fused.graph.node if n.op_type == "ConvTranspose").input) == 3
    monkeypatch.setattr(qf.ConvTransposeBias, "check", lambda self, g, ct: None)
    plain, plain_report = _fused(original)
    assert plain_report.transpose_biases == 0
    x = rng.normal(0, 1.2, (1, c, 8, 8)).astype(np.float32)
    want = _session(plain).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "o.onnx").run(None, {"x": x})[0]
    assert _ops(tmp_path / "o.onnx")["BatchNormalization"] == 1
    assert np.array_equal(got, want) and np.ptp(want) > 0.5


def _transposed_chain(rng: np.random.Generator, n: int, per_channel: bool, bias: bool, tail: str,
                      cout: int = 3) -> Any:
    """x -> Q -> DQ -> ConvTranspose(DQ(w8), 2x2, stride 2) -> [Add(b)] -> BN -> Mul(per channel) -> Relu | Clip ->
    Q -> DQ -> y on a [n, 5, 6, 7] input, `cout` output channels: PP-OCRv4 det's head upsampling, quantized after
    it."""
    cin = 5
    vals = {"sx": np.float32(0.02), "zx": np.int8(0), "w8": rng.integers(-127, 128, (cin, cout, 2, 2)).astype(np.int8),
            "sw": (rng.uniform(0.005, 0.02, cout) if per_channel else np.array(0.01)).astype(np.float32),
            "zw": np.zeros(cout if per_channel else (), np.int8), "b": rng.normal(0, 0.3, (1, cout, 1, 1)).astype(np.float32),
            "g": rng.uniform(0.5, 1.5, cout).astype(np.float32), "bb": rng.normal(0, 0.3, cout).astype(np.float32),
            "m": rng.normal(0, 0.2, cout).astype(np.float32), "v": rng.uniform(0.5, 2, cout).astype(np.float32),
            "k": rng.uniform(0.5, 1.5, (cout, 1, 1)).astype(np.float32), "lo": np.float32(-0.2), "hi": np.float32(1.5),
            "so": np.float32(0.03), "zo": np.int8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w8", "sw", "zw"], ["wd"], axis=1),
             helper.make_node("ConvTranspose", ["xd", "wd"], ["ct"], strides=[2, 2], kernel_shape=[2, 2])]
    cur = "ct"
    if bias:
        nodes.append(helper.make_node("Add", ["b", "ct"], ["ad"]))
        cur = "ad"
    nodes += [helper.make_node("BatchNormalization", [cur, "g", "bb", "m", "v"], ["bn"]),
              helper.make_node("Mul", ["bn", "k"], ["mu"]),
              helper.make_node("Relu", ["mu"], ["r"]) if tail == "relu" else helper.make_node("Clip", ["mu", "lo", "hi"],
                                                                                            ["r"]),
              helper.make_node("QuantizeLinear", ["r", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    return _model("ct", nodes, vals, [n, cin, 6, 7], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                  [n, cout, 12, 14])])


@pytest.mark.parametrize("n, per_channel, bias, tail, cout", [(1, True, True, "relu", 3), (2, False, True, "clip", 3),
                                                              (2, True, False, "relu", 3), (1, True, True, "relu", 1)],
                         ids=["det_head", "batch2_per_tensor_clip", "no_bias", "one_channel"])
def test_transposed_conv_runs_as_qlinearconv_and_a_move_of_its_codes(n: int, per_channel: bool, bias: bool, tail: str,
                                                                     cout: int, tmp_path: Path) -> None:
    """A 2x2 stride-2 ConvTranspose quantized after its batch norm / affine step / clamp becomes a 1x1 conv on 4x
    the channels, which ONNX Runtime makes a QLinearConv, and the codes moved to their pixels: no ConvTranspose
    left, each output within one quantization step of the QDQ model's (the int32 bias, as for any conv), >= 99%
    exactly; every output pixel is checked, so a tap put in the wrong place fails."""
    rng = np.random.default_rng(31 + n)
    original = _transposed_chain(rng, n, per_channel, bias, tail, cout)
    fused, report = _fused(original)
    assert (report.transposed_convs, report.convs) == (1, 1), report
    assert _kinds(fused)["ConvTranspose"] == 0
    onnx.checker.check_model(fused, full_check=True)
    x = rng.normal(0, 1.0, (n, 5, 6, 7)).astype(np.float32)
    ref = _same_codes(original, fused, x, 0.03, tmp_path / "o.onnx")
    assert _ops(tmp_path / "o.onnx")["ConvTranspose"] == 0
    assert len(np.unique(ref)) > 20 and (ref == 0).any()  # the codes vary and the clamp bites: not trivial


def test_transposed_conv_left_alone_where_it_is_not_one_tap_per_pixel() -> None:
    """Kernel 3 with stride 2 (overlapping taps), or an output read in float (a graph output through Sigmoid):
    the ConvTranspose stays."""
    rng = np.random.default_rng(40)
    overlapping = _transposed_chain(rng, 1, True, True, "relu")
    ct = next(n for n in overlapping.graph.node if n.op_type == "ConvTranspose")
    overlapping.graph.initializer[[t.name for t in overlapping.graph.initializer].index("w8")].CopyFrom(
        _init("w8", rng.integers(-127, 128, (5, 3, 3, 3)).astype(np.int8)))
    del ct.attribute[:]
    ct.attribute.extend([helper.make_attribute("strides", [2, 2]), helper.make_attribute("kernel_shape", [3, 3])])
    float_out = _transposed_chain(rng, 1, True, True, "relu")
    for node in list(float_out.graph.node)[-3:]:
        float_out.graph.node.remove(node)
    float_out.graph.node.append(helper.make_node("Sigmoid", ["mu"], ["y"]))
    for model in (overlapping, float_out):
        fused, report = _fused(model)
        assert report.transposed_convs == 0 and _kinds(fused)["ConvTranspose"] == 1, report


def _upsample_chain(f: int) -> Any:
    """x -> Q -> DQ -> Conv -> BN -> Relu -> Resize(nearest, asymmetric, floor, x f) -> Q -> DQ -> y: the
    upsampling Paddle's nearest_interp_v2 converts to (a DB head's)."""
    rng = np.random.default_rng(20 + f)
    vals, nodes = _conv_bn(rng, 4, 6)
    vals.update(scales=np.array([1, 1, f, f], np.float32), so=np.float32(0.03), zo=np.int8(0))
    nodes += [helper.make_node("Relu", ["bn"], ["r"]),
              helper.make_node("Resize", ["r", "", "scales"], ["up"], mode="nearest",
                               coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
              helper.make_node("QuantizeLinear", ["up", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    return _model("upsample", nodes, vals, [2, 4, 6, 5], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                       [2, 6, 6 * f, 5 * f])])


@pytest.mark.parametrize("f", [2, 4, 8, 3])
def test_upsample_of_codes_runs_as_resizes_by_two_between_reshapes(f: int, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A nearest upsample by 2^k of the codes becomes Reshape(N*C, 1, H, W), k Resizes by 2 and a Reshape back,
    which ONNX Runtime keeps out of its NHWC region (its optimized model has the Resizes between the reshapes);
    the codes equal the single Resize's. By 3: left as it is."""
    import pdlite.nnadapter.qdq_fusion.graph as qf

    original = _upsample_chain(f)
    fused, report = _fused(original)
    assert report.convs == 1
    kinds = _kinds(fused)
    twos = {2: 1, 4: 2, 8: 3}.get(f)
    assert kinds["Resize"] == (twos or 1) and kinds["Reshape"] == (2 if twos else 0), kinds
    onnx.checker.check_model(fused, full_check=True)
    monkeypatch.setattr(qf, "_resize_by_twos", lambda *a: None)
    plain, _ = _fused(original)
    x = np.random.default_rng(f).normal(0, 1.2, (2, 4, 6, 5)).astype(np.float32)
    want = _session(plain).run(None, {"x": x})[0]
    got = _session(fused, tmp_path / "o.onnx").run(None, {"x": x})[0]
    assert np.array_equal(got, want) and np.ptp(want) > 0.5
    _same_codes(original, fused, x, 0.03, copies=f * f)
    opt = onnx.load(str(tmp_path / "o.onnx")).graph.node
    made = {o: n.op_type for n in opt for o in n.output}
    assert all(made.get(n.input[0]) in (("Reshape", "Resize") if twos else ("QuantizeLinear", "Transpose",
                                                                            "QLinearConv", "Relu", "Clip"))
               for n in opt if n.op_type == "Resize"), [(n.op_type, made.get(n.input[0])) for n in opt]
