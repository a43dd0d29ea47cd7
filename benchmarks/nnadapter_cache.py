"""First-call latency of a second `pdlite ocr` process: the compiled device models come from the model cache.

`pdlite` commands keep compiled NNAdapter models under the user cache (pdlite/nnadapter/model_cache.py). For each
device this runs, in fresh processes with an empty cache folder first (XDG_CACHE_HOME pointed at a temporary
folder, so the real user cache is untouched), alternately:
- cold: a process whose cache folder is empty (every subgraph converted and compiled);
- warm: a second process on the same cache folder (converted, then loaded instead of compiled);
and reports the medians of: the OCR engine's creation plus its first image (the first-call latency), and the
whole `pdlite ocr IMAGE --device D` command's wall time.

    python benchmarks/nnadapter_cache.py [--image examples/images/sample_en.png] [--devices intel_openvino,onnxruntime]
                                         [--threads 2] [--rounds 3]
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from pdlite.apps.ocr import OCR
from pdlite.nnadapter.model_cache import default_model_cache
with default_model_cache():
    t1 = time.perf_counter()
    ocr = OCR(device=sys.argv[2], threads=int(sys.argv[3]))
    lines = ocr(sys.argv[1])
    t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first_call": t2 - t1, "lines": len(lines)}))
"""


def _env(cache: str) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    env.pop("PDLITE_NNADAPTER_MODEL_CACHE_DIR", None)
    return env


def first_call(cache: str, image: str, device: str, threads: int) -> float:
    """Seconds from creating the OCR engine to the end of its first image, in a new process."""
    out = subprocess.run([sys.executable, "-c", CHILD, image, device, str(threads)], env=_env(cache), cwd=REPO,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["first_call"]


def cli(cache: str, image: str, device: str, threads: int) -> float:
    """Wall seconds of `pdlite ocr IMAGE --device DEVICE`."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pdlite", "ocr", image, "--device", device, "--threads", str(threads),
                    "--quiet", "--json", os.devnull], env=_env(cache), cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=str(REPO / "examples/images/sample_en.png"))
    ap.add_argument("--devices", default="intel_openvino,onnxruntime")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for device in [d for d in args.devices.split(",") if d]:
            for what in (first_call, cli):
                tmp = tempfile.mkdtemp(prefix="pdlite-cache-bench-")
                try:
                    cold = what(tmp, args.image, device, args.threads)  # fills the cache
                    warm = what(tmp, args.image, device, args.threads)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                rows.setdefault((device, what.__name__), []).append((cold, warm))
    print("| device | measured | first process, empty cache (s) | second process (s) | second / first |")
    print("|---|---|---|---|---|")
    for (device, what), vals in rows.items():
        cold, warm = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
        label = "engine + first image" if what == "first_call" else "`pdlite ocr` wall"
        print(f"| {device} | {label} | {cold:.2f} | {warm:.2f} | {warm / cold:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
