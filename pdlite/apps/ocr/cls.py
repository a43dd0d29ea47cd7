"""Text direction classification: PaddleOCR's `TextClassifier` (0 or 180 degrees; rotate when confident).

Mirrors PaddleOCR 2.x `tools/infer/predict_cls.py` and `ClsPostProcess`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from pdlite.apps.ocr._deps import require


def resize_norm_pad(img: np.ndarray, img_c: int, img_h: int, img_w: int) -> np.ndarray:
    """PaddleOCR's crop normalisation (cls and rec): resize to height img_h keeping the aspect ratio (width capped
    at img_w), scale to [-1, 1], zero-pad on the right to img_w: [img_c, img_h, img_w] float32."""
    cv2 = require("cv2")
    h, w = img.shape[:2]
    ratio = w / float(h)
    resized_w = img_w if math.ceil(img_h * ratio) > img_w else int(math.ceil(img_h * ratio))
    resized = cv2.resize(img, (resized_w, img_h)).astype("float32")
    if img_c == 1:
        resized = resized / 255
        resized = resized[np.newaxis, :]
    else:
        resized = resized.transpose((2, 0, 1)) / 255
    resized -= 0.5
    resized /= 0.5
    out = np.zeros((img_c, img_h, img_w), dtype=np.float32)
    out[:, :, 0:resized_w] = resized
    return out


def cls_resize_norm(img: np.ndarray, image_shape: Sequence[int] = (3, 48, 192)) -> np.ndarray:
    """Resize to height imgH keeping the aspect ratio (width capped at imgW), scale to [-1, 1], zero-pad to imgW."""
    img_c, img_h, img_w = image_shape
    return resize_norm_pad(img, img_c, img_h, img_w)


class TextClassifier:
    """Classifies crops in batches of `cls_batch_num` (sorted by aspect ratio); rotates a crop by 180 degrees
    when its label is '180' with probability above `cls_thresh`."""

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], cls_image_shape: Sequence[int] = (3, 48, 192),
                 cls_batch_num: int = 6, cls_thresh: float = 0.9,
                 label_list: Sequence[str] = ("0", "180")) -> None:
        self.run = run
        self.cls_image_shape = [int(v) for v in cls_image_shape]
        self.cls_batch_num = int(cls_batch_num)
        self.cls_thresh = float(cls_thresh)
        self.label_list = list(label_list)

    def __call__(self, img_list: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[tuple[str, float]]]:
        cv2 = require("cv2")
        img_list = list(img_list)
        img_num = len(img_list)
        indices = np.argsort(np.array([img.shape[1] / float(img.shape[0]) for img in img_list]))
        cls_res: list[tuple[str, float]] = [("", 0.0)] * img_num
        for beg in range(0, img_num, self.cls_batch_num):
            end = min(img_num, beg + self.cls_batch_num)
            batch = np.concatenate([cls_resize_norm(img_list[indices[ino]], self.cls_image_shape)[None]
                                    for ino in range(beg, end)])
            prob = self.run(batch)
            for rno, idx in enumerate(prob.argmax(axis=1)):
                label, score = self.label_list[int(idx)], float(prob[rno, idx])
                cls_res[indices[beg + rno]] = (label, score)
                if "180" in label and score > self.cls_thresh:
                    img_list[indices[beg + rno]] = cv2.rotate(img_list[indices[beg + rno]], 1)
        return img_list, cls_res
