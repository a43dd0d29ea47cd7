"""`pdlite ocr` with PaddleOCR 3 / PaddleX model folders, against PaddleOCR 3's pipeline.

Fixtures (tests/fixtures/ocr/ppocrv5/, made by tools/gen_ppocrv5_fixtures.py from PaddleOCR's own modeling code):
PP-OCRv5-architecture mobile det and rec with random weights and a stand-in text-line orientation classifier,
each exported as PaddleOCR exports them in both formats (legacy inference.pdmodel, PIR inference.json) with a real
inference.yml; Paddle Inference's outputs on a det input and a rec batch, PaddleX's post-processing of those
outputs, and PaddleOCR 3's whole pipeline (transcribed in the generator, run on Paddle Inference) on four example
images.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pdlite.apps.ocr import OCR, load_image
from pdlite.apps.ocr.det import DBPostProcess, det_resize
from pdlite.apps.ocr.engine import Model
from pdlite.apps.ocr.orientation import DocOrientation, rotate_image
from pdlite.apps.ocr.paddlex_config import ModelFolder, read_model_folder
from pdlite.apps.ocr.pipeline import OCRWarning
from pdlite.apps.ocr.rec import CTCLabelDecode, PaddleXTextRecognizer
from pdlite.errors import ConfigError, InputError

try:
    import yaml  # noqa: F401 -- PaddleOCR 3's inference.yml (part of the ocr extra)
except ImportError:
    yaml = None
pytestmark = pytest.mark.skipif(yaml is None, reason="needs pip install pdlite[ocr] (PyYAML reads inference.yml)")

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "examples" / "images"
FIX = REPO / "tests" / "fixtures" / "ocr" / "ppocrv5"
EXPECTED = json.loads((FIX / "expected.json").read_text(encoding="utf-8"))
FORMATS = ("legacy", "pir")


def folders(fmt: str) -> dict[str, Path]:
    return {"det_model_dir": FIX / "det" / fmt, "rec_model_dir": FIX / "rec" / fmt,
            "textline_orientation_model_dir": FIX / "textline" / fmt}


@pytest.fixture(scope="module", params=FORMATS)
def fmt_ocr(request: pytest.FixtureRequest) -> tuple[str, OCR]:
    return request.param, OCR(**folders(request.param))


def _same_lines(got: list, want: list[dict], what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.text == w["text"], (what, g, w)
        assert np.abs(np.array(g.box) - np.array(w["box"])).max() <= 2, (what, g, w)
        assert abs(g.score - w["score"]) <= 1e-4, (what, g, w)


# -- the networks and the post-processing, one at a time ---------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_networks_match_paddle_inference(fmt: str) -> None:
    """pdlite's det and rec outputs on the fixtures' inputs: Paddle Inference's within 1e-4 of the output range."""
    cases = np.load(FIX / "cases.npz")
    for kind in ("det", "rec"):
        got = Model(FIX / kind / fmt)(cases[f"{kind}.in"])
        ref = cases[f"{kind}.{fmt}.out"]
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("fmt", FORMATS)
def test_postprocessing_matches_paddlex(fmt: str) -> None:
    """PaddleX's DBPostProcess and CTCLabelDecode of Paddle Inference's outputs: the same boxes, texts, scores."""
    cases = np.load(FIX / "cases.npz")
    h, w = cases["det.in"].shape[2:]
    boxes, _ = DBPostProcess(paddlex=True)(cases[f"det.{fmt}.out"], np.array([h, w, 1.0, 1.0]))
    assert boxes.dtype == np.int16 and len(boxes) > 5
    np.testing.assert_array_equal(boxes, cases[f"det.{fmt}.boxes"])
    folder = read_model_folder(FIX / "rec" / fmt, "rec")
    chars = ["blank", *folder.config["PostProcess"]["character_dict"], " "]
    got = CTCLabelDecode(chars, paddlex=True)(cases[f"rec.{fmt}.out"])
    assert [t for t, _ in got] == list(cases[f"rec.{fmt}.texts"])
    np.testing.assert_allclose([s for _, s in got], cases[f"rec.{fmt}.scores"], rtol=0, atol=1e-7)


# -- end to end ---------------------------------------------------------------------------------------------------
def test_pipeline_matches_paddleocr3(fmt_ocr: tuple[str, OCR]) -> None:
    """Every line of PaddleOCR 3's pipeline on the same folders (text, box within 2 px, score within 1e-4), in its
    order; the crops the orientation model turned are among them."""
    fmt, ocr = fmt_ocr
    assert ocr.flavour == "paddleocr3" and ocr.drop_score == 0.0
    assert (ocr.det_limit_side_len, ocr.det_limit_type, ocr.det_max_side_limit) == (64, "min", 4000)
    turned = 0
    for key, want in EXPECTED.items():
        f, _, name = key.partition("/")
        if f == fmt:
            _same_lines(ocr(IMAGES / name), want, key)
            turned += sum(ln["angle"] for ln in want)
    assert turned > 0


def test_pipeline_with_doc_orientation_matches_paddleocr3() -> None:
    """With a document orientation model first (PIR folders; a stand-in 4-class classifier): the page angle PaddleOCR
    3 picks, and every line of the turned page."""
    ocr = OCR(**folders("pir"), doc_orientation_model_dir=FIX / "doc" / "pir")
    assert list(ocr.models()) == ["doc", "det", "cls", "rec"]
    angles = EXPECTED["doc_angles"]
    assert len(set(angles.values())) > 1
    for name, angle in angles.items():
        lines = ocr(IMAGES / name)
        assert ocr.last_doc_angle == angle, name
        _same_lines(lines, EXPECTED[f"pir+doc/{name}"], f"doc/{name}")


def test_rec_batch_of_one_matches_paddleocr3() -> None:
    """PaddleOCR 3 with text_recognition_batch_size=1 (each crop alone, no padding): the same lines."""
    ocr = OCR(**folders("pir"), rec_batch_num=1)
    for key, want in EXPECTED.items():
        if key.startswith("pir+b1/"):
            _same_lines(ocr(IMAGES / key.split("/")[1]), want, key)


V4 = REPO / "tests" / "fixtures" / "ocr" / "paddleocr3_v4"


@pytest.fixture(scope="module")
def v4_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shipped PP-OCRv4 det and rec as PaddleOCR 3 folders: their files plus an inference.yml each (the rec's
    names ppocr_keys_v1's characters)."""
    root = tmp_path_factory.mktemp("v4")
    models = REPO / "pdlite" / "apps" / "ocr" / "models"
    dirs = {}
    for kind, src in (("det", "ch_PP-OCRv4_det_infer"), ("rec", "ch_PP-OCRv4_rec_infer")):
        shutil.copytree(models / src, root / kind)
        shutil.copy(V4 / f"{kind}.inference.yml", root / kind / "inference.yml")
        dirs[f"{kind}_model_dir"] = root / kind
    return dirs


def test_trained_v4_as_paddleocr3_folders_match_paddlex(v4_dirs: dict[str, Path]) -> None:
    """Trained weights, real text: the shipped PP-OCRv4 det and rec as PaddleOCR 3 folders against PaddleX 3.3.13's
    own OCR pipeline with PaddleOCR 3's defaults (tools/check_ppocrv5_fixtures_paddlex.py --v4-reference): every
    line's text, box within 2 px (identical today), score within 1e-3."""
    ocr = OCR(**v4_dirs)
    assert ocr.flavour == "paddleocr3" and ocr.text_classifier is None
    ref = json.loads((V4 / "reference.json").read_text(encoding="utf-8"))
    assert sum(len(v) for v in ref.values()) >= 40
    for name, want in ref.items():
        got = ocr(IMAGES / name)
        assert [g.text for g in got] == [w["text"] for w in want], name
        for g, w in zip(got, want):
            assert np.abs(np.array(g.box) - np.array(w["box"])).max() <= 2, (name, g, w)
            assert abs(g.score - w["score"]) <= 1e-3, (name, g, w)


@pytest.mark.parametrize("device,package", [("intel_openvino", "openvino"), ("onnxruntime", "onnxruntime")])
def test_devices_read_paddleocr3_folders_the_same(device: str, package: str, v4_dirs: dict[str, Path]) -> None:
    pytest.importorskip(package)
    pytest.importorskip("onnx")
    ref = json.loads((V4 / "reference.json").read_text(encoding="utf-8"))
    got = OCR(**v4_dirs, device=device)(IMAGES / "rotated.png")
    assert [ln.text for ln in got] == [w["text"] for w in ref["rotated.png"]]


def test_cli_with_paddleocr3_folders(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pdlite.tools.cli import main

    out = tmp_path / "out.jsonl"
    f = folders("pir")
    assert main(["ocr", str(IMAGES / "receipt.png"), "--det-model", str(f["det_model_dir"]), "--rec-model",
                 str(f["rec_model_dir"]), "--textline-orientation-model", str(f["textline_orientation_model_dir"]),
                 "--json", str(out), "--quiet", "--device", "host"]) == 0
    row = json.loads(out.read_text(encoding="utf-8"))
    want = EXPECTED["pir/receipt.png"]
    assert [ln["text"] for ln in row["lines"]] == [w["text"] for w in want]
    assert [ln["box"] for ln in row["lines"]] == [w["box"] for w in want]


def test_rec_batching_is_paddleocr3s() -> None:
    """Crops sorted by aspect ratio (stable), batches of 6, each resized to height 48 on its own (width >= 320,
    int(48 * ratio) caps the ceil, 3200 at most) and the batch zero-padded to its widest."""
    seen: list[np.ndarray] = []

    def run(x: np.ndarray) -> np.ndarray:
        seen.append(x)
        out = np.zeros((x.shape[0], 4, 3), np.float32)
        out[:, :, 1] = 1.0
        return out

    rec = PaddleXTextRecognizer(run, ["blank", "a", " "], (3, 48, 320), 6)
    widths = [100, 1000, 481, 30, 2000, 4000, 700, 300]
    crops = [np.full((48, w, 3), 200, np.uint8) for w in widths]
    crops[2] = np.full((10, 100, 3), 200, np.uint8)  # ratio 10: 48 * 10 = 480
    res = rec(crops)
    assert res == [("a", 1.0)] * len(crops)
    assert [b.shape[0] for b in seen] == [6, 2]
    assert seen[0].shape[3] == 1000 and seen[1].shape[3] == 3200  # padded to the widest of each batch
    one = rec.resize_norm(crops[2])
    assert one.shape == (3, 48, 480) and (one[:, :, 479] != 0).all()
    assert rec.resize_norm(np.full((48, 8000, 3), 9, np.uint8)).shape == (3, 48, 3200)


def test_det_resize_paddleocr3_defaults() -> None:
    """Short side at least 64 (never down), the long side then at most 4000, multiples of 32."""
    out, shape = det_resize(np.zeros((40, 300, 3), np.uint8), 64, "min", 4000)
    assert out.shape == (64, 480, 3) and shape[2] == 64 / 40
    out, _ = det_resize(np.zeros((600, 900, 3), np.uint8), 64, "min", 4000)
    assert out.shape == (608, 896, 3)
    out, _ = det_resize(np.zeros((100, 9000, 3), np.uint8), 64, "min", 4000)
    assert out.shape == (32, 4000, 3)  # 100x9000 -> 44x4000 -> multiples of 32


# -- orientation ---------------------------------------------------------------------------------------------------
def test_doc_orientation_turns_the_page() -> None:
    """The document classifier's top class picks the angle; the page is turned counter-clockwise by it."""
    cfg = {"Global": {"model_name": "PP-LCNet_x1_0_doc_ori"},
           "PreProcess": {"transform_ops": [{"ResizeImage": {"resize_short": 256}}, {"CropImage": {"size": 224}},
                                            {"NormalizeImage": {}}, {"ToCHWImage": None}]},
           "PostProcess": {"Topk": {"topk": 1, "label_list": ["0", "90", "180", "270"]}}}
    seen = []

    def run(x: np.ndarray) -> np.ndarray:
        seen.append(x.shape)
        return np.array([[0.1, 0.7, 0.1, 0.1]], np.float32)

    img = np.zeros((100, 300, 3), np.uint8)
    img[10:20, 5:50] = 255
    out, angle = DocOrientation(run, ModelFolder(Path("doc"), cfg))(img)
    assert seen == [(1, 3, 224, 224)] and angle == 90
    assert out.shape[:2] == (300, 100)
    assert out[250:296, 10:20].mean() > 200  # the top-left mark is now bottom-left
    np.testing.assert_array_equal(rotate_image(img, 0), img)
    turned = rotate_image(img, 180)
    assert turned.shape == img.shape and turned[81:90, 251:295].min() > 200


# -- folders, languages ------------------------------------------------------------------------------------------
def test_model_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        OCR(det_model_dir=tmp_path / "nope")
    with pytest.raises(ConfigError, match="text recognition model .* pass it with --rec-model"):
        OCR(det_model_dir=FIX / "rec" / "pir")
    bad = tmp_path / "det"
    shutil.copytree(FIX / "det" / "pir", bad)
    yml = (bad / "inference.yml").read_text(encoding="utf-8")
    (bad / "inference.yml").write_text(yml.replace("name: DBPostProcess", "name: DBPostProcess\n  box_type: poly"),
                                       encoding="utf-8")
    with pytest.raises(ConfigError, match="box_type 'poly'"):
        OCR(det_model_dir=bad)
    with pytest.raises(ConfigError, match="rec_char_dict_path"):
        OCR(rec_model_dir=FIX / "rec" / "pir", rec_char_dict_path=tmp_path / "keys.txt")
    with pytest.raises(ConfigError, match="doc_orientation_model_dir"):
        OCR(use_doc_orientation_classify=True)


def test_yml_needs_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PyYAML a PaddleOCR 3 folder is an error naming the package; 2.x folders do not need it."""
    import importlib

    from pdlite.apps.ocr import _deps
    from pdlite.errors import MissingDependencyError

    real = importlib.import_module

    def fake(name: str, *a, **k):
        if name == "yaml":
            raise ImportError("No module named 'yaml'")
        return real(name, *a, **k)

    monkeypatch.setattr(_deps.importlib, "import_module", fake)
    with pytest.raises(MissingDependencyError, match="'pyyaml'"):
        read_model_folder(FIX / "det" / "pir", "det")
    assert not read_model_folder(REPO / "pdlite" / "apps" / "ocr" / "models" / "ch_PP-OCRv4_det_infer", "det").paddlex


def test_yml_channel_order_is_followed(tmp_path: Path) -> None:
    """A det yml reading RGB (DecodeImage img_mode RGB) sees the image's channels swapped: its boxes on an image are
    the BGR model's boxes on the channel-swapped image."""
    rgb = tmp_path / "det"
    shutil.copytree(FIX / "det" / "pir", rgb)
    yml = (rgb / "inference.yml").read_text(encoding="utf-8")
    assert "img_mode: BGR" in yml
    (rgb / "inference.yml").write_text(yml.replace("img_mode: BGR", "img_mode: RGB"), encoding="utf-8")
    img = load_image(IMAGES / "receipt.png")
    got = OCR(det_model_dir=rgb, use_angle_cls=False).detect(img)
    want = OCR(det_model_dir=FIX / "det" / "pir", use_angle_cls=False).detect(np.ascontiguousarray(img[:, :, ::-1]))
    assert len(got) > 0
    np.testing.assert_array_equal(got, want)


def test_lang_picks_installed_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDLITE_OCR_MODELS", str(tmp_path))
    monkeypatch.setenv("PADDLE_PDX_CACHE_HOME", str(tmp_path / "pdx"))
    with pytest.raises(ConfigError, match=r"en_PP-OCRv5_mobile_rec, which is not installed.*Available here: ch"):
        OCR(lang="en")
    with pytest.raises(ConfigError, match="not a language"):
        OCR(lang="klingon")
    shutil.copytree(FIX / "rec" / "pir", tmp_path / "en_PP-OCRv5_mobile_rec")
    shutil.copytree(FIX / "det" / "pir", tmp_path / "PP-OCRv5_mobile_det")
    ocr = OCR(lang="en", use_angle_cls=False)
    assert ocr.flavour == "paddleocr3"
    assert ocr.folders["rec"].path == tmp_path / "en_PP-OCRv5_mobile_rec"
    assert ocr.folders["det"].path == tmp_path / "PP-OCRv5_mobile_det"
    assert ocr.text_classifier is None  # PaddleOCR 3 folders: no direction stage unless a model is given
    assert all(isinstance(ln.text, str) for ln in ocr(IMAGES / "rotated.png"))
    assert OCR(lang="ch").flavour == "paddleocr2"


# -- no surprises --------------------------------------------------------------------------------------------------
def test_alpha_is_composited_on_white() -> None:
    """Black text on a transparent background stays black on white; a fully transparent image warns."""
    rgba = np.zeros((20, 30, 4), np.uint8)
    rgba[5:10, 5:20, 3] = 255  # opaque black stroke, the rest transparent (black with alpha 0)
    rgba[12:15, 5:20, 3] = 128
    img = load_image(rgba)
    assert img.shape == (20, 30, 3) and img[0, 0].tolist() == [255, 255, 255]
    assert img[6, 6].tolist() == [0, 0, 0] and img[13, 6].tolist() == [127, 127, 127]
    with pytest.warns(OCRWarning, match="fully transparent"):
        load_image(np.zeros((8, 8, 4), np.uint8))
    with pytest.raises(InputError, match="HxWx4"):
        load_image(np.zeros((8, 8, 2), np.uint8))
    import cv2

    ok, png = cv2.imencode(".png", rgba)  # an encoded PNG with alpha: the same
    assert ok
    np.testing.assert_array_equal(load_image(png.tobytes()), img)
    ok, jpg = cv2.imencode(".jpg", np.full((8, 8, 3), 90, np.uint8))  # no alpha: as cv2.imread reads it
    np.testing.assert_array_equal(load_image(jpg.tobytes()), cv2.imdecode(jpg, cv2.IMREAD_COLOR))


def test_cli_folder_reports_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A folder with a corrupt, a fully transparent and a good image: all are tried, the JSON has one row per
    file (the corrupt one with its error), the report names the failure, the exit code says one failed."""
    import cv2

    from pdlite.tools.cli import main

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a_corrupt.png").write_bytes(b"\x89PNG not really")
    cv2.imwrite(str(folder / "b_clear.png"), np.zeros((40, 40, 4), np.uint8))
    shutil.copy(IMAGES / "sample_zh.png", folder / "c_good.png")
    out = tmp_path / "out.jsonl"
    f = folders("pir")
    assert main(["ocr", str(folder), "--json", str(out), "--det-model", str(f["det_model_dir"]),
                 "--rec-model", str(f["rec_model_dir"]), "--quiet", "--device", "host"]) == 1
    err = capsys.readouterr().err
    assert "1 of 3 image(s) failed" in err and "a_corrupt.png" in err and "could not be decoded" in err
    assert "b_clear.png" in err and "fully transparent" in err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [Path(r["image"]).name for r in rows] == ["a_corrupt.png", "b_clear.png", "c_good.png"]
    assert "error" in rows[0] and "lines" in rows[1] and len(rows[2]["lines"]) > 0


def test_cli_draw_warns_once_about_missing_glyphs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pdlite.apps.ocr.draw import find_font, missing_glyphs
    from pdlite.tools.cli import main

    font = find_font()
    if font is None or not missing_glyphs(font, ["中文"]):
        pytest.skip("the system font found has CJK glyphs; the warning needs a Latin-only font (DejaVu)")
    for n in ("1.png", "2.png"):
        shutil.copy(IMAGES / "sample_zh.png", tmp_path / n)
    assert main(["ocr", str(tmp_path / "1.png"), str(tmp_path / "2.png"), "--draw", str(tmp_path / "d"),
                 "--quiet", "--device", "host"]) == 0
    err = capsys.readouterr().err
    assert err.count("has no glyphs for") == 1 and "--font" in err
    assert (tmp_path / "d" / "1_ocr.png").is_file() and (tmp_path / "d" / "2_ocr.png").is_file()
