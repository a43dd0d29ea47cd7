"""`pdlite export-onnx`: every non-PIR model exported as one ONNX file that ONNX Runtime runs with Paddle's
reference outputs (max|got - ref| <= 1e-4 * max|ref|), at batch 1 and, from the same file, batch 4.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdlite.tools.cli import main as cli_main
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

REL = 1e-4


def _session(path: str):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("model", LEGACY_MODELS)
def test_export_round_trip(model: str, tmp_path, capsys) -> None:
    out = tmp_path / f"{model}.onnx"
    assert cli_main(["export-onnx", str(model_dir(model)), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    sess = _session(str(out))
    for case in ("case.npz", "case_b4.npz"):
        if case == "case_b4.npz" and not (model_dir(model) / case).exists():
            continue
        ins, refs = load_case(model, case)
        got = sess.run(None, ins)
        for o, g in zip(sess.get_outputs(), got):
            assert_close_rel(g, refs[o.name], REL, f"{model} {case} {o.name}")


def test_export_lists_unconvertible_ops(tmp_path, monkeypatch, capsys) -> None:
    from pdlite.nnadapter.registry import CONVERTERS
    from pdlite.registries import load_registries

    load_registries()
    monkeypatch.setattr(CONVERTERS, "_items", {k: v for k, v in CONVERTERS.items()
                                               if k not in ("hard_swish", "hard_sigmoid")})
    rc = cli_main(["export-onnx", str(model_dir("mobilenet_v3_small")), "-o", str(tmp_path / "m.onnx")])
    err = capsys.readouterr().err
    assert rc == 1 and "hard_sigmoid x" in err and "hard_swish x" in err and "no converter" in err
    assert not (tmp_path / "m.onnx").exists()


def test_export_fixed_shape(tmp_path) -> None:
    out = tmp_path / "cls.onnx"
    assert cli_main(["export-onnx", str(model_dir("ppocr_cls_v2")), "-o", str(out), "--shape", "x=1,3,48,192"]) == 0
    dims = [d.dim_value for d in onnx.load(str(out)).graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 48, 192]
    ins, refs = load_case("ppocr_cls_v2")
    (got,) = _session(str(out)).run(None, ins)
    assert_close_rel(got, next(iter(refs.values())), REL, "ppocr_cls_v2 fixed shape")


def test_export_is_byte_identical_across_processes(tmp_path) -> None:
    """The same model gives the same ONNX bytes in every process, whatever Python's string hashing (the device
    model cache is keyed on those bytes): a batch norm's mean and variance, written in place, once became
    initializers in set order (the int8 PP-OCR det fixture, whose batch norms stay ops after its quantized convs)."""
    root = Path(__file__).resolve().parents[2]
    model = root / "tests" / "fixtures" / "quant" / "ptq_det_qdq"
    blobs = []
    for seed in ("1", "2", "3", "4"):
        out = tmp_path / f"m{seed}.onnx"
        proc = subprocess.run([sys.executable, "-m", "pdlite", "export-onnx", str(model), "-o", str(out)], cwd=root,
                              env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        blobs.append(out.read_bytes())
    assert all(b == blobs[0] for b in blobs[1:]), "the exported bytes depend on the process's hash seed"
