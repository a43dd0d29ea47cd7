"""Per-stage times of an OCR contender (benchmarks/ocr_bench.py --stages): where a pipeline's time goes.

Wraps the stages of pdlite's OCR app and of RapidOCR 1.4 (any engine) in timers, in the contender's own worker
process: det_pre (resize + normalise the page), det_run (the detector), db_post (DB boxes), crop (the perspective
crops), cls_pre / cls_run (direction), rec_pre / rec_run (recognition batches), ctc (CTC decoding); "other" is the
rest of the pass (sorting, filtering, copies, the engine's own bookkeeping). Each *_run stage also counts its calls
and the distinct input shapes it saw, so two engines can be checked to run the same networks on the same inputs.
Imports nothing at module level beyond the standard library (the RapidOCR worker runs under another interpreter).
"""
from __future__ import annotations

import time
from typing import Any

STAGES = ("det_pre", "det_run", "db_post", "crop", "cls_pre", "cls_run", "rec_pre", "rec_run", "ctc")


class Timed:
    """A callable that adds its time and calls (and, for a *_run stage, its first argument's shape) to `acc`;
    other attributes are the wrapped object's."""

    def __init__(self, fn: Any, key: str, acc: dict[str, list]) -> None:
        self._fn, self._key, self._acc = fn, key, acc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self._fn(*args, **kwargs)
        entry = self._acc[self._key]
        entry[0] += time.perf_counter() - t0
        entry[1] += 1
        if self._key.endswith("_run") and args and hasattr(args[0], "shape"):
            entry[2].append(tuple(int(v) for v in args[0].shape))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)


def new_acc() -> dict[str, list]:
    """{stage: [seconds, calls, input shapes]}."""
    return {k: [0.0, 0, []] for k in STAGES}


def _wrap(obj: Any, attr: str, key: str, acc: dict[str, list]) -> None:
    if obj is not None and getattr(obj, attr, None) is not None:
        setattr(obj, attr, Timed(getattr(obj, attr), key, acc))


def instrument_pdlite(ocr: Any, acc: dict[str, list]) -> None:
    """Timers on an `OCR` (pdlite.apps.ocr): the pipeline module's pre-processing and crop functions (looked up
    at call time), the networks and post-processors it holds."""
    from pdlite.apps.ocr import cls as cls_mod
    from pdlite.apps.ocr import pipeline, rec

    for name in ("det_resize", "det_normalize", "det_normalize_paddlex"):
        _wrap(pipeline, name, "det_pre", acc)
    for name in ("get_rotate_crop_image", "crop_minarea"):
        _wrap(pipeline, name, "crop", acc)
    _wrap(cls_mod, "cls_resize_norm", "cls_pre", acc)
    _wrap(rec, "rec_resize_norm", "rec_pre", acc)
    _wrap(ocr, "det", "det_run", acc)
    _wrap(ocr, "postprocess_op", "db_post", acc)
    _wrap(ocr.text_classifier, "run", "cls_run", acc)
    _wrap(ocr.text_recognizer, "run", "rec_run", acc)
    _wrap(ocr.text_recognizer, "resize_norm", "rec_pre", acc)  # PaddleOCR 3 folders
    _wrap(ocr.text_recognizer, "postprocess_op", "ctc", acc)


def instrument_rapidocr(eng: Any, acc: dict[str, list]) -> None:
    """Timers on a RapidOCR 1.4 engine (rapidocr_onnxruntime / _openvino / _paddle: the same pipeline code)."""
    det, cls, rec = eng.text_det, eng.text_cls, eng.text_rec
    get_pre = det.get_preprocess
    det.get_preprocess = lambda max_wh: Timed(get_pre(max_wh), "det_pre", acc)
    _wrap(det, "infer", "det_run", acc)
    _wrap(det, "postprocess_op", "db_post", acc)
    _wrap(eng, "get_crop_img_list", "crop", acc)
    _wrap(cls, "resize_norm_img", "cls_pre", acc)
    _wrap(cls, "infer", "cls_run", acc)
    _wrap(rec, "resize_norm_img", "rec_pre", acc)
    _wrap(rec, "session", "rec_run", acc)
    _wrap(rec, "postprocess_op", "ctc", acc)


def report(acc: dict[str, list], wall: float) -> dict[str, Any]:
    """What a worker sends back: seconds and calls per stage, "other", distinct shapes and input elements per
    *_run stage."""
    out: dict[str, Any] = {k: [v[0], v[1]] for k, v in acc.items()}
    out["other"] = [wall - sum(v[0] for v in acc.values()), 0]
    out["wall"] = [wall, 0]
    for k, v in acc.items():
        if v[2]:
            out[k].append({"distinct": len(set(v[2])), "elements": sum(_prod(s) for s in v[2])})
    return out


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def print_table(stages: dict[str, dict[str, Any]]) -> None:
    """ms/image per stage (calls/image), one column per contender (each entry's "_images": images timed)."""
    names = list(stages)
    print("\nper-stage ms/image (calls/image) over the timed rounds:")
    print("| stage | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key in (*STAGES, "other", "wall"):
        cells = []
        for name in names:
            secs, calls, *_ = stages[name].get(key, [0.0, 0])
            n = stages[name]["_images"]
            cell = f"{1e3 * secs / n:.1f}"
            cells.append(cell + (f" ({calls / n:.2f})" if calls else ""))
        print(f"| {key} | " + " | ".join(cells) + " |")
    for name in names:
        runs = [f"{k}: {v[2]['distinct']} shapes, {v[2]['elements'] / max(v[1], 1) / 1e3:.0f}k elements/call"
                for k, v in stages[name].items() if k.endswith("_run") and len(v) > 2]
        if runs:
            print(f"{name}: " + "; ".join(runs))
