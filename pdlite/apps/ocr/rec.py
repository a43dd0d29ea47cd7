"""Text recognition (CRNN/SVTR with CTC): PaddleOCR's `resize_norm_img`, aspect-ratio batching, `CTCLabelDecode`.

Mirrors PaddleOCR 2.x `tools/infer/predict_rec.py` and `ppocr/postprocess/rec_postprocess.py`.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from pdlite.apps.ocr.cls import resize_norm_pad
from pdlite.errors import ConfigError


def load_dictionary(path: str | os.PathLike, use_space_char: bool = True) -> list[str]:
    """The CTC alphabet: 'blank' (index 0), one character per line of `path`, then ' ' when use_space_char."""
    if not os.path.isfile(path):
        raise ConfigError(f"rec_char_dict_path {os.fspath(path)!r} does not exist")
    chars = []
    with open(path, "rb") as f:
        for line in f.readlines():
            chars.append(line.decode("utf-8").strip("\n").strip("\r\n"))
    if use_space_char:
        chars.append(" ")
    return ["blank"] + chars


class CTCLabelDecode:
    """Greedy CTC decoding: best class per time step, merge repeats, drop blanks; score = mean kept probability."""

    def __init__(self, character: Sequence[str]) -> None:
        self.character = list(character)

    def __call__(self, preds: np.ndarray) -> list[tuple[str, float]]:
        """preds: [N, T, C] probabilities (the model ends in softmax) -> [(text, score)] per row."""
        if preds.ndim != 3 or preds.shape[2] != len(self.character):
            raise ConfigError(f"recognition output of shape {list(preds.shape)} does not match the dictionary "
                              f"({len(self.character)} classes incl. blank and space); wrong rec_char_dict_path?")
        preds_idx = preds.argmax(axis=2)
        preds_prob = preds.max(axis=2)
        return self.decode(preds_idx, preds_prob, is_remove_duplicate=True)

    def decode(self, text_index: np.ndarray, text_prob: np.ndarray | None = None,
               is_remove_duplicate: bool = False) -> list[tuple[str, float]]:
        result = []
        for b in range(len(text_index)):
            idx = text_index[b]
            selection = np.ones(len(idx), dtype=bool)
            if is_remove_duplicate:
                selection[1:] = idx[1:] != idx[:-1]
            selection &= idx != 0  # the blank
            conf = text_prob[b][selection].tolist() if text_prob is not None else [1] * int(selection.sum())
            if len(conf) == 0:
                conf = [0]
            text = "".join(self.character[int(t)] for t in idx[selection])
            result.append((text, float(np.mean(conf))))
        return result


def rec_resize_norm(img: np.ndarray, max_wh_ratio: float, image_shape: Sequence[int] = (3, 48, 320)) -> np.ndarray:
    """Resize to height imgH keeping the aspect ratio (width capped at imgH*max_wh_ratio), scale to [-1, 1],
    zero-pad on the right to imgH*max_wh_ratio: [C, imgH, W] float32."""
    img_c, img_h, _ = image_shape
    if img.shape[2] != img_c:
        raise ConfigError(f"rec_image_shape has {img_c} channels but the crop has {img.shape[2]}")
    return resize_norm_pad(img, img_c, img_h, int(img_h * max_wh_ratio))


class TextRecognizer:
    """Batches crops by aspect ratio (narrow first), pads each batch to its widest crop, runs, decodes."""

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], character: Sequence[str],
                 rec_image_shape: Sequence[int] = (3, 48, 320), rec_batch_num: int = 6) -> None:
        self.run = run
        self.rec_image_shape = [int(v) for v in rec_image_shape]
        self.rec_batch_num = int(rec_batch_num)
        self.postprocess_op = CTCLabelDecode(character)

    def __call__(self, img_list: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        img_num = len(img_list)
        indices = np.argsort(np.array([img.shape[1] / float(img.shape[0]) for img in img_list]))
        rec_res: list[tuple[str, float]] = [("", 0.0)] * img_num
        _, img_h, img_w = self.rec_image_shape[:3]
        for beg in range(0, img_num, self.rec_batch_num):
            end = min(img_num, beg + self.rec_batch_num)
            max_wh_ratio = img_w / img_h
            for ino in range(beg, end):
                h, w = img_list[indices[ino]].shape[0:2]
                max_wh_ratio = max(max_wh_ratio, w * 1.0 / h)
            batch = np.concatenate([rec_resize_norm(img_list[indices[ino]], max_wh_ratio,
                                                    self.rec_image_shape)[None] for ino in range(beg, end)])
            for rno, res in enumerate(self.postprocess_op(self.run(batch))):
                rec_res[indices[beg + rno]] = res
        return rec_res
