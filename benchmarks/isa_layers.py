"""Per layer, where pdlite's host fp32 spends its time at each forced instruction set (issue 39): the per-op side of
benchmarks/isa_compare.py.

For each model and ISA, a worker process (PDLITE_NATIVE_ISA set before pdlite loads) runs the model `--runs` times
with a hook on every instruction and keeps each instruction's fastest time (the minimum: on a shared machine the
least disturbed run of each op). Prints, per model, the sum of those minima per ISA and the whole run's fastest time
(their difference: the time between ops, Python's dispatch), then the `--top` ops by time at the first ISA with
their times at the others.

`--openvino`: also OpenVINO's fp32 CPU plugin per node at each ISA (ONEDNN_MAX_CPU_ISA forced, PERF_COUNT on, each
node's fastest time over the same runs), matched to pdlite's ops in program order by output shape: an OpenVINO
column per ISA, each cell the matched node plus the unmatched nodes (reorders, layout changes) run since the previous
match. PERF_COUNT adds its own cost per node (OpenVINO's sum of nodes exceeds its unprofiled run); compare per-op
cells, and whole runs with isa_compare.py.

    python benchmarks/isa_layers.py [--models mobilenet_v2,resnet18] [--isas avx2,avx512] [--threads 1] [--top 8]
                                    [--openvino]
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
from isa_compare import isa_env  # noqa: E402  (the ISA forced on pdlite, oneDNN and OpenBLAS)


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


def ov_worker(name: str, threads: int, runs: int) -> None:
    """Print one JSON line: {"run_ms", "nodes": [[node type, output shape, min ms], ...]} in OpenVINO's execution
    order (the nodes that ran), ONEDNN_MAX_CPU_ISA as the environment sets it."""
    import openvino as ov

    d = compare.find_model(name)
    feeds = compare.feeds_for(d, 1)
    core = ov.Core()
    m, _ = compare.program_files(d)
    model = core.read_model(str(m))
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                 "INFERENCE_PRECISION_HINT": "f32", "PERF_COUNT": True})
    req = compiled.create_infer_request()
    for _ in range(3):
        req.infer(feeds)
    best: dict[str, float] = {}
    total = []
    for _ in range(runs):
        t = time.perf_counter()
        req.infer(feeds)
        total.append(time.perf_counter() - t)
        for p in req.profiling_info:
            if p.status == p.Status.EXECUTED:
                best[p.node_name] = min(best.get(p.node_name, 1e9), p.real_time.total_seconds() * 1e3)
    nodes = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        name_ = op.get_friendly_name()
        if name_ in best and op.get_output_size():
            ps = op.get_output_partial_shape(0)
            shape = "x".join(str(x) for x in ps.to_shape()) if ps.is_static else "?"
            nodes.append([str(op.get_rt_info()["layerType"].astype(str)), shape, best[name_]])
    print(json.dumps({"run_ms": min(total) * 1e3, "nodes": nodes}), flush=True)


def match_nodes(ops: list[list], nodes: list[list]) -> list[float | None]:
    """Per pdlite op (program order), the time of the next OpenVINO node with its output shape plus the unmatched
    nodes since the previous match (None: no such node; ops that OpenVINO fused away, as activations)."""
    out: list[float | None] = []
    j = 0
    for _, shape, _ in ops:
        k = next((k for k in range(j, len(nodes)) if nodes[k][1] == shape), None)
        if k is None:
            out.append(None)
            continue
        out.append(sum(n[2] for n in nodes[j:k + 1]))
        j = k + 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v1,mobilenet_v2,mobilenet_v3_small,resnet18,ppocr_cls_v2,"
                                        "ppocr_det_v4,transformer_encoder")
    ap.add_argument("--isas", default="avx2,avx512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--openvino", action="store_true", help="OpenVINO's fp32 time per node beside each op")
    ap.add_argument("--blas-own-pick", action="store_true", help="leave OpenBLAS's kernels to its own CPU detection "
                                                                  "(default: forced to the ISA, as isa_compare.py)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--ov-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.runs)
        return 0
    if args.ov_worker:
        ov_worker(args.ov_worker, args.threads, args.runs)
        return 0
    isas = args.isas.split(",")
    from pdlite.tools.doctor import cpu_info

    flags = cpu_info()[1]
    for name in args.models.split(","):
        if compare.find_model(name) is None:
            print(f"{name}: model not found")
            continue
        res, ovr = {}, {}
        for isa in isas:
            env = dict(os.environ, **isa_env(isa, flags, not args.blas_own_pick))
            for flag, into in [("--worker", res)] + [("--ov-worker", ovr)] * args.openvino:
                out = subprocess.run([sys.executable, __file__, flag, name, "--threads", str(args.threads),
                                      "--runs", str(args.runs)], env=env, capture_output=True, text=True, check=True)
                into[isa] = json.loads(out.stdout.strip().splitlines()[-1])
        ran = {isa: r["isa"] for isa, r in res.items() if r["isa"] != isa}
        if ran:
            print(f"{name}: asked for {list(ran)}, the kernels ran {list(ran.values())}")
        print(f"\n{name}, {args.threads} thread(s), fastest of {args.runs} runs: "
              + "; ".join(f"{isa} ops {sum(o[2] for o in r['ops']):.3f} ms, run {r['run_ms']:.3f} ms"
                          for isa, r in res.items()))
        first = res[isas[0]]["ops"]
        ovm = {isa: match_nodes(res[isa]["ops"], r["nodes"]) for isa, r in ovr.items()}
        for isa, r in ovr.items():
            matched = sum(t for t in ovm[isa] if t is not None)
            print(f"OpenVINO {isa}: nodes {sum(n[2] for n in r['nodes']):.3f} ms (matched to ops {matched:.3f}), "
                  f"run {r['run_ms']:.3f} ms (profiled)")
        print("| # | op | output | " + " | ".join(f"{isa} ms" for isa in isas)
              + "".join(f" | OpenVINO {isa} ms" for isa in ovm) + " |")
        print("|---|---|---|" + "---|" * (len(isas) + len(ovm)))
        for i in sorted(range(len(first)), key=lambda i: -first[i][2])[:args.top]:
            times = " | ".join(f"{res[isa]['ops'][i][2]:.3f}" if i < len(res[isa]["ops"]) else "-" for isa in isas)
            times += "".join(f" | {m[i]:.3f}" if i < len(m) and m[i] is not None else " | -" for m in ovm.values())
            print(f"| {i} | {first[i][0]} | {first[i][1]} | {times} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
