"""RapidOCR 1.4's variant of the pipeline (`OCR.like_rapidocr()`, `pdlite ocr --preset rapidocr`), for comparing with
results made by RapidOCR at its default settings (rapidocr_onnxruntime 1.4.4 / rapidocr_paddle 1.4.5 `main.py`,
`ch_ppocr_det/`, `utils/process_img.py`).

Where RapidOCR departs from PaddleOCR's predict_system: its parameters (det limit 736 'min', box_thresh 0.5, unclip
1.6, dilation on), det mean/std 0.5 instead of ImageNet's, a 960/1500/2000 limit ladder for 'max', the older imutils
corner ordering, and image preparation before detection: longer side above 2000 shrunk, shorter side under 30 grown
(both rounded to multiples of 32), and a black letterbox above and below an image at most 30 px high or more than 8
times wider than high; boxes are mapped back to the original image at the end.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.apps.ocr._deps import require

PARAMS = {"det_limit_side_len": 736, "det_limit_type": "min", "det_db_box_thresh": 0.5, "det_db_unclip_ratio": 1.6,
          "use_dilation": True}
MAX_SIDE_LEN, MIN_SIDE_LEN, MIN_HEIGHT, WIDTH_HEIGHT_RATIO = 2000, 30, 30, 8


def _resize32(img: np.ndarray, ratio: float) -> tuple[np.ndarray, float, float]:
    cv2 = require("cv2")
    h, w = img.shape[:2]
    rh, rw = int(round(int(h * ratio) / 32) * 32), int(round(int(w * ratio) / 32) * 32)
    img = cv2.resize(img, (rw, rh))
    return img, h / rh, w / rw


def prepare(img: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """RapidOCR's `preprocess` and `maybe_add_letterbox`: the image detection sees and how to map boxes back."""
    cv2 = require("cv2")
    record: dict[str, Any] = {"ratio_h": 1.0, "ratio_w": 1.0, "top": 0}
    h, w = img.shape[:2]
    if max(h, w) > MAX_SIDE_LEN:
        img, record["ratio_h"], record["ratio_w"] = _resize32(img, MAX_SIDE_LEN / (h if h > w else w))
    h, w = img.shape[:2]
    if min(h, w) < MIN_SIDE_LEN:
        img, record["ratio_h"], record["ratio_w"] = _resize32(img, MIN_SIDE_LEN / (h if h < w else w))
    h, w = img.shape[:2]
    if h <= MIN_HEIGHT or w / h > WIDTH_HEIGHT_RATIO:
        pad = int(abs(max(int(w / WIDTH_HEIGHT_RATIO), MIN_HEIGHT) * 2 - h) / 2)
        img = cv2.copyMakeBorder(img, pad, pad, 0, 0, cv2.BORDER_CONSTANT, value=(0, 0, 0))
        record["top"] = pad
    return img, record


def to_origin(boxes: np.ndarray, record: dict[str, Any], raw_h: int, raw_w: int) -> np.ndarray:
    """Boxes of the prepared image in the original image's coordinates (letterbox removed, scaled, clipped)."""
    out = np.array(boxes).astype(np.float32)
    out[:, :, 1] -= record["top"]
    out[:, :, 0] *= record["ratio_w"]
    out[:, :, 1] *= record["ratio_h"]
    out = np.where(out < 0, 0, out)
    out[..., 0] = np.where(out[..., 0] > raw_w, raw_w, out[..., 0])
    out[..., 1] = np.where(out[..., 1] > raw_h, raw_h, out[..., 1])
    return out


def det_limit(limit_side_len: int, limit_type: str, max_wh: int) -> int:
    """RapidOCR's limit: as given for 'min'; for 'max' 960, 1500 or 2000 by the image's longer side."""
    if limit_type == "min":
        return limit_side_len
    return 960 if max_wh < 960 else 1500 if max_wh < 1500 else 2000


def det_input(img: np.ndarray, limit_side_len: int, limit_type: str) -> np.ndarray | None:
    """RapidOCR's DetPreProcess: resize (multiples of 32, no 32-pixel minimum), x/255, mean/std 0.5, NCHW."""
    cv2 = require("cv2")
    h, w = img.shape[:2]
    if limit_type == "max":
        ratio = float(limit_side_len) / (h if h > w else w) if max(h, w) > limit_side_len else 1.0
    else:
        ratio = float(limit_side_len) / (h if h < w else w) if min(h, w) < limit_side_len else 1.0
    rh, rw = int(round(int(h * ratio) / 32) * 32), int(round(int(w * ratio) / 32) * 32)
    if rh <= 0 or rw <= 0:
        return None
    img = cv2.resize(img, (rw, rh))
    half = np.array([0.5, 0.5, 0.5])
    x = (img.astype("float32") * (1 / 255.0) - half) / half
    return np.expand_dims(x.transpose((2, 0, 1)), axis=0).astype(np.float32)


def order_points_imutils(pts: np.ndarray) -> np.ndarray:
    """The older corner ordering RapidOCR keeps: two left-most by x, each pair split by y."""
    x_sorted = pts[np.argsort(pts[:, 0]), :]
    left, right = x_sorted[:2, :], x_sorted[2:, :]
    tl, bl = left[np.argsort(left[:, 1]), :]
    tr, br = right[np.argsort(right[:, 1]), :]
    return np.array([tl, tr, br, bl], dtype="float32")
