"""Per layer, where pdlite's host fp32 spends its time at each forced instruction set (issue 39): the per-op side of
benchmarks/isa_compare.py.

For each model and ISA, a worker process (PDLITE_NATIVE_ISA set before pdlite loads) runs the model `--runs` times
with a hook on every instruction and keeps each instruction's fastest time (the minimum: on a shared machine the
least disturbed run of each op). Prints, per model, the sum of those minima per ISA and the whole run's fastest time
(their difference: the time between ops, Python's dispatch), then the `--top` ops by time at the first ISA with
their times at the others.

    python benchmarks/isa_layers.py [--models mobilenet_v2,resnet18] [--isas avx2,avx512] [--threads 1] [--top 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: find_model, feeds_for)


def worker(name: str, threads: int, runs: int) -> None:
    """Print one JSON line: {"isa", "run_ms", "ops": [[op type, output shape, min ms], ...]} in program order."""
    from pdlite.kernels.host import native
    from pdlite.lite import CxxConfig, create_paddle_predictor

    d = compare.find_model(name)
    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_threads(threads)
    pred = create_paddle_predictor(cfg)
    for k, v in compare.feeds_for(d, 1).items():
        pred.get_input_by_name(k).from_numpy(v)
    for _ in range(3):
        pred.run()
    best: dict[int, float] = {}
    info: dict[int, tuple[int, str, str]] = {}

    def hook(inst, seconds, scope) -> None:
        key = id(inst)
        if key not in info:
            outs = [n for ns in inst.op.outputs.values() for n in ns]
            v = scope.get(outs[0]) if outs and hasattr(scope, "get") else None
            info[key] = (len(info), inst.op.type, "x".join(map(str, getattr(v, "shape", ()))))
        best[key] = min(best.get(key, seconds), seconds)

    pred.set_hook(hook)
    total = []
    for _ in range(runs):
        t = time.perf_counter()
        pred.run()
        total.append(time.perf_counter() - t)
    ops = [[info[k][1], info[k][2], best[k] * 1e3] for k in sorted(best, key=lambda k: info[k][0])]
    print(json.dumps({"isa": native.isa(), "run_ms": min(total) * 1e3, "ops": ops}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v1,mobilenet_v2,mobilenet_v3_small,resnet18,ppocr_cls_v2,"
                                        "ppocr_det_v4,transformer_encoder")
    ap.add_argument("--isas", default="avx2,avx512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.runs)
        return 0
    isas = args.isas.split(",")
    for name in args.models.split(","):
        if compare.find_model(name) is None:
            print(f"{name}: model not found")
            continue
        res = {}
        for isa in isas:
            env = dict(os.environ, PDLITE_NATIVE_ISA=isa)
            out = subprocess.run([sys.executable, __file__, "--worker", name, "--threads", str(args.threads),
                                  "--runs", str(args.runs)], env=env, capture_output=True, text=True, check=True)
            res[isa] = json.loads(out.stdout.strip().splitlines()[-1])
        ran = {isa: r["isa"] for isa, r in res.items() if r["isa"] != isa}
        if ran:
            print(f"{name}: asked for {list(ran)}, the kernels ran {list(ran.values())}")
        print(f"\n{name}, {args.threads} thread(s), fastest of {args.runs} runs: "
              + "; ".join(f"{isa} ops {sum(o[2] for o in r['ops']):.3f} ms, run {r['run_ms']:.3f} ms"
                          for isa, r in res.items()))
        print("| # | op | output | " + " | ".join(f"{isa} ms" for isa in isas) + " |")
        print("|---|---|---|" + "---|" * len(isas))
        first = res[isas[0]]["ops"]
        for i in sorted(range(len(first)), key=lambda i: -first[i][2])[:args.top]:
            times = " | ".join(f"{res[isa]['ops'][i][2]:.3f}" if i < len(res[isa]["ops"]) else "-" for isa in isas)
            print(f"| {i} | {first[i][0]} | {first[i][1]} | {times} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
