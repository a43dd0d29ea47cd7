"""Bad input to a predictor: each case gets a named pdlite error (or, where documented, works), on
both predictors: CxxConfig (full analysis) and MobileConfig over the `.nb` it saves.

Models (tests/fixtures/conformance, references from Paddle Inference in case.npz): fc_linear
(input x: float32 [-1, 5, 8], four outputs), multi_io (inputs image, vec, scale) and
conv_variants (x: float32 [-1, 4, 9, 9]). docs/input_checks.md lists the behaviour tested here.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.api import CxxConfig, MobileConfig, create_paddle_predictor
from pdlite.errors import InputError, PdliteError

CONFORMANCE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
KINDS = ["cxx", "nb"]


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    """make(kind, model) -> a new predictor of that kind for that conformance model."""
    nbs: dict[str, str] = {}

    def _make(kind: str, name: str):
        cfg = CxxConfig()
        cfg.set_model_dir(str(CONFORMANCE / name))
        if kind == "cxx":
            return create_paddle_predictor(cfg)
        if name not in nbs:
            nbs[name] = create_paddle_predictor(cfg).save_optimized_model(str(tmp_path_factory.mktemp(name) / "m"))
        mcfg = MobileConfig()
        mcfg.set_model_from_file(nbs[name])
        return create_paddle_predictor(mcfg)

    return _make


def _case(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    z = np.load(CONFORMANCE / name / "case.npz")
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")}, {k[4:]: z[k] for k in z.files if k.startswith("out:")})


def _check_outputs(pred, refs: dict[str, np.ndarray]) -> None:
    """The predictor's outputs equal Paddle's references within fp32 tolerance (1e-4 * max|ref|)."""
    for name in pred.get_output_names():
        got, ref = pred.get_output_by_name(name).numpy(), refs[name]
        assert got.shape == ref.shape, name
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * max(float(np.abs(ref).max()), 1e-6), err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_dtype(make, kind):
    pred = make(kind, "fc_linear")
    x = _case("fc_linear")[0]["x"]
    pred.get_input(0).from_numpy(x.astype(np.float64))
    with pytest.raises(InputError, match=r"input 'x': expected dtype float32, got float64"):
        pred.run()


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_rank(make, kind):
    pred = make(kind, "fc_linear")
    pred.get_input(0).from_numpy(np.zeros((5, 8), np.float32))
    with pytest.raises(InputError, match=r"input 'x': expected rank 3 \(shape \[-1, 5, 8\]"):
        pred.run()


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_static_dim(make, kind):
    pred = make(kind, "fc_linear")
    pred.get_input(0).from_numpy(np.zeros((3, 6, 8), np.float32))
    with pytest.raises(InputError, match=r"input 'x': dim 1 must be 5 \(model shape \[-1, 5, 8\]\), got shape \[3, 6, 8\]"):
        pred.run()


@pytest.mark.parametrize("kind", KINDS)
def test_missing_feed(make, kind):
    pred = make(kind, "multi_io")
    feeds, _ = _case("multi_io")
    pred.get_input_by_name("image").from_numpy(feeds["image"])
    pred.get_input_by_name("vec").from_numpy(feeds["vec"])
    with pytest.raises(InputError, match=r"input 'scale' was not set"):
        pred.run()
    with pytest.raises(InputError, match=r"expected 3 input\(s\) \['image', 'vec', 'scale'\], got 2"):
        pred.predict([feeds["image"], feeds["vec"]])


@pytest.mark.parametrize("kind", KINDS)
def test_extra_unknown_feed(make, kind):
    pred = make(kind, "fc_linear")
    x = _case("fc_linear")[0]["x"]
    with pytest.raises(InputError, match=r"unknown input\(s\) \['y'\]; inputs are \['x'\]"):
        pred.predict({"x": x, "y": x})
    with pytest.raises(InputError, match=r"no input named 'y'; inputs are \['x'\]"):
        pred.get_input_by_name("y")
    with pytest.raises(InputError, match=r"expected 1 input\(s\) \['x'\], got 2"):
        pred.predict([x, x])


@pytest.mark.parametrize("kind", KINDS)
def test_nan_passes_through(make, kind):
    """NaNs are not checked: they propagate like in Paddle (rows without NaN keep their values)."""
    pred = make(kind, "fc_linear")
    feeds, refs = _case("fc_linear")
    x = feeds["x"].copy()
    x[0, 0, 0] = np.nan
    outs = pred.predict({"x": x})
    for name, got in zip(pred.get_output_names(), outs):
        assert np.isnan(got[0]).any(), name  # sample 0 is NaN somewhere
        assert not np.isnan(got[1:]).any(), name
        ref = refs[name][1:]
        np.testing.assert_allclose(got[1:], ref, rtol=0, atol=1e-4 * float(np.abs(ref).max()), err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_zero_size_batch_error(make, kind):
    """fc cannot run an empty batch: an InputError naming the input and its shape, then the op."""
    pred = make(kind, "fc_linear")
    pred.get_input(0).from_numpy(np.zeros((0, 5, 8), np.float32))
    with pytest.raises(InputError, match=r"zero-size input 'x' \[0, 5, 8\]: this model cannot run on an empty "
                                         r"batch .*op fc"):
        pred.run()


@pytest.mark.parametrize("kind", KINDS)
def test_zero_size_batch_runs_where_kernels_can(make, kind):
    """Convolutions run an empty batch, as in Paddle: each output has batch 0 and the model's other dims."""
    pred = make(kind, "conv_variants")
    feeds, refs = _case("conv_variants")
    outs = pred.predict({"x": np.zeros((0,) + feeds["x"].shape[1:], np.float32)})
    for name, got in zip(pred.get_output_names(), outs):
        assert got.shape == (0,) + refs[name].shape[1:], name


@pytest.mark.parametrize("kind", KINDS)
def test_non_contiguous_arrays(make, kind):
    """Fortran-ordered and strided views give bit-identical outputs to the C-contiguous array."""
    pred = make(kind, "fc_linear")
    feeds, refs = _case("fc_linear")
    x = feeds["x"]
    want = pred.predict({"x": x})
    wide = np.zeros(x.shape[:2] + (2 * x.shape[2],), np.float32)
    wide[:, :, ::2] = x
    for arr in (np.asfortranarray(x), wide[:, :, ::2], np.ascontiguousarray(x[::-1])[::-1]):
        assert not arr.flags.c_contiguous
        got = pred.predict({"x": arr})
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    _check_outputs(pred, refs)


@pytest.mark.parametrize("kind", KINDS)
def test_object_array_or_none(make, kind):
    pred = make(kind, "fc_linear")
    for bad in (None, np.array([object()]), np.array([{"a": 1}, None])):
        with pytest.raises(InputError, match=r"tensor 'x': cannot take an object array"):
            pred.predict({"x": bad})


@pytest.mark.parametrize("kind", KINDS)
def test_get_input_out_of_range(make, kind):
    pred = make(kind, "fc_linear")
    with pytest.raises(InputError, match=r"get_input\(99\): the model has 1 input\(s\): \['x'\]"):
        pred.get_input(99)
    with pytest.raises(InputError, match=r"get_input\(-1\)"):
        pred.get_input(-1)
    with pytest.raises(InputError, match=r"get_input\(x\)"):
        pred.get_input("x")
    with pytest.raises(InputError, match=r"get_output\(4\): the model has 4 output\(s\)"):
        pred.get_output(4)


@pytest.mark.parametrize("kind", KINDS)
def test_output_before_run(make, kind):
    pred = make(kind, "fc_linear")
    out = pred.get_output(0)
    with pytest.raises(InputError, match=r"tensor '.+' holds no data yet"):
        out.numpy()


@pytest.mark.parametrize("kind", KINDS)
def test_usable_after_failed_runs(make, kind):
    """Runs refused before the kernels (dtype, static dim) and failing inside them (empty batch): the
    outputs of the last good run stay readable, and the next correct run gives Paddle's outputs."""
    pred = make(kind, "fc_linear")
    feeds, refs = _case("fc_linear")
    x = feeds["x"]
    pred.predict({"x": x})
    for bad in (x.astype(np.float64), np.zeros((0, 5, 8), np.float32), x[:, :4]):
        pred.get_input(0).from_numpy(bad)
        with pytest.raises(PdliteError):
            pred.run()
        _check_outputs(pred, refs)
        pred.get_input(0).from_numpy(x)
        pred.run()
        _check_outputs(pred, refs)
