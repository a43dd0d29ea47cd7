"""Streams of changing input shapes, end to end, pdlite beside the engines users would run instead.

Each contender runs a stream in a fresh process, twice: pass 1 with every shape new (conversions, compiles, plans:
what a new shape costs), pass 2 the same shapes again. Contenders:
- pdlite-host, pdlite-intel_openvino, pdlite-onnxruntime: pdlite on one target (an empty model cache each time);
- pdlite-auto: `set_nnadapter_device_names(["auto"])` with an empty cache (it explores as it goes);
- pdlite-auto-warm: the same with the choices earlier auto processes on this stream cached (--warm-runs, default
  3; the choices file only, no compiled models: what a user's fourth run knows);
- paddle-inference: paddle.inference (mkldnn on, IR optim on), reshaping its input handles each call;
- onnxruntime, openvino: the model exported to ONNX by pdlite's exporter (pdlite.nnadapter.export, dynamic dims
  kept), run by each runtime natively (one session / one compiled model with dynamic shapes, fp32).
Streams:
- rec: PP-OCRv4 rec, batches of 6 lines (height 48) at 12 widths;
- det: PP-OCRv4 det, 6 page sizes (multiples of 32, as the app feeds it);
- ernie: tests/fixtures/dynamic/ernie_like (ERNIE-style encoder + classifier), batch 1, 12 sequence lengths.
Rounds are interleaved (every contender once per round, the order rotated); medians over rounds. The table gives
load (model load + build), pass 1, pass 2, their ratio and the stream (pass 1 + pass 2); "auto / best" compares
pdlite-auto's stream with the best single pdlite target's (the issue-37 bar: within 1.1x).

    python benchmarks/shape_streams.py [--streams rec,det,ernie] [--contenders ...] [--threads 2] [--rounds 3]
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (benchmarks/compare.py: Paddle Inference as the peers run it)

REPO = Path(__file__).resolve().parents[1]
REC = REPO / "pdlite/apps/ocr/models/ch_PP-OCRv4_rec_infer"
DET = REPO / "pdlite/apps/ocr/models/ch_PP-OCRv4_det_infer"
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
WIDTHS = [120, 160, 200, 240, 280, 320, 400, 480, 560, 640, 720, 800]
PAGES = [(480, 352), (640, 480), (736, 544), (800, 608), (960, 736), (960, 544)]
LENGTHS = [9, 13, 17, 22, 28, 33, 41, 47, 55, 64, 80, 96]
PDLITE = ["pdlite-host", "pdlite-intel_openvino", "pdlite-onnxruntime", "pdlite-auto", "pdlite-auto-warm"]
PEERS = ["paddle-inference", "onnxruntime", "openvino"]


def stream(name: str) -> tuple[Path, list[dict[str, np.ndarray]]]:
    rng = np.random.default_rng(0)
    if name == "rec":
        return REC, [{"x": rng.uniform(-1, 1, (6, 3, 48, w)).astype(np.float32)} for w in WIDTHS]
    if name == "det":
        return DET, [{"x": rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)} for h, w in PAGES]
    if name == "ernie":
        return ERNIE, [{"input_ids": rng.integers(1, 100, (1, n)).astype(np.int64),
                        "token_type_ids": np.zeros((1, n), np.int64)} for n in LENGTHS]
    raise SystemExit(f"unknown stream {name!r}: rec, det or ernie")


# -- one contender, in a worker process ------------------------------------------------------------------------
def make(contender: str, model: Path, threads: int, onnx: str | None):
    """A callable feeds -> outputs for `contender`."""
    if contender.startswith("pdlite-"):
        from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

        device = contender[len("pdlite-"):].replace("-warm", "")
        cfg = CxxConfig()
        cfg.set_model_dir(str(model))
        cfg.set_threads(threads)
        cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                             f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads}")
        if device != "host":
            cfg.set_nnadapter_device_names([device])
            cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32),
                                  Place(TargetType.Host, PrecisionType.FP32)])
        pred = create_paddle_predictor(cfg)
        make.pred = pred
        return lambda feeds: pred.predict(feeds)
    if contender == "paddle-inference":
        pred = compare.paddle_predictor(model, threads)  # benchmarks/compare.py's Paddle Inference settings

        def run(feeds):
            for k, v in feeds.items():
                h = pred.get_input_handle(k)
                h.reshape(v.shape)
                h.copy_from_cpu(v)
            pred.run()
            return [pred.get_output_handle(n).copy_to_cpu() for n in pred.get_output_names()]
        return run
    if contender == "onnxruntime":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
        return lambda feeds: sess.run(None, feeds)
    if contender == "openvino":
        import openvino as ov

        compiled = ov.Core().compile_model(onnx, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                        "PERFORMANCE_HINT": "LATENCY",
                                                        "INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()

        def run(feeds):
            req.infer(feeds)
            return [req.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]
        return run
    raise SystemExit(f"unknown contender {contender!r}")


def worker(contender: str, name: str, threads: int, onnx: str | None) -> dict:
    model, feeds = stream(name)
    t0 = time.perf_counter()
    run = make(contender, model, threads, onnx)
    load = time.perf_counter() - t0
    passes = []
    for _ in range(2):
        t0 = time.perf_counter()
        for f in feeds:
            run(f)
        passes.append(time.perf_counter() - t0)
    out = {"load": load, "pass1": passes[0], "pass2": passes[1]}
    pred = getattr(make, "pred", None)
    if contender.startswith("pdlite-auto") and pred is not None and pred.auto_choice is not None:
        out["note"] = " ".join(pred.auto_choice.describe().split())
        pol = pred._auto.policy  # what it explored: when, its first call (build included), the build, its calls
        tried = [f"{c.name} at call {c.first_call + 1}: first {c.first[0]:.0f} ms (build {c.build_ms:.0f}), "
                 f"{len(c.runs) + 1} calls" for c in pol.cands.values() if c.first is not None and c.name != "host"]
        out["note"] += f"; explored {pol.explore_ms:.0f} ms: " + ("; ".join(tried) or "nothing")
    return out


# -- the parent ----------------------------------------------------------------------------------------------
def export(model: Path, out: Path) -> str:
    from pdlite.model_parser import load_model
    from pdlite.nnadapter.export import export_program

    m = load_model(model_dir=str(model))
    out.write_bytes(export_program(m.program, m.params, name=model.name).SerializeToString())
    return str(out)


def spawn(contender: str, name: str, threads: int, onnx: str, cache: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, __file__, "--worker", contender, "--streams", name, "--threads", str(threads),
           "--onnx", onnx]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])


def fresh_cache(tmp: Path, warm_from: Path | None = None) -> str:
    d = Path(tempfile.mkdtemp(dir=tmp))
    if warm_from is not None and warm_from.exists():  # the auto choices only, no compiled models
        (d / "pdlite" / "auto").mkdir(parents=True)
        shutil.copy(warm_from, d / "pdlite" / "auto" / "choices.json")
    return str(d)


def bench(name: str, contenders: list[str], threads: int, rounds: int, tmp: Path,
          warm_runs: int = 3) -> dict[str, list[dict]]:
    model, _ = stream(name)
    onnx = export(model, tmp / f"{name}.onnx")
    warm_choices = None
    if "pdlite-auto-warm" in contenders:  # unmeasured auto runs leave the choices the next run starts from
        prime = fresh_cache(tmp)
        for _ in range(warm_runs):
            spawn("pdlite-auto", name, threads, onnx, prime)
            shutil.rmtree(Path(prime) / "pdlite" / "nnadapter", ignore_errors=True)  # no compiled models kept
        warm_choices = Path(prime) / "pdlite" / "auto" / "choices.json"
    res: dict[str, list[dict]] = {c: [] for c in contenders}
    for r in range(rounds):
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for c in order:
            cache = fresh_cache(tmp, warm_choices if c == "pdlite-auto-warm" else None)
            res[c].append(spawn(c, name, threads, onnx, cache))
            print(f"  {name} round {r + 1} {c}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res[c][-1].items()),
                file=sys.stderr)
    return res


def table(name: str, res: dict[str, list[dict]]) -> list[str]:
    med: dict[str, dict[str, float]] = {}
    notes = []
    for c, runs in res.items():
        ok = [x for x in runs if "error" not in x]
        if not ok:
            notes.append(f"{c}: {runs[0].get('error') if runs else 'not run'}")
            continue
        med[c] = {k: statistics.median(x[k] for x in ok) for k in ("load", "pass1", "pass2")}
        med[c]["stream"] = statistics.median(x["pass1"] + x["pass2"] for x in ok)
        notes += [f"{c}: {x['note']}" for x in ok[-1:] if "note" in x]
    singles = {c: m["stream"] for c, m in med.items() if c in PDLITE[:3]}
    best = min(singles, key=singles.get) if singles else None
    out = [f"\n{name}: load / pass 1 (new shapes) / pass 2 (same shapes) in s, medians",
           "| contender | load | pass 1 | pass 2 | pass 1 / pass 2 | stream | stream / best pdlite target |",
           "|---|---|---|---|---|---|---|"]
    for c, m in med.items():
        rel = f"{m['stream'] / singles[best]:.2f}" if best else "-"
        out.append(f"| {c} | {m['load']:.2f} | {m['pass1']:.3f} | {m['pass2']:.3f} | "
                   f"{m['pass1'] / m['pass2']:.2f} | {m['stream']:.3f} | {rel} |")
    if best:
        for c in ("pdlite-auto", "pdlite-auto-warm"):
            if c in med:
                out.append(f"{c} / best single target ({best}): {med[c]['stream'] / singles[best]:.2f}x")
    return out + [f"note: {n}" for n in notes]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="rec,det,ernie")
    ap.add_argument("--contenders", default=",".join(PDLITE + PEERS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm-runs", type=int, default=3,
                    help="auto runs of the stream before pdlite-auto-warm's (its cached choices; default 3)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.streams, args.threads, args.onnx)))
        return 0
    contenders = [c for c in args.contenders.split(",") if c]
    lines = []
    with tempfile.TemporaryDirectory(prefix="pdlite_streams_") as tmp:
        for name in args.streams.split(","):
            lines += table(name, bench(name, contenders, args.threads, args.rounds, Path(tmp), args.warm_runs))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
