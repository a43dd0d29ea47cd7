"""PaddleOCR 3's pipeline: `pdlite ocr --det-model --rec-model` vs PaddleX's own OCR pipeline (Paddle Inference).

Usage: PYTHONPATH=<paddlex> DISABLE_MODEL_SOURCE_CHECK=True python benchmarks/ocr_paddleocr3_bench.py
       [--threads 1] [--rounds 5]
Needs paddlepaddle and PaddleX (installed as tools/check_ppocrv5_fixtures_paddlex.py says).

Both run the same trained models, the shipped PP-OCRv4 mobile det and rec turned into PaddleOCR 3 folders (their
files plus tests/fixtures/ocr/paddleocr3_v4/*.inference.yml), with PaddleOCR 3's defaults (det 64 'min' / 4000,
rec batches of 6, score threshold 0, no orientation models), on examples/images. PaddleX runs Paddle Inference
without oneDNN (run_mode "paddle": its oneDNN path fails on these programs in Paddle 3.3.1) at the same thread
count. After a warm-up pass each, the timed passes over the image set are interleaved (pdlite, PaddleX, pdlite,
...) in one process; the median pass gives images/s. "same lines" counts lines with the same text and box.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import check_ppocrv5_fixtures_paddlex as cx

    sys.meta_path.insert(0, cx._HubStubs())
    import cv2
    from paddlex import create_pipeline
    from paddlex.inference.utils.pp_option import PaddlePredictorOption

    from pdlite.apps.ocr import OCR

    images = [cv2.imread(str(p)) for p in sorted((ROOT / "examples" / "images").glob("*.*"))
              if p.suffix in (".png", ".jpg")]
    with tempfile.TemporaryDirectory() as tmp:
        dirs = cx.v4_folders(Path(tmp))
        opt = PaddlePredictorOption()
        opt.run_mode, opt.cpu_threads = "paddle", args.threads
        sub = {"TextDetection": {"module_name": "text_detection", "model_name": "PP-OCRv4_mobile_det",
                                 "model_dir": str(dirs["det"]), "limit_side_len": 64, "limit_type": "min",
                                 "max_side_limit": 4000, "thresh": 0.3, "box_thresh": 0.6, "unclip_ratio": 1.5},
               "TextRecognition": {"module_name": "text_recognition", "model_name": "PP-OCRv4_mobile_rec",
                                   "model_dir": str(dirs["rec"]), "batch_size": 6, "score_thresh": 0.0}}
        pdx = create_pipeline(config={"pipeline_name": "OCR", "text_type": "general", "use_doc_preprocessor": False,
                                      "use_textline_orientation": False, "SubModules": sub},
                              device="cpu", pp_option=opt)
        ours = OCR(det_model_dir=dirs["det"], rec_model_dir=dirs["rec"], threads=args.threads)

        def run_pdx() -> list:
            return [list(zip(r["rec_texts"], [np.array(b).tolist() for b in r["rec_polys"]]))
                    for img in images for r in pdx.predict(img)]

        def run_ours() -> list:
            return [[(ln.text, ln.box) for ln in ours(img)] for img in images]

        a, b = run_ours(), run_pdx()  # warm-up, and the comparison
        same = sum(x == y for la, lb in zip(a, b) for x, y in zip(la, lb))
        total = sum(len(lb) for lb in b)
        times: dict[str, list[float]] = {"pdlite host": [], "PaddleX (Paddle Inference)": []}
        for _ in range(args.rounds):
            for name, fn in (("pdlite host", run_ours), ("PaddleX (Paddle Inference)", run_pdx)):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    print(f"{len(images)} images, {total} lines; same lines (text and box): {same} of {total}; "
          f"threads {args.threads}, {args.rounds} interleaved rounds")
    print(f"{'contender':<28}{'median s':>10}{'images/s':>10}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<28}{med:>10.2f}{len(images) / med:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
