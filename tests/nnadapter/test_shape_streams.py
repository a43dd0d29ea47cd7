"""Streams of changing input shapes on every device: one compiled model for all of them where the device runs
dynamic shapes, one per shape (bounded LRU) where it does not, and always the host's outputs.

Models whose programs leave dims open: PP-OCRv4 rec (width; shipped with the OCR app), PP-OCRv4 det (height,
width; tests/fixtures/models) and an ERNIE-like classifier (batch and sequence length, position ids from
arange over the run-time length; tests/fixtures/dynamic, tools/make_dynamic_fixtures.py). Every shape's outputs
are compared with pdlite's host kernels: max|device - host| <= 1e-4 * max|host| (the devices fuse and reorder
fp32 arithmetic; seen here: <= 1e-5). The static-only device is ONNX Runtime declared `dynamic_shapes = False`.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

from pdlite import CxxConfig, create_paddle_predictor
from pdlite.nnadapter.drivers.onnxruntime import OnnxRuntimeDriver
from pdlite.nnadapter.registry import DRIVERS, register_driver
from tests.conftest import model_dir
from tests.nnadapter._models import DEVICES, NNAdapterFallbackWarning, subgraph_kernels

REL = 1e-4
REPO = Path(__file__).resolve().parents[2]
REC = REPO / "pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer"
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
STATIC = "static_onnxruntime"


class StaticOnnxRuntime(OnnxRuntimeDriver):
    """ONNX Runtime declared to run static shapes only (a device of that kind)."""

    dynamic_shapes = False
    auto_candidate = False


class PromotingOnnxRuntime(OnnxRuntimeDriver):
    """ONNX Runtime declared to run static models faster (as OpenVINO does): hot signatures get their own."""

    promote_hot_shapes = True
    auto_candidate = False


@pytest.fixture
def promoting_device():
    pytest.importorskip("onnxruntime", reason="needs pip install pdlite[onnx]")
    register_driver("promoting_onnxruntime", override=True)(PromotingOnnxRuntime)
    yield "promoting_onnxruntime"
    DRIVERS.remove("promoting_onnxruntime")


@pytest.fixture
def static_device():
    pytest.importorskip("onnxruntime", reason="needs pip install pdlite[onnx]")
    register_driver(STATIC, override=True)(StaticOnnxRuntime)
    yield STATIC
    DRIVERS.remove(STATIC)


def _need(device: str) -> None:
    pytest.importorskip("onnx", reason="needs pip install pdlite[onnx]")
    pytest.importorskip(DEVICES.get(device, "onnxruntime"), reason=f"{device} needs its pip extra (pdlite[onnx] / "
                                                                       "pdlite[openvino])")


def _predictor(model: Path, device: str, **options: object):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model))
    if device != "host":
        cfg.set_nnadapter_device_names([device])
        cfg.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_NUM_THREADS=2;"
                                             "ONNXRUNTIME_INTRA_OP_NUM_THREADS=2")
    for k, v in options.items():
        getattr(cfg, f"set_{k}")(v)
    return create_paddle_predictor(cfg)


def _rec_stream() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(37)
    return [{"x": rng.uniform(-1, 1, (2, 3, 48, w)).astype(np.float32)} for w in (64, 100, 160, 232)]


def _det_stream() -> list[dict[str, np.ndarray]]:
    """Crops of the det fixture's real page (random pixels give a probability map of ~1e-7 everywhere)."""
    z = np.load(model_dir("ppocr_det_v4") / "case.npz")
    x = z[next(k for k in z.files if k.startswith("in:"))]
    return [{"x": np.ascontiguousarray(np.concatenate([x[:, :, t:t + h, s:s + w]] * b))}
            for b, t, s, h, w in ((1, 0, 0, 96, 160), (1, 64, 32, 160, 96), (2, 128, 96, 128, 128))]


def _ernie_stream() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(39)
    return [{"input_ids": rng.integers(0, 400, (b, n)).astype(np.int64),
             "token_type_ids": (rng.uniform(size=(b, n)) > 0.5).astype(np.int64)}
            for b, n in ((1, 7), (2, 19), (1, 40), (3, 5))]


STREAMS = {"rec": (lambda: REC, _rec_stream), "det": (lambda: model_dir("ppocr_det_v4"), _det_stream),
           "ernie": (lambda: ERNIE, _ernie_stream)}


def _check_stream(stream: str, device: str, **options: object):
    """Runs the stream (then its first shape again) on `device` beside the host; returns the device predictor."""
    where, make = STREAMS[stream]
    model, feeds = where(), make()
    host = _predictor(model, "host")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # the device must really run every shape
        pred = _predictor(model, device, **options)
        for f in [*feeds, feeds[0]]:
            want = host.predict(f)
            got = pred.predict(f)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                err = float(np.max(np.abs(g - w)))
                assert err <= REL * float(np.max(np.abs(w))), f"{stream} {device} {f[next(iter(f))].shape}: {err}"
    return pred, len(feeds)


@pytest.mark.parametrize("stream", list(STREAMS))
@pytest.mark.parametrize("device", list(DEVICES))
def test_stream_compiles_once(stream: str, device: str) -> None:
    _need(device)
    pred, _ = _check_stream(stream, device)
    kernels = subgraph_kernels(pred)
    assert kernels and all(k.builds == 1 and k.shape_mode == "dynamic" for k in kernels), \
        [(k.builds, k.shape_mode) for k in kernels]
    if stream != "det":  # det keeps its post-processing-free program whole too, but rec and ERNIE must
        assert [i.op.type for i in pred.runtime_program.instructions] == ["subgraph"]


@pytest.mark.parametrize("stream", ["det", "ernie"])
def test_static_only_device_builds_per_shape(stream: str, static_device: str) -> None:
    pred, n = _check_stream(stream, static_device)
    (k,) = subgraph_kernels(pred)
    assert k.builds == n and k.shape_mode.startswith("per-shape: device 'static_onnxruntime' runs static shapes")


def test_static_only_lru_size_is_an_option(static_device: str) -> None:
    pred, n = _check_stream("ernie", static_device, nnadapter_shape_cache_size=2)
    (k,) = subgraph_kernels(pred)
    # 4 shapes, then the first again: it was dropped (2 kept), so it is built again
    assert k.builds == n + 1


def test_ernie_matches_paddle_at_every_length() -> None:
    _need("onnxruntime")
    pred = _predictor(ERNIE, "onnxruntime")
    for case in ("case.npz", "case_b2_l19.npz", "case_b3_l40.npz"):
        z = np.load(ERNIE / case)
        ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
        outs = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
        for name, got in zip(pred.get_output_names(), pred.predict(ins)):
            want = outs[name]
            assert float(np.max(np.abs(got - want))) <= REL * float(np.max(np.abs(want))), (case, name)
    assert [k.builds for k in subgraph_kernels(pred)] == [1]


def test_subgraph_that_cannot_convert_for_all_shapes_goes_per_shape(monkeypatch, caplog) -> None:
    """A converter that needs a dim the shapes do not fix refuses the dynamic conversion: that subgraph gets one
    model per shape, says so in the debug log and in shape_mode, and still gives the host's outputs."""
    _need("onnxruntime")
    from pdlite.nnadapter import dynamic
    from pdlite.nnadapter.registry import ConversionError

    def refuse(self, op, info):
        raise ConversionError("a converter needs a concrete dim")

    monkeypatch.setattr(dynamic.Probes, "infer", refuse)
    with caplog.at_level(logging.DEBUG, logger="pdlite.nnadapter"):
        pred, n = _check_stream("ernie", "onnxruntime")
    (k,) = subgraph_kernels(pred)
    assert k.builds == n and k.shape_mode.startswith("per-shape: no model for all shapes")
    assert any("one model per input shape" in r.getMessage() and "concrete dim" in r.getMessage()
               for r in caplog.records)


def test_a_changed_fixed_dim_widens_the_model(monkeypatch) -> None:
    """A dim the first model fixed (here: every dim, as if the program declared them) that changes gets a wider
    model (that dim symbolic), which then serves the shapes of both."""
    _need("onnxruntime")
    from pdlite.nnadapter.dynamic import dynamic_dims

    calls = []

    def first_static(declared, fed):
        calls.append(fed)
        return (False,) * len(fed) if len(calls) <= 2 else dynamic_dims(declared, fed)

    monkeypatch.setattr("pdlite.nnadapter.dynamic.dynamic_dims", first_static)
    pred, n = _check_stream("ernie", "onnxruntime")
    (k,) = subgraph_kernels(pred)
    assert k.builds == 2 and k.shape_mode == "dynamic"


def test_model_cache_from_the_environment(monkeypatch, tmp_path) -> None:
    """PDLITE_NNADAPTER_MODEL_CACHE_DIR (what the CLI sets to the user cache) holds the dynamic model; a second
    predictor loads it (keyed on the model's content: the same file whatever the model's path)."""
    _need("onnxruntime")
    import os
    import shutil

    from pdlite.nnadapter.model_cache import ENV, default_model_cache, user_cache_dir

    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    pred, _ = _check_stream("ernie", "onnxruntime")
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].endswith(".onnxruntime")  # one model for all shapes, no temporary left
    copy = tmp_path / "copy"
    shutil.copytree(ERNIE, copy)
    again = _predictor(copy, "onnxruntime")
    again.predict(_ernie_stream()[1])
    (k,) = subgraph_kernels(again)
    assert (k.builds, k.cache_hits) == (1, 1)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == files
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with default_model_cache():
        assert os.environ[ENV] == user_cache_dir() == str(tmp_path / "xdg" / "pdlite" / "nnadapter")
    assert ENV not in os.environ


def test_hot_signature_gets_a_static_model(promoting_device: str) -> None:
    """On a device whose static models run faster, a signature run 3 times in a row gets a static model of its
    own (a fixed-shape workload), with the host's outputs; shapes that change keep the one model for all shapes.
    With one per-shape model kept, an older hot signature goes back to the model for all shapes (no rebuild)."""
    feeds = _ernie_stream()
    host = _predictor(ERNIE, "host")
    pred = _predictor(ERNIE, promoting_device, nnadapter_shape_cache_size=1)

    def run(f):
        for g, w in zip(pred.predict(f), host.predict(f)):
            assert float(np.max(np.abs(g - w))) <= REL * float(np.max(np.abs(w)))

    for f in feeds:  # each new: the model for all shapes
        run(f)
    (k,) = subgraph_kernels(pred)
    assert k.builds == 1
    for _ in range(3):  # feeds[1] three times in a row: promoted on the third
        run(feeds[1])
    assert k.builds == 2 and k._entries[((feeds[1]["input_ids"].shape, np.dtype(np.int64)),) * 2] is not k._dynamic
    for _ in range(3):  # feeds[2] promoted: feeds[1]'s static model dropped (1 kept), back on the dynamic one
        run(feeds[2])
    assert k.builds == 3
    run(feeds[1])
    assert k.builds == 3 and k.shape_mode == "dynamic"


@pytest.mark.parametrize("device", list(DEVICES))
def test_new_shapes_run_direct_on_the_model_for_all_shapes(device: str) -> None:
    """A one-subgraph predictor's direct runner serves a new signature that the model for all shapes fits and whose
    feeds pass the predictor's checks, with the host's outputs and no build; another dtype or rank is left to the
    general path (which raises its error). The first run of the model is checked without host kernels (its output
    shapes at the fed shapes are inferred during conversion, arange over the run-time length included)."""
    from pdlite.errors import InputError
    from pdlite.nnadapter.subgraph_kernel import direct_program

    _need(device)
    host = _predictor(ERNIE, "host")
    pred = _predictor(ERNIE, device)
    run = direct_program(pred.runtime_program, pred.get_input_names(), pred.get_output_names())
    rng = np.random.default_rng(5)

    def feeds(b: int, n: int, dtype=np.int64) -> dict[str, np.ndarray]:
        return {"input_ids": rng.integers(0, 400, (b, n)).astype(dtype), "token_type_ids": np.zeros((b, n), dtype)}

    pred.predict(feeds(1, 7))
    (k,) = subgraph_kernels(pred)
    assert k._host is None, "the first run's check ran the host kernels"
    for b, n in ((1, 12), (1, 33), (2, 20)):
        f = feeds(b, n)
        got = run(f)
        assert got is not None, (b, n)
        for g, w in zip(got, host.predict(f)):
            assert g.shape == w.shape and float(np.max(np.abs(g - w))) <= REL * float(np.max(np.abs(w)))
    bad_dtype = feeds(1, 21, np.int32)
    bad_rank = {n: v[None] for n, v in feeds(1, 21).items()}
    assert run(bad_dtype) is None and run(bad_rank) is None
    with pytest.raises(InputError, match="input 'input_ids': expected"):
        pred.predict(bad_dtype)
    assert k.builds == 1 and k._host is None
