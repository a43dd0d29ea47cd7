"""`pdlite export-onnx`: every non-PIR model exported as one ONNX file that ONNX Runtime runs with Paddle's
reference outputs (max|got - ref| <= 1e-4 * max|ref|), at batch 1 and, from the same file, batch 4.
"""
from __future__ import annotations

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
