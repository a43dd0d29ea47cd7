"""`pdlite ocr IMAGE|DIR...`: read the text in images with PP-OCR (models inside pdlite; needs pdlite[ocr])."""
from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from pdlite.errors import InputError, PdliteError
from pdlite.tools.common import (
    HOST_IGNORES_CONTEXT,
    IMAGE_SUFFIXES,
    MAX_DEFAULT_THREADS,
    default_threads,
    int_at_least,
    parse_kv,
)
from pdlite.tools.progress import Progress

DEFAULT_WORKERS = 1  # see docs/ocr.md: two workers x one thread did not beat one pipeline on two threads here
IMAGE_EXTS = IMAGE_SUFFIXES  # the one list, shared with `pdlite batch`


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ocr", help="read the text in images (PP-OCR: detection, direction, recognition)",
                       description=__doc__)
    p.add_argument("images", nargs="+", metavar="IMAGE|DIR", help="image files or folders of images")
    p.add_argument("--json", metavar="OUT.jsonl", help="write one JSON line per image (boxes, texts, scores)")
    p.add_argument("--draw", metavar="OUT_DIR", help="write each image with its boxes and texts side by side")
    p.add_argument("--device", default=None, choices=["host", "intel_openvino", "onnxruntime", "auto"],
                   help="where the networks run (auto: each network runs each call where pdlite measures it "
                        "cheapest, the host or an installed device, new image sizes included; exploring costs at "
                        "most a tenth of the run and what it learnt is cached for the next run); default auto "
                        "when a device package is installed, else host")
    p.add_argument("--threads", type=int_at_least(1), default=None,
                   help=f"CPU threads (default: the CPUs this process may use, at most {MAX_DEFAULT_THREADS})")
    p.add_argument("--workers", type=int_at_least(1), default=None,
                   help="read this many images at once, each on its own clone of the pipeline (shared weights) "
                        "with threads/workers threads; output in input order (default 1)")
    p.add_argument("--overlap", action="store_true",
                   help="with one worker: detect the next image on a second thread while this one's lines are "
                        "recognised (the same text; whether it is faster depends on the cores left idle)")
    p.add_argument("--context", action="append", metavar="KEY=VALUE",
                   help="an NNAdapter context property for the devices (docs/nnadapter.md), repeatable; e.g. "
                        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16 (OpenVINO in bfloat16 on CPUs with AMX or "
                        "AVX-512 BF16: faster, ~1e-2 from float32)")
    p.add_argument("--precision", default="auto", choices=["auto", "f32", "bf16", "f16"],
                   help="OpenVINO's inference precision for the networks it runs (auto: OpenVINO's own default on "
                        "this CPU, bf16 where it computes bfloat16 natively, else f32; the host computes in f32)")
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    p.add_argument("--scores", action="store_true", help="print each line's recognition score")
    p.add_argument("--quiet", action="store_true", help="print no text (with --json or --draw)")
    p.add_argument("--drop-score", type=float,
                   help="drop lines scored below this (default 0.5; 0 with PaddleOCR 3 models, as PaddleOCR 3)")
    p.add_argument("--det-model", metavar="DIR", help="your own detection model: a PaddleOCR 3 / PaddleX folder "
                   "(inference.json or .pdmodel, inference.pdiparams, inference.yml) or a PaddleOCR 2.x folder")
    p.add_argument("--rec-model", metavar="DIR", help="your own recognition model (PaddleOCR 3 folder: its "
                   "inference.yml holds the dictionary; 2.x folder: the shipped ppocr_keys_v1 dictionary)")
    p.add_argument("--cls-model", metavar="DIR", help="your own direction model: a PaddleOCR 2.x direction "
                   "classifier or a PaddleOCR 3 text-line orientation folder")
    p.add_argument("--textline-orientation-model", metavar="DIR",
                   help="PaddleOCR 3's text-line orientation model (PP-LCNet_x0_25 / x1_0_textline_ori folder)")
    p.add_argument("--doc-orientation-model", metavar="DIR", help="turn each page upright (0/90/180/270) before "
                   "detection with PaddleOCR 3's PP-LCNet_x1_0_doc_ori (its folder)")
    p.add_argument("--lang", help="the recogniser's language: ch (shipped: Chinese, English letters, digits) or a "
                   "language whose PaddleOCR 3 recogniser is installed (~/.paddlex/official_models, "
                   "$PDLITE_OCR_MODELS); an unavailable one lists what is available")
    p.add_argument("--det-limit-side-len", type=int,
                   help="detection resize limit (default 960 on the longer side; PaddleOCR 3 models: 64 on the "
                        "shorter side, the longer side at most 4000)")
    p.add_argument("--rec-batch-num", type=int, help="recognition batch size: crops sorted by aspect ratio, each "
                   "batch padded to its widest (default 6, as PaddleOCR 2.x and 3; 1: no padding)")
    p.add_argument("--det-limit-type", choices=["max", "min", "resize_long"],
                   help="which side --det-limit-side-len limits (default max; PaddleOCR 3 models: min)")
    p.add_argument("--det-db-box-thresh", type=float, help="DB box score threshold (default 0.6)")
    p.add_argument("--det-db-unclip-ratio", type=float, help="DB box growth ratio (default 1.5)")
    p.add_argument("--preset", default="paddleocr", choices=["paddleocr", "rapidocr"],
                   help="paddleocr: PaddleOCR's predict_system defaults (default); rapidocr: RapidOCR 1.4's defaults "
                        "and image preparation, to compare with its results (the det options above then default "
                        "to RapidOCR's)")
    p.add_argument("--font", help="font for --draw (default: a system font with CJK glyphs when there is one)")
    p.set_defaults(func=main)


def collect_images(items: list[str]) -> list[str]:
    """The image files named, and those in the folders named (sorted), in command-line order."""
    out: list[str] = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, f) for f in os.listdir(item) if f.lower().endswith(IMAGE_EXTS))
            if not found:
                raise InputError(f"folder {item!r} has no images ({', '.join(IMAGE_EXTS)})")
            out += found
        elif os.path.isfile(item):
            out.append(item)
        elif not os.path.exists(item):
            raise InputError(f"{item!r} not found (no such image file or folder)")
        else:
            raise InputError(f"{item!r} is neither an image file nor a folder")
    return out


def main(args: argparse.Namespace) -> int:
    from pdlite.apps.ocr import OCR

    paths = collect_images(args.images)
    t0 = time.perf_counter()
    tuning = {k: v for k, v in (("det_limit_side_len", args.det_limit_side_len),
                                 ("det_limit_type", args.det_limit_type), ("rec_batch_num", args.rec_batch_num),
                                 ("det_db_box_thresh", args.det_db_box_thresh),
                                 ("det_db_unclip_ratio", args.det_db_unclip_ratio)) if v is not None}
    models = {k: v for k, v in (("det_model_dir", args.det_model), ("rec_model_dir", args.rec_model),
                                 ("cls_model_dir", args.cls_model),
                                 ("textline_orientation_model_dir", args.textline_orientation_model),
                                 ("doc_orientation_model_dir", args.doc_orientation_model)) if v is not None}
    context = parse_kv(args.context, "--context")
    explicit_auto = args.device == "auto"
    if args.device is None:
        from pdlite.tools.common import default_device

        args.device = default_device()
    if context and args.device == "host":
        print(HOST_IGNORES_CONTEXT, file=sys.stderr)
    make = OCR.like_rapidocr if args.preset == "rapidocr" else OCR
    threads = args.threads if args.threads is not None else default_threads()
    workers = max(1, min(args.workers or DEFAULT_WORKERS, len(paths)))
    ocr = make(device=args.device, threads=max(1, threads // workers), use_angle_cls=not args.no_cls,
               drop_score=args.drop_score, context=context, lang=args.lang, precision=args.precision, **models,
               **tuning)
    if ocr.placement is not None and ocr.placement.plan is None:  # auto, nothing cached for these networks yet
        if len(paths) == 1:
            ocr.placement.skip(ocr.models(), "one image: the host, not measured (a folder measures the devices)")
        else:
            ocr.placement.notify = lambda text: print(f"note: {text}", file=sys.stderr)
    pipelines = [ocr] + [ocr.clone() for _ in range(workers - 1)]
    t_load = time.perf_counter() - t0
    if args.draw:
        os.makedirs(args.draw, exist_ok=True)
    jsonl = open(args.json, "w", encoding="utf-8") if args.json else None
    many = len(paths) > 1
    # the progress bar shares no terminal with the text: shown when the text goes elsewhere (or is not printed)
    show_bar = many and (args.quiet or not sys.stdout.isatty())
    t_images = 0.0  # seconds spent reading the images, summed over the workers
    failed: list[tuple[str, str]] = []
    drawer = _Drawer(args.draw, args.font) if args.draw else None
    try:
        t_start = time.perf_counter()
        with Progress(len(paths), "ocr", stream=sys.stderr if show_bar else io.StringIO()) as bar:
            for path, img, lines, notes, msg, seconds in _read_all(pipelines, paths, args.overlap):
                for note in notes:
                    print(f"note: {note}", file=sys.stderr)
                if msg is not None:
                    failed.append((path, msg))
                    print(f"error: {path}: {msg}", file=sys.stderr)
                    if jsonl:
                        jsonl.write(json.dumps({"image": path, "error": msg}, ensure_ascii=False) + "\n")
                    bar.update()
                    continue
                t_images += seconds
                if not args.quiet:
                    if many:
                        print(f"== {path}")
                    for ln in lines:
                        print(f"{ln.text}\t{ln.score:.3f}" if args.scores else ln.text)
                if jsonl:
                    jsonl.write(json.dumps({"image": path, "lines": [
                        {"box": ln.box, "text": ln.text, "score": round(ln.score, 6)} for ln in lines]},
                        ensure_ascii=False) + "\n")
                if drawer:
                    drawer(img, lines, path)
                if args.device == "auto":  # where each network runs so far
                    bar.label = "ocr (" + ", ".join(f"{k} {d}" for k, d in ocr.devices().items()) + ")"
                bar.update()
        t_wall = time.perf_counter() - t_start
    finally:
        if jsonl:
            jsonl.close()
    if many or explicit_auto:
        _report(pipelines, len(paths) - len(failed), t_load, t_images, t_wall)
    if failed:
        print(f"{len(failed)} of {len(paths)} image(s) failed (the others were read):", file=sys.stderr)
        for path, msg in failed:
            print(f"  {path}: {msg}", file=sys.stderr)
        return 1
    return 0


_WARNINGS_LOCK = threading.Lock()  # warnings.catch_warnings changes process-wide state: one thread at a time


def _load(path: str) -> tuple:
    """(image, notes): the image and what loading it noted (a fully transparent image), caught here so that the
    caller prints the notes in input order."""
    import warnings

    from pdlite.apps.ocr import load_image
    from pdlite.apps.ocr.pipeline import OCRWarning

    with _WARNINGS_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OCRWarning)
        img = load_image(path)
    return img, [str(w.message) for w in caught]


def _message(e: Exception) -> str:
    return str(e) if isinstance(e, PdliteError) else f"{type(e).__name__}: {e}"


def _read(ocr, path: str):
    """(image, lines, notes, error message, seconds): one image read by one pipeline; notes (a fully transparent
    image) and the error (one bad image does not stop the others) are printed by the caller, in input order."""
    t = time.perf_counter()
    try:
        img, notes = _load(path)
        return img, ocr(img), notes, None, time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 -- one bad image (corrupt, huge, odd) does not stop the others
        return None, [], [], _message(e), time.perf_counter() - t


def _read_all(pipelines: list, paths: list[str], overlap: bool = False) -> Iterator[tuple]:
    """(path, *_read's answer) per path, in input order. With several pipelines (clones of one) the images are
    read on as many threads, each pipeline by one thread at a time, at most two images per pipeline ahead of the
    one the caller takes next; with one and `overlap`, the next image is loaded and detected on a second thread
    while this one's lines are recognised (OCR.overlapped; seconds: the wall time since the previous image)."""
    if len(pipelines) == 1 and overlap and len(paths) > 1:
        yield from _overlapped(pipelines[0], paths)
        return
    if len(pipelines) == 1:
        for path in paths:
            yield (path, *_read(pipelines[0], path))
        return
    free: queue.SimpleQueue = queue.SimpleQueue()
    for p in pipelines:
        free.put(p)

    def job(path: str) -> tuple:
        ocr = free.get()
        try:
            return (path, *_read(ocr, path))
        finally:
            free.put(ocr)

    todo = iter(paths)
    with ThreadPoolExecutor(len(pipelines), thread_name_prefix="pdlite-ocr") as pool:
        pending = deque(pool.submit(job, p) for p in itertools.islice(todo, 2 * len(pipelines)))
        try:
            while pending:
                done = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(job, nxt))
                yield done
        finally:  # the caller stopped early (an interrupt, a failed write): no new images
            for f in pending:
                f.cancel()


def _overlapped(ocr, paths: list[str]) -> Iterator[tuple]:
    notes: dict[str, list[str]] = {}

    def load(path: str):
        img, notes[path] = _load(path)
        return img

    t = time.perf_counter()
    for path, img, lines, err in ocr.overlapped(paths, load):
        now = time.perf_counter()
        yield path, img, lines, notes.pop(path, []), None if err is None else _message(err), now - t
        t = now


class _Drawer:
    """`--draw`: writes <name>_ocr.png per image; warns once when the font lacks glyphs of the text."""

    def __init__(self, out_dir: str, font: str | None) -> None:
        from pdlite.apps.ocr.draw import find_font

        self.out_dir, self.font = out_dir, find_font(font)
        self.given = font is not None
        self.warned = False

    def __call__(self, img, lines, path: str) -> None:
        import cv2

        from pdlite.apps.ocr.draw import draw_ocr, missing_glyphs

        texts = [ln.text for ln in lines]
        if not self.warned:
            missing = missing_glyphs(self.font, texts)
            if missing:
                self.warned = True
                name = self.font or "Pillow's built-in font"
                print(f"warning: --draw: the font {name} has no glyphs for {missing!r} (drawn as boxes); "
                      + ("pass another --font" if self.given else "install a font that has them (e.g. "
                         "apt-get install fonts-noto-cjk) or pass --font FILE"), file=sys.stderr)
        pic = draw_ocr(img, [ln.box for ln in lines], texts, self.font)
        out = os.path.join(self.out_dir, os.path.splitext(os.path.basename(path))[0] + "_ocr.png")
        ok, buf = cv2.imencode(".png", pic)
        if not ok:
            raise InputError(f"could not encode the picture of {path!r}")
        buf.tofile(out)


def _report(pipelines: list, n: int, t_load: float, t_images: float, t_wall: float) -> None:
    """Per-stage timings on stderr (stdout stays the text), summed over the workers' pipelines; images/s from
    the wall time when several workers read at once."""
    err = sys.stderr
    ocr, workers = pipelines[0], len(pipelines)
    for stage, model in ocr.models().items():
        if model.choice is not None:
            print(f"{stage}: {model.choice.describe()}", file=err)
    st = {k: sum(p.timings[k] for p in pipelines) for k in ocr.timings}
    devices = ", ".join(f"{k} on {d}" for k, d in ocr.devices().items())
    t = t_images if workers == 1 else t_wall
    print(f"{n} image(s) in {t:.2f} s ({n / t if t else 0:.2f} images/s; {devices}; {workers} worker(s) x "
          f"{ocr.threads} thread(s)); models loaded in {t_load:.2f} s", file=err)
    summed = f", summed over the {workers} workers" if workers > 1 else ""
    print(f"stage   total s  ms/image   runs on   (cls includes the perspective crops{summed})", file=err)
    models = ocr.models()
    for k in ("det", "cls", "rec"):
        where = models[k].placement() if k in models else "-"
        print(f"{k:<6}{st[k]:>9.2f}{1e3 * st[k] / max(n, 1):>10.1f}   {where}", file=err)
    other = max(t_images - sum(st.values()), 0.0)
    print(f"{'other':<6}{other:>9.2f}{1e3 * other / max(n, 1):>10.1f}", file=err)
