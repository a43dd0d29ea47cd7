"""PP-OCR end to end, as PaddleOCR's `TextSystem` (tools/infer/predict_system.py): detect, sort the boxes into
reading order, crop each (perspective), classify direction, recognise, drop low scores."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from pdlite.apps.ocr import rapidocr_compat
from pdlite.apps.ocr._deps import require
from pdlite.apps.ocr.cls import TextClassifier
from pdlite.apps.ocr.det import DBPostProcess, det_normalize, det_resize, filter_tag_det_res
from pdlite.apps.ocr.engine import (
    CLS_MODEL_DIR,
    DET_MODEL_DIR,
    DEVICES,
    REC_CHAR_DICT_PATH,
    REC_MODEL_DIR,
    Model,
)
from pdlite.apps.ocr.rec import TextRecognizer, load_dictionary
from pdlite.errors import ConfigError, InputError

STAGES = ("det", "cls", "rec")  # "cls" includes the perspective crops


class OCRLine(NamedTuple):
    """One recognised text line: its box (4 [x, y] corners, clockwise from top-left), text and score."""

    box: list[list[int]]
    text: str
    score: float


def load_image(image: str | os.PathLike | bytes | np.ndarray) -> np.ndarray:
    """An HWC uint8 BGR image (what cv2.imread gives) from a path, encoded bytes or an array."""
    cv2 = require("cv2")
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        if not os.path.isfile(path):
            raise InputError(f"image {path!r} does not exist")
        img = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise InputError(f"image {path!r} could not be decoded (not an image format OpenCV reads)")
        return img
    if isinstance(image, (bytes, bytearray, memoryview)):
        img = cv2.imdecode(np.frombuffer(image, dtype=np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise InputError(f"image bytes ({len(image)} bytes) could not be decoded")
        return img
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise InputError(f"image array must be uint8 (HWC BGR as cv2 gives), got {image.dtype}")
        if image.ndim == 2:
            return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
        if image.ndim == 3 and image.shape[2] == 3:
            return image
        if image.ndim == 3 and image.shape[2] == 4:
            return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
        raise InputError(f"image array must be HxW, HxWx3 (BGR) or HxWx4, got shape {list(image.shape)}")
    raise InputError(f"image must be a path, bytes or a numpy array, got {type(image).__name__}")


def sorted_boxes(dt_boxes: np.ndarray) -> list[np.ndarray]:
    """Top to bottom by the first corner, then left to right within 10 px of height (PaddleOCR's rule)."""
    boxes = list(sorted(dt_boxes, key=lambda x: (x[0][1], x[0][0])))
    for i in range(len(boxes) - 1):
        for j in range(i, -1, -1):
            if abs(boxes[j + 1][0][1] - boxes[j][0][1]) < 10 and boxes[j + 1][0][0] < boxes[j][0][0]:
                boxes[j], boxes[j + 1] = boxes[j + 1], boxes[j]
            else:
                break
    return boxes


def get_rotate_crop_image(img: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The box's content warped to an upright rectangle (cubic, replicated border); a crop at least 1.5 times
    taller than wide is turned 90 degrees (vertical text)."""
    cv2 = require("cv2")
    points = np.asarray(points, dtype=np.float32)
    crop_w = int(max(np.linalg.norm(points[0] - points[1]), np.linalg.norm(points[2] - points[3])))
    crop_h = int(max(np.linalg.norm(points[0] - points[3]), np.linalg.norm(points[1] - points[2])))
    pts_std = np.float32([[0, 0], [crop_w, 0], [crop_w, crop_h], [0, crop_h]])
    m = cv2.getPerspectiveTransform(points, pts_std)
    dst = cv2.warpPerspective(img, m, (crop_w, crop_h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
    if dst.shape[0] * 1.0 / dst.shape[1] >= 1.5:
        dst = np.rot90(dst)
    return dst


def _shape(text: str | Sequence[int], what: str) -> list[int]:
    vals = [int(v) for v in text.split(",")] if isinstance(text, str) else [int(v) for v in text]
    if len(vals) != 3:
        raise ConfigError(f"{what} must be 'C, H, W', got {text!r}")
    return vals


class OCR:
    """PP-OCR (v4 mobile det + rec, mobile v2 direction classifier) on pdlite.

    `OCR()(image)` -> [OCRLine(box, text, score), ...] in reading order. Parameters carry PaddleOCR's names
    and defaults (tools/infer/utility.py); `use_angle_cls` (alias `use_cls`) is on by default here. `context`:
    NNAdapter context properties for the devices (docs/nnadapter.md), e.g.
    {"INTEL_OPENVINO_INFERENCE_PRECISION_HINT": "bf16"} (the host ignores them).
    """

    def __init__(self, device: str = "host", threads: int = 1, use_angle_cls: bool = True,
                 det_model_dir: str | os.PathLike = DET_MODEL_DIR, rec_model_dir: str | os.PathLike = REC_MODEL_DIR,
                 cls_model_dir: str | os.PathLike = CLS_MODEL_DIR,
                 rec_char_dict_path: str | os.PathLike = REC_CHAR_DICT_PATH, use_space_char: bool = True,
                 det_limit_side_len: int = 960, det_limit_type: str = "max", det_db_thresh: float = 0.3,
                 det_db_box_thresh: float = 0.6, det_db_unclip_ratio: float = 1.5, use_dilation: bool = False,
                 det_db_score_mode: str = "fast", rec_image_shape: str | Sequence[int] = "3, 48, 320",
                 rec_batch_num: int = 6, cls_image_shape: str | Sequence[int] = "3, 48, 192",
                 cls_batch_num: int = 6, cls_thresh: float = 0.9, label_list: Sequence[str] = ("0", "180"),
                 drop_score: float = 0.5, use_cls: bool | None = None, compat: str = "paddleocr",
                 context: Mapping[str, str] | None = None) -> None:
        if compat not in ("paddleocr", "rapidocr"):
            raise ConfigError(f"compat must be 'paddleocr' or 'rapidocr', got {compat!r}")
        self.compat = compat
        if use_cls is not None:
            use_angle_cls = use_cls
        if device not in DEVICES:
            raise ConfigError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
        if int(threads) < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        self.threads = int(threads)
        self.use_angle_cls = bool(use_angle_cls)
        self.drop_score = float(drop_score)
        self.det_limit_side_len = int(det_limit_side_len)
        self.det_limit_type = det_limit_type
        if det_limit_type not in ("max", "min", "resize_long"):
            raise ConfigError(f"det_limit_type must be 'max', 'min' or 'resize_long', got {det_limit_type!r}")
        self.postprocess_op = DBPostProcess(thresh=det_db_thresh, box_thresh=det_db_box_thresh,
                                            max_candidates=1000, unclip_ratio=det_db_unclip_ratio,
                                            use_dilation=use_dilation, score_mode=det_db_score_mode)
        self._model_dirs = {"det": det_model_dir, "rec": rec_model_dir, "cls": cls_model_dir}
        self._character = load_dictionary(rec_char_dict_path, use_space_char)
        self._rec_args = (_shape(rec_image_shape, "rec_image_shape"), int(rec_batch_num))
        self._cls_args = (_shape(cls_image_shape, "cls_image_shape"), int(cls_batch_num), float(cls_thresh),
                          list(label_list))
        self.timings = {k: 0.0 for k in STAGES}  # seconds spent per stage, summed over calls
        self.device = device
        self.det = Model(self._model_dirs["det"], device, self.threads, "det_model_dir", context)
        self.rec_model = Model(self._model_dirs["rec"], device, self.threads, "rec_model_dir", context)
        self.text_recognizer = TextRecognizer(self.rec_model, self._character, *self._rec_args)
        self.text_classifier = None
        if self.use_angle_cls:
            self.cls_model = Model(self._model_dirs["cls"], device, self.threads, "cls_model_dir", context)
            self.text_classifier = TextClassifier(self.cls_model, *self._cls_args)

    @classmethod
    def like_rapidocr(cls, **kwargs: object) -> OCR:
        """RapidOCR 1.4's defaults and image preparation (see rapidocr_compat), for comparing with its results;
        keyword arguments override as in OCR()."""
        return cls(**{**rapidocr_compat.PARAMS, "compat": "rapidocr", **kwargs})

    def detect(self, img: np.ndarray) -> np.ndarray:
        """Text boxes [K, 4, 2] (float32 integer pixels) of a BGR image, in the detector's order."""
        if self.compat == "rapidocr":
            limit = rapidocr_compat.det_limit(self.det_limit_side_len, self.det_limit_type, max(img.shape[:2]))
            x = rapidocr_compat.det_input(img, limit, self.det_limit_type)
            if x is None:
                return np.zeros((0, 4, 2), np.float32)
            boxes, _ = self.postprocess_op(self.det(x), np.array([img.shape[0], img.shape[1], 1.0, 1.0]))
            return filter_tag_det_res(boxes, img.shape, rapidocr_compat.order_points_imutils)
        resized, shape = det_resize(img, self.det_limit_side_len, self.det_limit_type)
        pred = self.det(det_normalize(resized))
        boxes, _ = self.postprocess_op(pred, shape)
        return filter_tag_det_res(boxes, img.shape)

    def _run(self, img: np.ndarray) -> list[OCRLine]:
        raw_h, raw_w = img.shape[:2]
        record = None
        if self.compat == "rapidocr":
            img, record = rapidocr_compat.prepare(img)
        t0 = time.perf_counter()
        dt_boxes = self.detect(img)
        t1 = time.perf_counter()
        self.timings["det"] += t1 - t0
        if len(dt_boxes) == 0:
            return []
        boxes = sorted_boxes(dt_boxes)
        crops = [get_rotate_crop_image(img, b.copy()) for b in boxes]
        if self.text_classifier is not None:
            crops, _ = self.text_classifier(crops)
        t2 = time.perf_counter()
        self.timings["cls"] += t2 - t1
        rec_res = self.text_recognizer(crops)
        self.timings["rec"] += time.perf_counter() - t2
        if record is not None:
            boxes = list(rapidocr_compat.to_origin(np.array(boxes), record, raw_h, raw_w))
        return [OCRLine(np.round(b).astype(int).tolist(), text, score)
                for b, (text, score) in zip(boxes, rec_res) if score >= self.drop_score]

    def __call__(self, image: str | os.PathLike | bytes | np.ndarray) -> list[OCRLine]:
        """Text lines of an image (path, encoded bytes, or HWC uint8 BGR array) in reading order."""
        return self._run(load_image(image))

    def models(self) -> dict[str, Model]:
        """The networks in use by stage (det, cls when use_angle_cls, rec)."""
        out = {"det": self.det, "cls": getattr(self, "cls_model", None), "rec": self.rec_model}
        return {k: m for k, m in out.items() if m is not None}

    def devices(self) -> dict[str, str]:
        """The device each network runs on ("auto" until its first input when device="auto")."""
        return {k: m.device for k, m in self.models().items()}
