"""`pdlite ocr IMAGE|DIR...`: read the text in images with PP-OCR (models inside pdlite; needs pdlite[ocr])."""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time

from pdlite.errors import InputError
from pdlite.tools.common import HOST_IGNORES_CONTEXT, parse_kv
from pdlite.tools.progress import Progress

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ocr", help="read the text in images (PP-OCRv4: detection, direction, recognition)",
                       description=__doc__)
    p.add_argument("images", nargs="+", metavar="IMAGE|DIR", help="image files or folders of images")
    p.add_argument("--json", metavar="OUT.jsonl", help="write one JSON line per image (boxes, texts, scores)")
    p.add_argument("--draw", metavar="OUT_DIR", help="write each image with its boxes and texts side by side")
    p.add_argument("--device", default="host", choices=["host", "intel_openvino", "onnxruntime", "auto"],
                   help="where the networks run (auto: pdlite measures host and the installed devices on each "
                        "network's first input and keeps the fastest; the first image pays for it); default host")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    p.add_argument("--context", action="append", metavar="KEY=VALUE",
                   help="an NNAdapter context property for the devices (docs/nnadapter.md), repeatable; e.g. "
                        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16 (OpenVINO in bfloat16 on CPUs with AMX or "
                        "AVX-512 BF16: faster, ~1e-2 from float32)")
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    p.add_argument("--scores", action="store_true", help="print each line's recognition score")
    p.add_argument("--quiet", action="store_true", help="print no text (with --json or --draw)")
    p.add_argument("--drop-score", type=float, default=0.5, help="drop lines scored below this (default 0.5)")
    p.add_argument("--det-limit-side-len", type=int,
                   help="detection resizes so the longer side is at most this (default 960)")
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
        else:
            raise InputError(f"{item!r} is neither an image file nor a folder")
    return out


def main(args: argparse.Namespace) -> int:
    from pdlite.apps.ocr import OCR, load_image

    paths = collect_images(args.images)
    t0 = time.perf_counter()
    det = {k: v for k, v in (("det_limit_side_len", args.det_limit_side_len),
                              ("det_db_box_thresh", args.det_db_box_thresh),
                              ("det_db_unclip_ratio", args.det_db_unclip_ratio)) if v is not None}
    context = parse_kv(args.context, "--context")
    if context and args.device == "host":
        print(HOST_IGNORES_CONTEXT, file=sys.stderr)
    make = OCR.like_rapidocr if args.preset == "rapidocr" else OCR
    ocr = make(device=args.device, threads=args.threads, use_angle_cls=not args.no_cls, drop_score=args.drop_score,
               context=context, **det)
    t_load = time.perf_counter() - t0
    if args.draw:
        os.makedirs(args.draw, exist_ok=True)
    jsonl = open(args.json, "w", encoding="utf-8") if args.json else None
    many = len(paths) > 1
    # the progress bar shares no terminal with the text: shown when the text goes elsewhere (or is not printed)
    show_bar = many and (args.quiet or not sys.stdout.isatty())
    t_images = 0.0
    try:
        with Progress(len(paths), "ocr", stream=sys.stderr if show_bar else io.StringIO()) as bar:
            for path in paths:
                img = load_image(path)
                t = time.perf_counter()
                lines = ocr(img)
                t_images += time.perf_counter() - t
                if not args.quiet:
                    if many:
                        print(f"== {path}")
                    for ln in lines:
                        print(f"{ln.text}\t{ln.score:.3f}" if args.scores else ln.text)
                if jsonl:
                    jsonl.write(json.dumps({"image": path, "lines": [
                        {"box": ln.box, "text": ln.text, "score": round(ln.score, 6)} for ln in lines]},
                        ensure_ascii=False) + "\n")
                if args.draw:
                    _draw(img, lines, path, args.draw, args.font)
                bar.update()
    finally:
        if jsonl:
            jsonl.close()
    if many or args.device == "auto":
        _report(ocr, len(paths), t_load, t_images)
    return 0


def _draw(img, lines, path: str, out_dir: str, font: str | None) -> None:
    import cv2

    from pdlite.apps.ocr.draw import draw_ocr

    pic = draw_ocr(img, [ln.box for ln in lines], [ln.text for ln in lines], font)
    out = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + "_ocr.png")
    ok, buf = cv2.imencode(".png", pic)
    if not ok:
        raise InputError(f"could not encode the picture of {path!r}")
    buf.tofile(out)


def _report(ocr, n: int, t_load: float, t_images: float) -> None:
    """Per-stage timings on stderr (stdout stays the text)."""
    err = sys.stderr
    for stage, model in ocr.models().items():
        if model.choice is not None:
            print(f"{stage}: {model.choice.describe()}", file=err)
    st = ocr.timings
    devices = ", ".join(f"{k} on {d}" for k, d in ocr.devices().items())
    print(f"{n} image(s) in {t_images:.2f} s ({n / t_images if t_images else 0:.2f} images/s; {devices}; "
          f"{ocr.threads} thread(s)); models loaded in {t_load:.2f} s", file=err)
    print("stage   total s  ms/image   (cls includes the perspective crops)", file=err)
    for k in ("det", "cls", "rec"):
        print(f"{k:<6}{st[k]:>9.2f}{1e3 * st[k] / max(n, 1):>10.1f}", file=err)
    other = max(t_images - sum(st.values()), 0.0)
    print(f"{'other':<6}{other:>9.2f}{1e3 * other / max(n, 1):>10.1f}", file=err)
