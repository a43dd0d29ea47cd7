"""Applications built on pdlite's public API (`pdlite.lite`); each is an optional extra.

- `pdlite.apps.ocr`: PP-OCR (detection, direction classification, recognition) end to end
  (`pip install pdlite[ocr]`, `pdlite ocr IMAGE`).
"""
