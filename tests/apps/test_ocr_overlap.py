"""OCR.overlapped / `pdlite ocr --overlap`: the next image detected on a second thread while this one is recognised
gives the lines of reading the images one by one, in order, with a bad image reported in its place."""
from __future__ import annotations

from pathlib import Path

import pytest

from pdlite.apps.ocr import OCR, load_image
from pdlite.errors import InputError

IMAGES = Path(__file__).resolve().parents[2] / "examples" / "images"
NAMES = ["receipt.png", "upside_down.png", "sample_en.png"]


@pytest.fixture(scope="module")
def one_by_one() -> list:
    ocr = OCR(threads=1)
    return [ocr(IMAGES / n) for n in NAMES]


def test_overlapped_reads_as_one_by_one(tmp_path: Path, one_by_one: list) -> None:
    ocr = OCR(threads=1)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    items = [IMAGES / NAMES[0], bad, *[IMAGES / n for n in NAMES[1:]]]
    got = list(ocr.overlapped(items, load_image))
    assert [g[0] for g in got] == items
    assert got[1][1] is None and got[1][2] == [] and isinstance(got[1][3], InputError)
    assert [g[2] for g in got[:1] + got[2:]] == one_by_one
    assert all(g[3] is None for g in got[:1] + got[2:])
    assert ocr.timings["det"] > 0 and ocr.timings["rec"] > 0


def test_cli_overlap_prints_the_same(capsys: pytest.CaptureFixture, one_by_one: list) -> None:
    from pdlite.tools.cli import main

    paths = [str(IMAGES / n) for n in NAMES[:2]]
    assert main(["ocr", *paths, "--device", "host", "--threads", "1", "--overlap"]) == 0
    expected = [line for p, lines in zip(paths, one_by_one) for line in [f"== {p}", *(ln.text for ln in lines)]]
    assert capsys.readouterr().out.splitlines() == expected
