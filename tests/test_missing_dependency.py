"""A missing optional package raises MissingDependencyError (a PdliteError and an ImportError) whose
message names what to pip install, from every place that imports one on use."""
from __future__ import annotations

import sys

import pytest

from pdlite.errors import MissingDependencyError, PdliteError


def test_is_pdlite_and_import_error() -> None:
    assert issubclass(MissingDependencyError, PdliteError) and issubclass(MissingDependencyError, ImportError)


def test_ocr_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pdlite.apps.ocr._deps import require

    monkeypatch.setitem(sys.modules, "pyclipper", None)
    with pytest.raises(MissingDependencyError, match=r"pyclipper.*pip install pdlite\[ocr\]"):
        require("pyclipper")


def test_ray_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pdlite.integrations.ray import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install pdlite\[ray\]"):
        require_ray()


def test_batch_images_need_opencv(monkeypatch: pytest.MonkeyPatch) -> None:
    from pdlite.tools.batch import ImagePrep

    monkeypatch.setitem(sys.modules, "cv2", None)
    with pytest.raises(MissingDependencyError, match=r"img\.png: reading images needs OpenCV"):
        ImagePrep()("img.png")
