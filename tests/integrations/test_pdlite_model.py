"""PdliteModel (the Ray Data callable class) called directly, without Ray: rows, shapes, names, errors."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from pdlite.api import CxxConfig, create_paddle_predictor
from pdlite.errors import ConfigError, InputError, PdliteError
from pdlite.integrations import predictor_from_path
from pdlite.integrations.ray import PdliteModel, require_ray
from pdlite.tools.cli import main
from tests.conftest import assert_close_rel, load_case, model_dir

OUT = "softmax_0.tmp_0"


def _reference(model: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    """One-item runs of a plain predictor (1 thread), batch axis added and removed here."""
    cfg = CxxConfig()
    cfg.set_model_dir(model)
    cfg.set_threads(1)
    pred = create_paddle_predictor(cfg)
    return [pred.predict([x[None]])[0][0] for x in xs]


def _samples(widths: list[int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 48, w)).astype(np.float32) for w in widths]


def _objects(xs: list[np.ndarray]) -> np.ndarray:
    col = np.empty(len(xs), dtype=object)
    for i, x in enumerate(xs):
        col[i] = x
    return col


def test_variable_shapes_item_by_item_are_bit_exact():
    cls = str(model_dir("ppocr_cls_v2"))
    xs = _samples([160, 192, 160, 96, 192])
    m = PdliteModel(cls)
    out = m({"x": _objects(xs), "id": np.arange(5)})  # as Ray gives a variable-shaped column
    assert sorted(out) == ["id", OUT]
    assert out["id"].tolist() == [0, 1, 2, 3, 4]
    assert isinstance(out[OUT], np.ndarray) and out[OUT].shape == (5, 2)
    for got, ref in zip(out[OUT], _reference(cls, xs)):
        assert np.array_equal(got, ref)


def test_stack_groups_rows_by_shape():
    cls = str(model_dir("ppocr_cls_v2"))
    xs = _samples([160, 192, 160, 192, 160], seed=1)
    m = PdliteModel(cls, stack=True)
    calls: list[tuple[int, ...]] = []
    predict = m.predictor.predict
    m.predictor.predict = lambda feeds: calls.append(feeds["x"].shape) or predict(feeds)
    out = m({"x": list(xs)})
    assert sorted(calls) == [(2, 3, 48, 192), (3, 3, 48, 160)]  # two model calls, one per shape
    # each group equals one stacked call of a plain predictor exactly, and one-item runs to fp32 rounding
    plain = predictor_from_path(cls)
    stacked = plain.predict([np.stack([xs[0], xs[2], xs[4]])])[0]
    assert np.array_equal(out[OUT][[0, 2, 4]], stacked)
    for got, ref in zip(out[OUT], _reference(cls, xs)):
        assert_close_rel(got, ref, 1e-5, "stacked vs one-item")


def test_case_npz_reference_and_input_output_mapping():
    cls = str(model_dir("ppocr_cls_v2"))
    ins, outs = load_case("ppocr_cls_v2")
    m = PdliteModel(cls, inputs={"x": "pixels"}, outputs={OUT: "probs"}, keep_columns=["name"])
    out = m({"pixels": ins["x"], "name": np.array(["case"]), "other": np.zeros(1)})
    assert sorted(out) == ["name", "probs"]
    assert_close_rel(out["probs"], outs[OUT], 1e-4, "vs Paddle Inference")


def test_default_data_column_for_single_input_models():
    cls = str(model_dir("ppocr_cls_v2"))
    xs = _samples([192, 192])
    out = PdliteModel(cls, outputs=[OUT])({"data": np.stack(xs)})
    assert all(np.array_equal(g, r) for g, r in zip(out[OUT], _reference(cls, xs)))
    assert "data" not in out  # input columns are not kept


def test_nb_program_file_and_pir_models(tmp_path):
    cls = str(model_dir("ppocr_cls_v2"))
    cfg = CxxConfig()
    cfg.set_model_dir(cls)
    nb = create_paddle_predictor(cfg).save_optimized_model(str(tmp_path / "cls"))
    xs = _samples([192, 128], seed=2)
    out = PdliteModel(nb)({"x": list(xs)})
    for got, ref in zip(out[OUT], _reference(cls, xs)):
        assert_close_rel(got, ref, 1e-5, ".nb vs source model")
    files = PdliteModel(f"{cls}/inference.pdmodel", f"{cls}/inference.pdiparams")({"x": list(xs)})
    assert all(np.array_equal(g, r) for g, r in zip(files[OUT], _reference(cls, xs)))

    ins, outs = load_case("mobilenet_v3_small_pir")
    (name,) = ins
    pir = PdliteModel(str(model_dir("mobilenet_v3_small_pir")), add_batch_axis=False)
    got = pir({name: [ins[name]]})  # one row: the whole feed, batch axis included
    (oname,) = outs
    assert_close_rel(got[oname][0], outs[oname], 1e-4, "PIR model vs Paddle Inference")


def test_complete_feeds_without_batch_axis():
    cls = str(model_dir("ppocr_cls_v2"))
    xs = _samples([160, 192], seed=3)
    out = PdliteModel(cls, add_batch_axis=False)({"x": [x[None] for x in xs]})
    assert out[OUT].shape == (2, 1, 2)  # whole outputs, one per row
    for got, ref in zip(out[OUT], _reference(cls, xs)):
        assert np.array_equal(got[0], ref)


def test_errors_name_the_row_and_what_was_expected(tmp_path):
    cls = str(model_dir("ppocr_cls_v2"))
    m = PdliteModel(cls, key_column="path")
    bad = np.zeros((4, 48, 192), np.float32)  # 4 channels, the model takes 3
    with pytest.raises(InputError, match=r"b\.npy: .*'x'"):
        m({"x": [np.zeros((3, 48, 192), np.float32), bad], "path": np.array(["a.npy", "b.npy"])})
    with pytest.raises(InputError, match=r"no column 'x' .*inputs=\{'x'"):
        m({"pixels": [bad]})
    with pytest.raises(ConfigError, match="no input 'y'"):
        PdliteModel(cls, inputs={"y": "col"})
    with pytest.raises(ConfigError, match="no output 'nope'"):
        PdliteModel(cls, outputs=["nope"])
    with pytest.raises(ConfigError, match="stack=True needs add_batch_axis"):
        PdliteModel(cls, stack=True, add_batch_axis=False)
    with pytest.raises(ConfigError, match="not found"):
        PdliteModel(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="a params file goes with a program file"):
        PdliteModel(cls, params=str(tmp_path / "p.pdiparams"))
    with pytest.raises(InputError, match=f"output column '{OUT}'"):
        PdliteModel(cls)({"x": [np.zeros((3, 48, 192), np.float32)], OUT: np.zeros(1)})


def test_missing_ray_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if Ray were not installed
    with pytest.raises(PdliteError, match=r"pip install pdlite\[ray\]"):
        require_ray()
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "a.npy", np.zeros((1, 3, 48, 192), np.float32))
    cls = str(model_dir("ppocr_cls_v2"))
    assert main(["batch", cls, str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--ray", "local"]) == 1
    assert "pip install pdlite[ray]" in capsys.readouterr().err
