"""OCR end to end: pdlite (host, each NNAdapter device, auto) vs RapidOCR on ONNX Runtime, OpenVINO and Paddle Inference.

Usage: python benchmarks/ocr_bench.py [--images examples/images] [--threads 1] [--rounds 5]
       [--contenders pdlite-host,pdlite-intel_openvino,...] [--python CONTENDER=PYTHON] [--warm-runs 1]
       [--stages]
Needs: pip install ".[ocr,onnx,openvino]" rapidocr_onnxruntime==1.4.4 rapidocr_paddle==1.4.5 paddlepaddle;
rapidocr_openvino 1.4.4 needs openvino < 2024.1, so it runs under another interpreter: make a venv
(python3 -m venv /work/venv_rapidov && /work/venv_rapidov/bin/pip install rapidocr_openvino==1.4.4
"openvino<2024.1") and pass --python rapidocr_openvino=/work/venv_rapidov/bin/python (a contender's worker
runs under that interpreter; it needs only numpy, cv2 and the RapidOCR package there).

Every contender runs the same trained models (PP-OCRv4 mobile det/rec, mobile v2 cls) with PaddleOCR's
predict_system processing (RapidOCR is set to PaddleOCR's parameters by tools/make_ocr_reference.py's
`rapidocr_as_paddleocr`), at the same thread count, each in its own worker process (a subprocess speaking JSON
lines, so a contender may run under another interpreter). After one warm-up pass per contender (first-run
compilation, per-shape device builds), the timed passes over the whole image set are interleaved (A B C ...
A B C ...) and the median pass gives images/s.

pdlite contenders run as `pdlite ocr` does: with the compiled-model cache on (model_cache.default_model_cache),
each in a fresh cache folder of its own (XDG_CACHE_HOME). pdlite-auto (and pdlite-default: `pdlite ocr`'s default
device, auto when a device package is installed) first sees --warm-runs unmeasured `pdlite ocr IMAGES` processes
in its folder (what a user's next run knows: auto's choices and the compiled models those runs built);
pdlite-auto-cold starts from an empty folder. A pdlite contender's name may end in +bf16 (OpenVINO's inference
precision), +recN (rec_batch_num N), +wN (N workers: `pdlite ocr --workers N`, clones of the pipeline reading
images on N threads, --threads/N threads each) and/or +overlap (`pdlite ocr --overlap`: the next image detected on
a second thread while this one is recognised), e.g. pdlite-default+rec1, pdlite-host+w2, pdlite-default+overlap.

Accuracy (from the warm-up pass) against ground_truth.json in the images folder: a predicted line belongs to the
ground-truth line whose box contains its centre (several are joined left to right); "line acc" = exact text,
"no-space" ignores spaces (PP-OCRv4's Chinese recogniser often omits spaces between English words); CER = edit
distance / ground-truth characters, unmatched predictions counted as insertions. "= paddle" is the share of
rapidocr_paddle's lines (same box within 10 px) that have exactly its text.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import ocr_stages  # benchmarks/ (the script's folder is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONTENDERS = ["pdlite-host", "pdlite-intel_openvino", "pdlite-onnxruntime", "pdlite-auto",
              "rapidocr_onnxruntime", "rapidocr_openvino", "rapidocr_paddle"]
AUTO = ("pdlite-auto", "pdlite-default")  # after --warm-runs earlier runs; pdlite-auto-cold: none


def make_engine(name: str, threads: int) -> Any:
    """A callable image(BGR array) -> [(box, text, score)]."""
    if name.startswith("pdlite-"):
        from pdlite.apps.ocr import OCR
        from pdlite.tools.common import default_device

        # suffixes: +bf16 (or +f16, +f32): OpenVINO's precision; +recN: rec_batch_num N (PaddleOCR's 6 by default);
        # +wN: N workers (`pdlite ocr --workers N`: N clones of the pipeline on threads, threads/N threads each)
        device, *extras = name[len("pdlite-"):].replace("-cold", "").split("+")
        kwargs: dict[str, Any] = {}
        workers, overlap = 1, False
        for extra in extras:
            if extra.startswith("rec") and extra[3:].isdigit():
                kwargs["rec_batch_num"] = int(extra[3:])
            elif extra.startswith("w") and extra[1:].isdigit():
                workers = max(1, int(extra[1:]))
            elif extra == "overlap":
                overlap = True
            else:
                kwargs["context"] = {"INTEL_OPENVINO_INFERENCE_PRECISION_HINT": extra}
        ocr = OCR(device=default_device() if device == "default" else device, threads=max(1, threads // workers),
                  **kwargs)
        run = lambda img: [(ln.box, ln.text, ln.score) for ln in ocr(img)]  # noqa: E731
        if workers > 1:
            run.run_all = _workers_pass([ocr] + [ocr.clone() for _ in range(workers - 1)])
        elif overlap:  # `pdlite ocr --overlap`: the next image's detection beside this one's recognition
            run.run_all = lambda images: [[(ln.box, ln.text, ln.score) for ln in lines]
                                          for _, _, lines, _ in ocr.overlapped(images, lambda img: img)]
        run.where = lambda: "; ".join(f"{k} {m.placement()}" for k, m in ocr.models().items())
        run.instrument = lambda acc: ocr_stages.instrument_pdlite(ocr, acc)
        return run
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_ocr_reference import rapidocr_as_paddleocr

    eng = rapidocr_as_paddleocr(name, threads)

    def run(img):
        res, _ = eng(img)
        return [([[int(v) for v in p] for p in b], t, float(s)) for b, t, s in (res or [])]
    run.instrument = lambda acc: ocr_stages.instrument_rapidocr(eng, acc)
    return run


def _workers_pass(pipelines: list[Any]) -> Any:
    """images -> results in input order, read by the pipelines (clones) on as many threads, as `pdlite ocr
    --workers N` reads a folder (each pipeline used by one thread at a time)."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    free: queue.SimpleQueue = queue.SimpleQueue()
    for p in pipelines:
        free.put(p)
    pool = ThreadPoolExecutor(len(pipelines))

    def one(img: Any) -> list:
        ocr = free.get()
        try:
            return [(ln.box, ln.text, ln.score) for ln in ocr(img)]
        finally:
            free.put(ocr)
    return lambda images: list(pool.map(one, images))


def worker(name: str, threads: int, paths: list[str], stages: bool = False) -> None:
    """The worker process: JSON lines on stdout answer commands on stdin ("results", "time", "where", "stages",
    "stop"); with `stages` the engine's stages are timed (benchmarks/ocr_stages.py), "stages" sends and resets
    what the passes since the last "stages" spent in each."""
    out, sys.stdout = sys.stdout, sys.stderr  # engines that print go to stderr, the protocol alone to stdout

    def send(*msg: Any) -> None:
        out.write(json.dumps(msg, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)) + "\n")
        out.flush()

    try:
        import cv2

        if name.startswith("pdlite-"):
            from pdlite.nnadapter.model_cache import default_model_cache

            default_model_cache().__enter__()  # as `pdlite ocr` runs: compiled models cached
        engine = make_engine(name, threads)
        acc, wall = ocr_stages.new_acc(), 0.0
        # the stage timers go on after the warm-up pass (its stage times are dropped): pdlite's auto moves its
        # networks to other devices after the first image, and the timers must wrap the networks it runs then
        images = [cv2.imread(p, cv2.IMREAD_COLOR) for p in paths]
        instrumented = False
        send("ready", None)
    except Exception as e:  # report, so the table says why a contender is missing
        send("error", f"{type(e).__name__}: {e}")
        return
    for cmd in sys.stdin:
        cmd = cmd.strip()
        if cmd == "stop":
            return
        if cmd == "where":  # where a pdlite contender's networks ran
            send("where", getattr(engine, "where", lambda: "")())
            continue
        if cmd == "stages":
            if stages and not instrumented:
                engine.instrument(acc)
                instrumented = True
            send("stages", ocr_stages.report(acc, wall))
            acc.update(ocr_stages.new_acc())
            wall = 0.0
            continue
        t0 = time.perf_counter()
        results = engine.run_all(images) if hasattr(engine, "run_all") else [engine(img) for img in images]
        elapsed = time.perf_counter() - t0
        wall += elapsed
        send("done", [elapsed, results if cmd == "results" else None])


class Worker:
    """A contender's worker process (`python ocr_bench.py --worker NAME`), under `python`, in `env`."""

    def __init__(self, name: str, python: str, threads: int, paths_file: str, env: dict[str, str],
                 stages: bool = False) -> None:
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", name, "--threads", str(threads),
                                      "--paths-file", paths_file, *(["--stages"] if stages else [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)

    def recv(self) -> tuple[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            return "error", f"worker exited ({self.proc.wait()})"
        status, info = json.loads(line)
        return status, info

    def ask(self, cmd: str) -> Any:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.recv()[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        self.proc.wait()


def warm_up_auto(paths: list[str], threads: int, runs: int, env: dict[str, str], workers: int = 1) -> None:
    """`runs` unmeasured `pdlite ocr IMAGES --device auto` processes in the contender's cache folder (with its
    --workers: auto's cache keys on the threads each network runs with)."""
    for _ in range(runs):
        subprocess.run([sys.executable, "-m", "pdlite", "ocr", *paths, "--device", "auto", "--threads", str(threads),
                        "--workers", str(workers), "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


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
    ap.add_argument("--python", action="append", default=[], metavar="CONTENDER=PYTHON",
                    help="run CONTENDER's worker under PYTHON (e.g. a venv with rapidocr_openvino); repeatable")
    ap.add_argument("--warm-runs", type=int, default=1,
                    help="unmeasured `pdlite ocr` auto processes before pdlite-auto's (default 1; 0: cold)")
    ap.add_argument("--stages", action="store_true",
                    help="also time each pipeline stage (det pre/run/post, crops, cls, rec pre/run, CTC) per contender")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--paths-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        with open(args.paths_file, encoding="utf-8") as f:
            worker(args.worker, args.threads, json.load(f), args.stages)
        return
    with open(os.path.join(args.images, "ground_truth.json"), encoding="utf-8") as f:
        truth_map = json.load(f)
    names = list(truth_map)
    paths = [os.path.join(args.images, n) for n in names]
    truth = [truth_map[n] for n in names]

    tmp = tempfile.mkdtemp(prefix="pdlite_ocr_bench_")
    paths_file = os.path.join(tmp, "paths.json")
    with open(paths_file, "w", encoding="utf-8") as f:
        json.dump(paths, f)
    pythons = dict(item.split("=", 1) for item in args.python)
    workers: dict[str, Worker] = {}
    missing: dict[str, str] = {}
    try:
        for name in args.contenders.split(","):
            env = dict(os.environ)
            python = pythons.get(name, sys.executable)
            if name.startswith("pdlite-"):  # a cache folder of its own (compiled models, auto's choices)
                env["XDG_CACHE_HOME"] = tempfile.mkdtemp(dir=tmp)
                env.pop("PDLITE_NNADAPTER_MODEL_CACHE_DIR", None)
                base, *extras = name.split("+")
                if base in AUTO:
                    n = [int(e[1:]) for e in extras if e.startswith("w") and e[1:].isdigit()]
                    warm_up_auto(paths, args.threads, args.warm_runs, env, n[-1] if n else 1)
            w = Worker(name, python, args.threads, paths_file, env, args.stages)
            status, info = w.recv()
            if status == "ready":
                workers[name] = w
            else:
                missing[name] = info
                w.stop()

        results: dict[str, list] = {}
        warm: dict[str, float] = {}
        for name, w in workers.items():
            warm[name], results[name] = w.ask("results")
            w.ask("stages")  # the warm-up pass's stage times are dropped
        times: dict[str, list[float]] = {name: [] for name in workers}
        for _ in range(args.rounds):
            for name, w in workers.items():
                times[name].append(w.ask("time")[0])
        where = {name: w.ask("where") for name, w in workers.items()}
        stages = {name: {**w.ask("stages"), "_images": args.rounds * len(paths)} for name, w in workers.items()}
    finally:
        for w in workers.values():
            w.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    ref = results.get("rapidocr_paddle")
    n_img = len(paths)
    print(f"{n_img} images, {sum(len(t) for t in truth)} ground-truth lines; {args.threads} thread(s); "
          f"{args.rounds} interleaved rounds; auto after {args.warm_runs} earlier run(s); "
          f"CPU: {cpu_name()} ({os.cpu_count()} cores)")
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
    for name, text in where.items():
        if text:
            print(f"{name}: {text}")
    if args.stages:
        ocr_stages.print_table(stages)


def cpu_name() -> str:
    from pdlite.tools.doctor import cpu_info

    return cpu_info()[0] or "unknown"


if __name__ == "__main__":
    main()
