"""OCR.clone() and `pdlite ocr --workers N`: clones of one pipeline read images at the same time on threads and
give the serial run's lines bit for bit on the host (the native kernels' sums do not depend on the thread, nor on
the thread count), in input order, with one bad image reported and the others read."""
from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pdlite.apps.ocr import OCR, OCRLine

pytest.importorskip("cv2", reason="the OCR app needs pip install pdlite[ocr]")

IMAGES = Path(__file__).resolve().parents[2] / "examples" / "images"
NAMES = ("receipt.png", "upside_down.png", "sample_en.png")  # upside_down: the direction classifier turns lines


@pytest.fixture(scope="module")
def ocr() -> OCR:
    return OCR(device="host", threads=1)


@pytest.fixture(scope="module")
def serial(ocr: OCR) -> dict[str, list[OCRLine]]:
    return {n: ocr(IMAGES / n) for n in NAMES}


def test_clone_shares_the_networks_not_the_state(ocr: OCR) -> None:
    clone = ocr.clone()
    for stage, model in ocr.models().items():
        twin = clone.models()[stage]
        assert twin is not model and twin.predictor is not model.predictor, stage
        # the same prepared program (no second load or analysis), its own input and output handles
        assert twin.predictor._runtime is model.predictor._runtime, stage
        assert twin._input is not model._input and twin._output is not model._output, stage
    assert clone.text_recognizer.run is clone.rec_model and ocr.text_recognizer.run is ocr.rec_model
    assert clone.text_classifier.run is clone.cls_model and ocr.text_classifier.run is ocr.cls_model
    before = dict(ocr.timings)
    clone(IMAGES / "sample_en.png")
    assert ocr.timings == before and clone.timings["det"] > 0 and clone.timings["rec"] > 0


def test_clones_on_threads_read_as_the_serial_run(ocr: OCR, serial: dict[str, list[OCRLine]]) -> None:
    pipelines = [ocr, ocr.clone()]
    names = [*NAMES, *NAMES]  # each image read twice, by whichever clone is free, two at a time

    def job(i: int) -> list[OCRLine]:
        return pipelines[i % 2](IMAGES / names[i])

    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(job, range(len(names))))
    for name, lines in zip(names, got):
        assert lines == serial[name], name  # boxes, texts and float scores bit for bit


def test_cli_workers_keep_order_and_report_a_bad_image(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                        serial: dict[str, list[OCRLine]]) -> None:
    from pdlite.tools.cli import main

    folder = tmp_path / "imgs"
    folder.mkdir()
    for n in NAMES:
        shutil.copy(IMAGES / n, folder / n)
    (folder / "broken.png").write_bytes(b"\x89PNG not really")  # sorts first: the others still get read
    out = tmp_path / "out.jsonl"
    argv = ["ocr", str(folder), "--device", "host", "--threads", "2", "--workers", "2", "--json", str(out)]
    assert main(argv) == 1
    cap = capsys.readouterr()
    assert "2 worker(s) x 1 thread(s)" in cap.err and "summed over the 2 workers" in cap.err
    assert "1 of 4 image(s) failed" in cap.err and "broken.png" in cap.err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    order = sorted(["broken.png", *NAMES])
    assert [Path(r["image"]).name for r in rows] == order
    assert "could not be decoded" in rows[0]["error"]
    for row in rows[1:]:
        want = serial[Path(row["image"]).name]
        assert row["lines"] == [{"box": ln.box, "text": ln.text, "score": round(ln.score, 6)} for ln in want]
    # the printed text follows the input order too
    heads = [line[3:] for line in cap.out.splitlines() if line.startswith("== ")]
    assert [Path(h).name for h in heads] == sorted(NAMES)


def test_cli_workers_option_checked(capsys: pytest.CaptureFixture) -> None:
    from pdlite.tools.cli import main

    with pytest.raises(SystemExit):
        main(["ocr", str(IMAGES / "receipt.png"), "--workers", "0"])
    assert "--workers: must be >= 1" in capsys.readouterr().err


def test_clone_of_a_paddleocr3_pipeline_with_orientation_models() -> None:
    """PaddleOCR 3 folders (tests/fixtures/ocr/ppocrv5: a text-line orientation and a document orientation model):
    each stage of the clone runs the clone's network, and the clone reads as the original (lines, page angle)."""
    pytest.importorskip("yaml", reason="PaddleOCR 3 folders need pip install pdlite[ocr] (PyYAML)")
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "ocr" / "ppocrv5"
    ocr = OCR(det_model_dir=fix / "det" / "pir", rec_model_dir=fix / "rec" / "pir",
              textline_orientation_model_dir=fix / "textline" / "pir", doc_orientation_model_dir=fix / "doc" / "pir")
    clone = ocr.clone()
    assert list(clone.models()) == ["doc", "det", "cls", "rec"]
    assert clone.text_classifier.classifier.run is clone.cls_model
    assert clone.doc_orientation.classifier.run is clone.doc_model
    assert ocr.text_classifier.classifier.run is ocr.cls_model and ocr.doc_orientation.classifier.run is ocr.doc_model
    for name in ("receipt.png", "rotated.png"):
        want = ocr(IMAGES / name)
        assert clone(IMAGES / name) == want and clone.last_doc_angle == ocr.last_doc_angle, name
