"""pdlite.apps.ocr and `pdlite ocr`: PP-OCR end to end against ground truth and Paddle Inference (rapidocr_paddle
running the same models with PaddleOCR's processing; references made by tools/make_ocr_reference.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdlite.apps.ocr import OCR, OCRLine, load_image
from pdlite.apps.ocr.det import DBPostProcess, det_normalize, det_resize, filter_tag_det_res, polygon_area_length
from pdlite.apps.ocr.pipeline import get_rotate_crop_image, sorted_boxes
from pdlite.apps.ocr.rec import CTCLabelDecode, load_dictionary
from pdlite.errors import ConfigError, InputError, PdliteError

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "examples" / "images"
FIXTURES = REPO / "tests" / "fixtures" / "ocr"
GROUND_TRUTH = json.loads((IMAGES / "ground_truth.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((FIXTURES / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ocr() -> OCR:
    return OCR()


@pytest.fixture(scope="module")
def results(ocr: OCR) -> dict[str, list[OCRLine]]:
    """pdlite's lines for every image of the set (host, 1 thread, PaddleOCR's defaults)."""
    return {name: ocr(IMAGES / name) for name in GROUND_TRUTH}


# -- end to end ---------------------------------------------------------------------------------------------------
def test_reads_the_ground_truth_of_every_image(results: dict[str, list[OCRLine]]) -> None:
    """Every rendered line, in reading order, character for character; spaces are not compared (PP-OCRv4's Chinese
    recogniser often omits the spaces between English words; the comparison with Paddle below includes them)."""
    for name, lines in GROUND_TRUTH.items():
        got = [ln.text.replace(" ", "") for ln in results[name]]
        want = [ln["text"].replace(" ", "") for ln in lines]
        assert got == want, name


def test_clean_lines_with_spaces(results: dict[str, list[OCRLine]]) -> None:
    """Lines the recogniser reads with their spaces too (a fixed list: a regression here is a real change)."""
    texts = {ln.text for lines in results.values() for ln in lines}
    for want in ["Hello, world!", "Text in images becomes text you can search", "No framework to install",
                 "Shipped with the package, offline", "The quick brown fox jumps over the lazy dog",
                 "Sphinx of black quartz, judge my vow.", "This one is upside down", "A page turned by seven degrees"]:
        assert want in texts


def test_matches_paddle_inference(results: dict[str, list[OCRLine]]) -> None:
    """Same text as Paddle Inference + PaddleOCR processing on >= 98% of lines (here: all), boxes within 2 px,
    scores within 1e-3 (float rounding of the networks)."""
    total = same = 0
    for name, ref in REFERENCE.items():
        got = results[name]
        assert len(got) == len(ref), name
        for g, r in zip(got, ref):
            total += 1
            same += g.text == r["text"]
            assert np.abs(np.array(g.box) - np.array(r["box"])).max() <= 2, (name, g, r)
            assert abs(g.score - r["score"]) <= 1e-3, (name, g, r)
    assert total == sum(len(v) for v in GROUND_TRUTH.values())
    assert same / total >= 0.98


def test_like_rapidocr_matches_rapidocr_defaults() -> None:
    """OCR.like_rapidocr() against rapidocr_paddle at RapidOCR's own defaults (Paddle Inference): same text on
    >= 98% of lines (here: all), boxes within 2 px."""
    ref_all = json.loads((FIXTURES / "reference_rapidocr_defaults.json").read_text(encoding="utf-8"))
    ocr = OCR.like_rapidocr()
    total = same = 0
    for name, ref in ref_all.items():
        got = ocr(IMAGES / name)
        assert len(got) == len(ref), name
        for g, r in zip(got, ref):
            total += 1
            same += g.text == r["text"]
            assert np.abs(np.array(g.box) - np.array(r["box"])).max() <= 2, (name, g, r)
    assert same / total >= 0.98


def test_rapidocr_preparation() -> None:
    from pdlite.apps.ocr import rapidocr_compat as rc

    wide = np.zeros((40, 400, 3), np.uint8)  # 10x wider than high: black letterbox above and below
    out, rec = rc.prepare(wide)
    assert out.shape == (100, 400, 3) and rec["top"] == 30
    boxes = rc.to_origin(np.array([[[10, 35], [50, 35], [50, 60], [10, 60]]]), rec, 40, 400)
    np.testing.assert_array_equal(boxes[0], [[10, 5], [50, 5], [50, 30], [10, 30]])
    big, rec = rc.prepare(np.zeros((1000, 2600, 3), np.uint8))  # longer side to 2000, multiples of 32
    assert big.shape == (768, 1984, 3) and rec["ratio_w"] == pytest.approx(2600 / 1984)  # 2000 / 32 = 62.5 -> 62
    assert rc.det_limit(960, "max", 1200) == 1500 and rc.det_limit(736, "min", 5000) == 736


def test_result_shape(results: dict[str, list[OCRLine]]) -> None:
    line = results["sample_en.png"][0]
    box, text, score = line
    assert len(box) == 4 and all(len(p) == 2 and all(isinstance(v, int) for v in p) for p in box)
    assert isinstance(text, str) and 0.5 <= score <= 1.0


def test_image_inputs_agree(ocr: OCR) -> None:
    path = IMAGES / "sample_zh.png"
    want = ocr(path)
    arr = load_image(path)
    assert ocr(str(path)) == want
    assert ocr(path.read_bytes()) == want
    assert ocr(arr) == want
    gray = arr[:, :, 1].copy()  # HxW is read as gray
    assert [ln.text for ln in ocr(gray)] == [ln.text for ln in want]


def test_no_text_gives_no_lines(ocr: OCR) -> None:
    assert ocr(np.full((64, 96, 3), 255, dtype=np.uint8)) == []
    assert ocr(np.full((8, 8, 3), 255, dtype=np.uint8)) == []  # smaller than one 32-pixel cell


def test_bad_inputs_name_the_problem(ocr: OCR, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        ocr(tmp_path / "missing.png")
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(InputError, match="could not be decoded"):
        ocr(tmp_path / "junk.png")
    with pytest.raises(InputError, match="uint8"):
        ocr(np.zeros((32, 32, 3), np.float32))
    with pytest.raises(InputError, match="HxWx3"):
        ocr(np.zeros((32, 32, 5), np.uint8))
    with pytest.raises(ConfigError, match="device"):
        OCR(device="gpu")
    with pytest.raises(ConfigError, match="det_limit_type"):
        OCR(det_limit_type="long")
    with pytest.raises(ConfigError, match="rec_char_dict_path"):
        OCR(rec_char_dict_path=tmp_path / "none.txt")
    with pytest.raises(ConfigError, match="inference.pdmodel"):
        OCR(det_model_dir=tmp_path)


def test_no_cls_reads_upright_lines_only() -> None:
    """Without the direction classifier an upside-down line is not read as its text (the classifier matters)."""
    lines = OCR(use_cls=False)(IMAGES / "upside_down.png")
    assert "This one is upside down" not in [ln.text for ln in lines]
    assert "This line is upright" in [ln.text for ln in lines]


@pytest.mark.parametrize("device,package", [("intel_openvino", "openvino"), ("onnxruntime", "onnxruntime")])
def test_devices_read_the_same(device: str, package: str, results: dict[str, list[OCRLine]]) -> None:
    pytest.importorskip(package)
    pytest.importorskip("onnx")
    got = OCR(device=device, precision="f32")(IMAGES / "rotated.png")  # (bf16: test_ocr_placement.py)
    assert [ln.text for ln in got] == [ln.text for ln in results["rotated.png"]]


# -- detection (DB) -----------------------------------------------------------------------------------------------
def test_db_postprocess_matches_paddleocr() -> None:
    """Boxes and scores of PaddleOCR's DBPostProcess (thresh 0.3, box_thresh 0.6, unclip 1.5) on a Paddle Inference
    probability map: identical."""
    case = np.load(FIXTURES / "db_case.npz")
    src_h, src_w = case["src_shape"]
    boxes, scores = DBPostProcess()(case["pred"].astype(np.float32), np.array([src_h, src_w, 1.0, 1.0]))
    assert boxes.dtype == np.int32 and boxes.shape == case["boxes"].shape
    np.testing.assert_array_equal(boxes, case["boxes"])
    np.testing.assert_array_equal(np.array(scores), case["scores"])


def test_db_postprocess_rules() -> None:
    pred = np.zeros((1, 1, 64, 128), np.float32)
    pred[0, 0, 20:30, 10:100] = 0.9  # a line
    pred[0, 0, 40:42, 10:12] = 0.9  # too small (side < 3)
    pred[0, 0, 50:60, 10:60] = 0.35  # above thresh, below box_thresh
    boxes, scores = DBPostProcess()(pred, np.array([64, 128, 1.0, 1.0]))
    assert len(boxes) == 1 and scores[0] == pytest.approx(0.9, abs=1e-6)
    x0, y0 = boxes[0].min(axis=0)
    x1, y1 = boxes[0].max(axis=0)
    assert x0 < 10 and x1 > 99 and y0 < 20 and y1 > 29  # unclipped outwards
    boxes2, _ = DBPostProcess(box_thresh=0.3)(pred, np.array([128, 256, 0.5, 0.5]))  # scaled to the source size
    assert len(boxes2) == 2 and boxes2[:, :, 0].max() > 190


def test_polygon_area_length() -> None:
    assert polygon_area_length(np.array([[0, 0], [4, 0], [4, 3], [0, 3]])) == (12.0, 14.0)
    area, length = polygon_area_length(np.array([[1, 0], [2, 1], [1, 2], [0, 1]], np.float32))
    assert area == pytest.approx(2.0, abs=1e-12) and length == pytest.approx(4 * 2 ** 0.5, abs=1e-12)


def test_det_resize() -> None:
    img = np.zeros((500, 1000, 3), np.uint8)
    out, shape = det_resize(img, 960, "max")
    assert out.shape == (480, 960, 3)
    np.testing.assert_allclose(shape, [500, 1000, 480 / 500, 960 / 1000])
    out, _ = det_resize(np.zeros((100, 150, 3), np.uint8), 960, "max")  # no upscaling; round to 32
    assert out.shape == (96, 160, 3)
    out, shape = det_resize(np.zeros((10, 20, 3), np.uint8))  # tiny: padded to 32
    assert out.shape == (32, 32, 3) and list(shape[:2]) == [10, 20]
    out, _ = det_resize(np.zeros((100, 150, 3), np.uint8), 736, "min")
    assert out.shape == (736, 1088, 3)  # 150 * 7.36 = 1104 = 34.5 * 32: Python's round() halves to even
    x = det_normalize(np.full((32, 32, 3), 255, np.uint8))
    assert x.shape == (1, 3, 32, 32) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :, 0, 0], [(1 - 0.485) / 0.229, (1 - 0.456) / 0.224, (1 - 0.406) / 0.225],
                               rtol=1e-6)


def test_det_normalize_bit_for_bit() -> None:
    """The page normalisations (looked up per byte value) give PaddleOCR's / PaddleX's float32 formulas' bits on
    every value, for contiguous and strided images; other dtypes take the formula itself."""
    from pdlite.apps.ocr.det import det_normalize_paddlex

    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (37, 96, 3), dtype=np.uint8)
    img[0, :256 // 3 + 1] = np.arange(256 // 3 * 3 + 3).reshape(-1, 3) % 256  # every byte value in each channel
    img[1, :, :] = 255 - img[0, :, :]
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    for im in (img, img[:, ::-1], img[:, :, ::-1]):
        ref = ((im.astype(np.float32) * np.float32(1 / 255) - mean) / std).transpose(2, 0, 1)[None]
        np.testing.assert_array_equal(det_normalize(im), ref)
    floats = img.astype(np.float32) + np.float32(0.25)
    ref = ((floats * np.float32(1 / 255) - mean) / std).transpose(2, 0, 1)[None]
    np.testing.assert_array_equal(det_normalize(floats), ref)
    # PaddleX: x *= scale / std; x += -mean / std per channel in place, a NumPy float64 factor in float64
    for scale, m, s in ((1 / 255, (0.5, 0.4, 0.3), (0.2, 0.3, 0.4)),
                        (np.float64(1 / 255), tuple(np.float64(v) for v in (0.485, 0.456, 0.406)),
                         tuple(np.float64(v) for v in (0.229, 0.224, 0.225)))):
        planes = []
        for c in range(3):
            x = img[:, :, c].astype(np.float32)
            x *= scale / s[c]
            x += -m[c] / s[c]
            planes.append(x)
        out = det_normalize_paddlex(img, scale, m, s)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, np.stack(planes)[None])


def test_box_order_and_crop() -> None:
    boxes = np.array([[[200, 12], [300, 12], [300, 30], [200, 30]], [[10, 15], [100, 15], [100, 35], [10, 35]],
                      [[10, 60], [100, 60], [100, 80], [10, 80]]], np.float32)
    order = [int(b[0][0]) * 1000 + int(b[0][1]) for b in sorted_boxes(boxes)]
    assert order == [10015, 200012, 10060]  # same row (dy < 10) left to right, then the next row
    # PaddleOCR 2.6+: smallest x+y first, largest x+y third, then the other two by y-x; clipped into the image
    rotated = filter_tag_det_res(np.array([[[52, 40], [10, 12], [20, 0], [60, 30]]], np.int32), (100, 55))
    np.testing.assert_array_equal(rotated[0], [[20, 0], [54, 30], [52, 40], [10, 12]])
    img = np.zeros((100, 100, 3), np.uint8)
    tall = get_rotate_crop_image(img, np.float32([[10, 10], [20, 10], [20, 60], [10, 60]]))
    assert tall.shape[:2] == (10, 50)  # taller than 1.5x its width: turned


# -- recognition (CTC) --------------------------------------------------------------------------------------------
def test_ctc_decode_matches_paddleocr() -> None:
    """Texts and scores of PaddleOCR's CTCLabelDecode on Paddle Inference rec outputs (argmax and max kept)."""
    case = np.load(FIXTURES / "ctc_case.npz")
    idx, prob = case["idx"], case["prob"]
    preds = np.zeros((*idx.shape, int(case["classes"])), np.float32)
    np.put_along_axis(preds, idx[..., None].astype(np.int64), prob[..., None], axis=2)
    from pdlite.apps.ocr.engine import REC_CHAR_DICT_PATH

    got = CTCLabelDecode(load_dictionary(REC_CHAR_DICT_PATH))(preds)
    assert [t for t, _ in got] == list(case["texts"])
    np.testing.assert_allclose([s for _, s in got], case["scores"], rtol=0, atol=1e-12)


def test_ctc_decode_rules() -> None:
    chars = ["blank", "a", "b", " "]
    dec = CTCLabelDecode(chars)
    idx = np.array([[1, 1, 0, 1, 2, 2, 3, 0], [0, 0, 0, 0, 0, 0, 0, 0]])
    prob = np.array([[0.9, 0.7, 0.99, 0.8, 0.6, 0.5, 0.4, 0.99], [0.9] * 8])
    (t0, s0), (t1, s1) = dec.decode(idx, prob, is_remove_duplicate=True)
    assert t0 == "aab " and s0 == pytest.approx(np.mean([0.9, 0.8, 0.6, 0.4]))  # first of each run, blanks out
    assert (t1, s1) == ("", 0.0)
    with pytest.raises(ConfigError, match="dictionary"):
        dec(np.zeros((1, 5, 7), np.float32))


def test_dictionary_has_blank_and_space() -> None:
    from pdlite.apps.ocr.engine import REC_CHAR_DICT_PATH

    chars = load_dictionary(REC_CHAR_DICT_PATH)
    assert len(chars) == 6625 and chars[0] == "blank" and chars[-1] == " "


# -- packaging and dependencies -----------------------------------------------------------------------------------
def test_package_data_ships_the_models() -> None:
    """Every model file matches pyproject's package-data globs, so a non-editable install carries them."""
    import fnmatch

    text = (REPO / "pyproject.toml").read_text()  # (tomllib is 3.11+; these two lines are JSON-compatible TOML)
    section = text.split("[tool.setuptools.package-data]", 1)[1]
    globs = json.loads(section.split('"pdlite.apps.ocr" = ', 1)[1].splitlines()[0])
    extra = json.loads(text.split("\nocr = ", 1)[1].splitlines()[0])
    pkg = REPO / "pdlite" / "apps" / "ocr"
    files = [p.relative_to(pkg).as_posix() for p in (pkg / "models").rglob("*") if p.is_file()]
    assert len(files) == 7
    for f in files:
        assert any(fnmatch.fnmatch(f, g) for g in globs), f
    assert {"opencv-python-headless>=4.5", "pyclipper>=1.2"} <= set(extra)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from pdlite.apps.ocr import _deps

    real = importlib.import_module

    def fake(name: str, *a, **k):
        if name == "pyclipper":
            raise ImportError("No module named 'pyclipper'")
        return real(name, *a, **k)

    monkeypatch.setattr(_deps.importlib, "import_module", fake)
    with pytest.raises(PdliteError, match=r"pip install pdlite\[ocr\]"):
        DBPostProcess.unclip(np.float32([[0, 0], [10, 0], [10, 5], [0, 5]]), 1.5)


# -- CLI ----------------------------------------------------------------------------------------------------------
def test_cli_prints_the_text(capsys: pytest.CaptureFixture) -> None:
    from pdlite.tools.cli import main

    assert main(["ocr", str(IMAGES / "sample_zh.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [r["text"] for r in REFERENCE["sample_zh.png"]]


def test_cli_folder_json_draw(tmp_path: Path, capsys: pytest.CaptureFixture,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from pdlite.tools.cli import main

    folder = tmp_path / "imgs"
    folder.mkdir()
    for n in ("receipt.png", "upside_down.png"):
        shutil.copy(IMAGES / n, folder / n)
    (folder / "notes.txt").write_text("not an image")
    out_json, out_draw = tmp_path / "out.jsonl", tmp_path / "draw"
    import pdlite.tools.common as common

    # threads by default: the CPUs this process may use (2 here), at most MAX_DEFAULT_THREADS
    monkeypatch.setattr(common.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert main(["ocr", str(folder), "--json", str(out_json), "--draw", str(out_draw), "--no-cls"]) == 0
    cap = capsys.readouterr()
    assert f"== {folder / 'receipt.png'}" in cap.out and "RECEIPT" in cap.out
    assert "2 image(s)" in cap.err and "det" in cap.err and "rec" in cap.err and "2 thread(s)" in cap.err
    monkeypatch.setattr(common.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert common.default_threads() == common.MAX_DEFAULT_THREADS == 8
    rows = [json.loads(line) for line in out_json.read_text(encoding="utf-8").splitlines()]
    assert [Path(r["image"]).name for r in rows] == ["receipt.png", "upside_down.png"]
    assert [ln["text"] for ln in rows[0]["lines"]] == [r["text"] for r in REFERENCE["receipt.png"]]
    import cv2

    pic = cv2.imread(str(out_draw / "receipt_ocr.png"))
    src = cv2.imread(str(IMAGES / "receipt.png"))
    assert pic.shape == (src.shape[0], 2 * src.shape[1], 3)
    right = pic[:, src.shape[1]:]
    assert (right < 128).any() and (right > 250).mean() > 0.5  # text drawn on white


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pdlite.tools.cli import main

    assert main(["ocr", str(tmp_path / "none.png")]) == 1
    assert f"{str(tmp_path / 'none.png')!r} not found" in capsys.readouterr().err
    assert main(["ocr", str(tmp_path)]) == 1
    assert "has no images" in capsys.readouterr().err


def test_context_properties_reach_each_network(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`context` (API) / `--context` (CLI): the NNAdapter properties go to every network's config next to the
    thread counts (a user's value wins); a value the device refuses, or an item that is not NAME=VALUE, is an
    error naming it; the host notes that it ignores them and reads the text as without."""
    from pdlite.apps.ocr.engine import Model
    from pdlite.nnadapter.options import parse_context_properties
    from pdlite.tools.cli import main

    hint = "INTEL_OPENVINO_INFERENCE_PRECISION_HINT"
    ocr = OCR(threads=2, context={hint: "bf16", "ONNXRUNTIME_INTRA_OP_NUM_THREADS": "1"})
    for model in ocr.models().values():
        props = parse_context_properties(model.config.nnadapter_context_properties())
        assert props == {hint: "bf16", "ONNXRUNTIME_INTRA_OP_NUM_THREADS": "1",
                         "INTEL_OPENVINO_INFERENCE_NUM_THREADS": "2"}
    with pytest.raises(ConfigError, match="expected a NAME and a VALUE"):
        Model(ocr._model_dirs["cls"], context={"A;B": "1"})
    assert main(["ocr", str(IMAGES / "sample_zh.png"), "--device", "host", "--context", f"{hint}=bf16"]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines() == [r["text"] for r in REFERENCE["sample_zh.png"]]
    assert "host target ignores them" in cap.err
    assert main(["ocr", str(IMAGES / "sample_zh.png"), "--context", "FOO"]) == 1
    assert "--context 'FOO': expected NAME=VALUE" in capsys.readouterr().err
    pytest.importorskip("openvino")
    pytest.importorskip("onnx")
    assert main(["ocr", str(IMAGES / "sample_zh.png"), "--device", "intel_openvino", "--context", f"{hint}=fp8"]) == 1
    assert f"{hint}='fp8'" in capsys.readouterr().err
