"""`pdlite ocr --workers W` vs one pipeline: images/s of one OCR on T threads against W clones (OCR.clone()) on T/W
threads each reading the images on W threads, and one OCR on T/W threads for reference, in one process.

Usage: python benchmarks/ocr_workers.py [--images examples/images] [--device host] [--threads 2] [--workers 2]
       [--chunk 4] [--reps 2] [--gil]

Interleaving is fine-grained: the image set goes in chunks of --chunk images, and every chunk is read by each mode
in turn (the order rotated chunk by chunk), so load swings on a shared machine (seconds long) hit every mode alike;
the table sums each mode's time over all chunks (--reps passes over the set, after one unmeasured warm-up pass per
mode). Workers lose a little at each chunk's end (one worker may idle while the other finishes), which `pdlite ocr
--workers` does not; so the workers' figure is a lower bound. The lines of the modes are checked to be the same
(bit for bit on the host when the thread counts give the same sums: the native kernels' do not depend on them).

--gil: also profiles one pipeline at T/W threads (cProfile with the calling thread's CPU clock) and prints the share
of that thread's CPU time spent in calls that release Python's GIL (pdlite's native kernels, OpenCV, OpenVINO's and
ONNX Runtime's runs): what W workers can overlap at most (W workers: at most 1 / (1 - share) times one).
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import queue
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pdlite.apps.ocr import OCR, load_image  # noqa: E402
from pdlite.tools.ocr import IMAGE_EXTS  # noqa: E402

RELEASING = ("pdlite.kernels.host._native.", "openvino._pyopenvino.infer", "onnxruntime", "InferenceSession.run")


def gil_free_share(ocr: OCR, images: list) -> float:
    """The share of the calling thread's CPU time spent in calls that release the GIL (a second pass, profiled)."""
    prof = cProfile.Profile(timer=time.thread_time)
    prof.enable()
    for img in images:
        ocr(img)
    prof.disable()
    st = pstats.Stats(prof)
    free = 0.0
    for (fn, _line, name), (_cc, _nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        opencv = fn == "~" and name.startswith("<") and not name.startswith(("<built-in", "<method"))
        if opencv or any(r in name for r in RELEASING):
            free += tt
    return free / st.total_tt if st.total_tt else 0.0  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", default=os.path.join(ROOT, "examples", "images"))
    ap.add_argument("--device", default="host")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--gil", action="store_true")
    args = ap.parse_args()
    paths = sorted(os.path.join(args.images, f) for f in os.listdir(args.images) if f.lower().endswith(IMAGE_EXTS))
    images = [load_image(p) for p in paths]
    per = max(1, args.threads // args.workers)
    one = OCR(device=args.device, threads=args.threads)
    small = OCR(device=args.device, threads=per)
    free: queue.SimpleQueue = queue.SimpleQueue()
    for p in [small] + [small.clone() for _ in range(args.workers - 1)]:
        free.put(p)
    pool = ThreadPoolExecutor(args.workers)

    def read(img):
        ocr = free.get()
        try:
            return ocr(img)
        finally:
            free.put(ocr)

    modes = {f"1 x {args.threads} threads": lambda ch: [one(i) for i in ch],
             f"1 x {per} thread(s)": lambda ch: [small(i) for i in ch],
             f"{args.workers} workers x {per}": lambda ch: list(pool.map(read, ch))}
    names = list(modes)
    first = {k: f(images) for k, f in modes.items()}  # warm-up: compiles, caches, auto's first calls
    same = all(first[k] == first[names[1]] for k in names[2:])
    total = {k: 0.0 for k in modes}
    ratios = []
    turn = 0
    for _ in range(args.reps):
        for s in range(0, len(images), args.chunk):
            chunk, turn = images[s:s + args.chunk], turn + 1
            took = {}
            for k in names[turn % 3:] + names[:turn % 3]:
                t = time.perf_counter()
                modes[k](chunk)
                took[k] = time.perf_counter() - t
                total[k] += took[k]
            ratios.append(took[names[0]] / took[names[2]])
    n = args.reps * len(images)
    print(f"{len(images)} images ({args.images}), device {args.device}, {args.reps} pass(es) in chunks of {args.chunk}; "
          f"workers' lines = one pipeline's at {per} thread(s): {same}")
    print(f"| mode | images/s | vs 1 x {args.threads} threads |\n|---|---|---|")
    for k in names:
        print(f"| {k} | {n / total[k]:.2f} | {total[names[0]] / total[k]:.2f}x |")
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    print(f"per chunk, workers' speed-up over 1 x {args.threads} threads: median {statistics.median(ratios):.2f}x, "
          f"quartiles {q[0]:.2f}-{q[2]:.2f} ({len(ratios)} chunks)")
    if args.gil:
        share = gil_free_share(small, images)
        print(f"GIL released for {100 * share:.0f}% of one pipeline's calling-thread CPU ({per} thread(s)): "
              f"{args.workers} workers at most {min(args.workers, 1 / max(1 - share, 1e-9)):.2f}x one")


if __name__ == "__main__":
    main()
