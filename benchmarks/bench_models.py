"""CNNs for the serving benchmarks that are too large to commit, made once into a cache folder.

`model_dir("mnv3")` is the committed MobileNetV3-small fixture; `model_dir("alexnet")` is
paddle.vision.models.alexnet with seeded random weights (61M parameters, ~233 MB of float32), saved with
`paddle.jit.save` for input [None, 3, 224, 224] under $PDLITE_BENCH_MODELS or ~/.cache/pdlite/bench_models
on first use (needs paddlepaddle, the benchmarks' and tests' oracle; pdlite never imports it). Any other name is
taken as a model folder.

Why AlexNet: its three fc layers read ~230 MB of weights a call, so at batch 1 it is bound by memory bandwidth
and a batch reuses every weight it reads (the per-sample cost falls a lot with the batch), and its run is long
next to a server's own cost per request: the case where dynamic batching pays (docs/serving.md).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MNV3 = REPO / "tests/fixtures/models/mobilenet_v3_small"
LABELS = {"mnv3": "MobileNetV3-small", "alexnet": "AlexNet (random weights)"}

_MAKE = """
import sys, numpy as np, paddle
paddle.seed(0)
np.random.seed(0)
net = paddle.vision.models.alexnet(num_classes=1000)
net.eval()
paddle.jit.save(net, sys.argv[1] + "/inference", input_spec=[paddle.static.InputSpec([None, 3, 224, 224], "float32", "x")])
"""


def cache_root() -> Path:
    return Path(os.environ.get("PDLITE_BENCH_MODELS", Path.home() / ".cache/pdlite/bench_models"))


def model_dir(name: str) -> Path:
    """The folder of the benchmark model NAME (made on first use for the generated ones)."""
    if name == "mnv3":
        return MNV3
    if name != "alexnet":
        folder = Path(name)
        if not folder.exists():
            sys.exit(f"--model {name!r}: expected mnv3, alexnet or a model folder; {folder} is not there")
        return folder
    folder = cache_root() / name
    if not any(folder.glob("inference.*")):
        folder.mkdir(parents=True, exist_ok=True)
        print(f"(making {name} with paddle into {folder}: once)", flush=True)
        # a child process: paddle's own threads and allocator stay out of the benchmark's process
        r = subprocess.run([sys.executable, "-c", _MAKE, str(folder)], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"making {name} needs paddlepaddle (the benchmarks' oracle): {r.stderr.strip()[-500:]}")
    return folder


def label(name: str) -> str:
    return LABELS.get(name, Path(name).name)


def model_alone(model: Path, device: str, x: Any, threads: int = 1) -> dict[int, tuple[float, float]]:
    """The model alone in this process on DEVICE with THREADS (pdlite's served predictor, as the runtime runs it):
    (wall ms, process CPU ms) a sample at batch 1, batch 8, and (key 0) batches of 1..8 in turn; the best of 3."""
    import numpy as np

    from pdlite.integrations.serving import ServedModel

    served = ServedModel(model, device=device, threads=threads)
    name = served.input_names[0]
    seqs = {1: [1] * 8, 8: [8] * 2, 0: [3, 1, 5, 8, 2, 6, 4, 7]}
    for b in range(1, 9):
        served.run({name: np.concatenate([x] * b)})
    best = {}
    for key, seq in seqs.items():
        times = []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()  # the process: a device runs its own threads
            for b in seq:
                served.run({name: np.concatenate([x] * b)})
            n = sum(seq)
            times.append(((time.perf_counter() - t0) / n * 1e3, (time.process_time() - c0) / n * 1e3))
        best[key] = min(times)
    return best


def same_bits(answers: list[tuple[int, Any]], model: Path, device: str, threads: int, x: Any) -> str:
    """Whether every answer (batch size k, the output array of one request of the single sample X) equals, bit
    for bit, a row of a local run of the same served predictor on k stacked copies of X (what the tests check)."""
    import numpy as np

    from pdlite.integrations.serving import ServedModel

    served = ServedModel(model, device=device, threads=threads)
    name, local, bad = served.input_names[0], {}, 0
    for k, out in answers:
        if k not in local:
            local[k] = served.run({name: np.concatenate([x] * k)})[served.output_names[0]]
        bad += not any(np.array_equal(out.reshape(local[k][i:i + 1].shape), local[k][i:i + 1]) for i in range(k))
    sizes = sorted({k for k, _ in answers})
    return (f"{len(answers) - bad}/{len(answers)} answers bit for bit equal to a row of the local predictor "
            f"(batch sizes {sizes})")
