"""PaddleOCR 3's orientation pieces: the text-line orientation classifier (PP-LCNet_x0_25 / x1_0_textline_ori,
0 or 180 degrees, input 80x160) and the document orientation classifier (PP-LCNet_x1_0_doc_ori, 0/90/180/270,
shorter side 256 then a 224x224 centre crop), both PaddleX image classifiers, and PaddleX's `rotate_image`.

Mirrors paddlex/inference/models/image_classification/predictor.py (ReadImage RGB, ResizeImage, CropImage,
NormalizeImage, ToCHWImage, Topk) and paddlex/inference/pipelines/ocr/pipeline.py /
doc_preprocessor/pipeline.py (argmax class, rotation by its angle, no threshold).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pdlite.apps.ocr._deps import require
from pdlite.apps.ocr.paddlex_config import ModelFolder, cls_settings
from pdlite.errors import ConfigError


def rotate_image(image: np.ndarray, angle: float) -> np.ndarray:
    """PaddleX's rotate_image: counter-clockwise by `angle` degrees about (w/2, h/2), the canvas grown to hold the
    result, bicubic (so a 180-degree turn lands one pixel off a flip, as in PaddleOCR 3)."""
    cv2 = require("cv2")
    if angle < 0 or angle >= 360:
        raise ConfigError(f"rotation angle must be in [0, 360), got {angle}")
    if angle < 1e-7:
        return image
    h, w = image.shape[:2]
    mat = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    cos, sin = np.abs(mat[0, 0]), np.abs(mat[0, 1])
    new_w, new_h = int((h * sin) + (w * cos)), int((h * cos) + (w * sin))
    mat[0, 2] += (new_w - w) / 2
    mat[1, 2] += (new_h - h) / 2
    return cv2.warpAffine(image, mat, (new_w, new_h), flags=cv2.INTER_CUBIC)


class ImageClassifier:
    """A PaddleX image classifier on BGR images: its yml's resize / crop / normalisation, batches of
    `batch_size` in the given order, the top class per image."""

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], folder: ModelFolder, batch_size: int = 6) -> None:
        self.run = run
        self.settings = cls_settings(folder)
        self.labels = self.settings["labels"]
        self.batch_size = int(batch_size)
        scale, mean, std = self.settings["normalize"]
        self._alpha = [scale / s for s in std]
        self._beta = [-m / s for m, s in zip(mean, std)]

    def preprocess(self, img: np.ndarray) -> np.ndarray:
        """One BGR image -> the network's CHW float32 input (RGB, resized, cropped, normalised)."""
        cv2 = require("cv2")
        st = self.settings
        interp = getattr(cv2, "INTER_CUBIC" if st["interpolation"] == "BICUBIC" else f"INTER_{st['interpolation']}")
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        h, w = img.shape[:2]
        if st["resize_short"] is not None:
            scale = st["resize_short"] / min(h, w)
            size = [round(w * scale), round(h * scale)]
        else:
            size = st["size"]  # [w, h]
        if size[0] != w or size[1] != h:
            img = cv2.resize(img, (int(size[0]), int(size[1])), interpolation=interp)
        if st["crop"] is not None:
            cw, ch = st["crop"]
            h, w = img.shape[:2]
            if w < cw or h < ch:
                raise ConfigError(f"image of {w}x{h} is smaller than the classifier's crop {cw}x{ch}")
            x1, y1 = max(0, (w - cw) // 2), max(0, (h - ch) // 2)
            img = img[y1:min(h, y1 + ch), x1:min(w, x1 + cw)]
        chans = [img[:, :, c].astype(np.float32) for c in range(3)]
        for c in range(3):
            chans[c] *= self._alpha[c]
            chans[c] += self._beta[c]
        return np.stack(chans, axis=0)

    def __call__(self, images: Sequence[np.ndarray]) -> list[tuple[int, float]]:
        """(class index, probability) of each image."""
        out: list[tuple[int, float]] = []
        for beg in range(0, len(images), self.batch_size):
            batch = np.stack([self.preprocess(im) for im in images[beg:beg + self.batch_size]])
            prob = self.run(batch)
            if prob.ndim != 2 or prob.shape[1] != len(self.labels):
                raise ConfigError(f"classifier output of shape {list(prob.shape)} does not match its "
                                  f"{len(self.labels)} labels {self.labels}")
            top = prob.argsort(axis=1)[:, -1]  # Topk's choice (the last of equal maxima)
            out += [(int(k), float(prob[i, k])) for i, k in enumerate(top)]
        return out


class TextlineOrientation:
    """PaddleOCR 3's text-line orientation stage: every crop whose top class is the second label (180 degrees)
    is turned by PaddleX's rotate_image."""

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], folder: ModelFolder, batch_size: int = 6) -> None:
        self.classifier = ImageClassifier(run, folder, batch_size)
        if len(self.classifier.labels) != 2:
            raise ConfigError(f"{folder.path}: a text line orientation model has 2 labels (0 and 180 degrees), "
                              f"got {self.classifier.labels}")

    def __call__(self, crops: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[tuple[str, float]]]:
        res = self.classifier(crops)
        labels = self.classifier.labels
        out = [rotate_image(c, 180) if k == 1 else c for c, (k, _) in zip(crops, res)]
        return out, [(labels[k], p) for k, p in res]


def _angle(label: str, folder: Any) -> int:
    try:
        angle = int(float(label))
    except ValueError:
        raise ConfigError(f"{folder}: document orientation labels must be angles (0, 90, 180, 270), "
                          f"got {label!r}") from None
    return angle % 360


class DocOrientation:
    """PaddleOCR 3's document orientation stage: the page is turned by its top class's angle
    (counter-clockwise, as PaddleX's doc_preprocessor does) before detection."""

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], folder: ModelFolder) -> None:
        self.classifier = ImageClassifier(run, folder, 1)
        self.angles = [_angle(lb, folder.path) for lb in self.classifier.labels]

    def __call__(self, img: np.ndarray) -> tuple[np.ndarray, int]:
        k, _ = self.classifier([img])[0]
        angle = self.angles[k]
        return rotate_image(img, angle), angle
