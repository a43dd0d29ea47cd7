"""pdlite's host fp32 against OpenVINO's fp32 CPU plugin at the same forced instruction set (issue 39, Must-have 4).

For each instruction set, both run with it forced: pdlite's native kernels by PDLITE_NATIVE_ISA, OpenVINO's oneDNN
by ONEDNN_MAX_CPU_ISA (AVX2, AVX512_CORE), each contender in its own worker process, interleaved in blocks with the
order rotated each round, as benchmarks/compare.py does (its workers and its bench_cell; this script only sets the
environment and picks the two contenders). Ratio: median over rounds of (pdlite / OpenVINO) in the same round.

    python benchmarks/isa_compare.py [--models mobilenet_v2,resnet18] [--isas avx2,avx512] [--threads 2] [--rounds 4]

Per layer, the same models at each ISA: benchmarks/isa_layers.py.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: the workers and the interleaving)

ONEDNN_ISA = {"avx2": "AVX2", "avx512": "AVX512_CORE", "baseline": "SSE41"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(compare.MODELS))  # every shared model (../shared/models/INDEX.md)
    ap.add_argument("--isas", default="avx2,avx512")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.3)
    args = ap.parse_args()
    from pdlite.tools.doctor import cpu_info

    model, flags = cpu_info()
    print(f"CPU: {model}; flags: {' '.join(flags)}; batch {args.batch}, {args.threads} threads; median ms of "
          f"{args.rounds} x {args.block} runs per contender, interleaved; ratio = pdlite / OpenVINO (paired by round)")
    print("| model | ISA forced | pdlite host ms | OpenVINO fp32 ms | pdlite / OpenVINO |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        d = compare.find_model(name)
        if d is None:
            print(f"| {name} | (model not found) | | | |")
            continue
        for isa in args.isas.split(","):
            os.environ["PDLITE_NATIVE_ISA"], os.environ["ONEDNN_MAX_CPU_ISA"] = isa, ONEDNN_ISA[isa]
            workers = {k: [compare.start_worker(k, d, args.batch, args.threads, args.warmup, None)]
                       for k in ("pdlite-host", "openvino")}
            per_round: dict[str, list[float | None]] = {}
            try:
                med = compare.bench_cell(workers, args.rounds, args.block, args.pause, per_round=per_round)
            finally:
                for ws in workers.values():
                    for w in ws:
                        w.kill()
            r = compare.paired_ratio(per_round, "pdlite-host", "openvino")
            print(f"| {name} | {isa} | {med['pdlite-host']:.2f} | {med['openvino']:.2f} | "
                  f"{'-' if r is None else f'{r:.2f}x'} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
