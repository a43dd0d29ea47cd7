"""Det's nearest upsampling (nearest_interp_v2, scale 2 / 4 / 8 on NCHW): the whole-factor form before and after.

Before: np.repeat along W, then each row copied rh times (and no `bind`: the steady path ran kernel.run).
After: interp.upsample (2x along W: one ufunc pass writing each element's bits twice into every output row; other
factors as before) and the interp kernels' `bind`. Interleaved in one process (A, B, A, B, ...), medians:

    python benchmarks/nearest_upsample.py [--rounds 15] [--block 20] [--threads 1]

1. per op, on PP-OCRv4 det's six shapes at 320 x 320: us of the old form, of upsample, of kernel.run, of the bound
   call (outputs compared bit for bit);
2. the det model (ppocr_det_v4 from tests/fixtures or ../shared/models, steady path on), before against after:
   ms a run and the ratio; outputs compared bit for bit.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: find_model, feeds_for)

DET_SHAPES = [((1, 96, 10, 10), 2), ((1, 96, 20, 20), 2), ((1, 96, 40, 40), 2), ((1, 24, 10, 10), 8),
              ((1, 24, 20, 20), 4), ((1, 24, 40, 40), 2)]


def old_upsample(x: np.ndarray, rh: int, rw: int) -> np.ndarray:
    """The form before: np.repeat along W, then a broadcast copy of each row rh times."""
    n, c, h, w = x.shape
    rows = np.repeat(x, rw, axis=3) if rw > 1 else x
    out = np.empty((n, c, h * rh, w * rw), x.dtype)
    out.reshape(n, c, h, rh, w * rw)[...] = rows[:, :, :, None, :]
    return out


def interleaved(fns: list[Callable[[], object]], rounds: int, block: int) -> list[float]:
    """Median over rounds of each fn's median us of `block` calls, the order rotated every round."""
    times: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            ts = []
            for _ in range(block):
                t0 = time.perf_counter()
                fns[i]()
                ts.append(time.perf_counter() - t0)
            times[i].append(float(np.median(ts)))
    return [float(np.median(t)) * 1e6 for t in times]


def per_op(rounds: int, block: int) -> None:
    from pdlite.core.program import OpDesc
    from pdlite.core.types import TargetType
    from pdlite.kernels.host import interp
    from pdlite.kernels.registry import KernelContext, kernels_for
    from pdlite.operators.registry import OPS

    print("| input | factor | old form us | upsample us | kernel.run us | bound call us | same bits |")
    print("|---|---|---|---|---|---|---|")
    total = [0.0] * 4
    for shape, r in DET_SHAPES:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        desc = OpDesc("nearest_interp_v2", {"X": ["x"]}, {"Out": ["out"]},
                      {"scale": [float(r)] * 2, "interp_method": "nearest", "align_corners": False, "align_mode": 1,
                       "data_layout": "NCHW"})
        op = OPS["nearest_interp_v2"].attach(desc)
        k = next(d for d in kernels_for(op.type) if d.key.target == TargetType.Host).create(op, KernelContext({}))
        ins = {"X": [x]}
        b = k.bind(ins, frozenset())
        assert b is not None
        outs = [old_upsample(x, r, r), interp.upsample(x, r, r), k.run(ins)["Out"][0], b.fn(x)]
        same = all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs)
        ts = interleaved([partial(old_upsample, x, r, r), partial(interp.upsample, x, r, r), partial(k.run, ins),
                          partial(b.fn, x)], rounds, block)
        total = [a + t for a, t in zip(total, ts)]
        print(f"| {shape} | {r} | " + " | ".join(f"{t:.1f}" for t in ts) + f" | {'yes' if same else 'NO'} |")
    print("| all six | | " + " | ".join(f"{t:.1f}" for t in total) + " | |")


def det_model(rounds: int, block: int, threads: int) -> None:
    from pdlite.kernels.host import interp
    from pdlite.kernels.registry import Kernel
    from pdlite.lite import CxxConfig, create_paddle_predictor

    d = compare.find_model("ppocr_det_v4")
    if d is None:
        print("ppocr_det_v4 not found (tests/fixtures/models or ../shared/models)")
        return
    feeds = compare.feeds_for(d, 1)
    new_form, new_bind = interp.upsample, interp._Interp.bind
    preds = {}
    for after in (False, True):
        interp._Interp.bind = new_bind if after else Kernel.bind  # type: ignore[method-assign]
        interp.upsample = new_form if after else old_upsample
        cfg = CxxConfig()
        cfg.set_model_dir(str(d))
        cfg.set_threads(threads)
        cfg.set_option("steady_path", True)
        pred = create_paddle_predictor(cfg)
        for k, v in feeds.items():
            pred.get_input_by_name(k).from_numpy(v)
        for _ in range(5):  # (the steady path records its plan over the first runs)
            pred.run()
        preds[after] = pred
    interp._Interp.bind = new_bind  # type: ignore[method-assign]
    outs = {}

    def run(after: bool) -> None:
        interp.upsample = new_form if after else old_upsample
        preds[after].run()

    for after in (False, True):
        run(after)
        outs[after] = np.array(preds[after].get_output(0).numpy())
    same = np.array_equal(outs[False], outs[True])
    before_us, after_us = interleaved([lambda: run(False), lambda: run(True)], rounds, block)
    interp.upsample = new_form
    print(f"\nppocr_det_v4 1x3x320x320, {threads} thread(s), steady path: before {before_us / 1e3:.3f} ms, "
          f"after {after_us / 1e3:.3f} ms, after / before {after_us / before_us:.3f}, same bits: "
          f"{'yes' if same else 'NO'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    from pdlite.kernels.host import native

    native.set_num_threads(args.threads)
    print(f"medians of {args.rounds} rounds x {args.block} calls, interleaved in one process")
    per_op(args.rounds, args.block)
    det_model(args.rounds, max(args.block // 4, 3), args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
