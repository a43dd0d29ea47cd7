"""Throughput of `pdlite batch` (items/s) with 1 and 2 workers: in-process / process pool, and Ray actors.

    python benchmarks/batch_throughput.py [--model mobilenet_v3_small] [--items 160] [--repeat 3] [--no-ray]

Writes `items` random .npy feeds (1x3x224x224 float32 for the default model) to a temporary folder
and runs `pdlite.tools.batch.run_batch` over them (1 thread per worker, one output .npz per item):
- `local` 1 worker: in this process (what `pdlite batch --workers 1` does);
- `pool` 2 workers: a spawned process pool, one predictor per process;
- `ray` 1 and 2 workers: Ray Data actors on a local Ray instance (`ray.init(num_cpus=2)`, started once
  before timing; actor start-up is timed).
Runs are interleaved (every configuration once per round, `repeat` rounds) and medians reported:
end-to-end items/s (start-up included: spawning, model loading, actors), the wall time of a short
run of `small` items (mostly start-up), and the rate of the extra items, (items - small) / (difference
of the two medians), which leaves start-up out but is only meaningful on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite.integrations import predictor_from_path  # noqa: E402
from pdlite.tools.batch import run_batch  # noqa: E402

ROOTS = [REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"]
SHAPES = {"mobilenet_v3_small": (1, 3, 224, 224), "ppocr_cls_v2": (1, 3, 48, 192), "resnet18": (1, 3, 224, 224)}


def find_model(name: str) -> Path:
    for root in ROOTS:
        if (root / name).is_dir():
            return root / name
    raise SystemExit(f"model {name!r} not found in {ROOTS}")


def write_items(folder: Path, n: int, shape: tuple[int, ...], seed: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        np.save(folder / f"item{i:05d}.npy", rng.standard_normal(shape).astype(np.float32))


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mobilenet_v3_small")
    ap.add_argument("--items", type=int, default=160)
    ap.add_argument("--small", type=int, default=8, help="items of the short run (start-up estimate)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    args = ap.parse_args()

    model = str(find_model(args.model))
    shape = SHAPES.get(args.model) or tuple(max(d, 1) for d in predictor_from_path(model).get_input(0).shape())
    configs = [("local", 1, None), ("pool", 2, None)]
    if not args.no_ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        configs += [("ray", 1, "local"), ("ray", 2, "local")]
    times: dict[tuple[str, int, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        write_items(big, args.items, shape)
        write_items(small, args.small, shape, seed=1)
        for r in range(args.repeat):
            for kind, workers, address in configs:
                for folder, n in ((big, args.items), (small, args.small)):
                    t0 = time.perf_counter()
                    run_batch(model, str(folder), os.path.join(tmp, f"out_{kind}{workers}_{n}"), workers=workers,
                              batch_size=args.batch_size, ray_address=address)
                    dt = time.perf_counter() - t0
                    times.setdefault((kind, workers, n), []).append(dt)
                    print(f"round {r + 1}: {kind} x{workers}, {n} items: {dt:.2f} s", file=sys.stderr)
    print(f"model {args.model}, input {list(shape)} float32, {args.items} items (short run {args.small}), "
          f"batch size {args.batch_size}, 1 thread per worker, {args.repeat} interleaved rounds, medians")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average at the end {os.getloadavg()[0]:.2f}\n")
    print(f"| runner | workers | end-to-end items/s | wall s ({args.items} items) | wall s ({args.small} items) "
          "| extra items/s |")
    print("|---|---|---|---|---|---|")
    for kind, workers, _ in configs:
        t_big = statistics.median(times[(kind, workers, args.items)])
        t_small = statistics.median(times[(kind, workers, args.small)])
        extra = f"{(args.items - args.small) / (t_big - t_small):.1f}" if t_big > t_small else "n/a (noise)"
        label = {"local": "in-process", "pool": "process pool", "ray": "Ray actors"}[kind]
        print(f"| {label} | {workers} | {args.items / t_big:.1f} | {t_big:.2f} | {t_small:.2f} | {extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
