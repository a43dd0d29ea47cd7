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

    def __init__(self, character: Sequence[str], paddlex: bool = False) -> None:
        self.character = list(character)
        self.paddlex = paddlex  # PaddleX averages the kept probabilities in float32

    def __call__(self, preds: np.ndarray) -> list[tuple[str, float]]:
        """preds: [N, T, C] probabilities (the model ends in softmax) -> [(text, score)] per row."""
        if preds.ndim != 3 or preds.shape[2] != len(self.character):
            raise ConfigError(f"recognition output of shape {list(preds.shape)} does not match the dictionary "
                              f"({len(self.character)} classes incl. blank and space); wrong rec_char_dict_path?")
        preds_idx = preds.argmax(axis=2)
        preds_prob = np.take_along_axis(preds, preds_idx[..., None], axis=2)[..., 0]  # = max(axis=2), one pass less
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
            if text_prob is None:
                conf = [1] * int(selection.sum())
            else:
                conf = text_prob[b][selection] if self.paddlex else text_prob[b][selection].tolist()
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


class PaddleXTextRecognizer:
    """PaddleOCR 3's recognition (PaddleX OCR pipeline + TextRecPredictor): crops sorted by aspect ratio (stable),
    batches of `batch_size`; each crop resized to height H keeping its ratio (width at least W, at most 3200 px,
    `OCRReisizeNormImg`), then the batch zero-padded to its widest (`ToBatch`); CTC decoded."""

    MAX_WIDTH = 3200

    def __init__(self, run: Callable[[np.ndarray], np.ndarray], character: Sequence[str],
                 rec_image_shape: Sequence[int] = (3, 48, 320), batch_size: int = 6, rgb: bool = False) -> None:
        self.run = run
        self.rec_image_shape = [int(v) for v in rec_image_shape]
        self.batch_size = int(batch_size)
        self.rgb = rgb  # the model reads RGB crops (its yml's DecodeImage; PaddleOCR's exports read BGR)
        self.postprocess_op = CTCLabelDecode(character, paddlex=True)

    def resize_norm(self, img: np.ndarray) -> np.ndarray:
        if self.rgb:
            img = np.asarray(img[:, :, ::-1], order="C")
        img_c, img_h, img_w = self.rec_image_shape
        if img.shape[2] != img_c:
            raise ConfigError(f"rec_image_shape has {img_c} channels but the crop has {img.shape[2]}")
        ratio = max(img_w / img_h, img.shape[1] * 1.0 / img.shape[0])
        return resize_norm_pad(img, img_c, img_h, min(int(img_h * ratio), self.MAX_WIDTH))

    def __call__(self, img_list: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        order = sorted(range(len(img_list)), key=lambda i: img_list[i].shape[1] / float(img_list[i].shape[0]))
        rec_res: list[tuple[str, float]] = [("", 0.0)] * len(img_list)
        for beg in range(0, len(order), self.batch_size):
            ids = order[beg:beg + self.batch_size]
            ims = [self.resize_norm(img_list[i]) for i in ids]
            width = max(im.shape[2] for im in ims)
            batch = np.zeros((len(ims), ims[0].shape[0], ims[0].shape[1], width), np.float32)
            for k, im in enumerate(ims):
                batch[k, :, :, :im.shape[2]] = im
            for i, res in zip(ids, self.postprocess_op(self.run(batch))):
                rec_res[i] = res
        return rec_res
