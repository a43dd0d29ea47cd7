"""`OCR(device="auto")`'s placement (pdlite/apps/ocr/placement.py): each network measured once on the first image's
inputs on every candidate device and moved to the cheapest (the host unless beaten by 5%), cached per model content;
OpenVINO's precision in the OCR app (`precision`, bf16 where the CPU computes bfloat16 natively)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.apps.ocr import OCR, pipeline, placement
from pdlite.apps.ocr.engine import PRECISION_HINT, precision_context
from pdlite.apps.ocr.placement import disagreement, pick, wider
from pdlite.errors import ConfigError
from pdlite.nnadapter.drivers import intel_openvino

IMAGES = Path(__file__).resolve().parents[2] / "examples" / "images"
NAMES = ("receipt.png", "upside_down.png")


def test_pick_takes_the_cheapest_past_the_host_margin() -> None:
    assert pick({"host": 100.0, "a": 90.0, "b": 95.0}) == "a"
    assert pick({"host": 100.0, "a": 96.0}) == "host"  # within 5% of the host: not worth moving
    assert pick({"host": 100.0, "a": 96.0}, margin=1.0) == "a"
    assert pick({"host": 80.0, "a": 90.0}) == "host"
    assert pick({}) == "host"


def test_disagreement_checks_the_mask_and_the_classes() -> None:
    rng = np.random.default_rng(0)
    det = rng.random((1, 1, 64, 64)).astype(np.float32)
    assert disagreement([det + 1e-3], [det]) is None
    flipped = det.copy()
    flipped[0, 0, :8] = 1.0 - flipped[0, 0, :8]  # an eighth of the mask changed
    assert "text mask" in disagreement([flipped], [det])
    rec = rng.random((2, 10, 7)).astype(np.float32)
    assert disagreement([rec * 0.999], [rec]) is None
    assert "same class" in disagreement([rec[:, :, ::-1]], [rec])
    assert "non-finite" in disagreement([np.full_like(rec, np.nan)], [rec])
    assert "shape" in disagreement([rec[:1]], [rec])
    assert wider(rec).shape == (2, 10, 7 + placement.WIDER)


class _Script:
    """Scripted devices: "fast" runs the host's network (same outputs) at the given ms a call, "wrong"
    gives other outputs; the timer counts the calls it priced."""

    MS = {"host": {"det": 10.0, "cls": 10.0, "rec": 10.0}, "fast": {"det": 4.0, "cls": 9.8, "rec": 4.0},
          "wrong": {"det": 1.0, "cls": 1.0, "rec": 1.0}}

    def __init__(self) -> None:
        self.timed = 0

    @staticmethod
    def build(model, device: str):
        if device == "wrong":
            return lambda x: -model(x, keep=False)
        moved = model.on("host")
        moved._device = device
        return moved

    def timer(self, stage: str, device: str, fn):
        self.timed += 1
        return fn(), self.MS[device][stage]


def _scripted_ocr(monkeypatch: pytest.MonkeyPatch, script: _Script) -> OCR:
    monkeypatch.setattr(pipeline, "ocr_candidates", lambda: ["wrong", "fast"])
    monkeypatch.setattr(placement.Placement, "timer", staticmethod(script.timer))
    monkeypatch.setattr(placement.Placement, "build", staticmethod(script.build))
    return OCR(device="auto", threads=1)


def test_auto_measures_on_the_first_image_and_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scripted costs: det and rec go to the device 2.5x faster, cls stays on the host (the device within 5%), the
    device with other outputs is refused; the lines are the host's; a second pipeline takes the cached plan without
    measuring, and the measurement happens once, after the first image."""
    host = OCR(threads=1)
    script = _Script()
    ocr = _scripted_ocr(monkeypatch, script)
    assert ocr.placement.plan is None and ocr.devices() == {"det": "host", "cls": "host", "rec": "host"}
    first = ocr(IMAGES / NAMES[0])
    assert ocr.placement.plan == {"det": "fast", "cls": "host", "rec": "fast"}
    assert ocr.devices() == {"det": "fast", "cls": "host", "rec": "fast"}
    assert set(ocr.placement.refused["det"]) == {"wrong"} and "text mask" in ocr.placement.refused["det"]["wrong"]
    assert ocr.placement.costs["det"]["fast"] < ocr.placement.costs["det"]["host"]
    timed = script.timed
    assert timed > 0
    for name in NAMES[1:]:
        assert ocr(IMAGES / name) == host(IMAGES / name)
    assert first == host(IMAGES / NAMES[0])
    assert script.timed == timed  # measured once
    again = _Script()
    ocr2 = _scripted_ocr(monkeypatch, again)
    assert ocr2.placement.cached and ocr2.placement.plan == ocr.placement.plan
    assert ocr2(IMAGES / NAMES[0]) == first and again.timed == 0
    assert ocr2.devices() == ocr.devices() and "[cached]" in ocr2.det.placement()
    clone = ocr2.clone()
    assert clone(IMAGES / NAMES[1]) == host(IMAGES / NAMES[1]) and clone.devices() == ocr.devices()


def test_one_image_on_the_command_line_is_not_measured(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    from pdlite.tools.cli import main

    monkeypatch.setattr(pipeline, "ocr_candidates", lambda: ["fast"])
    monkeypatch.setattr(placement.Placement, "measure", lambda self, models: pytest.fail("measured one image"))
    assert main(["ocr", str(IMAGES / NAMES[0]), "--device", "auto", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "one image: the host, not measured" in err


def test_precision_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intel_openvino, "_NATIVE_BF16", [True])
    assert precision_context({}, "auto", "intel_openvino") == {PRECISION_HINT: "bf16"}
    assert precision_context({}, "auto", "auto") == {PRECISION_HINT: "bf16"}
    assert precision_context({}, "auto", "host") == {}  # the host computes in f32
    assert precision_context({}, "f32", "auto") == {}
    assert precision_context({PRECISION_HINT: "f32"}, "auto", "auto") == {PRECISION_HINT: "f32"}  # a given one wins
    monkeypatch.setattr(intel_openvino, "_NATIVE_BF16", [False])
    assert precision_context({}, "auto", "intel_openvino") == {}
    assert precision_context({}, "bf16", "intel_openvino") == {PRECISION_HINT: "bf16"}
    with pytest.raises(ConfigError, match="precision 'int4'"):
        precision_context({}, "int4", "auto")


def test_bf16_reaches_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OCR app's precision reaches OpenVINO's compiled model (INFERENCE_PRECISION_HINT), and the lines read in
    bf16 have the host's text up to spaces."""
    pytest.importorskip("openvino", reason="needs pip install pdlite[openvino]")
    pytest.importorskip("onnx", reason="needs pip install pdlite[openvino]")
    if not intel_openvino.native_bf16():
        pytest.skip("this CPU computes no bfloat16 natively (avx512_bf16 / amx_bf16): OpenVINO would run f32")
    compiled = []
    real = intel_openvino.OpenVINODriver.build

    def build(self, model, props, cache_path=None):
        out = real(self, model, props, cache_path)
        compiled.append(out.compiled)
        return out
    monkeypatch.setattr(intel_openvino.OpenVINODriver, "build", build)
    ocr = OCR(device="intel_openvino", threads=1, use_angle_cls=False)
    lines = ocr(IMAGES / "sample_en.png")
    assert compiled and all(str(c.get_property("INFERENCE_PRECISION_HINT")) in ("bf16", "<Type: 'bfloat16'>")
                            for c in compiled)
    assert ocr.rec_model.placement() == "intel_openvino bf16"
    host = OCR(threads=1, use_angle_cls=False)(IMAGES / "sample_en.png")
    assert [ln.text.replace(" ", "") for ln in lines] == [ln.text.replace(" ", "") for ln in host]
    f32 = OCR(device="intel_openvino", threads=1, use_angle_cls=False, precision="f32")
    assert f32.rec_model.placement() == "intel_openvino f32"
