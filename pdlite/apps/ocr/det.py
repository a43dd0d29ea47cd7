"""Text detection (DB): PaddleOCR's pre-processing (`DetResizeForTest`, `NormalizeImage`) and `DBPostProcess`.

Mirrors PaddleOCR 2.x `ppocr/data/imaug/operators.py`, `ppocr/postprocess/db_postprocess.py` and
`tools/infer/predict_det.py` step for step, so the same network output gives the same boxes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.apps.ocr._deps import require
from pdlite.errors import ConfigError

DET_MEAN = (0.485, 0.456, 0.406)
DET_STD = (0.229, 0.224, 0.225)


def det_resize(img: np.ndarray, limit_side_len: int = 960, limit_type: str = "max",
               max_side_limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`DetResizeForTest` (type 0): scale so the limited side fits, round both sides to multiples of 32.

    `max_side_limit` (PaddleX / PaddleOCR 3: 4000): a scaled size whose longer side exceeds it is scaled down to
    it before the rounding. Returns the resized image and `shape` = [src_h, src_w, ratio_h, ratio_w] as
    PaddleOCR keeps it.
    """
    cv2 = require("cv2")
    src_h, src_w = img.shape[:2]
    if src_h + src_w < 64:  # PaddleOCR pads tiny images to at least 32x32 (black), keeping src_h/src_w
        pad = np.zeros((max(32, src_h), max(32, src_w), img.shape[2]), np.uint8)
        pad[:src_h, :src_w, :] = img
        img = pad
    h, w = img.shape[:2]
    if limit_type == "max":
        ratio = float(limit_side_len) / (h if h > w else w) if max(h, w) > limit_side_len else 1.0
    elif limit_type == "min":
        ratio = float(limit_side_len) / (h if h < w else w) if min(h, w) < limit_side_len else 1.0
    elif limit_type == "resize_long":
        ratio = float(limit_side_len) / max(h, w)
    else:
        raise ConfigError(f"det_limit_type must be 'max', 'min' or 'resize_long', got {limit_type!r}")
    resize_h, resize_w = int(h * ratio), int(w * ratio)
    if max_side_limit is not None and max(resize_h, resize_w) > max_side_limit:
        ratio = float(max_side_limit) / max(resize_h, resize_w)
        resize_h, resize_w = int(resize_h * ratio), int(resize_w * ratio)
    resize_h = max(int(round(resize_h / 32) * 32), 32)
    resize_w = max(int(round(resize_w / 32) * 32), 32)
    img = cv2.resize(img, (resize_w, resize_h))
    return img, np.array([src_h, src_w, resize_h / float(h), resize_w / float(w)])


def det_normalize(img: np.ndarray) -> np.ndarray:
    """`NormalizeImage` (scale 1/255, ImageNet mean/std applied to the BGR channels as PaddleOCR does), HWC->NCHW:
    (x * (1/255) - mean) / std per channel in float32, bit for bit (`_normalize_nchw`)."""
    def formula(x: np.ndarray, c: int) -> np.ndarray:
        return (x * np.float32(1.0 / 255.0) - np.float32(DET_MEAN[c])) / np.float32(DET_STD[c])
    return _normalize_nchw(img, ("paddleocr", DET_MEAN, DET_STD), formula)


def det_normalize_paddlex(img: np.ndarray, scale: float = 1 / 255, mean: tuple = DET_MEAN,
                          std: tuple = DET_STD) -> np.ndarray:
    """PaddleX's `NormalizeImage` (the yml's scale, mean, std on the image's channels as read, BGR for PP-OCR):
    x * (scale / std) + (-mean / std) per channel in float32, HWC -> NCHW (bit for bit, `_normalize_nchw`)."""
    def formula(x: np.ndarray, c: int) -> np.ndarray:
        x = x.copy()
        x *= scale / std[c]  # in place on float32, as PaddleX (a NumPy float64 factor multiplies in float64)
        x += -mean[c] / std[c]
        return x
    return _normalize_nchw(img, ("paddlex", repr((scale, tuple(mean), tuple(std)))), formula)


_LUTS: dict[tuple, np.ndarray] = {}  # (normalisation, channels) -> [C, 1, 256] float32: each byte value's output


def _normalize_nchw(img: np.ndarray, key: tuple, formula: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """`formula(x, c)` (float32 x of channel c) over an HWC image, as float32 [1, C, H, W]. A uint8 image has 256
    values per channel: the formula runs on those (the same float32 operations, so the same bits) and each plane
    is looked up (cv2.LUT): one pass over a page instead of five NumPy passes with page-sized temporaries (a
    960x736 page 11-13 ms -> 0.8 ms). Other dtypes: the formula on the whole image."""
    chans = img.shape[2]
    if img.dtype != np.uint8 or not 1 <= chans <= 4:
        planes = [formula(img[:, :, c].astype(np.float32), c) for c in range(chans)]
        return np.stack(planes)[None].astype(np.float32, copy=False)
    luts = _LUTS.get((key, chans))
    if luts is None:
        values = np.arange(256, dtype=np.float32)
        luts = np.stack([formula(values, c) for c in range(chans)]).astype(np.float32).reshape(chans, 1, 256)
        _LUTS[(key, chans)] = luts
    cv2 = require("cv2")
    out = np.empty((1, chans, img.shape[0], img.shape[1]), np.float32)
    for c, plane in enumerate(cv2.split(np.asarray(img, order="C"))):
        out[0, c] = cv2.LUT(plane, luts[c])
    return out


def polygon_area_length(box: np.ndarray) -> tuple[float, float]:
    """Area and perimeter of a simple polygon, with GEOS's formulas (what shapely's Polygon.area/.length give)."""
    p = np.asarray(box, dtype=np.float64).reshape(-1, 2).tolist()
    ring = p + [p[0]]
    x0 = ring[0][0]
    s = 0.0
    for i in range(1, len(ring) - 1):
        s += (ring[i][0] - x0) * (ring[i - 1][1] - ring[i + 1][1])
    length = 0.0
    for (xa, ya), (xb, yb) in zip(ring[:-1], ring[1:]):
        dx, dy = xb - xa, yb - ya
        length += (dx * dx + dy * dy) ** 0.5
    return abs(s / 2.0), length


class DBPostProcess:
    """Differentiable Binarization post-processing: probability map -> quadrilateral text boxes."""

    def __init__(self, thresh: float = 0.3, box_thresh: float = 0.6, max_candidates: int = 1000,
                 unclip_ratio: float = 1.5, use_dilation: bool = False, score_mode: str = "fast",
                 paddlex: bool = False) -> None:
        """paddlex: PaddleX's variant (PaddleOCR 3): unclip distance from OpenCV's contourArea / arcLength
        instead of shapely's, corners scaled back by dest/size in float64, int16 boxes."""
        self.paddlex = paddlex
        if score_mode not in ("fast", "slow"):
            raise ConfigError(f"det_db_score_mode must be 'fast' or 'slow', got {score_mode!r}")
        self.thresh = thresh
        self.box_thresh = box_thresh
        self.max_candidates = max_candidates
        self.unclip_ratio = unclip_ratio
        self.min_size = 3
        self.score_mode = score_mode
        self.dilation_kernel = np.array([[1, 1], [1, 1]]) if use_dilation else None

    def __call__(self, pred: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, list[float]]:
        """pred: [1, 1, H, W] probability map; shape: [src_h, src_w, ratio_h, ratio_w]."""
        cv2 = require("cv2")
        prob = pred[0, 0, :, :]
        mask = prob > self.thresh
        if self.dilation_kernel is not None:
            mask = cv2.dilate(np.array(mask).astype(np.uint8), self.dilation_kernel)
        src_h, src_w = shape[0], shape[1]
        return self.boxes_from_bitmap(prob, mask, src_w, src_h)

    def boxes_from_bitmap(self, pred: np.ndarray, bitmap: np.ndarray, dest_width: Any,
                          dest_height: Any) -> tuple[np.ndarray, list[float]]:
        cv2 = require("cv2")
        height, width = bitmap.shape
        # 0/255 bytes (bool or 0/1 from the dilation), without an int64 page in between
        outs = cv2.findContours(np.asarray(bitmap, dtype=np.uint8) * np.uint8(255), cv2.RETR_LIST,
                                cv2.CHAIN_APPROX_SIMPLE)
        contours = outs[1] if len(outs) == 3 else outs[0]
        boxes, scores = [], []
        for contour in contours[: self.max_candidates]:
            points, sside = self.get_mini_boxes(contour)
            if sside < self.min_size:
                continue
            points = np.array(points)
            if self.score_mode == "fast":
                score = self.box_score_fast(pred, points.reshape(-1, 2))
            else:
                score = self.box_score_slow(pred, contour)
            if self.box_thresh > score:
                continue
            box = self.unclip(points, self.unclip_ratio, self.paddlex).reshape(-1, 1, 2)
            box, sside = self.get_mini_boxes(box)
            if sside < self.min_size + 2:
                continue
            box = np.array(box)
            if self.paddlex:
                box = box.astype(np.float64)
                box[:, 0] = np.clip(np.round(box[:, 0] * (dest_width / width)), 0, dest_width)
                box[:, 1] = np.clip(np.round(box[:, 1] * (dest_height / height)), 0, dest_height)
            else:
                box[:, 0] = np.clip(np.round(box[:, 0] / width * dest_width), 0, dest_width)
                box[:, 1] = np.clip(np.round(box[:, 1] / height * dest_height), 0, dest_height)
            boxes.append(box.astype("int32"))
            scores.append(score)
        return np.array(boxes, dtype="int16" if self.paddlex else "int32"), scores

    @staticmethod
    def unclip(box: np.ndarray, unclip_ratio: float, paddlex: bool = False) -> np.ndarray:
        """Grow the box by area * ratio / perimeter with pyclipper's round offset (Vatti clipping); area and
        perimeter as shapely (PaddleOCR 2.x) or OpenCV (paddlex: PaddleX / PaddleOCR 3) compute them."""
        pyclipper = require("pyclipper")
        if paddlex:
            cv2 = require("cv2")
            area, length = cv2.contourArea(box), cv2.arcLength(box, True)
        else:
            area, length = polygon_area_length(box)
        distance = area * unclip_ratio / length
        offset = pyclipper.PyclipperOffset()
        offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        paths = offset.Execute(distance)
        if paddlex and len(paths) > 1 and len({len(p) for p in paths}) > 1:
            return np.array(paths[0])  # PaddleX keeps the first of several ragged paths
        return np.array(paths)

    @staticmethod
    def get_mini_boxes(contour: np.ndarray) -> tuple[list[np.ndarray], float]:
        """The minimum-area rectangle's corners ordered [top-left, top-right, bottom-right, bottom-left]."""
        cv2 = require("cv2")
        bounding_box = cv2.minAreaRect(contour)
        points = sorted(list(cv2.boxPoints(bounding_box)), key=lambda x: x[0])
        i1, i4 = (0, 1) if points[1][1] > points[0][1] else (1, 0)
        i2, i3 = (2, 3) if points[3][1] > points[2][1] else (3, 2)
        return [points[i1], points[i2], points[i3], points[i4]], min(bounding_box[1])

    @staticmethod
    def box_score_fast(bitmap: np.ndarray, _box: np.ndarray) -> float:
        """Mean probability inside the box (filled polygon over its bounding rectangle)."""
        cv2 = require("cv2")
        h, w = bitmap.shape[:2]
        box = _box.copy()
        xmin = np.clip(np.floor(box[:, 0].min()).astype("int32"), 0, w - 1)
        xmax = np.clip(np.ceil(box[:, 0].max()).astype("int32"), 0, w - 1)
        ymin = np.clip(np.floor(box[:, 1].min()).astype("int32"), 0, h - 1)
        ymax = np.clip(np.ceil(box[:, 1].max()).astype("int32"), 0, h - 1)
        mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
        box[:, 0] = box[:, 0] - xmin
        box[:, 1] = box[:, 1] - ymin
        cv2.fillPoly(mask, box.reshape(1, -1, 2).astype("int32"), 1)
        return cv2.mean(bitmap[ymin:ymax + 1, xmin:xmax + 1], mask)[0]

    @staticmethod
    def box_score_slow(bitmap: np.ndarray, contour: np.ndarray) -> float:
        """Mean probability inside the contour itself."""
        cv2 = require("cv2")
        h, w = bitmap.shape[:2]
        contour = np.reshape(contour.copy(), (-1, 2))
        xmin = np.clip(np.min(contour[:, 0]), 0, w - 1)
        xmax = np.clip(np.max(contour[:, 0]), 0, w - 1)
        ymin = np.clip(np.min(contour[:, 1]), 0, h - 1)
        ymax = np.clip(np.max(contour[:, 1]), 0, h - 1)
        mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
        contour[:, 0] = contour[:, 0] - xmin
        contour[:, 1] = contour[:, 1] - ymin
        cv2.fillPoly(mask, contour.reshape(1, -1, 2).astype("int32"), 1)
        return cv2.mean(bitmap[ymin:ymax + 1, xmin:xmax + 1], mask)[0]


def order_points_clockwise(pts: np.ndarray) -> np.ndarray:
    """[top-left, top-right, bottom-right, bottom-left] by coordinate sum and difference (PaddleOCR 2.6+)."""
    rect = np.zeros((4, 2), dtype="float32")
    s = pts.sum(axis=1)
    rect[0] = pts[np.argmin(s)]
    rect[2] = pts[np.argmax(s)]
    tmp = np.delete(pts, (np.argmin(s), np.argmax(s)), axis=0)
    diff = np.diff(np.array(tmp), axis=1)
    rect[1] = tmp[np.argmin(diff)]
    rect[3] = tmp[np.argmax(diff)]
    return rect


def filter_tag_det_res(dt_boxes: np.ndarray, image_shape: tuple[int, ...],
                       order: Callable[[np.ndarray], np.ndarray] = order_points_clockwise) -> np.ndarray:
    """Order each box's corners, clip them into the image (integer pixels), drop boxes of 3 px or less."""
    img_height, img_width = image_shape[0:2]
    kept = []
    for box in dt_boxes:
        box = order(box)
        for pno in range(box.shape[0]):
            box[pno, 0] = int(min(max(box[pno, 0], 0), img_width - 1))
            box[pno, 1] = int(min(max(box[pno, 1], 0), img_height - 1))
        if int(np.linalg.norm(box[0] - box[1])) <= 3 or int(np.linalg.norm(box[0] - box[3])) <= 3:
            continue
        kept.append(box)
    return np.array(kept)
