"""The runtime's one-thread small instructions (pdlite/runtime/instruction.py SERIAL_WORK) against every instruction on
the native pool, and a 1-thread run, in one process, interleaved (issue 39: small models' per-op cost).

Three predictors of each model: 1 thread; `--threads` with the small instructions on one thread (the default);
`--threads` with every instruction on the pool (their marks cleared). Medians of `--rounds` x `--block` runs each,
rotated in order every round.

    python benchmarks/serial_small_ops.py [--models mobilenet_v3_small,ppocr_cls_v2] [--threads 2] [--rounds 10]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: find_model)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v3_small,ppocr_cls_v2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=20)
    args = ap.parse_args()
    from pdlite.lite import CxxConfig, create_paddle_predictor
    from pdlite.runtime import instruction, runtime_program

    print(f"median ms of {args.rounds} x {args.block} runs, batch 1, interleaved in one process")
    print(f"| model | 1 thread | {args.threads} threads, small on one | {args.threads} threads, all on the pool | "
          "serial instructions |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        d = compare.find_model(name)
        if d is None:
            print(f"| {name} | (model not found) | | | |")
            continue
        case = np.load(d / "case.npz")
        feeds = {k[3:]: case[k] for k in case.files if k.startswith("in:")}
        progs: list = []
        real = runtime_program.RuntimeProgram.run

        def spy(self, scope, hook=None, _real=real, progs=progs):
            progs.append(self)
            return _real(self, scope, hook)

        instruction.SPLIT_SMALL = True  # off by default (instruction.py says why): what this measures
        preds = {}
        for key, threads in (("t1", 1), ("split", args.threads), ("pool", args.threads)):
            cfg = CxxConfig()
            cfg.set_model_dir(str(d))
            cfg.set_threads(threads)
            cfg.set_option("steady_path", False)  # the split mode runs the normal path: all three on it, comparable
            pred = create_paddle_predictor(cfg)
            for k, v in feeds.items():
                pred.get_input_by_name(k).from_numpy(v)
            runtime_program.RuntimeProgram.run = spy
            try:
                pred.run()
            finally:
                runtime_program.RuntimeProgram.run = real
            preds[key] = (pred, progs[-1])
            for _ in range(3):
                pred.run()
        marked = sum(getattr(i, "serial", False) for i in preds["split"][1].instructions)
        times: dict[str, list[float]] = {k: [] for k in preds}
        order = list(preds)
        for r in range(args.rounds):
            for key in order[r % 3:] + order[:r % 3]:
                pred, prog = preds[key]
                if key == "pool":  # (re-marked when shapes change; they do not here)
                    for inst in prog.instructions:
                        inst.serial = False
                ts = []
                for _ in range(args.block):
                    t0 = time.perf_counter()
                    pred.run()
                    ts.append(time.perf_counter() - t0)
                times[key].append(float(np.median(ts)) * 1e3)
        med = {k: float(np.median(v)) for k, v in times.items()}
        print(f"| {name} | {med['t1']:.3f} | {med['split']:.3f} | {med['pool']:.3f} | "
              f"{marked} of {len(preds['split'][1])} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
