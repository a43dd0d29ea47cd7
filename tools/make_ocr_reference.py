"""Reference OCR results for pdlite's image set from Paddle Inference (rapidocr_paddle), PaddleOCR's processing.

Usage: python tools/make_ocr_reference.py [--images examples/images] [--out tests/fixtures/ocr]
Needs: pip install rapidocr_paddle==1.4.5 paddlepaddle (test-only; pdlite never imports them).

rapidocr_paddle runs the same three trained models (PP-OCRv4 mobile det/rec, mobile v2 cls) on Paddle Inference
with a copy of PaddleOCR's pipeline, but its defaults differ from PaddleOCR's `predict_system.py`. `rapidocr_as_paddleocr`
sets it to PaddleOCR's: det_limit_side_len 960 / 'max' (RapidOCR: 736 / 'min', and a 960/1500/2000 ladder for 'max'),
ImageNet mean/std for det (RapidOCR: 0.5), box_thresh 0.6 / unclip_ratio 1.5 / no dilation (RapidOCR: 0.5 / 1.6 /
dilation), PaddleOCR 2.6+'s order_points_clockwise (RapidOCR keeps the older imutils one), and no letterbox or
min/max side rescaling (RapidOCR extras). Images are decoded once with cv2 and handed over as BGR arrays.

Writes (small, committed):
- reference.json: {image: [{"box", "text", "score"}]} of Paddle Inference + PaddleOCR processing;
- reference_rapidocr_defaults.json: the same from rapidocr_paddle at its own defaults (for OCR.like_rapidocr());
- db_case.npz: one det probability map (float16-rounded, from Paddle Inference) with the boxes and scores that
  PaddleOCR's DBPostProcess (RapidOCR's copy, PaddleOCR's parameters) gives for it;
- ctc_case.npz: recognition outputs rebuilt from (argmax, max prob) of real Paddle Inference rec outputs, with the
  text and score PaddleOCR's CTCLabelDecode (RapidOCR's copy) gives for them.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
from typing import Any

import numpy as np

DET_MEAN = [0.485, 0.456, 0.406]
DET_STD = [0.229, 0.224, 0.225]
HERE = os.path.dirname(os.path.abspath(__file__))


def order_points_clockwise(pts: np.ndarray) -> np.ndarray:
    """PaddleOCR 2.6+ tools/infer/predict_det.py (sum/difference ordering)."""
    rect = np.zeros((4, 2), dtype="float32")
    s = pts.sum(axis=1)
    rect[0] = pts[np.argmin(s)]
    rect[2] = pts[np.argmax(s)]
    tmp = np.delete(pts, (np.argmin(s), np.argmax(s)), axis=0)
    diff = np.diff(np.array(tmp), axis=1)
    rect[1] = tmp[np.argmin(diff)]
    rect[3] = tmp[np.argmax(diff)]
    return rect


def rapidocr_as_paddleocr(package: str = "rapidocr_paddle", threads: int = 1) -> Any:
    """A RapidOCR engine (rapidocr_paddle, rapidocr_onnxruntime or rapidocr_openvino) set to PaddleOCR
    predict_system's processing."""
    mod = importlib.import_module(package)
    det_utils = importlib.import_module(f"{package}.ch_ppocr_det.utils")
    thread_kw = ({"cpu_math_library_num_threads": threads} if package == "rapidocr_paddle"
                 else {"inference_num_threads": threads} if package == "rapidocr_openvino"
                 else {"intra_op_num_threads": threads, "inter_op_num_threads": 1})
    eng = mod.RapidOCR(min_height=0, width_height_ratio=-1, max_side_len=10 ** 9, min_side_len=0, text_score=0.5,
                       **thread_kw)
    det = eng.text_det
    det.get_preprocess = lambda max_wh: det_utils.DetPreProcess(960, "max", DET_MEAN, DET_STD)
    det.postprocess_op = det_utils.DBPostProcess(thresh=0.3, box_thresh=0.6, max_candidates=1000, unclip_ratio=1.5,
                                                 score_mode="fast", use_dilation=False)
    det.order_points_clockwise = order_points_clockwise
    return eng


def run_reference(eng: Any, img: np.ndarray) -> list[dict]:
    res, _ = eng(img)
    return [{"box": np.asarray(b).astype(int).tolist(), "text": t, "score": float(s)} for b, t, s in (res or [])]


def main() -> None:
    import cv2

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default=os.path.join(HERE, "..", "examples", "images"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures", "ocr"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.images, "ground_truth.json"), encoding="utf-8") as f:
        names = list(json.load(f))
    eng = rapidocr_as_paddleocr("rapidocr_paddle", threads=1)
    ref = {}
    for name in names:
        img = cv2.imread(os.path.join(args.images, name), cv2.IMREAD_COLOR)
        ref[name] = run_reference(eng, img)
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=0)
    import rapidocr_paddle

    plain = rapidocr_paddle.RapidOCR(cpu_math_library_num_threads=1)
    ref_plain = {}
    for name in names:
        res, _ = plain(cv2.imread(os.path.join(args.images, name), cv2.IMREAD_COLOR))
        ref_plain[name] = [{"box": np.round(np.asarray(b)).astype(int).tolist(), "text": t, "score": float(s)}
                           for b, t, s in (res or [])]
    with open(os.path.join(args.out, "reference_rapidocr_defaults.json"), "w", encoding="utf-8") as f:
        json.dump(ref_plain, f, ensure_ascii=False, indent=0)

    # DB post-processing case: the det map of the receipt, rounded to float16 so the fixture stays small
    det = eng.text_det
    img = cv2.imread(os.path.join(args.images, "receipt.png"), cv2.IMREAD_COLOR)
    pred = det.infer(det.get_preprocess(max(img.shape[:2]))(img))[0].astype(np.float16)
    boxes, scores = det.postprocess_op(pred.astype(np.float32), img.shape[:2])
    np.savez_compressed(os.path.join(args.out, "db_case.npz"), pred=pred, src_shape=np.array(img.shape[:2]),
                        boxes=np.asarray(boxes, dtype=np.int32), scores=np.asarray(scores, dtype=np.float64))

    # CTC decode case: real rec outputs of the sample image's crops, kept as (argmax, max prob) per step
    img = cv2.imread(os.path.join(args.images, "sample_zh.png"), cv2.IMREAD_COLOR)
    dt_boxes, _ = eng.auto_text_det(img)
    crops = eng.get_crop_img_list(img, dt_boxes)
    rec = eng.text_rec
    ratio = max(c.shape[1] / c.shape[0] for c in crops)
    batch = np.stack([rec.resize_norm_img(c, max(ratio, 320 / 48)) for c in crops]).astype(np.float32)
    preds = rec.session(batch)[0]
    idx, prob = preds.argmax(axis=2).astype(np.int32), preds.max(axis=2).astype(np.float32)
    rebuilt = ctc_rebuild(idx, prob, preds.shape[2])
    decoded = rec.postprocess_op(rebuilt)
    np.savez_compressed(os.path.join(args.out, "ctc_case.npz"), idx=idx, prob=prob, classes=preds.shape[2],
                        texts=np.array([t for t, _ in decoded]), scores=np.array([s for _, s in decoded]))
    print(f"{sum(len(v) for v in ref.values())} reference lines over {len(ref)} images -> {os.path.abspath(args.out)}")


def ctc_rebuild(idx: np.ndarray, prob: np.ndarray, classes: int) -> np.ndarray:
    """A [N, T, C] tensor whose argmax and max are (idx, prob): other classes get prob/2 * (seeded) uniform."""
    rng = np.random.default_rng(0)
    out = (rng.random((*idx.shape, classes), dtype=np.float32) * (prob[..., None] * 0.5)).astype(np.float32)
    np.put_along_axis(out, idx[..., None].astype(np.int64), prob[..., None], axis=2)
    return out


if __name__ == "__main__":
    main()
