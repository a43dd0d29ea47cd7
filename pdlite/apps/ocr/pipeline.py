"""PP-OCR end to end: detect, sort the boxes into reading order, crop each (perspective), classify direction,
recognise, drop low scores; as PaddleOCR 2.x's `TextSystem` (tools/infer/predict_system.py) for 2.x folders and
the shipped models, as PaddleOCR 3's OCR pipeline (paddlex/inference/pipelines/ocr/pipeline.py) for PaddleOCR 3
folders (inference.yml)."""
from __future__ import annotations

import copy
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from pdlite.apps.ocr import languages, rapidocr_compat
from pdlite.apps.ocr._deps import require
from pdlite.apps.ocr.cls import TextClassifier
from pdlite.apps.ocr.det import (
    DET_MEAN,
    DET_STD,
    DBPostProcess,
    det_normalize,
    det_normalize_paddlex,
    det_resize,
    filter_tag_det_res,
)
from pdlite.apps.ocr.engine import (
    CLS_MODEL_DIR,
    DET_MODEL_DIR,
    DEVICES,
    REC_CHAR_DICT_PATH,
    REC_MODEL_DIR,
    Model,
    precision_context,
)
from pdlite.apps.ocr.orientation import DocOrientation, TextlineOrientation
from pdlite.apps.ocr.paddlex_config import (
    det_settings,
    image_mode,
    normalize_settings,
    read_model_folder,
    rec_settings,
)
from pdlite.apps.ocr.placement import Placement, ocr_candidates
from pdlite.apps.ocr.rec import PaddleXTextRecognizer, TextRecognizer, load_dictionary
from pdlite.errors import ConfigError, InputError

STAGES = ("det", "cls", "rec")  # "cls" includes the perspective crops
T = TypeVar("T")


class OCRLine(NamedTuple):
    """One recognised text line: its box (4 [x, y] corners, clockwise from top-left), text and score."""

    box: list[list[int]]
    text: str
    score: float


class OCRWarning(UserWarning):
    """Something about an input the caller should know (a fully transparent image)."""


def _to_bgr(img: np.ndarray, name: str) -> np.ndarray:
    """HxW / HxWx1..4 uint8 -> HxWx3 uint8 BGR; alpha composited on white (text drawn on a transparent background
    stays visible); a fully transparent image warns."""
    cv2 = require("cv2")
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.shape[2] == 3:
        return img
    if img.shape[2] == 2:  # gray + alpha
        color, alpha = cv2.cvtColor(np.asarray(img[:, :, 0], order="C"), cv2.COLOR_GRAY2BGR), img[:, :, 1]
    else:
        color, alpha = img[:, :, :3], img[:, :, 3]
    if not alpha.any():
        warnings.warn(f"{name} is fully transparent (alpha 0 everywhere): read as a blank white image",
                      OCRWarning, stacklevel=3)
    if alpha.min() == 255:
        return np.asarray(color, order="C")
    a = alpha.astype(np.float32)[:, :, None]
    out = (color.astype(np.float32) * a + 255.0 * (255.0 - a)) / 255.0
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _may_have_alpha(buf: np.ndarray) -> bool:
    """Whether an encoded image may carry transparency: a PNG with an alpha colour type or a tRNS chunk, any WebP or
    TIFF (checked by decoding). Others (JPEG, BMP, ...) have none."""
    head = bytes(buf[:4])
    if head == b"\x89PNG":
        if len(buf) > 25 and int(buf[25]) in (4, 6):  # IHDR colour type: gray + alpha, RGBA
            return True
        start = bytes(buf[:65536])
        return b"tRNS" in start[:start.find(b"IDAT")] if b"IDAT" in start else b"tRNS" in start
    return head == b"RIFF" or head in (b"II*\x00", b"MM\x00*")


def _decode(buf: np.ndarray, name: str) -> np.ndarray | None:
    """cv2.imdecode as cv2.imread reads (IMREAD_COLOR: EXIF orientation applied, 16 bits scaled to 8), except that
    an image with an alpha channel is composited on white."""
    cv2 = require("cv2")
    if _may_have_alpha(buf):
        full = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
        if full is not None and full.ndim == 3 and full.shape[2] in (2, 4):
            if full.dtype == np.uint16:  # as IMREAD_COLOR scales 16-bit images
                full = np.clip(np.round(full / 256.0), 0, 255).astype(np.uint8)
            return _to_bgr(full, name)
    img = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    return None if img is None or img.size == 0 else img


def load_image(image: str | os.PathLike | bytes | np.ndarray) -> np.ndarray:
    """An HWC uint8 BGR image from a path, encoded bytes or an array (HxW gray, HxWx3 BGR, HxWx4 BGRA); an alpha
    channel is composited on white."""
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        if not os.path.exists(path):
            raise InputError(f"image {path!r} not found")
        if not os.path.isfile(path):
            raise InputError(f"image {path!r} is not a file")
        img = _decode(np.fromfile(path, dtype=np.uint8), f"image {path!r}")
        if img is None:
            raise InputError(f"image {path!r} could not be decoded (not an image format OpenCV reads)")
        return img
    if isinstance(image, (bytes, bytearray, memoryview)):
        img = _decode(np.frombuffer(image, dtype=np.uint8), "the image")
        if img is None:
            raise InputError(f"image bytes ({len(image)} bytes) could not be decoded")
        return img
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise InputError(f"image array must be uint8 (HWC BGR as cv2 gives), got {image.dtype}")
        if image.ndim == 2 or (image.ndim == 3 and image.shape[2] in (3, 4)):
            return _to_bgr(image, "the image array")
        raise InputError(f"image array must be HxW, HxWx3 (BGR) or HxWx4 (BGRA), got shape {list(image.shape)}")
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


def crop_minarea(img: np.ndarray, points: np.ndarray) -> np.ndarray:
    """PaddleX's crop of a quad box (`CropByPolys.get_minarea_rect_crop`): the minimum-area rectangle of its
    integer corners, ordered as DB orders them, warped upright."""
    box, _ = DBPostProcess.get_mini_boxes(np.asarray(points).astype(np.int32))
    return get_rotate_crop_image(img, np.array(box))


def _rebound(stage: object, old: Model, new: Model) -> object:
    """A shallow copy of a stage (recogniser, classifier, orientation) that runs `new` where it ran `old` (its
    `run`, or its `classifier`'s)."""
    out = copy.copy(stage)
    if getattr(out, "run", None) is old:
        out.run = new  # type: ignore[attr-defined]
    if hasattr(out, "classifier"):
        out.classifier = _rebound(out.classifier, old, new)  # type: ignore[attr-defined]
    return out


# PaddleOCR 3's pipeline defaults (paddlex/configs/pipelines/OCR.yaml, PaddleOCR 3's OCR pipeline) and 2.x's
# (tools/infer/utility.py): the folders decide which apply, a value given wins
DEFAULTS = {"paddleocr3": {"det_limit_side_len": 64, "det_limit_type": "min", "det_max_side_limit": 4000,
                           "drop_score": 0.0},
            "paddleocr2": {"det_limit_side_len": 960, "det_limit_type": "max", "det_max_side_limit": None,
                           "drop_score": 0.5}}


class OCR:
    """PP-OCR on pdlite: the shipped PP-OCRv4 mobile det + rec and mobile v2 direction classifier, or your own
    PaddleOCR models (PaddleOCR 3 / PaddleX folders with inference.yml, or PaddleOCR 2.x folders).

    `OCR()(image)` -> [OCRLine(box, text, score), ...] in reading order. Parameters carry PaddleOCR's names;
    with PaddleOCR 3 folders (an inference.yml in the det or rec folder) the pipeline is PaddleOCR 3's (its
    defaults: det short side at least 64, long side at most 4000, rec score threshold 0, PaddleX's pre- and
    post-processing read from each inference.yml), otherwise PaddleOCR 2.x's (`use_angle_cls`, alias `use_cls`,
    is on by default here). `context`: NNAdapter context properties for the devices (docs/nnadapter.md).
    """

    def __init__(self, device: str = "host", threads: int = 1, use_angle_cls: bool = True,
                 det_model_dir: str | os.PathLike | None = None, rec_model_dir: str | os.PathLike | None = None,
                 cls_model_dir: str | os.PathLike | None = None,
                 textline_orientation_model_dir: str | os.PathLike | None = None,
                 doc_orientation_model_dir: str | os.PathLike | None = None,
                 use_doc_orientation_classify: bool | None = None,
                 rec_char_dict_path: str | os.PathLike | None = None, use_space_char: bool = True,
                 det_limit_side_len: int | None = None, det_limit_type: str | None = None,
                 det_max_side_limit: int | None = None, det_db_thresh: float = 0.3,
                 det_db_box_thresh: float = 0.6, det_db_unclip_ratio: float = 1.5, use_dilation: bool = False,
                 det_db_score_mode: str = "fast", rec_image_shape: str | Sequence[int] = "3, 48, 320",
                 rec_batch_num: int = 6, cls_image_shape: str | Sequence[int] = "3, 48, 192",
                 cls_batch_num: int = 6, cls_thresh: float = 0.9, label_list: Sequence[str] = ("0", "180"),
                 drop_score: float | None = None, use_cls: bool | None = None, compat: str = "paddleocr",
                 context: Mapping[str, str] | None = None, lang: str | None = None,
                 precision: str = "auto") -> None:
        if compat not in ("paddleocr", "rapidocr"):
            raise ConfigError(f"compat must be 'paddleocr' or 'rapidocr', got {compat!r}")
        self.compat = compat
        if use_cls is not None:
            use_angle_cls = use_cls
        if device not in DEVICES:
            raise ConfigError(f"device {device!r}: expected one of {', '.join(DEVICES)}")
        if int(threads) < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        if lang is not None:
            lang_det, lang_rec = languages.resolve(lang)
            det_model_dir = det_model_dir if det_model_dir is not None else lang_det
            rec_model_dir = rec_model_dir if rec_model_dir is not None else lang_rec
        self.lang = lang
        self.threads = int(threads)
        self.device = device
        context = precision_context(context, precision, device)
        build = "host" if device == "auto" else device  # auto: the host until the placement is decided
        self.timings = {k: 0.0 for k in STAGES}  # seconds spent per stage, summed over calls
        det_f = read_model_folder(DET_MODEL_DIR if det_model_dir is None else det_model_dir, "det")
        rec_f = read_model_folder(REC_MODEL_DIR if rec_model_dir is None else rec_model_dir, "rec")
        self.folders = {"det": det_f, "rec": rec_f}
        self.flavour = "paddleocr3" if (det_f.paddlex or rec_f.paddlex) else "paddleocr2"
        if self.flavour == "paddleocr3" and compat == "rapidocr":
            raise ConfigError("compat='rapidocr' (--preset rapidocr) reproduces RapidOCR on PaddleOCR 2.x models; "
                              "these are PaddleOCR 3 folders (inference.yml)")
        given = {"det_limit_side_len": det_limit_side_len, "det_limit_type": det_limit_type,
                 "det_max_side_limit": det_max_side_limit, "drop_score": drop_score}
        cfg = {k: DEFAULTS[self.flavour][k] if v is None else v for k, v in given.items()}
        self.det_limit_side_len = int(cfg["det_limit_side_len"])
        self.det_limit_type = cfg["det_limit_type"]
        if self.det_limit_type not in ("max", "min", "resize_long"):
            raise ConfigError(f"det_limit_type must be 'max', 'min' or 'resize_long', got {self.det_limit_type!r}")
        self.det_max_side_limit = None if cfg["det_max_side_limit"] is None else int(cfg["det_max_side_limit"])
        self.drop_score = float(cfg["drop_score"])
        db = {"max_candidates": 1000, "use_dilation": use_dilation, "score_mode": det_db_score_mode}
        self._det_norm = (1 / 255, DET_MEAN, DET_STD)
        self._det_rgb = False
        if det_f.paddlex:
            db = det_settings(det_f)
            self._det_norm = normalize_settings(det_f)
            self._det_rgb = image_mode(det_f) == "RGB"
        self.postprocess_op = DBPostProcess(thresh=det_db_thresh, box_thresh=det_db_box_thresh,
                                            unclip_ratio=det_db_unclip_ratio, paddlex=self.flavour == "paddleocr3",
                                            **db)
        self._model_dirs = {"det": det_f.path, "rec": rec_f.path}
        self.det = Model(det_f.path, build, self.threads, "det_model_dir", context)
        self.rec_model = Model(rec_f.path, build, self.threads, "rec_model_dir", context)
        if rec_f.paddlex:
            if rec_char_dict_path is not None:
                raise ConfigError(f"rec_char_dict_path: {rec_f.path} is a PaddleOCR 3 folder, its dictionary is the "
                                  "character_dict of its inference.yml")
            shape, chars = rec_settings(rec_f)
            self._character = ["blank", *chars, *([" "] if use_space_char else [])]
        else:
            shape = _shape(rec_image_shape, "rec_image_shape")
            self._character = load_dictionary(REC_CHAR_DICT_PATH if rec_char_dict_path is None
                                              else rec_char_dict_path, use_space_char)
        if self.flavour == "paddleocr3":
            self.text_recognizer = PaddleXTextRecognizer(self.rec_model, self._character, shape, int(rec_batch_num),
                                                         rec_f.paddlex and image_mode(rec_f) == "RGB")
        else:
            self.text_recognizer = TextRecognizer(self.rec_model, self._character, shape, int(rec_batch_num))
        self._setup_orientation(build, context, use_angle_cls, cls_model_dir, textline_orientation_model_dir,
                                doc_orientation_model_dir, use_doc_orientation_classify,
                                (_shape(cls_image_shape, "cls_image_shape"), int(cls_batch_num), float(cls_thresh),
                                 list(label_list)))
        self.placement: Placement | None = None  # device "auto": where each network runs (placement.py)
        self._placed: dict[str, str] | None = None  # the plan this pipeline's networks run on
        if device == "auto":
            self.placement = Placement(ocr_candidates(), self.threads)
            if self.placement.load(self.models()):
                self._place()  # a cached decision: on it from the start
            else:
                for model in self.models().values():
                    model.kept = []  # the first image's inputs, measured on each device

    def _setup_orientation(self, device: str, context: Mapping[str, str] | None, use_angle_cls: bool,
                           cls_dir: str | os.PathLike | None, textline_dir: str | os.PathLike | None,
                           doc_dir: str | os.PathLike | None, use_doc: bool | None, cls_args: tuple) -> None:
        """The direction stage (PaddleOCR 2.x's classifier, or PaddleOCR 3's text-line orientation model) and
        the optional document orientation before detection."""
        if cls_dir is not None and textline_dir is not None:
            raise ConfigError("cls_model_dir and textline_orientation_model_dir both given: pass one direction model")
        line_dir = textline_dir if textline_dir is not None else cls_dir
        if line_dir is None and self.flavour == "paddleocr2":
            line_dir = CLS_MODEL_DIR
        self.text_classifier = None
        self.use_angle_cls = bool(use_angle_cls) and line_dir is not None
        if self.use_angle_cls:
            folder = read_model_folder(line_dir, "textline")
            self._model_dirs["cls"] = folder.path
            self.cls_model = Model(folder.path, device, self.threads, "cls_model_dir", context)
            if folder.paddlex:
                self.text_classifier = TextlineOrientation(self.cls_model, folder, cls_args[1])
            else:
                self.text_classifier = TextClassifier(self.cls_model, *cls_args)
        self.doc_orientation = None
        self.last_doc_angle: int | None = None  # the page angle of the last call (with a doc orientation model)
        if use_doc and doc_dir is None:
            raise ConfigError("use_doc_orientation_classify needs doc_orientation_model_dir (a PP-LCNet_x1_0_doc_ori "
                              "folder; pdlite does not ship one)")
        if doc_dir is not None and use_doc is not False:
            folder = read_model_folder(doc_dir, "doc")
            if not folder.paddlex:
                raise ConfigError(f"doc_orientation_model_dir {str(folder.path)!r} has no inference.yml (expected a "
                                  "PaddleX folder such as PP-LCNet_x1_0_doc_ori)")
            self.doc_model = Model(folder.path, device, self.threads, "doc_orientation_model_dir", context)
            self.doc_orientation = DocOrientation(self.doc_model, folder)

    @classmethod
    def like_rapidocr(cls, **kwargs: object) -> OCR:
        """RapidOCR 1.4's defaults and image preparation (see rapidocr_compat), for comparing with its results;
        keyword arguments override as in OCR()."""
        return cls(**{**rapidocr_compat.PARAMS, "compat": "rapidocr", **kwargs})

    def detect(self, img: np.ndarray) -> np.ndarray:
        """Text boxes [K, 4, 2] (integer pixels) of a BGR image, in the detector's order."""
        if self.compat == "rapidocr":
            limit = rapidocr_compat.det_limit(self.det_limit_side_len, self.det_limit_type, max(img.shape[:2]))
            x = rapidocr_compat.det_input(img, limit, self.det_limit_type)
            if x is None:
                return np.zeros((0, 4, 2), np.float32)
            boxes, _ = self.postprocess_op(self.det(x), np.array([img.shape[0], img.shape[1], 1.0, 1.0]))
            return filter_tag_det_res(boxes, img.shape, rapidocr_compat.order_points_imutils)
        resized, shape = det_resize(img, self.det_limit_side_len, self.det_limit_type, self.det_max_side_limit)
        if self.flavour == "paddleocr3":  # PaddleX: the yml's channel order and normalisation; boxes as DB gives them
            if self._det_rgb:
                resized = np.asarray(resized[:, :, ::-1], order="C")
            boxes, _ = self.postprocess_op(self.det(det_normalize_paddlex(resized, *self._det_norm)), shape)
            return boxes
        boxes, _ = self.postprocess_op(self.det(det_normalize(resized)), shape)
        return filter_tag_det_res(boxes, img.shape)

    def _run(self, img: np.ndarray) -> list[OCRLine]:
        if self.placement is None:
            return self._read(img)
        self._place()
        out = self._read(img)
        models = self.models()
        kept = [m.kept for m in models.values()]
        if self.placement.plan is None and None not in kept and (all(kept) or len(kept[0]) >= 3):
            self.placement.measure(models)  # once every network has inputs (or after 3 pages)
            self._place()
        return out

    _STAGE_ATTRS = {"doc": ("doc_model", "doc_orientation"), "det": ("det", None),
                    "cls": ("cls_model", "text_classifier"), "rec": ("rec_model", "text_recognizer")}

    def _place(self) -> None:
        """Move the networks to the placement's plan, once it is decided (this pipeline's and each clone's)."""
        plan = self.placement.plan if self.placement is not None else None
        if plan is None or self._placed is plan:
            return
        for stage, device in plan.items():
            model_attr, stage_attr = self._STAGE_ATTRS[stage]
            old = getattr(self, model_attr)
            new = old if old.device == device else self.placement.build(old, device)
            new.kept, new.note = None, self.placement.describe(stage)
            setattr(self, model_attr, new)
            if stage_attr is not None:
                setattr(self, stage_attr, _rebound(getattr(self, stage_attr), old, new))
        self._placed = plan

    def _read(self, img: np.ndarray) -> list[OCRLine]:
        return self._recognise(self._detect(img))

    def _detect(self, img: np.ndarray) -> tuple:
        """A read's first half: (the image as detected, its boxes in reading order, RapidOCR's record, raw h, w)."""
        raw_h, raw_w = img.shape[:2]
        record = None
        if self.compat == "rapidocr":
            img, record = rapidocr_compat.prepare(img)
        t0 = time.perf_counter()
        if self.doc_orientation is not None:
            img, self.last_doc_angle = self.doc_orientation(img)
        dt_boxes = self.detect(img)
        self.timings["det"] += time.perf_counter() - t0
        return img, sorted_boxes(dt_boxes) if len(dt_boxes) else [], record, raw_h, raw_w

    def _recognise(self, found: tuple) -> list[OCRLine]:
        """A read's second half: crops, direction, recognition of `_detect`'s boxes."""
        img, boxes, record, raw_h, raw_w = found
        if not boxes:
            return []
        t1 = time.perf_counter()
        crop = crop_minarea if self.flavour == "paddleocr3" else get_rotate_crop_image
        crops = [crop(img, b.copy()) for b in boxes]
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

    def overlapped(self, items: Iterable[T], load: Callable[[T], np.ndarray]) -> Iterator[tuple]:
        """(item, image, lines, error) per item, in order, with the stages overlapped: the next item's `load` and
        detection run on a second thread while this one's crops, direction and recognition run (`pdlite ocr
        --overlap`). The lines are those of reading the items one by one; an item whose load or read raised gives
        (item, None, [], the exception) and the others go on. With `auto`, the items before the placement is decided
        are read one by one (the first image decides it). `last_doc_angle` is not kept."""
        from concurrent.futures import ThreadPoolExecutor

        def first(item: T) -> tuple:
            try:
                img = load(item)
                return img, self._detect(img), None
            except Exception as e:  # noqa: BLE001 -- reported with its item, the others are read
                return None, None, e

        end = object()
        todo = iter(items)
        item = next(todo, end)
        while item is not end and self.placement is not None and self.placement.plan is None:
            try:  # one by one until the networks stay where they are
                img = load(item)
                yield item, img, self._run(img), None
            except Exception as e:  # noqa: BLE001
                yield item, None, [], e
            item = next(todo, end)
        if item is end:
            return
        self._place()
        with ThreadPoolExecutor(1, thread_name_prefix="pdlite-ocr-det") as pool:
            pending = (item, pool.submit(first, item))
            for nxt in [*todo, end]:
                item, fut = pending
                img, found, err = fut.result()
                if nxt is not end:
                    pending = (nxt, pool.submit(first, nxt))
                if err is None:
                    try:
                        yield item, img, self._recognise(found), None
                        continue
                    except Exception as e:  # noqa: BLE001
                        err = e
                yield item, None, [], err

    def __call__(self, image: str | os.PathLike | bytes | np.ndarray) -> list[OCRLine]:
        """Text lines of an image (path, encoded bytes, or HWC uint8 BGR array) in reading order. With a document
        orientation model the boxes are in the turned page's coordinates (as PaddleOCR 3 gives them); the angle
        is `last_doc_angle`."""
        return self._run(load_image(image))

    def clone(self) -> OCR:
        """A pipeline over the same networks (each Model's predictor cloned: weights and prepared kernels shared,
        nothing loaded again) with its own inputs, outputs and `timings`: clones read images at the same time on
        other threads (`pdlite ocr --workers N`). Same settings, same results as this pipeline."""
        new = copy.copy(self)
        new.timings = {k: 0.0 for k in STAGES}
        new.last_doc_angle = None
        for attr, stage in (("det", None), ("rec_model", "text_recognizer"), ("cls_model", "text_classifier"),
                            ("doc_model", "doc_orientation")):
            model = getattr(self, attr, None)
            if model is None:
                continue
            setattr(new, attr, model.clone())
            if stage is not None:
                setattr(new, stage, _rebound(getattr(self, stage), model, getattr(new, attr)))
        return new

    def models(self) -> dict[str, Model]:
        """The networks in use by stage (doc, det, cls when a direction model runs, rec)."""
        out = {"doc": getattr(self, "doc_model", None), "det": self.det, "cls": getattr(self, "cls_model", None),
               "rec": self.rec_model}
        return {k: m for k, m in out.items() if m is not None}

    def devices(self) -> dict[str, str]:
        """The device each network runs on ("auto" until its first input when device="auto")."""
        return {k: m.device for k, m in self.models().items()}
