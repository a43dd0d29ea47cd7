"""The ONNX graphs pdlite converts, as OpenVINO compiles and runs them: against a reference ONNX file, and what
a new input shape costs where.

`compare` (default): pdlite's converted model (the bytes the intel_openvino driver builds for a model with its
dynamic dims symbolic) against a reference ONNX file of the same network (e.g. RapidOCR's), on raw OpenVINO:
1. ONNX node counts by type of both files;
2. OpenVINO's compiled (execution) graphs of both, compared node by node (layer type, runtime precision, output
   layouts; constants left out) for f32 / bf16, snippets on / off, dynamic dims / reshaped to the timing shape:
   "same" means OpenVINO runs the same kernels in the same order for both files;
3. run time, interleaved per call (A, B, A, B, ...; medians; ratio pdlite / reference) at each --widths (rec,
   cls: batches of 6 at height 48; det: square pages), f32 and bf16 with OpenVINO's default snippets, and with
   --snippets-off also without (as pdlite compiles models with dynamic dims).
`newshape`: the ERNIE-like classifier (or --model-dir) converted by pdlite, cut after each LayerNormalization
(embeddings, each encoder layer's attention and feed-forward halves) and whole; per cut, raw OpenVINO (f32, no
snippets, as pdlite compiles dynamic models) runs 12 new sequence lengths and the same again on fresh compiled
models (--rounds), rounds interleaved over cuts: the new-shape cost per shape and what each part adds.
`attention`: one self-attention block in the form pdlite converts it and in two others (one 5-D transpose for
Q, K and V; OpenVINO's own ScaledDotProductAttention op): what a new length costs each (the same outputs).
`versions`: one ONNX file (RapidOCR's rec) under this Python's OpenVINO and another Python's (RapidOCR's venv
has its own, older one), processes alternating: what the engine's version alone changes.

    python benchmarks/ov_graphs.py compare --preset rec [--reference FILE.onnx] [--widths 192,320,640] [--n 9]
    python benchmarks/ov_graphs.py newshape [--rounds 10]
    python benchmarks/ov_graphs.py attention [--rounds 10]
    python benchmarks/ov_graphs.py versions --python /work/venv_rapidov/bin/python [--rounds 6] [--n 9]
"""
from __future__ import annotations

import argparse
import collections
import glob
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite import CxxConfig, create_paddle_predictor  # noqa: E402

OCR = REPO / "pdlite/apps/ocr/models"
PRESETS = {  # pdlite model dir, RapidOCR's file name, input shape at width w
    "rec": (OCR / "ch_PP-OCRv4_rec_infer", "ch_PP-OCRv4_rec_infer.onnx", lambda w: (6, 3, 48, w)),
    "det": (OCR / "ch_PP-OCRv4_det_infer", "ch_PP-OCRv4_det_infer.onnx", lambda w: (1, 3, w, w)),
    "cls": (OCR / "ch_ppocr_mobile_v2.0_cls_infer", "ch_ppocr_mobile_v2.0_cls_infer.onnx", lambda w: (6, 3, 48, w)),
}
RAPID = "/work/venv_rapidov/lib/python3*/site-packages/rapidocr_openvino/models/"
ERNIE = REPO / "tests/fixtures/dynamic/ernie_like"
LENGTHS = [9, 13, 17, 22, 28, 33, 41, 47, 55, 64, 80, 96]


def converted(model_dir: Path, feeds: dict[str, np.ndarray], threads: int) -> bytes:
    """The ONNX bytes pdlite's intel_openvino driver builds for `model_dir` run on `feeds` (dims symbolic)."""
    from pdlite.nnadapter.registry import get_driver

    drv = get_driver("intel_openvino")
    built: list[bytes] = []
    build = drv.build
    drv.build = lambda self, m, props, cache_path=None: (built.append(m), build(self, m, props, None))[1]
    try:
        cfg = CxxConfig()
        cfg.set_model_dir(str(model_dir))
        cfg.set_threads(threads)
        cfg.set_nnadapter_device_names(["intel_openvino"])
        cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            create_paddle_predictor(cfg).predict(feeds)
    finally:
        drv.build = build
    if len(built) != 1:
        raise SystemExit(f"{model_dir}: expected one device model, the driver built {len(built)}")
    return built[0]


def ov_config(precision: str, threads: int, snippets: bool = True) -> dict[str, Any]:
    cfg: dict[str, Any] = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY",
                           "INFERENCE_NUM_THREADS": threads}
    if not snippets:
        cfg["SNIPPETS_MODE"] = "DISABLE"
    return cfg


def exec_graph(core: Any, model: Any, cfg: dict[str, Any]) -> list[tuple[str, ...]]:
    """(layer type, runtime precision, output layouts) of each non-constant node of OpenVINO's compiled graph."""
    out = []
    for op in core.compile_model(model, "CPU", cfg).get_runtime_model().get_ordered_ops():
        ri = op.get_rt_info()
        row = tuple(ri[k].astype(str) if k in ri else "" for k in ("layerType", "runtimePrecision", "outputLayouts"))
        if row[0] != "Const":
            out.append(row)
    return out


def compare(args: argparse.Namespace) -> None:
    import onnx
    import openvino as ov

    model_dir, rapid_name, shape_of = PRESETS[args.preset]
    ref = args.reference or next(iter(sorted(glob.glob(RAPID + rapid_name))), None)
    if not ref:
        raise SystemExit(f"no reference ONNX: pass --reference (RapidOCR's {rapid_name})")
    widths = [int(w) for w in args.widths.split(",")]
    rng = np.random.default_rng(0)
    ours = converted(model_dir, {"x": rng.uniform(-1, 1, shape_of(widths[0])).astype(np.float32)}, args.threads)
    files = {"pdlite": ours, "reference": Path(ref).read_bytes()}
    print(f"{args.preset}: pdlite's converted model vs {ref} (OpenVINO {ov.__version__})")
    for name, data in files.items():
        g = onnx.load_from_string(data).graph
        counts = collections.Counter(n.op_type for n in g.node)
        print(f"  {name}: {len(g.node)} nodes: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    core = ov.Core()
    read = {k: (lambda d=d: core.read_model(d, b"")) for k, d in files.items()}
    print("| precision | snippets | dims | pdlite exec nodes | reference exec nodes | same kernels, order |")
    print("|---|---|---|---|---|---|")
    for prec in ("f32", "bf16"):
        for snip in (True, False):
            for dyn in (True, False):
                graphs = []
                for k in files:
                    m = read[k]()
                    if not dyn:
                        m.reshape(list(shape_of(widths[0])))
                    graphs.append(exec_graph(core, m, ov_config(prec, args.threads, snip)))
                print(f"| {prec} | {'on' if snip else 'off'} | {'dynamic' if dyn else 'static'} | "
                      f"{len(graphs[0])} | {len(graphs[1])} | {'yes' if graphs[0] == graphs[1] else 'NO'} |")
    print("| precision | snippets | width | pdlite (ms) | reference (ms) | pdlite / reference |")
    print("|---|---|---|---|---|---|")
    for prec in ("f32", "bf16"):
        for snip in (True, False) if args.snippets_off else (True,):
            reqs = {k: core.compile_model(read[k](), "CPU", ov_config(prec, args.threads, snip))
                    .create_infer_request() for k in files}
            for w in widths:
                x = rng.uniform(-1, 1, shape_of(w)).astype(np.float32)
                t: dict[str, list[float]] = {k: [] for k in reqs}
                for r in reqs.values():
                    r.infer([x])
                for _ in range(args.n):
                    for k, r in reqs.items():
                        t0 = time.perf_counter()
                        r.infer([x])
                        t[k].append(time.perf_counter() - t0)
                a, b = statistics.median(t["pdlite"]), statistics.median(t["reference"])
                print(f"| {prec} | {'on' if snip else 'off'} | {w} | {a * 1e3:.1f} | {b * 1e3:.1f} | {a / b:.3f}x |",
                      flush=True)


def cut(data: bytes, out: str) -> bytes:
    """The ONNX model with `out` its only output (and only the nodes it needs)."""
    import onnx

    m = onnx.load_from_string(data)
    g = m.graph
    need, keep = {out}, []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(n.input)
    inits = [t for t in g.initializer if t.name in need]
    ins = [i for i in g.input if i.name in need]
    del g.node[:], g.initializer[:], g.input[:], g.output[:]
    g.node.extend(reversed(keep))
    g.initializer.extend(inits)
    g.input.extend(ins)
    g.output.append(onnx.helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, None))
    return m.SerializeToString()


def interleaved(core: Any, models: dict[str, Any], cfg: dict[str, Any], rounds: int,
                feed: Any) -> dict[str, tuple[float, float]]:
    """Per model, seconds of the 12 new lengths and of the same again: each round compiles every model afresh
    and runs each one's stream (a first call at length 32, the new lengths, the same again) in turn, rounds
    interleaving the models (a stream is not interleaved call by call with other models: the other models'
    calls in between made a new length cost 2-3x more, cold code and caches); per call, the median over
    rounds, summed. `feed(request, length)`: the inputs."""
    times: dict[str, tuple[list, list]] = {k: ([], []) for k in models}
    for _ in range(rounds):
        for k, m in models.items():
            r = core.compile_model(m, "CPU", cfg).create_infer_request()
            r.infer(feed(r, 32))
            for store in times[k]:
                calls = []
                for n in LENGTHS:
                    f = feed(r, n)
                    t0 = time.perf_counter()
                    r.infer(f)
                    calls.append(time.perf_counter() - t0)
                store.append(calls)
    return {k: (sum(statistics.median(c) for c in zip(*t[0])), sum(statistics.median(c) for c in zip(*t[1])))
            for k, t in times.items()}


def newshape(args: argparse.Namespace) -> None:
    import onnx
    import openvino as ov

    def feeds(n: int) -> dict[str, np.ndarray]:
        return {"input_ids": np.ones((1, n), np.int64), "token_type_ids": np.zeros((1, n), np.int64)}

    data = converted(Path(args.model_dir), feeds(32), args.threads)
    g = onnx.load_from_string(data).graph
    points = [n.output[0] for n in g.node if n.op_type == "LayerNormalization"]
    models = {p: cut(data, p) for p in points} | {"whole model": data}
    core = ov.Core()
    cfg = ov_config("f32", args.threads, snippets=False)
    read = {k: core.read_model(m, b"") for k, m in models.items()}
    passes = interleaved(core, read, cfg, args.rounds, lambda req, n: {
        k: v for k, v in feeds(n).items() if k in {i.get_any_name() for i in req.model_inputs}})
    print(f"{args.model_dir}: raw OpenVINO {ov.__version__}, f32, snippets off, {args.threads} threads, "
          f"{args.rounds} rounds of fresh compiled models, interleaved over cuts; per call, the median")
    print("| cut after | nodes | 12 new lengths (ms) | same again (ms) | new / again | per new shape (us) | "
          "step (us) |")
    print("|---|---|---|---|---|---|---|")
    prev = 0.0
    for k, m in models.items():
        new, again = passes[k]
        per = (new - again) / len(LENGTHS) * 1e6
        print(f"| {k} | {len(onnx.load_from_string(m).graph.node)} | {new * 1e3:.2f} | {again * 1e3:.2f} | "
              f"{new / again:.2f}x | {per:.0f} | {per - prev:+.0f} |")
        prev = per


def attention_forms() -> dict[str, Any]:
    """One self-attention block over a fused QKV input [batch, length, 192] (4 heads of 16), in three forms:
    `paddle` as pdlite converts Paddle's MultiHeadAttention (Split, per tensor Reshape + Transpose, MatMul,
    Softmax, MatMul, Transpose, Reshape); `one-transpose` (one 5-D Reshape + Transpose, Split on the new
    leading axis); `sdpa` (OpenVINO's ScaledDotProductAttention op, built with its Python API)."""
    import openvino as ov
    import openvino.opset13 as ops
    from onnx import TensorProto, helper, numpy_helper

    def ints(name: str, v: list[int]) -> Any:
        return numpy_helper.from_array(np.array(v, np.int64), name)

    def model(nodes: list[Any], inits: list[Any]) -> bytes:
        nodes = nodes + [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                         helper.make_node("MatMul", ["q", "kt"], ["a"]),
                         helper.make_node("Softmax", ["a"], ["p"], axis=-1),
                         helper.make_node("MatMul", ["p", "v"], ["o"]),
                         helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
                         helper.make_node("Reshape", ["ot", "s2"], ["y"])]
        g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  ["b", "l", 192])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits + [ints("s2", [0, 0, 64])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    paddle = [helper.make_node("Split", ["x", "sp"], ["q0", "k0", "v0"], axis=2)]
    for t in "qkv":
        paddle += [helper.make_node("Reshape", [f"{t}0", "s"], [f"{t}1"]),
                   helper.make_node("Transpose", [f"{t}1"], [t], perm=[0, 2, 1, 3])]
    one = [helper.make_node("Reshape", ["x", "s5"], ["r5"]),
           helper.make_node("Transpose", ["r5"], ["t5"], perm=[2, 0, 3, 1, 4]),
           helper.make_node("Split", ["t5", "sp"], ["q0", "k0", "v0"], axis=0)]
    one += [helper.make_node("Squeeze", [f"{t}0", "ax0"], [t]) for t in "qkv"]
    x = ops.parameter([-1, -1, 192], np.float32, name="x")
    q, k, v = (ops.transpose(ops.reshape(part, ops.constant(np.array([0, 0, 4, 16], np.int64)), True),
                             ops.constant(np.array([0, 2, 1, 3], np.int64)))
               for part in ops.split(x, 2, 3).outputs())
    a = ops.scaled_dot_product_attention(q, k, v, ops.constant(np.zeros((), np.float32)),
                                         ops.constant(np.float32(1.0)), causal=False)
    y = ops.reshape(ops.transpose(a, ops.constant(np.array([0, 2, 1, 3], np.int64))),
                    ops.constant(np.array([0, 0, 64], np.int64)), True)
    core = ov.Core()
    return {"paddle": core.read_model(model(paddle, [ints("sp", [64, 64, 64]), ints("s", [0, 0, 4, 16])]), b""),
            "one-transpose": core.read_model(model(one, [ints("sp", [1, 1, 1]), ints("s5", [0, 0, 3, 4, 16]),
                                                         ints("ax0", [0])]), b""),
            "sdpa": ov.Model([y], [x])}


def attention(args: argparse.Namespace) -> None:
    import openvino as ov

    forms = attention_forms()
    core = ov.Core()
    cfg = ov_config("f32", args.threads, snippets=False)
    rng = np.random.default_rng(0)
    xs = {n: rng.standard_normal((1, n, 192)).astype(np.float32) for n in [32, *LENGTHS]}
    ref = core.compile_model(forms["paddle"], "CPU", cfg).create_infer_request().infer([xs[32]])[0]
    for k, m in forms.items():
        got = core.compile_model(m, "CPU", cfg).create_infer_request().infer([xs[32]])[0]
        if float(np.max(np.abs(got - ref))) > 1e-5 * float(np.max(np.abs(ref))):
            raise SystemExit(f"attention form {k} differs from the paddle form")
    passes = interleaved(core, forms, cfg, args.rounds, lambda req, n: [xs[n]])
    print(f"one attention block, raw OpenVINO {ov.__version__}, f32, snippets off, {args.threads} threads")
    print("| form | compiled nodes | 12 new lengths (ms) | same again (ms) | per new shape (us) |")
    print("|---|---|---|---|---|")
    for k, m in forms.items():
        types = collections.Counter(op.get_rt_info()["layerType"].astype(str) for op in
                                    core.compile_model(m, "CPU", cfg).get_runtime_model().get_ordered_ops())
        shown = ", ".join(f"{t} {c}" for t, c in types.most_common() if t not in ("Const", "Input", "Output"))
        new, again = passes[k]
        print(f"| {k} | {shown} | {new * 1e3:.2f} | {again * 1e3:.2f} | {(new - again) / len(LENGTHS) * 1e6:.0f} |")


TIMER = """
import sys, time, statistics, numpy as np, openvino as ov
f, n, threads, widths = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(w) for w in sys.argv[4].split(",")]
core, rng, out = ov.Core(), np.random.default_rng(0), [ov.__version__.split("-")[0]]
for prec in ("f32", "bf16"):
    cfg = {"INFERENCE_PRECISION_HINT": prec, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
    r = core.compile_model(core.read_model(f), "CPU", cfg).create_infer_request()
    for w in widths:
        x = rng.uniform(-1, 1, (6, 3, 48, w)).astype(np.float32)
        r.infer([x])
        t = []
        for _ in range(n):
            t0 = time.perf_counter(); r.infer([x]); t.append(time.perf_counter() - t0)
        out.append(str(statistics.median(t)))
    if prec == "f32" or len(sys.argv) > 5:  # per kernel (node type, implementation): ms per call, 1st width
        cfg["PERF_COUNT"] = True
        r = core.compile_model(core.read_model(f), "CPU", cfg).create_infer_request()
        x = rng.uniform(-1, 1, (6, 3, 48, widths[0])).astype(np.float32)
        r.infer([x])
        per = {}
        for _ in range(n):
            r.infer([x])
            for p in r.get_profiling_info():
                k = f"{prec}:{p.node_type}:{p.exec_type}"
                per[k] = per.get(k, 0.0) + p.real_time.total_seconds() / n
        out += [f"{k}={v}" for k, v in per.items()]
print(" ".join(out))
"""


def versions(args: argparse.Namespace) -> None:
    """One ONNX file (RapidOCR's rec by default) under this interpreter's OpenVINO and --python's, processes
    alternating (A, B, A, B, ...), each timing batches of 6 at height 48; the median over processes."""
    import subprocess

    ref = args.reference or next(iter(sorted(glob.glob(RAPID + PRESETS["rec"][1]))), None)
    if not ref or not args.python:
        raise SystemExit("versions needs --python OTHER_PYTHON (with openvino) and a reference ONNX file")
    widths = args.widths or "320,640"
    runs: dict[str, list[list[float]]] = {sys.executable: [], args.python: []}
    names: dict[str, str] = {}
    kernels: dict[str, dict[str, list[float]]] = {py: {} for py in runs}
    for _ in range(args.rounds):
        for py in runs:
            out = subprocess.run([py, "-c", TIMER, ref, str(args.n), str(args.threads), widths], check=True,
                                 capture_output=True, text=True).stdout.split()
            names[py] = out[0]
            runs[py].append([float(v) for v in out[1:] if "=" not in v])
            for kv in out[1:]:
                if "=" in kv:
                    k, v = kv.rsplit("=", 1)
                    kernels[py].setdefault(k, []).append(float(v))
    cells = [f"{p} w{w}" for p in ("f32", "bf16") for w in widths.split(",")]
    print(f"{ref}: batches of 6, height 48, {args.threads} threads, {args.rounds} processes each, alternating")
    print("| OpenVINO | " + " | ".join(f"{c} (ms)" for c in cells) + " |")
    print("|---|" + "---|" * len(cells))
    med = {py: [statistics.median(col) for col in zip(*r)] for py, r in runs.items()}
    for py, m in med.items():
        print(f"| {names[py]} ({py}) | " + " | ".join(f"{v * 1e3:.1f}" for v in m) + " |")
    a, b = med.values()
    print("| first / second | " + " | ".join(f"{x / y:.3f}x" for x, y in zip(a, b)) + " |")
    w0 = widths.split(",")[0]
    print(f"\nOpenVINO's per-kernel profile (PERF_COUNT), width {w0}, ms per call (median over processes):")
    print("| precision:node type | " + " | ".join(f"{names[py]}: implementation, ms" for py in runs) + " |")
    print("|---|---|---|")
    rows: dict[str, dict[str, tuple[str, float]]] = {}
    for py, ks in kernels.items():
        for k, v in ks.items():
            prec, node, impl = k.split(":")
            tot = rows.setdefault(f"{prec}:{node}", {}).get(py, ("", 0.0))
            rows[f"{prec}:{node}"][py] = ((tot[0] + " " + impl).strip(), tot[1] + statistics.median(v) * 1e3)
    top = sorted(rows.items(), key=lambda kv: -max(v[1] for v in kv[1].values()))[:args.top]
    for k, by in top:
        print(f"| {k} | " + " | ".join(f"{by[py][0]} {by[py][1]:.2f}" if py in by else "-" for py in runs) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", default="compare", choices=("compare", "newshape", "attention",
                                                                         "versions"))
    ap.add_argument("--preset", default="rec", choices=sorted(PRESETS))
    ap.add_argument("--reference", default="", help="the reference ONNX file (default: RapidOCR's, from "
                    "/work/venv_rapidov)")
    ap.add_argument("--widths", default="", help="input widths to time (default rec/cls 192,320,640; det 640,960)")
    ap.add_argument("--n", type=int, default=9, help="timed calls per width and file")
    ap.add_argument("--snippets-off", action="store_true", help="also time without OpenVINO's snippets")
    ap.add_argument("--model-dir", default=str(ERNIE), help="newshape: the model (inputs input_ids, "
                    "token_type_ids [batch, length])")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=8, help="versions: kernels shown in the profile")
    ap.add_argument("--python", default="", help="versions: another Python with its own openvino (e.g. "
                    "/work/venv_rapidov/bin/python, RapidOCR's)")
    args = ap.parse_args(argv)
    if args.mode == "compare":
        args.widths = args.widths or ("640,960" if args.preset == "det" else "192,320,640")
        compare(args)
    elif args.mode == "newshape":
        newshape(args)
    elif args.mode == "attention":
        attention(args)
    else:
        versions(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
