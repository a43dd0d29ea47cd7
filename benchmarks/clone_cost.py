"""What `clone()` costs next to creating another predictor: wall time and resident memory (RSS) per predictor.

    python benchmarks/clone_cost.py [--models ppocr_det_v4,resnet18] [--clones 8] [--new 3] [--markdown]

Per model and kind (CxxPredictor from the model folder, LightPredictor from its `.nb`, and the
pdlite.inference Predictor): make one predictor and run it once (so that kernels have prepared
their weights), then make `new` more predictors the ordinary way and `clones` clones, each kept
alive; report the median time per creation and the RSS growth per predictor. Each kind is
measured in its own process, so that memory freed by one does not hide another's. A clone's
first run is also checked to equal the original's output.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ROOTS = [REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"]
KINDS = ("cxx", "light", "inference")


def find_model(name: str) -> Path | None:
    return next((r / name for r in ROOTS if (r / name).is_dir()), None)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def measure(model: str, kind: str, clones: int, new: int) -> dict:
    """One process's measurement (called in a child by main)."""
    sys.path.insert(0, str(REPO))
    from pdlite import inference
    from pdlite.lite import CxxConfig, MobileConfig, create_paddle_predictor

    d = find_model(model)
    z = np.load(d / "case.npz")
    feeds = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    tmp = tempfile.mkdtemp()

    def cxx_config() -> CxxConfig:
        c = CxxConfig()
        c.set_model_dir(str(d))
        return c

    nb = create_paddle_predictor(cxx_config()).save_optimized_model(f"{tmp}/m") if kind == "light" else ""

    def make():
        if kind == "cxx":
            return create_paddle_predictor(cxx_config())
        if kind == "light":
            m = MobileConfig()
            m.set_model_from_file(nb)
            return create_paddle_predictor(m)
        return inference.create_predictor(inference.Config(str(d)))

    def run(p) -> np.ndarray:
        if kind == "inference":
            return p.run([feeds[n] for n in p.get_input_names()])[0]
        return p.predict(feeds)[0]

    first = make()
    ref = run(first)
    keep = []
    gc.collect()
    r0, t_new = rss_mb(), []
    for _ in range(new):
        t = time.perf_counter()
        p = make()
        run(p)  # prepared like the first
        t_new.append(time.perf_counter() - t)
        keep.append(p)
    gc.collect()
    r1, t_clone = rss_mb(), []
    for _ in range(clones):
        t = time.perf_counter()
        c = first.clone()
        t_clone.append(time.perf_counter() - t)
        keep.append(c)
    out = run(keep[-1])
    gc.collect()
    r2 = rss_mb()
    return dict(model=model, kind=kind, new_ms=1e3 * statistics.median(t_new), clone_ms=1e3 * statistics.median(t_clone),
                new_mb=(r1 - r0) / new, clone_mb=(r2 - r1) / clones, same=bool(np.array_equal(out, ref)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ppocr_det_v4,resnet18")
    ap.add_argument("--clones", type=int, default=8)
    ap.add_argument("--new", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure(a.child[0], a.child[1], a.clones, a.new)))
        return 0
    rows = []
    for model in a.models.split(","):
        if find_model(model) is None:
            print(f"skip {model}: not found", file=sys.stderr)
            continue
        for kind in KINDS:
            res = subprocess.run([sys.executable, __file__, "--child", model, kind, "--clones", str(a.clones),
                                  "--new", str(a.new)], capture_output=True, text=True, check=True)
            rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    head = "| model | predictor | new: ms | new: MB RSS | clone: ms | clone: MB RSS | clone output = original |"
    print(head)
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['model']} | {r['kind']} | {r['new_ms']:.1f} | {r['new_mb']:.1f} | {r['clone_ms']:.3f} | "
              f"{r['clone_mb']:.2f} | {'yes' if r['same'] else 'NO'} |")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
