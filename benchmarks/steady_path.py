"""The runtime's steady path (pdlite/runtime/steady.py) against the normal path, in one process, interleaved.

Two predictors of each model, option `steady_path` on and off, at each thread count; medians of `--rounds` x
`--block` runs each, the order alternated every round; the outputs of both are compared bit for bit. The last
column says how the recorded steps run: bound calls / kernel.run without checks / constants of the feed key /
re-checked instructions.

    python benchmarks/steady_path.py [--models mobilenet_v3_small,ppocr_cls_v2,...] [--threads 1,2] [--rounds 15]
    python benchmarks/steady_path.py --ocr [--rounds 6]   # `pdlite ocr` on examples/images/, steady path on / off

With --ocr: passes of the OCR pipeline (det, cls, rec, 1 thread) over the example images, alternately with the steady
path on and off (off: every program's SteadyRunner answers "not steady", so the pipeline's predictors run as
with the option off), after one warm-up pass of each; the texts of both are compared.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: find_model, feeds_for)

MODELS = "mobilenet_v3_small,ppocr_cls_v2,transformer_encoder,mobilenet_v2,ppocr_det_v4,ppocr_rec_v4"
# the OCR recogniser pdlite ships (not in the shared zoo): one text line 48 x 320, random values
REC = Path(__file__).resolve().parents[1] / "pdlite" / "apps" / "ocr" / "models" / "ch_PP-OCRv4_rec_infer"


def model_and_feeds(name: str) -> tuple[Path | None, dict[str, np.ndarray]]:
    if name == "ppocr_rec_v4":
        x = np.random.default_rng(0).standard_normal((1, 3, 48, 320)).astype(np.float32)
        return (REC if REC.is_dir() else None), {"x": x}
    d = compare.find_model(name)
    return d, compare.feeds_for(d, 1) if d is not None else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--ocr", action="store_true", help="time the OCR pipeline over examples/images instead")
    args = ap.parse_args()
    if args.ocr:
        return ocr_passes(args.rounds)
    from pdlite.lite import CxxConfig, create_paddle_predictor

    print(f"median ms of {args.rounds} x {args.block} runs, batch 1, interleaved in one process")
    print("| model | threads | normal path ms | steady path ms | steady / normal | same bits | steps bound / "
          "generic / constant / re-checked |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        d, feeds = model_and_feeds(name)
        if d is None:
            print(f"| {name} | (model not found) | | | | | |")
            continue
        for threads in (int(t) for t in args.threads.split(",")):
            preds = {}
            for steady in (False, True):
                cfg = CxxConfig()
                cfg.set_model_dir(str(d))
                cfg.set_threads(threads)
                cfg.set_option("steady_path", steady)
                pred = create_paddle_predictor(cfg)
                for k, v in feeds.items():
                    pred.get_input_by_name(k).from_numpy(v)
                for _ in range(5):
                    pred.run()
                preds[steady] = pred
            outs = {s: [np.array(p.get_output(i).numpy()) for i in range(len(p.get_output_names()))]
                    for s, p in preds.items()}
            same = all(np.array_equal(a, b) for a, b in zip(outs[False], outs[True]))
            runner = preds[True].runtime_program._steady
            plan = next(iter(runner.plans.values()), None) if runner is not None else None
            kinds = "/".join(str(v) for v in plan.counts().values()) if plan is not None else "-"
            times: dict[bool, list[float]] = {False: [], True: []}
            for r in range(args.rounds):
                for steady in ((False, True) if r % 2 else (True, False)):
                    pred = preds[steady]
                    ts = []
                    for _ in range(args.block):
                        t0 = time.perf_counter()
                        pred.run()
                        ts.append(time.perf_counter() - t0)
                    times[steady].append(float(np.median(ts)) * 1e3)
            a, b = float(np.median(times[False])), float(np.median(times[True]))
            print(f"| {name} | {threads} | {a:.3f} | {b:.3f} | {b / a:.2f} | {'yes' if same else 'NO'} | {kinds} |",
                  flush=True)
    return 0


def ocr_passes(rounds: int) -> int:
    from pdlite.apps.ocr import OCR
    from pdlite.runtime import steady

    images = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "examples" / "images").glob("*.[pj]*g"))
    real = steady.SteadyRunner.run
    ocr = OCR(threads=1)
    texts: dict[bool, list] = {}
    times: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds + 1):
        for on in ((False, True) if r % 2 else (True, False)):
            steady.SteadyRunner.run = real if on else (lambda self, scope, hook=None: False)  # type: ignore[method-assign]
            t0 = time.perf_counter()
            out = [[line.text for line in ocr(p)] for p in images]
            if r:  # (round 0: warm-up, and the steady path's first two runs of each shape)
                times[on].append(time.perf_counter() - t0)
            texts[on] = out
    steady.SteadyRunner.run = real  # type: ignore[method-assign]
    a, b = float(np.median(times[False])), float(np.median(times[True]))
    print(f"OCR of {len(images)} example images, 1 thread, median of {rounds} passes each: normal path {a:.3f} s, "
          f"steady path {b:.3f} s, steady / normal {b / a:.2f}, same text: {'yes' if texts[True] == texts[False] else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
