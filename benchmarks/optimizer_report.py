"""Per model: op count before/after the optimizer and intermediate memory before/after reuse.

    python benchmarks/optimizer_report.py [--models a,b] [--markdown]

For each legacy model (tests/fixtures/models first, then ../shared/models), on its case.npz input:
- ops: block-0 ops of the original program (without feed/fetch) and runtime instructions after
  the default pipeline; the fused and the unfused outputs are checked against case.npz (1e-4).
- memory (measured tensor sizes; memory_optimize_pass's own report uses var descs with -1 = 1):
  `no reuse` is the sum of all intermediates of the optimized program (what the scope held when
  nothing was released), `buffers` the shared-buffer plan of memory_optimize_pass's algorithm,
  `peak live` the largest sum of intermediates alive at once (what releasing achieves).
- traced peak: tracemalloc's peak during one predictor.run() with the default pipeline minus
  memory_optimize_pass (no releases) and with it (releases), over the memory held before the run.
"""
from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite.api.config import CxxConfig  # noqa: E402
from pdlite.api.predictor import CxxPredictor  # noqa: E402
from pdlite.optimizer.passes.memory_optimize import plan_memory  # noqa: E402
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES, default_passes  # noqa: E402

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined",
          "ppocr_cls_v2", "ppocr_det_v4", "resnet18", "transformer_encoder"]
UNFUSED = ESSENTIAL_PASSES


def find_model(name: str) -> Path | None:
    for root in (REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"):
        if (root / name).is_dir():
            return root / name
    return None


def load_case(d: Path, name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    path = d / "case.npz"
    if not path.exists():
        twin = find_model(name.replace("_noncombined", ""))
        path = twin / "case.npz" if twin is not None else path
    z = np.load(path)
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            {k[4:]: z[k] for k in z.files if k.startswith("out:")})


def predictor(d: Path, passes: list[str]) -> CxxPredictor:
    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_passes(passes)
    return CxxPredictor(cfg)


def rel_err(got: list[np.ndarray], p: CxxPredictor, ref: dict[str, np.ndarray]) -> float:
    errs = []
    for n, g in zip(p.get_output_names(), got):
        r = ref[n].astype(np.float64)
        errs.append(float(np.max(np.abs(g - r)) / max(float(np.max(np.abs(r))), 1e-30)))
    return max(errs)


def traced_peak(p: CxxPredictor, ins: dict[str, np.ndarray]) -> int:
    p.predict(ins)  # warm-up: kernels' prepared weights and caches are not counted
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        p.predict(ins)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def report(name: str) -> dict[str, Any] | None:
    d = find_model(name)
    if d is None:
        return None
    ins, outs = load_case(d, name)
    unfused = predictor(d, UNFUSED)
    full = predictor(d, default_passes())
    no_release = predictor(d, [p for p in default_passes() if p != "memory_optimize_pass"])
    err_unfused = rel_err(unfused.predict(ins), unfused, outs)
    sizes: dict[str, int] = {}
    full.set_hook(lambda inst, dt, scope: sizes.update(
        {n: int(np.asarray(scope[n]).nbytes) for n in inst.op.output_names() if n in scope}))
    err_full = rel_err(full.predict(ins), full, outs)
    full.set_hook(None)
    mem = full.analysis.ctx.meta["memory_plan"]
    inter = set(mem["buffer_of"])
    steps = [(i.op.input_names(), i.op.output_names()) for i in full.runtime_program.instructions]
    plan = plan_memory(steps, inter.__contains__, lambda n: sizes.get(n, 0))
    before = sum(1 for op in full.program.main.ops if op.type not in ("feed", "fetch"))
    return {
        "model": name, "ops_before": before, "ops_after": len(full.runtime_program),
        "no_reuse": plan.bytes_no_reuse, "buffers": plan.bytes_shared_buffers, "peak_live": plan.peak_live_bytes,
        "traced_no_release": traced_peak(no_release, ins), "traced_release": traced_peak(full, ins),
        "err_unfused": err_unfused, "err_full": err_full,
    }


def mib(n: int) -> str:
    return f"{n / 2**20:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    cols = ["model", "ops before", "ops after", "after/before", "no reuse MiB", "buffers MiB", "peak live MiB",
            "traced peak MiB: no release", "release", "rel err unfused", "rel err fused"]
    rows = []
    for name in args.models.split(","):
        r = report(name.strip())
        if r is None:
            print(f"# {name}: not found", file=sys.stderr)
            continue
        rows.append([r["model"], str(r["ops_before"]), str(r["ops_after"]), f"{r['ops_after'] / r['ops_before']:.0%}",
                     mib(r["no_reuse"]), mib(r["buffers"]), mib(r["peak_live"]), mib(r["traced_no_release"]),
                     mib(r["traced_release"]), f"{r['err_unfused']:.1e}", f"{r['err_full']:.1e}"])
    if args.markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
        for row in rows:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
