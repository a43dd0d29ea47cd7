"""Generate the quantization fixtures under tests/fixtures/quant/ (dev tool; needs paddlepaddle 3.x).

Two kinds:
- `ops_*`: small legacy programs of raw quantization ops (every form: QDQ per tensor / per channel,
  int8 weights, bit lengths, both round types, only_observer, the fake_* family in inference and training
  mode, scale 0 and exact .5 ties) built with `LayerHelper.append_op`;
- `ptq_*`: small CNNs quantized by Paddle's own post-training quantization
  (`paddle.static.quantization.PostTrainingQuantization`), in the QDQ format (onnx_format=True:
  int8 weights + quantize_linear/dequantize_linear) and the old fake-quant format (onnx_format=False:
  fake_quantize_* / fake_channel_wise_dequantize_max_abs).

Each folder holds inference.pdmodel + inference.pdiparams + case.npz (`in:<feed>`, `out:<fetch>` from
Paddle Inference 3.x on the saved files, `switch_ir_optim(False)`, MKLDNN off, 1 thread: Paddle's fp32
simulation of the quantized program, the same convention as ../shared/models). A `ptq_*` case also holds
`fp32:<fetch>`, the original float model's output on the same input, and `opt:<fetch>`, Paddle Inference's
output with IR optimisation on (its CPU passes fold the weight QDQ), as tolerance hints.

Usage: python tools/make_quant_fixtures.py [--out tests/fixtures/quant] [names...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
F32 = "float32"
BUILDERS: dict[str, Callable[[Path, np.random.Generator], None]] = {}


def fixture(name: str) -> Callable:
    def deco(fn: Callable[[Path, np.random.Generator], None]) -> Callable:
        BUILDERS[name] = fn
        return fn
    return deco


# ---------------------------------------------------------------------------------------------- helpers
def _param(name: str, value: np.ndarray) -> Any:
    """A persistable parameter holding `value` (set after the startup program ran)."""
    import paddle

    p = paddle.static.create_parameter(list(value.shape), str(value.dtype), name=name,
                                       default_initializer=paddle.nn.initializer.Constant(0))
    p.stop_gradient = True
    _VALUES[name] = value
    return p


_VALUES: dict[str, np.ndarray] = {}


def _op(type_: str, inputs: dict[str, Any], attrs: dict[str, Any], outs: dict[str, Any]) -> list[Any]:
    """Append a raw op; `outs` maps slot -> dtype (a new variable) or an existing variable."""
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(type_)
    outputs = {k: [v if not isinstance(v, str) else helper.create_variable_for_type_inference(v)]
               for k, v in outs.items()}
    helper.append_op(type=type_, inputs={k: v if isinstance(v, list) else [v] for k, v in inputs.items()},
                     outputs=outputs, attrs=attrs)
    return [outputs[k][0] for k in outs]


def paddle_reference(d: Path, feeds: dict[str, np.ndarray], ir_optim: bool = False) -> dict[str, np.ndarray]:
    from paddle_reference import paddle_reference as run_paddle

    return run_paddle(d / "inference.pdmodel", d / "inference.pdiparams", feeds, ir_optim)


def _save(d: Path, feed_vars: list[Any], fetch_vars: list[Any], exe: Any, program: Any) -> None:
    import paddle

    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        paddle.static.save_inference_model(str(Path(tmp) / "inference"), feed_vars, fetch_vars, exe,
                                           program=program)
        for f in Path(tmp).iterdir():
            shutil.move(str(f), d / f.name)
    _strip_callstacks(d / "inference.pdmodel")


def _strip_callstacks(path: Path) -> None:
    import paddle

    prog = paddle.static.deserialize_program(path.read_bytes())
    for block in prog.blocks:
        for op in block.ops:
            for a in ("op_callstack", "op_namescope"):
                if op.desc.has_attr(a):
                    op.desc.remove_attr(a)
    path.write_bytes(prog.desc.serialize_to_string())


def _write_case(d: Path, feeds: dict[str, np.ndarray], extra: dict[str, np.ndarray] | None = None) -> None:
    outs = paddle_reference(d, feeds)
    np.savez(d / "case.npz", **{f"in:{k}": v for k, v in feeds.items()},
             **{f"out:{k}": v for k, v in outs.items()}, **(extra or {}))


def _op_program(d: Path, rng: np.random.Generator, build: Callable[[Any], list[Any]],
                feeds: dict[str, np.ndarray]) -> None:
    """Build a program of raw ops over feed `x`, set the parameters, save it and its reference."""
    import paddle

    paddle.enable_static()
    _VALUES.clear()
    main, start = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, start), paddle.utils.unique_name.guard():
        feed_vars = [paddle.static.data(k, [-1, *v.shape[1:]], str(v.dtype)) for k, v in feeds.items()]
        fetch = build(*feed_vars)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(start)
        for k, v in _VALUES.items():
            scope.find_var(k).get_tensor().set(v, paddle.CPUPlace())
        _save(d, feed_vars, fetch, exe, main)
    _write_case(d, feeds)


def _x(rng: np.random.Generator, shape: tuple[int, ...] = (2, 4, 3, 5)) -> np.ndarray:
    """Normal values, a few outliers beyond the scales below, and exact zeros."""
    x = rng.normal(0, 1.5, shape).astype(np.float32)
    x.reshape(-1)[::7] *= 3.0
    x.reshape(-1)[::11] = 0.0
    return x


# ---------------------------------------------------------------------------------------------- op fixtures
@fixture("ops_qdq")
def _ops_qdq(d: Path, rng: np.random.Generator) -> None:
    """quantize_linear / dequantize_linear per tensor and per channel, both round types, 4/8/16 bits."""
    scale_t = np.array([2.5], np.float32)
    scale_c0 = rng.uniform(0.5, 3.0, 2).astype(np.float32)  # axis 0 of [2, 4, 3, 5]
    scale_c1 = rng.uniform(0.5, 3.0, 4).astype(np.float32)
    w = rng.integers(-128, 128, (3, 4, 2, 2)).astype(np.int8)
    w_scale = rng.uniform(0.01, 0.1, 3).astype(np.float32)

    def build(x):
        zp = _param("zp", np.zeros(1, np.int32))
        st, c0, c1 = _param("s_t", scale_t), _param("s_c0", scale_c0), _param("s_c1", scale_c1)
        outs = []
        for s, attrs in [
            (st, {"quant_axis": -1, "bit_length": 8}),
            (st, {"quant_axis": -1, "bit_length": 8, "round_type": 1}),
            (st, {"quant_axis": -1, "bit_length": 4, "round_type": 0}),
            (st, {"quant_axis": -1, "bit_length": 16, "round_type": 1}),
            (c0, {"quant_axis": 0, "bit_length": 8, "round_type": 0}),
            (c1, {"quant_axis": 1, "bit_length": 8, "round_type": 1}),
            (c1, {"quant_axis": 1, "bit_length": 8, "only_observer": True}),
        ]:
            full = {"is_test": True, **attrs}
            (q,) = _op("quantize_linear", {"X": x, "Scale": s, "ZeroPoint": zp}, full, {"Y": F32})
            (dq,) = _op("dequantize_linear", {"X": q, "Scale": s, "ZeroPoint": zp}, full, {"Y": F32})
            outs += [q, dq]
        wq = _param("w_int8", w)
        (wd,) = _op("dequantize_linear", {"X": wq, "Scale": _param("w_scale", w_scale),
                                          "ZeroPoint": _param("wzp", np.zeros(3, np.int32))},
                    {"quant_axis": 0, "bit_length": 8}, {"Y": F32})
        import paddle

        outs.append(paddle.nn.functional.conv2d(outs[1], wd))
        return outs

    _op_program(d, rng, build, {"x": _x(rng)})


@fixture("ops_qdq_ties")
def _ops_qdq_ties(d: Path, rng: np.random.Generator) -> None:
    """Exact .5 ties (scale 127: the grid is the integers), values beyond the range, and a zero scale."""
    x = np.concatenate([np.arange(-130.5, 131.0, 0.5), [-200.0, 200.0, 1e-3]]).astype(np.float32).reshape(1, -1)

    def build(x):
        s127, s0 = _param("s127", np.array([127.0], np.float32)), _param("s0", np.array([0.0], np.float32))
        zp = _param("zp", np.zeros(1, np.int32))
        outs = []
        for s in (s127, s0):
            for rt in (0, 1):
                a = {"quant_axis": -1, "bit_length": 8, "round_type": rt, "is_test": True}
                (q,) = _op("quantize_linear", {"X": x, "Scale": s, "ZeroPoint": zp}, a, {"Y": F32})
                outs.append(q)
        for t, rt in (("fake_quantize_dequantize_abs_max", 0), ("fake_quantize_abs_max", 1)):
            outs += _op(t, {"X": x}, {"bit_length": 8, "round_type": rt}, {"Out": F32, "OutScale": F32})
        return outs

    _op_program(d, rng, build, {"x": x})


@fixture("ops_fake")
def _ops_fake(d: Path, rng: np.random.Generator) -> None:
    """The fake_* family: abs_max, range_abs_max (is_test), moving average (is_test and training),
    channel-wise on axis 0 and 1, the dequantize ops and moving_average_abs_max_scale."""
    def build(x):
        in_scale = _param("in_scale", np.array([2.0], np.float32))
        accum, state = _param("accum", np.array([3.0], np.float32)), _param("state", np.array([1.5], np.float32))
        outs = []
        outs += _op("fake_quantize_abs_max", {"X": x}, {"bit_length": 8}, {"Out": F32, "OutScale": F32})
        outs += _op("fake_quantize_dequantize_abs_max", {"X": x}, {"bit_length": 5}, {"Out": F32, "OutScale": F32})
        outs += _op("fake_quantize_abs_max", {"X": x * 1e-32}, {"bit_length": 8}, {"Out": F32, "OutScale": F32})
        outs += _op("fake_quantize_range_abs_max", {"X": x, "InScale": in_scale},
                    {"bit_length": 8, "is_test": True, "window_size": 100}, {"Out": F32, "OutScale": F32})[:1]
        for t in ("fake_quantize_moving_average_abs_max", "fake_quantize_dequantize_moving_average_abs_max"):
            # Paddle Inference runs every quant op with is_test: the scale is InScale, state outputs stay unset
            outs += _op(t, {"X": x, "InScale": in_scale, "InAccum": accum, "InState": state},
                        {"bit_length": 8, "is_test": False, "moving_rate": 0.8},
                        {"Out": F32, "OutScale": F32, "OutState": F32, "OutAccum": F32})[:1]
        for axis in (0, 1):
            outs += _op("fake_channel_wise_quantize_dequantize_abs_max", {"X": x},
                        {"bit_length": 8 - 2 * axis, "quant_axis": axis, "round_type": axis},
                        {"Out": F32, "OutScale": F32})
        outs += _op("fake_dequantize_max_abs", {"X": x, "Scale": in_scale}, {"max_range": 100.0}, {"Out": F32})
        s_c = _param("s_c", rng.uniform(0.5, 2.0, 4).astype(np.float32))
        s_n = _param("s_n", rng.uniform(0.5, 2.0, 2).astype(np.float32))
        outs += _op("fake_channel_wise_dequantize_max_abs", {"X": x, "Scales": [s_c]},
                    {"quant_bits": [8], "quant_axis": 1}, {"Out": F32})
        outs += _op("fake_channel_wise_dequantize_max_abs", {"X": x, "Scales": [s_n]},
                    {"quant_bits": [6], "quant_axis": 0}, {"Out": F32})
        outs += _op("fake_channel_wise_dequantize_max_abs", {"X": x, "Scales": [s_c, in_scale]},
                    {"quant_bits": [8, 8], "quant_axis": 0, "x_num_col_dims": 1}, {"Out": F32})
        outs += _op("moving_average_abs_max_scale", {"X": x, "InAccum": accum, "InState": state},
                    {"moving_rate": 0.9, "is_test": False},
                    {"Out": F32, "OutScale": F32, "OutState": F32, "OutAccum": F32})[:1]
        return outs

    _op_program(d, rng, build, {"x": _x(rng)})


@fixture("ops_dequant_lite")
def _ops_dequant_lite(d: Path, rng: np.random.Generator) -> None:
    """Paddle-Lite's weight formats: dequantize_abs_max (int8 * scale / max_range) and dequantize_log
    (a 128-entry table, sign from the int8), feeding a matmul with the feed."""
    def build(x):
        w = _param("w8", rng.integers(-128, 128, (5, 4)).astype(np.int8))
        (a,) = _op("dequantize_abs_max", {"X": w, "Scale": _param("ws", np.array([0.7], np.float32))},
                   {"max_range": 127.0}, {"Out": F32})
        table = _param("dict", np.sort(rng.uniform(0, 2, 128)).astype(np.float32))
        (b,) = _op("dequantize_log", {"X": w, "Dict": table}, {}, {"Out": F32})
        return [a, b, *(_op("matmul_v2", {"X": x, "Y": v}, {}, {"Out": F32})[0] for v in (a, b))]

    _op_program(d, rng, build, {"x": rng.normal(0, 1, (2, 5)).astype(np.float32)})


# ---------------------------------------------------------------------------------------------- PTQ fixtures
def _save_fp32(d: Path, build: Callable[[Any], list[Any]], shape: list[int], rng: np.random.Generator) -> None:
    """A float model from a static builder, seeded weights, random BN statistics, saved to d."""
    import paddle

    paddle.enable_static()
    main, start = paddle.static.Program(), paddle.static.Program()
    main.random_seed = start.random_seed = 7
    with paddle.static.program_guard(main, start), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, *shape], F32)
        fetch = build(x)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(start)
        for var in main.list_vars():
            t = scope.find_var(var.name) if var.persistable else None
            if t is None or var.name in ("feed", "fetch"):
                continue
            arr = np.array(t.get_tensor())
            if arr.ndim != 1:
                continue
            if "batch_norm" in var.name and var.name.endswith((".w_0", ".w_2")):  # scale, variance
                arr = rng.uniform(0.5, 1.5, arr.shape)
            else:
                arr = rng.normal(0.0, 0.2, arr.shape)
            t.get_tensor().set(arr.astype(np.float32), paddle.CPUPlace())
        _save(d, [x], fetch, exe, main)


def _cnn(x: Any) -> list[Any]:
    """A narrow MobileNet-like classifier: conv-BN-ReLU, depthwise-separable blocks, GAP, FC, softmax."""
    import paddle.nn as nn
    import paddle.nn.functional as F

    def cbr(y, cin, cout, k, s, groups=1):
        y = nn.Conv2D(cin, cout, k, stride=s, padding=k // 2, groups=groups, bias_attr=False)(y)
        return F.relu(nn.BatchNorm2D(cout)(y))

    y = cbr(x, 3, 8, 3, 2)
    for cin, cout, s in ((8, 16, 1), (16, 24, 2), (24, 32, 2), (32, 32, 1)):
        y = cbr(cbr(y, cin, cin, 3, s, groups=cin), cin, cout, 1, 1)
    y = nn.AdaptiveAvgPool2D(1)(y).flatten(1)
    return [F.softmax(nn.Linear(32, 10)(y))]



def _resnet(x: Any) -> list[Any]:
    """A narrow ResNet-like classifier: a stem, two basic blocks (the second with a strided 1x1 shortcut),
    residual adds then relu, GAP, FC, softmax."""
    import paddle.nn as nn
    import paddle.nn.functional as F

    def cb(y, cin, cout, k, s):
        return nn.BatchNorm2D(cout)(nn.Conv2D(cin, cout, k, stride=s, padding=k // 2, bias_attr=False)(y))

    y = F.relu(cb(x, 3, 8, 3, 2))
    for cin, cout, s in ((8, 8, 1), (8, 16, 2)):
        short = y if (cin, s) == (cout, 1) else cb(y, cin, cout, 1, s)
        y = F.relu(cb(F.relu(cb(y, cin, cout, 3, s)), cout, cout, 3, 1) + short)
    y = nn.AdaptiveAvgPool2D(1)(y).flatten(1)
    return [F.softmax(nn.Linear(16, 10)(y))]

def _detector(x: Any) -> list[Any]:
    """A small detector-like CNN: strided backbone, nearest upsample + concat neck, a box head and a sigmoid
    score head per cell (8 boxes x 4 coords, 3 classes)."""
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    def cbr(y, cin, cout, s):
        return F.relu(nn.BatchNorm2D(cout)(nn.Conv2D(cin, cout, 3, stride=s, padding=1, bias_attr=False)(y)))

    c1 = cbr(x, 3, 8, 2)
    c2 = cbr(c1, 8, 16, 2)
    c3 = cbr(c2, 16, 24, 2)
    up = F.interpolate(c3, scale_factor=2, mode="nearest")
    p2 = cbr(paddle.concat([c2, up], axis=1), 40, 16, 1)
    boxes = nn.Conv2D(16, 4, 1)(p2).transpose([0, 2, 3, 1]).reshape([0, -1, 4])
    (scores,) = _op("sigmoid", {"X": nn.Conv2D(16, 3, 1)(p2)}, {}, {"Out": F32})  # no legacy tracing
    scores = scores.transpose([0, 2, 3, 1]).reshape([0, -1, 3])
    return [boxes, scores]


def _ptq(fp32: Path, d: Path, calib: list[np.ndarray], feed: str, onnx_format: bool, algo: str,
         ops: list[str]) -> None:
    """Paddle's post-training quantization of the model in fp32/ into d/."""
    import paddle
    from paddle.static.quantization import PostTrainingQuantization

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        names = (("inference.pdmodel", "inference.pdiparams") if (fp32 / "inference.pdmodel").is_file()
                 else ("__model__", "__params__"))
        ptq = PostTrainingQuantization(
            exe, model_dir=str(fp32), model_filename=names[0], params_filename=names[1],
            data_loader=lambda: ({feed: b} for b in calib), batch_nums=len(calib), algo=algo,
            onnx_format=onnx_format, quantizable_op_type=ops, scope=scope)
        ptq.quantize()
        with tempfile.TemporaryDirectory() as tmp:
            ptq.save_quantized_model(tmp, model_filename="inference.pdmodel", params_filename="inference.pdiparams")
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            for f in Path(tmp).iterdir():
                shutil.move(str(f), d / f.name)
    _strip_callstacks(d / "inference.pdmodel")


def _ptq_fixture(d: Path, fp32: Path, feeds: dict[str, np.ndarray], calib: list[np.ndarray],
                 onnx_format: bool, algo: str, ops: list[str], pir: bool = False) -> None:
    (feed,) = feeds
    _ptq(fp32, d, calib, feed, onnx_format, algo, ops)
    ref32 = paddle_reference(fp32, feeds)
    opt = paddle_reference(d, feeds, ir_optim=True)
    ref = paddle_reference(d, feeds)
    # opt:<fetch> only where IR optimisation changes the numbers (Paddle 3.3.1 CPU: it never did here)
    _write_case(d, feeds, {**{f"fp32:{k}": v for k, v in ref32.items()},
                           **{f"opt:{k}": v for k, v in opt.items() if not np.array_equal(v, ref[k])}})
    if feeds[feed][0].size <= 4096:  # calibration batches for the `pdlite quantize` tests (small models only)
        np.savez(d / "calib.npz", **{f"{feed}_{i}": b[:2] for i, b in enumerate(calib[:2])})
    if pir:
        _pir_copy(d, Path(str(d) + "_pir"), feeds, legacy_ref=ref if onnx_format else None)


def _float_weights(src: Path, dst: Path) -> Path:
    """A copy of a QDQ model whose int8 weights are stored as float32 (the same integers): Paddle's PIR
    executor runs dequantize_linear on float inputs only."""
    from dataclasses import replace

    from pdlite.core.dtypes import VarType
    from pdlite.model_parser import LoDTensor, load_model, save_model

    m = load_model(src)
    block = m.program.main
    for name, t in list(m.params.items()):
        if t.array.dtype == np.int8:
            m.params[name] = LoDTensor(t.array.astype(np.float32))
            block.vars[name] = replace(block.vars[name], dtype=VarType.FP32)
    dst.mkdir(parents=True, exist_ok=True)
    save_model(m.program, m.params, dst / "inference.pdmodel", dst / "inference.pdiparams")
    return dst


def _pir_copy(src: Path, dst: Path, feeds: dict[str, np.ndarray],
              legacy_ref: dict[str, np.ndarray] | None = None) -> None:
    """Re-save a legacy fixture as PIR JSON (Paddle's translator, in a PIR-mode subprocess) with its reference.

    `legacy_ref`: use the legacy program's outputs as the reference (under the PIR fetch names), for QDQ
    programs: Paddle 3.3.1's PIR executor returns a saturated softmax (values ~1e-28) on the translated
    QDQ classifier, while pdlite on the PIR program equals the legacy executor's fp32 simulation."""
    import subprocess

    shutil.rmtree(dst, ignore_errors=True)
    env = {**os.environ, "FLAGS_enable_pir_api": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        src = _float_weights(src, Path(tmp) / "m")
        subprocess.run([sys.executable, str(REPO / "tools" / "make_pir_fixtures.py"), "--from-legacy", str(src),
                        str(dst)], check=True, env=env)
    np.savez(dst / "feeds.npz", **feeds)
    code = ("import sys, numpy as np; from paddle import inference; d = sys.argv[1]\n"
            "c = inference.Config(d + '/inference.json', d + '/inference.pdiparams'); c.switch_ir_optim(False)\n"
            "c.disable_mkldnn(); c.set_cpu_math_library_num_threads(1); c.disable_glog_info()\n"
            "p = inference.create_predictor(c); f = np.load(d + '/feeds.npz')\n"
            "[p.get_input_handle(n).copy_from_cpu(f[n]) for n in p.get_input_names()]; p.run()\n"
            "np.savez(d + '/case.npz', **{'in:' + n: f[n] for n in f.files}, "
            "**{'out:' + n: p.get_output_handle(n).copy_to_cpu() for n in p.get_output_names()})\n")
    subprocess.run([sys.executable, "-c", code, str(dst)], check=True, env=env)
    (dst / "feeds.npz").unlink()
    if legacy_ref is not None:
        z = dict(np.load(dst / "case.npz"))
        outs = sorted(k for k in z if k.startswith("out:"))
        assert len(outs) == len(legacy_ref) == 1, "legacy_ref supports single-output models"
        z[outs[0]] = next(iter(legacy_ref.values()))
        z["ref:legacy_executor"] = np.array(1)
        np.savez(dst / "case.npz", **z)


CNN_OPS = ["conv2d", "depthwise_conv2d", "mul", "matmul", "matmul_v2"]


@fixture("ptq_cnn_qdq")
def _ptq_cnn_qdq(d: Path, rng: np.random.Generator) -> None:
    """The narrow classifier, QDQ format, histogram calibration; also as PIR JSON (weights as float integers)."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _cnn, [3, 32, 32], rng)
        calib = [rng.normal(0, 1, (4, 3, 32, 32)).astype(np.float32) for _ in range(4)]
        feeds = {"x": rng.normal(0, 1, (8, 3, 32, 32)).astype(np.float32)}
        _ptq_fixture(d, Path(tmp), feeds, calib, True, "hist", CNN_OPS, pir=True)



@fixture("ptq_res_qdq")
def _ptq_res_qdq(d: Path, rng: np.random.Generator) -> None:
    """The narrow ResNet, QDQ format, abs_max calibration, residual adds quantized too (elementwise_add in
    quantizable_op_type: Paddle then also quantizes conv, batch norm and add outputs)."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _resnet, [3, 32, 32], rng)
        calib = [rng.normal(0, 1, (4, 3, 32, 32)).astype(np.float32) for _ in range(4)]
        feeds = {"x": rng.normal(0, 1, (8, 3, 32, 32)).astype(np.float32)}
        _ptq_fixture(d, Path(tmp), feeds, calib, True, "abs_max", [*CNN_OPS, "elementwise_add"])

@fixture("ptq_cnn_fake")
def _ptq_cnn_fake(d: Path, rng: np.random.Generator) -> None:
    """The narrow classifier, old fake-quant format, KL calibration; also re-saved as PIR JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _cnn, [3, 32, 32], rng)
        calib = [rng.normal(0, 1, (4, 3, 32, 32)).astype(np.float32) for _ in range(4)]
        feeds = {"x": rng.normal(0, 1, (8, 3, 32, 32)).astype(np.float32)}
        _ptq_fixture(d, Path(tmp), feeds, calib, False, "KL", CNN_OPS, pir=True)


@fixture("ptq_det_qdq")
def _ptq_det_qdq(d: Path, rng: np.random.Generator) -> None:
    """The detector-like CNN, QDQ format, abs_max calibration, every quantizable op type (incl. concat)."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _detector, [3, 32, 32], rng)
        calib = [rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32) for _ in range(4)]
        feeds = {"x": rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)}
        _ptq_fixture(d, Path(tmp), feeds, calib, True, "abs_max", [])


@fixture("ptq_det_fake")
def _ptq_det_fake(d: Path, rng: np.random.Generator) -> None:
    """The detector-like CNN, old fake-quant format, avg calibration."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _detector, [3, 32, 32], rng)
        calib = [rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32) for _ in range(4)]
        feeds = {"x": rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)}
        _ptq_fixture(d, Path(tmp), feeds, calib, False, "avg", CNN_OPS)


def _zoo(name: str) -> Path:
    for root in (REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"):
        if (root / name / "inference.pdmodel").is_file():
            return root / name
    raise FileNotFoundError(f"model {name} not found in tests/fixtures/models or ../shared/models")


@fixture("ptq_ppocr_cls_qdq")
def _ptq_cls(d: Path, rng: np.random.Generator) -> None:
    """PP-OCR mobile v2 direction classifier (trained), QDQ format, KL calibration on its case input + noise."""
    src = _zoo("ppocr_cls_v2")
    x = np.load(src / "case.npz")["in:x"]
    calib = [np.clip(x + rng.normal(0, 0.1, x.shape), -1, 1).astype(np.float32) for _ in range(4)]
    feeds = {"x": np.concatenate([x, calib[0]])}
    _ptq_fixture(d, src, feeds, calib, True, "KL", CNN_OPS)


@fixture("ptq_ppocr_det_qdq")
def _ptq_det(d: Path, rng: np.random.Generator) -> None:
    """PP-OCRv4 text detector (trained), QDQ format, hist calibration, at 160x160 (test speed)."""
    src = _zoo("ppocr_det_v4")
    x = np.load(src / "case.npz")["in:x"][:, :, ::2, ::2].copy()
    calib = [np.clip(x + rng.normal(0, 0.1, x.shape), -3, 3).astype(np.float32) for _ in range(2)]
    _ptq_fixture(d, src, {"x": x}, calib, True, "hist", CNN_OPS)


def _rec_net(x: Any) -> list[Any]:
    """A narrow PP-OCR-like text recogniser: conv-BN-hard_swish/ReLU backbone with depthwise-separable blocks
    striding the height only after the stem, an average pool to height 1, the width as the sequence, one
    SVTR-like self-attention mixing block (matmul_v2 on activations, softmax, residual, layer_norm) and a
    CTC head: a [N, T, 97] softmax per time step."""
    import paddle.nn as nn
    import paddle.nn.functional as F

    def cba(y, cin, cout, k, s, groups=1, act="hard_swish"):
        y = nn.BatchNorm2D(cout)(nn.Conv2D(cin, cout, k, stride=s, padding=k // 2, groups=groups,
                                           bias_attr=False)(y))
        return F.hardswish(y) if act == "hard_swish" else F.relu(y)

    y = cba(x, 3, 16, 3, 2, act="relu")                                   # 16 x 50
    for cin, cout, s, act in ((16, 32, 1, "relu"), (32, 48, (2, 1), "hard_swish"), (48, 64, (2, 1), "relu")):
        y = cba(cba(y, cin, cin, 3, s, groups=cin, act=act), cin, cout, 1, 1, act=act)
    y = F.avg_pool2d(y, (4, 2), stride=(4, 2))                              # 1 x 25
    y = y.reshape([0, 64, 25]).transpose([0, 2, 1])                        # [N, 25, 64]
    q, k, v = (nn.Linear(64, 64)(y) for _ in range(3))
    (qk,) = _op("matmul_v2", {"X": q, "Y": k}, {"trans_y": True}, {"Out": F32})  # raw ops: no legacy tracing
    (qk,) = _op("scale", {"X": qk}, {"scale": 0.125, "bias": 0.0}, {"Out": F32})
    (mix,) = _op("matmul_v2", {"X": F.softmax(qk), "Y": v}, {}, {"Out": F32})
    (y,) = _op("elementwise_add", {"X": y, "Y": nn.Linear(64, 64)(mix)}, {"axis": -1}, {"Out": F32})
    return [F.softmax(nn.Linear(64, 97)(nn.LayerNorm(64)(y)))]


def _text_lines(texts: list[str], rng: np.random.Generator, noise: float, h: int = 32, w: int = 100) -> np.ndarray:
    """Text lines rendered dark on light grey with PIL's default font and scaled to [-1, 1] as the OCR app
    feeds its recogniser ([N, 3, h, w]), plus Gaussian pixel noise."""
    from PIL import Image, ImageDraw, ImageFont

    from pdlite.apps.ocr.rec import rec_resize_norm

    font = ImageFont.load_default(size=int(h * 0.6))
    out = []
    for t in texts:
        img = Image.new("RGB", (w, h), (235, 235, 230))
        ImageDraw.Draw(img).text((2, h // 6), t, fill=(20, 20, 30), font=font)
        a = np.asarray(img, np.float32) + rng.normal(0, noise, (h, w, 3))
        out.append(rec_resize_norm(np.clip(a, 0, 255).astype(np.uint8), w / h, (3, h, w)))
    return np.stack(out).astype(np.float32)


@fixture("ptq_rec_qdq")
def _ptq_rec(d: Path, rng: np.random.Generator) -> None:
    """The narrow PP-OCR-like recogniser (random weights; PP-OCRv4 rec quantized is ~3.3 MB before its
    reference, over the fixture budget), QDQ format, abs_max calibration on rendered text lines, every
    quantizable op type (convs, the linears, the attention's matmuls)."""
    words = ["pdlite int8", "OCR 2026", "Paddle v4", "ORT 1.32", "hello 42", "QLinear", "calib set", "Lite"]
    with tempfile.TemporaryDirectory() as tmp:
        _save_fp32(Path(tmp), _rec_net, [3, 32, 100], rng)
        calib = [_text_lines(words[2 * i:2 * i + 2], rng, 6.0) for i in range(4)]
        feeds = {"x": _text_lines(["int8 line 7", "Paddle Lite", "CTC head"], rng, 3.0)}
        _ptq_fixture(d, Path(tmp), feeds, calib, True, "abs_max", [*CNN_OPS, "matmul_v2"])


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "quant"))
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    for name in args.names or list(BUILDERS):
        if name not in BUILDERS:
            ap.error(f"unknown fixture {name!r}; known: {list(BUILDERS)}")
        d = Path(args.out) / name
        BUILDERS[name](d, np.random.default_rng(args.seed + list(BUILDERS).index(name)))
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"{name}: {size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
