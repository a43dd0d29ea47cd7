"""Where MLServer + pdlite spend CPU on each request (issue 42: why batching pays so little on a small CNN here).

    python benchmarks/serve_profile.py [--model mnv3,mnv3b,null,nulllist] [--seconds 8] [--concurrency 8]

One `mlserver start` (parallel_workers 0: everything in one process) serving MobileNetV3-small as the batching
benchmark does (`mnv3`: 2 clones x 1 thread, unbatched; `mnv3b`: 1 clone, pdlite's batching 8), `null` (a
model that decodes the input as pdlite's runtime does, raw bytes as an array, and answers zeros: MLServer's own
cost) and `nulllist` (the same on MLServer's own raw path: bytes -> Python list -> array, what pdlite's runtime
paid before it kept raw bytes), loaded over gRPC with raw tensor bytes by C closed-loop clients
(benchmarks/serve_load.py's generator). Two passes per model:

1. plain: requests/s and the server's CPU ms per request by thread, from /proc/PID/task/*/stat: the event loop
   (the main thread: gRPC's asyncio server, MLServer's request conversion, pdlite's runtime coroutine) and the
   other threads (pdlite's clones running the model, gRPC's pollers; Python does not name OS threads);
2. under cProfile (the event loop only; cProfile's own overhead inflates every figure ~1.5x, the split is what
   counts): the loop's ms per request in named parts: MLServer turning raw bytes into a Python list
   (`mlserver/raw.py` inject_raw; pdlite's models: pdlite's inject_raw, an array over the bytes), pdlite's
   runtime decoding the input (`_feeds`), pdlite's
   batcher or executor hand-off, the answer's encoding (pdlite's `_output`, MLServer's response converter),
   and the rest of the loop (gRPC, MLServer's data plane, asyncio).
"""
from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import serve_load as sl  # noqa: E402

from tests.integrations.serve_util import CNN, wait_ready, write_repository  # noqa: E402

# the event loop's parts: label -> (file suffix, function) whose cumulative time is that part
PARTS = {
    "MLServer: raw bytes -> Python list (inject_raw)": ("mlserver/raw.py", "inject_raw"),
    "pdlite: raw bytes -> array (its inject_raw; other models: MLServer's inside)": ("pdlite/integrations/mlserver.py", "inject_raw"),
    "the runtime's predict on the loop (pdlite's PdliteRuntime / NullModel)": ("", "predict"),
    "pdlite: the input decoded (_feeds)": ("pdlite/integrations/mlserver.py", "_feeds"),
    "pdlite: outputs -> V2 (_output)": ("pdlite/integrations/mlserver.py", "_output"),
    "MLServer: response -> protobuf (from_types)": ("mlserver/grpc/converters.py", "from_types"),
}


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of PID's threads: the main thread (the event loop) and the others."""
    out = {"event loop": 0.0, "other threads": 0.0}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            ticks = sum(int(v) for v in (t / "stat").read_text().rsplit(")", 1)[1].split()[11:13])
        except OSError:
            continue
        out["event loop" if int(t.name) == pid else "other threads"] += ticks / os.sysconf("SC_CLK_TCK")
    return out


def serve(folder: Path, ports: dict[str, int], model: str, args: argparse.Namespace, profile: Path | None):
    exe = str(Path(sys.executable).with_name("mlserver"))
    cmd = ([sys.executable, "-m", "cProfile", "-o", str(profile), exe] if profile else [exe]) + ["start", str(folder)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "benchmarks")]))
    proc = subprocess.Popen(cmd, cwd=str(folder), env=env, stdout=open(folder / "mlserver.log", "ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{ports['http_port']}", proc)
        call = sl.Grpc(ports["grpc_port"], model, "x", sl.cnn_input())
        warm = sl.load(call, args.concurrency, 1.5)  # warm-up
        before = thread_cpu(proc.pid)
        res = sl.load(call, args.concurrency, args.seconds)
        after = thread_cpu(proc.pid)
        res["threads"] = {k: (after[k] - before[k]) / max(1, res["ok"]) * 1e3 for k in after}
        res["batch"] = sum(call.batches) / len(call.batches) if call.batches else 1.0
        res["requests"] = sum(warm["other"].values()) + warm["ok"] + sum(res["other"].values()) + res["ok"]
        return res
    finally:
        proc.send_signal(signal.SIGINT)  # cProfile writes its file when mlserver returns
        proc.wait(120)


def loop_parts(profile: Path, requests: int) -> dict[str, float]:
    """The event loop's ms per request in PARTS, from a cProfile file of REQUESTS (warm-up included)."""
    st = pstats.Stats(str(profile)).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    out = {}
    for label, (suffix, func) in PARTS.items():
        out[label] = sum(v[3] for (f, _, fn), v in st.items() if fn == func and (
            f.endswith(suffix) if suffix else f.endswith(("pdlite/integrations/mlserver.py", "serve_load.py"))))
    return {k: v / max(1, requests) * 1e3 for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mnv3,mnv3b,null,nulllist")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--concurrency", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        extra = {"max_queued": 64, "threads": 1}
        ports = write_repository(folder, {
            "mnv3": {"uri": CNN, "extra": {**extra, "workers": 2}},
            "mnv3b": {"uri": CNN, "extra": {**extra, "workers": 1, "max_batch_size": 8,
                                            "batch_wait_timeout_s": 0.002}}}, parallel_workers=0)
        for name, cls in (("null", "NullModel"), ("nulllist", "NullListModel")):
            (folder / name).mkdir()
            (folder / name / "model-settings.json").write_text(json.dumps(
                {"name": name, "implementation": f"serve_load.{cls}"}))
        print(f"serve_profile: CPU {os.cpu_count()} cores (shared: noisy); concurrency {args.concurrency}, gRPC raw "
              "FP32 1x3x224x224, MobileNetV3-small; CPU ms per answered request")
        rows = []
        for model in args.model.split(","):
            plain = serve(folder, ports, model, args, None)
            prof = Path(tmp) / f"{model}.prof"
            profiled = serve(folder, ports, model, args, prof)
            parts = loop_parts(prof, profiled["requests"])  # the profile holds the warm-up's requests too
            rows.append((model, plain, parts))
        print("\n| model | req/s | mean batch | event loop | other threads (the model's runs) | all |\n"
              "|---|---|---|---|---|---|")
        for model, r, _ in rows:
            t = r["threads"]
            print(f"| {model} | {r['rps']:.0f} | {r['batch']:.1f} | {t['event loop']:.2f} | {t['other threads']:.2f} | "
                  f"{sum(t.values()):.2f} |")
        from pdlite.kernels.host import native

        print(f"\nhost kernels: {native.load_note}")
        print("\nthe event loop under cProfile, ms per request (inflated by the profiler; compare the parts):\n")
        print("| part | " + " | ".join(m for m, _, _ in rows) + " |\n|---|" + "---|" * len(rows))
        for label in PARTS:
            print(f"| {label} | " + " | ".join(f"{parts[label]:.2f}" for _, _, parts in rows) + " |")


if __name__ == "__main__":
    main()
