"""PP-OCR on pdlite: `from pdlite.apps.ocr import OCR; OCR()(image)` -> [(box, text, score), ...].

Needs the `ocr` extra (`pip install pdlite[ocr]`: OpenCV, pyclipper, Pillow); the trained models
(PP-OCRv4 mobile det and rec, mobile v2 direction classifier) ship with the package. Your own PaddleOCR 2.x or
PaddleOCR 3 / PaddleX model folders: `OCR(det_model_dir=..., rec_model_dir=...)` (PaddleOCR 3's inference.yml
needs PyYAML).
"""
from __future__ import annotations

from pdlite.apps.ocr.engine import DEVICES
from pdlite.apps.ocr.pipeline import OCR, OCRLine, OCRWarning, load_image

__all__ = ["DEVICES", "OCR", "OCRLine", "OCRWarning", "load_image"]
