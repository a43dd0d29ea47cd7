"""The command-line tools: run, bench (+ profile, precision profile), inspect, graph. Output content is checked."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pdlite.tools.cli import main
from tests.conftest import LEGACY_MODELS, PIR_MODELS, load_case, model_dir


def _cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_run_check_against_reference(capsys, tmp_path):
    d = model_dir("ppocr_cls_v2")
    out = tmp_path / "out.npz"
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--output", str(out))
    assert rc == 0, text
    assert "output softmax_0.tmp_0: shape [1, 2] float32" in text
    assert "OK" in text and "MISMATCH" not in text
    ref = load_case("ppocr_cls_v2")[1]["softmax_0.tmp_0"]
    np.testing.assert_allclose(np.load(out)["softmax_0.tmp_0"], ref, rtol=1e-4, atol=1e-6)


def test_run_random_with_shape_and_input_file(capsys, tmp_path):
    d = model_dir("ppocr_cls_v2")
    rc, text = _cli(capsys, "run", str(d), "--random", "--shape", "x=2,3,48,96")
    assert rc == 0, text
    assert "input  x: shape [2, 3, 48, 96] float32" in text
    assert re.search(r"output softmax_0.tmp_0: shape \[2, 2\] float32  min [\d.e+-]+  max", text)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 48, 64), np.float32))
    rc, text = _cli(capsys, "run", str(d), "--input", f"x={tmp_path / 'x.npy'}")
    assert rc == 0 and "input  x: shape [1, 3, 48, 64]" in text


def test_random_inputs_default_a_dynamic_batch_to_one(capsys):
    """--random without --shape: a model whose only dynamic dim is the batch runs one sample (and says so); other
    dynamic dims are refused with the model's own dims in the --shape example."""
    rc, text = _cli(capsys, "run", str(model_dir("mobilenet_v3_small")), "--random")
    assert rc == 0, text
    assert "input x: batch 1 (the model's shape [-1, 3, 224, 224]" in text
    assert "input  x: shape [1, 3, 224, 224] float32" in text
    assert "output linear_1.tmp_1: shape [1, 100] float32" in text
    rc, text = _cli(capsys, "run", str(model_dir("ppocr_cls_v2")), "--random")  # x: [-1, 3, -1, -1]
    assert rc == 1 and "input 'x' has dynamic dims [-1, 3, -1, -1]: give --shape x=1,3,N,N" in text


def test_run_reports_mismatch_and_errors(capsys, tmp_path):
    d = model_dir("ppocr_cls_v2")
    ins, outs = load_case("ppocr_cls_v2")
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{"in:x": ins["x"], "out:softmax_0.tmp_0": outs["softmax_0.tmp_0"][:, ::-1] + 1})
    rc, text = _cli(capsys, "run", str(d), "--check", str(bad))
    assert rc == 1 and "MISMATCH" in text
    rc, text = _cli(capsys, "run", str(d))
    assert rc == 1 and "input 'x' has no data" in text
    rc, text = _cli(capsys, "run", str(tmp_path / "missing"))
    assert rc == 1 and "not found" in text


def test_run_and_bench_pass_context_properties_to_the_device(capsys):
    """--context KEY=VALUE reaches the device: OpenVINO runs in the precision asked for, and refuses a bad value
    with its own error naming the property."""
    pytest.importorskip("openvino")
    pytest.importorskip("onnx")
    d = model_dir("ppocr_cls_v2")
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--device", "intel_openvino",
                    "--context", "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=f32")
    assert rc == 0 and "device: intel_openvino" in text and "OK" in text, text
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--device", "intel_openvino",
                    "--context", "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=fp8")
    assert rc == 1 and "INTEL_OPENVINO_INFERENCE_PRECISION_HINT='fp8'" in text, text
    rc, text = _cli(capsys, "bench", str(d), "--shape", "x=1,3,48,192", "--warmup", "1", "--repeats", "2",
                    "--device", "intel_openvino", "--context", "INTEL_OPENVINO_PERFORMANCE_HINT=SPEED")
    assert rc == 1 and "INTEL_OPENVINO_PERFORMANCE_HINT='SPEED'" in text, text
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--device", "host", "--context",
                    "NOT_A_PAIR")
    assert rc == 1 and "--context 'NOT_A_PAIR': expected NAME=VALUE" in text, text
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--device", "host",
                    "--context", "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16")
    assert rc == 0 and "the host target ignores them" in text, text


def test_threads_hold_for_the_devices(capsys, monkeypatch):
    """`--threads N` is the devices' thread count too (their runtimes otherwise take every core while the output
    says N); a thread count given with --context wins; the host run sets no device properties."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from pdlite.api.from_path import config_for
    from pdlite.nnadapter.drivers.onnxruntime import OnnxRuntimeDriver
    from pdlite.nnadapter.options import parse_context_properties
    from pdlite.tools.common import set_device

    seen: list[int] = []
    real = OnnxRuntimeDriver.session_options

    def spy(self, props):
        so = real(self, props)
        seen.append(so.intra_op_num_threads)
        return so

    monkeypatch.setattr(OnnxRuntimeDriver, "session_options", spy)
    d = model_dir("ppocr_cls_v2")
    rc, text = _cli(capsys, "run", str(d), "--check", str(d / "case.npz"), "--device", "onnxruntime",
                    "--threads", "1")
    assert rc == 0 and "OK" in text and seen and set(seen) == {1}, (text, seen)
    seen.clear()
    rc, text = _cli(capsys, "bench", str(d), "--shape", "x=1,3,48,192", "--warmup", "1", "--repeats", "2",
                    "--device", "onnxruntime", "--threads", "1", "--context", "ONNXRUNTIME_INTRA_OP_NUM_THREADS=2")
    assert rc == 0 and set(seen) == {2}, (text, seen)
    cfg = config_for(str(d), None)
    cfg.set_threads(2)
    set_device(cfg, "intel_openvino" if _has("openvino") else "onnxruntime", {})
    props = parse_context_properties(cfg.nnadapter_context_properties())
    assert props["INTEL_OPENVINO_INFERENCE_NUM_THREADS"] == props["ONNXRUNTIME_INTRA_OP_NUM_THREADS"] == "2"
    host = config_for(str(d), None)
    set_device(host, "host", {})
    assert not host.nnadapter_context_properties()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_bench_with_profile_and_precision_profile(capsys):
    d = model_dir("ppocr_cls_v2")
    rc, text = _cli(capsys, "bench", str(d), "--shape", "x=1,3,48,192", "--warmup", "1", "--repeats", "3",
                    "--profile", "--precision-profile")
    assert rc == 0, text
    m = re.search(r"min ([\d.]+) ms  median ([\d.]+) ms  max ([\d.]+) ms", text)
    assert m and float(m.group(1)) <= float(m.group(2)) <= float(m.group(3))
    prof = text.split("per-op profile")[1].split("precision profile")[0]
    rows = [ln for ln in prof.splitlines() if re.match(r"^\w+\s+Host/", ln)]
    assert rows, prof
    assert any(r.startswith("conv2d ") for r in rows)
    shares = [float(r.split()[-1].rstrip("%")) for r in rows]
    assert shares == sorted(shares, reverse=True) and 95 <= sum(shares) <= 105
    pp = text.split("precision profile (one run):")[1]
    assert "softmax_0.tmp_0" in pp and "no NaN or Inf in any op output" in pp


def test_precision_profile_finds_first_nan(capsys):
    from pdlite.lite import CxxConfig, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.enable_precision_profiler()
    cfg.enable_profiler()
    pred = create_paddle_predictor(cfg)
    x = load_case("ppocr_cls_v2")[0]["x"].copy()
    x[0, 0, 0, 0] = np.nan
    pred.predict({"x": x})
    bad = pred.precision_profiler.first_bad()
    assert bad is not None and bad.op_type in ("conv2d", "fused_conv2d", "fc") and bad.nan > 0
    assert pred.profiler.rows()[0]["calls"] >= 1


def test_inspect(capsys):
    rc, text = _cli(capsys, "inspect", str(model_dir("ppocr_cls_v2")))
    assert rc == 0, text
    assert "x: shape [-1, 3, -1, -1] float32" in text
    assert "softmax_0.tmp_0" in text
    assert re.search(r"ops: 182 in 1 block", text)
    assert re.search(r"conv2d\s+\d+", text)
    assert "parameters:" in text and "MB" in text
    assert re.search(r"hard_swish\s+Y", text), "the support table marks host kernels"


def test_graph_dot(capsys, tmp_path):
    out = tmp_path / "g.dot"
    rc, text = _cli(capsys, "graph", str(model_dir("ppocr_cls_v2")), "-o", str(out))
    assert rc == 0, text
    dot = out.read_text()
    assert dot.startswith("digraph") and dot.count("shape=box") == 182 + 2, "182 ops plus feed and fetch"
    rc, text = _cli(capsys, "graph", str(model_dir("ppocr_cls_v2")), "-o", str(out), "--after-passes")
    assert rc == 0
    assert out.read_text().count("shape=box") < 182, "passes fused or removed ops"


def test_graph_svg_without_graphviz_is_an_error(capsys, tmp_path, monkeypatch):
    """Asked for SVG with no graphviz: exit 1 with a message naming the fix, and no file pretending to be done."""
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    out = tmp_path / "g.svg"
    rc, text = _cli(capsys, "graph", str(model_dir("ppocr_cls_v2")), "-o", str(out))
    assert rc == 1 and "graphviz" in text and "g.dot" in text, text
    assert not out.exists() and not (tmp_path / "g.dot").exists()


def test_graph_svg_with_graphviz(capsys, tmp_path):
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot program is absent (an optional system tool)")
    out = tmp_path / "g.svg"
    rc, text = _cli(capsys, "graph", str(model_dir("ppocr_cls_v2")), "-o", str(out))
    assert rc == 0, text
    assert "<svg" in out.read_text()


def test_version_and_help(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "pdlite" in capsys.readouterr().out
    assert main([]) == 2


@pytest.mark.parametrize("name", LEGACY_MODELS + PIR_MODELS)
def test_tools_on_every_shared_model(capsys, tmp_path, name):
    """inspect, graph and bench --profile --precision-profile on each model: content, not just exit codes."""
    d = str(model_dir(name))
    rc, text = _cli(capsys, "inspect", d)
    assert rc == 0, text
    n_ops = int(re.search(r"ops: (\d+) in \d+ block", text).group(1))
    assert n_ops > 10 and "parameters:" in text and "unsupported everywhere" not in text
    rc, text = _cli(capsys, "graph", d, "-o", str(tmp_path / "g.dot"))
    assert rc == 0 and (tmp_path / "g.dot").read_text().count("shape=box") >= n_ops
    ins, _ = load_case(name)
    shapes = [f"{k}={','.join(map(str, v.shape))}" for k, v in ins.items()]
    args = ["bench", d, "--warmup", "0", "--repeats", "1", "--profile", "--precision-profile"]
    for s in shapes:
        args += ["--shape", s]
    rc, text = _cli(capsys, *args)
    assert rc == 0, text
    prof = text.split("per-op profile")[1].split("precision profile")[0]
    assert re.search(r"\d+\.\d+%", prof)
    assert "no NaN or Inf in any op output" in text
