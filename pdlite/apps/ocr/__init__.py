"""PP-OCR on pdlite: `from pdlite.apps.ocr import OCR; OCR()(image)` -> [(box, text, score), ...].

Needs the `ocr` extra (`pip install pdlite[ocr]`: OpenCV, pyclipper, Pillow); the trained models
(PP-OCRv4 mobile det and rec, mobile v2 direction classifier) ship with the package.
"""
from __future__ import annotations

from pdlite.apps.ocr.engine import DEVICES
from pdlite.apps.ocr.pipeline import OCR, OCRLine, load_image

__all__ = ["DEVICES", "OCR", "OCRLine", "load_image"]
