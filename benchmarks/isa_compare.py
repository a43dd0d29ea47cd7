"""pdlite's host fp32 against OpenVINO's fp32 CPU plugin at the same forced instruction set (issue 39, Must-have 4).

For each instruction set, both run with it forced: pdlite's native kernels by PDLITE_NATIVE_ISA, OpenVINO's oneDNN
by ONEDNN_MAX_CPU_ISA (AVX2, AVX512_CORE), each contender in its own worker process, interleaved in blocks with the
order rotated each round, as benchmarks/compare.py does (its workers and its bench_cell; this script only sets the
environment and picks the two contenders). Ratio: median over rounds of (pdlite / OpenVINO) in the same round.

    python benchmarks/isa_compare.py [--models mobilenet_v2,resnet18] [--isas avx2,avx512] [--threads 2] [--rounds 4]

The BLAS pdlite calls (NumPy's OpenBLAS: Winograd's products on large maps, im2col GEMMs) is forced to the same ISA too
(OPENBLAS_CORETYPE: Haswell at avx2, SkylakeX at avx512 where the CPU has AVX-512F): OpenBLAS picks its kernels by CPU
model and runs its AVX2 (Haswell) ones on AMD Zen 4 / Zen 5, AVX-512 CPUs (measured on Zen 5, 1 thread, noisy: PP-OCRv4
det 0.84x, ResNet18 0.80x the time with SkylakeX's). `--blas-own-pick` leaves OpenBLAS's choice (what a user gets
unless OPENBLAS_CORETYPE is set before NumPy loads); the header says which.

Per layer, the same models at each ISA: benchmarks/isa_layers.py.

The last column lists OpenVINO's nodes that run above the forced ISA (its runtime model's primitiveType per node):
ONEDNN_MAX_CPU_ISA caps oneDNN's primitives only; OpenVINO's MLAS GEMMs (`gemm_mlas_f32`: its FullyConnected on
small shapes) and some of its own JIT nodes (MVN: `jit_avx512_f32`) pick their kernels from CPUID. On the transformer
encoder at "AVX2" (OpenVINO 2025, Zen 5), 9 of its 13 FullyConnected (2/3 of the model's multiply-adds) and its 5
layer norms ran AVX-512 code: that cell is not an AVX2 comparison.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: the workers and the interleaving)

ONEDNN_ISA = {"avx2": "AVX2", "avx512": "AVX512_CORE", "baseline": "SSE41"}
OPENBLAS_CORE = {"avx2": "Haswell", "avx512": "SkylakeX"}  # OpenBLAS's kernels of that ISA (OPENBLAS_CORETYPE)


def isa_env(isa: str, flags: list[str], blas: bool = True) -> dict[str, str]:
    """The environment forcing `isa` on pdlite's native kernels, OpenVINO's oneDNN and (`blas`, where the CPU has
    the ISA) NumPy's OpenBLAS; set before the worker processes import NumPy."""
    env = {"PDLITE_NATIVE_ISA": isa, "ONEDNN_MAX_CPU_ISA": ONEDNN_ISA[isa]}
    need = {"avx2": {"avx2", "fma"}, "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq"}}.get(isa)
    if blas and isa in OPENBLAS_CORE and need and need <= set(flags):
        env["OPENBLAS_CORETYPE"] = OPENBLAS_CORE[isa]
    return env


def ov_above_isa(d: Path, isa: str, batch: int) -> str:
    """OpenVINO's nodes above `isa` for model dir d ("9 FullyConnected gemm_mlas_f32, ..."), compiled in a child
    process under the environment already set (oneDNN reads its ISA cap once per process)."""
    if isa == "avx512":
        return "-"
    code = ("import sys, collections; sys.path.insert(0, sys.argv[1]); import compare, openvino as ov; "
            "d = compare.find_model(sys.argv[2]); feeds = compare.feeds_for(d, int(sys.argv[3])); core = ov.Core(); "
            "m = core.read_model(str(compare.program_files(d)[0])); m.reshape({k: list(v.shape) for k, v in feeds.items()}); "
            "cm = core.compile_model(m, 'CPU', {'INFERENCE_NUM_THREADS': 1, 'INFERENCE_PRECISION_HINT': 'f32'}); "
            "c = collections.Counter((i['layerType'].astype(str), i['primitiveType'].astype(str)) for i in "
            "(op.get_rt_info() for op in cm.get_runtime_model().get_ordered_ops()) if 'primitiveType' in i); "
            "print(', '.join(f'{n} {t} {p}' for (t, p), n in sorted(c.items()) "
            "if 'avx512' in p or 'amx' in p or 'mlas' in p) or 'none')")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), d.name, str(batch)],
                             capture_output=True, text=True, errors="replace", timeout=300)
    except subprocess.TimeoutExpired:
        return "?"
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else "?"


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
    ap.add_argument("--blas-own-pick", action="store_true", help="leave OpenBLAS's kernels to its own CPU detection")
    args = ap.parse_args()
    from pdlite.tools.doctor import cpu_info

    model, flags = cpu_info()
    print(f"CPU: {model}; flags: {' '.join(flags)}; batch {args.batch}, {args.threads} threads; median ms of "
          f"{args.rounds} x {args.block} runs per contender, interleaved; ratio = pdlite / OpenVINO (paired by round); "
          f"NumPy's OpenBLAS: {'its own pick' if args.blas_own_pick else 'forced to the ISA (OPENBLAS_CORETYPE)'}")
    print("| model | ISA forced | pdlite host ms | OpenVINO fp32 ms | pdlite / OpenVINO | OpenVINO nodes above the ISA |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        d = compare.find_model(name)
        if d is None:
            print(f"| {name} | (model not found) | | | | |")
            continue
        for isa in args.isas.split(","):
            os.environ.pop("OPENBLAS_CORETYPE", None)
            os.environ.update(isa_env(isa, flags, not args.blas_own_pick))
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
                  f"{'-' if r is None else f'{r:.2f}x'} | {ov_above_isa(d, isa, args.batch)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
