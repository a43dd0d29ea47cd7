"""The int8 depthwise conv's forms against the fp32 depthwise kernel, per depthwise shape of the models.

For each depthwise conv shape of ../shared/models/<model> (same padding k // 2), random data, three calls
alternated call by call (CPU time of the calling thread, 1 thread, medians of `--rounds` x 10 calls):
- fp32: native.depthwise_conv2d with bias and the activation (`--act`, relu by default: the fp32 program's fused
  conv);
- int8: quant_native.qdwconv reading codes and writing codes (the output quantized to the next conv's codes) or, with
  `--floats`, floats (MobileNetV3's hard_swish convs before a squeeze-excitation block), as the int8 programs run it,
  in the form the kernel picks (at vnni the integer window form);
- int8 fsum: the same call in the float-sums form (native._set_qdw_integer(0): the fp32 kernel on the codes as
  floats; the form every depthwise conv ran in before the window form).
The three give the same codes where both int8 forms run (tests/kernels/test_host_int8_depthwise.py checks that).

`--in-model`: instead, the depthwise convs inside the models as they run: the fp32 program against the int8 program
of Paddle's PTQ model (benchmarks/int8_bench.py's, made once in its --work folder) in the form the kernel picks and
in the float-sums form, the CPU time of
each depthwise kernel call (kernel.run, the steady path off), 1 thread, the three programs alternated run by run,
medians of `--rounds` x 10 runs (the stride-1 and stride-2 convs of one input and filter shape share a row).

`--stem`: instead, the 3-channel 3x3 stride-2 stem on 224x224 (16 outputs, hard_swish): the fp32 direct conv against
the int8 conv in its stem form (native_src/qstem.c, at vnni) and in the columns form it ran in before (floats in,
codes out, as MobileNetV3-small's int8 program runs it), alternated call by call, CPU time, 1 thread, medians.

Usage: python benchmarks/qdepthwise_bench.py [--models mobilenet_v3_small mobilenet_v1] [--rounds 5]
       [--act relu|hard_swish] [--floats] [--in-model] [--stem]
Prints a Markdown table (BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from int8_bench import dw_layer  # noqa: E402  (one home for a depthwise layer's operands)

SHARED = REPO.parent / "shared" / "models"


def shapes(model: str) -> list[tuple]:
    """(input shape, kernel, stride) of each depthwise conv of the model, in program order."""
    from benchmarks.int8_bench import conv_times

    x = np.load(SHARED / model / "case.npz")["in:x"]
    return [(k[0], k[1][2], int(k[2][0])) for k in conv_times(SHARED / model, x, False, runs=1)
            if k[1][1] == 1 and k[0][1] == k[1][0] > 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["mobilenet_v3_small", "mobilenet_v1"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--act", default="relu", choices=["relu", "hard_swish"])
    ap.add_argument("--floats", action="store_true", help="int8 writes floats (else codes)")
    ap.add_argument("--in-model", action="store_true", help="time the depthwise convs inside the models' programs")
    ap.add_argument("--stem", action="store_true", help="time the 3-channel stem conv's forms")
    args = ap.parse_args()
    if args.stem:
        stem(args.rounds * 10)
        return 0
    if args.in_model:
        for model in args.models:
            in_model(model, args.rounds * 10)
        return 0
    from pdlite.kernels.host import native
    from pdlite.kernels.host import quant_native as qn

    native._ext.set_num_threads(1)
    relu = native.activation(args.act, {"offset": 3.0, "threshold": 6.0, "scale": 6.0} if args.act != "relu" else {})
    rng = np.random.default_rng(0)
    print(f"int8 {qn.int8_isa()}, fp32 {native._ext.isa()}; {args.act}, int8 writes {'floats' if args.floats else 'codes'}; "
          "ms of CPU time per call, 1 thread, medians\n")
    print("| model | input | kernel, stride | fp32 ms | int8 ms | int8 fsum ms | fp32 / int8 | fp32 / int8 fsum |")
    print("|---|---|---|---|---|---|---|---|")
    for model in args.models:
        tot = np.zeros(3)
        for (n, c, h, w), k, s in shapes(model):
            L = dw_layer(rng, (n, c, h, w), k, s)
            xi, xc, wf, wq, comp, b, mul, oh, ow = L.xi, L.xc, L.wf, L.wq, L.comp, L.b, L.mul, L.oh, L.ow
            geo, qp, cq = L.geo, L.qp, L.cq
            plan = qn.qdwconv_plan(xc.shape, wq, comp, mul, b, oh, ow, *geo, qp, relu, xcodes=True,
                                   codes=None if args.floats else cq)

            def fsum(plan=plan, xc=xc):
                before = native._ext._set_qdw_integer(0)
                try:
                    return plan(xc)
                finally:
                    native._ext._set_qdw_integer(before)

            calls = (functools.partial(native.depthwise_conv2d, xi, wf, b, c, oh, ow, *geo, relu),
                     functools.partial(plan, xc), fsum)
            assert np.array_equal(calls[1](), calls[2]()), (model, (n, c, h, w), k, s)
            ts: list[list[float]] = [[], [], []]
            for _ in range(args.rounds * 10):
                for i, f in enumerate(calls):
                    t = time.thread_time()
                    f()
                    ts[i].append((time.thread_time() - t) * 1e3)
            med = np.array([np.median(t) for t in ts])
            tot += med
            print(f"| {model} | {[n, c, h, w]} | {k}x{k} / {s} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | "
                  f"{med[0] / med[1]:.2f}x | {med[0] / med[2]:.2f}x |")
        print(f"| {model} | all | | {tot[0]:.3f} | {tot[1]:.3f} | {tot[2]:.3f} | {tot[0] / tot[1]:.2f}x | "
              f"{tot[0] / tot[2]:.2f}x |")
    return 0


def stem(calls: int) -> None:
    """The 3-channel 3x3 stride-2 stem (224x224 -> 16 x 112x112, hard_swish): fp32 direct conv, int8 stem form, int8
    columns form (floats in, codes out); ms of CPU time per call, 1 thread, medians."""
    from pdlite.kernels.host import native, native_plans
    from pdlite.kernels.host import quant_native as qn

    native._ext.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    w8 = rng.integers(-127, 128, (16, 3, 3, 3)).astype(np.int8)
    mul, b = np.full(16, 1e-3, np.float32), np.zeros(16, np.float32)
    hs = native.activation("hard_swish", {"offset": 3.0, "threshold": 6.0, "scale": 6.0})
    geo, qp, cq = ((3, 3), (2, 2), (1, 1), (1, 1)), qn.QParam.of(2.5, 0), qn.QParam.of(0.5, 0)
    forms = {"fp32 direct": functools.partial(native_plans.direct_plan(
        native.direct_conv_weights(w8.astype(np.float32)), b, x.shape, 16, 112, 112, *geo, hs), x)}
    if qn.stem_form(3, (3, 3), (2, 2), (1, 1)):
        forms["int8 stem form"] = functools.partial(
            qn.qstemconv_plan(x.shape, *qn.dw_weights(w8), mul, b, 16, 112, 112, *geo, qp, hs, codes=cq), x)
    forms["int8 columns form"] = functools.partial(
        qn.qconv_plan(x.shape, qn.pack_weights(w8.reshape(16, -1)), mul, b, 16, 112, 112, *geo, qp, hs, codes=cq), x)
    ts: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(calls):
        for k, f in forms.items():
            t = time.thread_time()
            f()
            ts[k].append((time.thread_time() - t) * 1e3)
    med = {k: float(np.median(v)) for k, v in ts.items()}
    print(f"int8 {qn.int8_isa()}, fp32 {native._ext.isa()}; the 3-channel 3x3/2 stem, 224x224 -> 16 x 112x112, "
          "hard_swish, int8 floats in and codes out; ms of CPU time per call, 1 thread, medians\n")
    print("| form | ms | fp32 / form |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} | {med['fp32 direct'] / v:.2f}x |")


def in_model(model: str, runs: int) -> None:
    """The depthwise convs of the fp32 program and of the int8 program (window form, float-sums form) of `model`, as
    the programs run them: ms of CPU time per call, medians."""
    import hashlib
    import tempfile

    from benchmarks.int8_bench import OPS, _inputs, quantize
    from pdlite.api.config import CxxConfig
    from pdlite.api.predictor import create_paddle_predictor
    from pdlite.kernels.host import native

    work = Path(tempfile.gettempdir()) / "pdlite_int8_bench"
    q = quantize(model, work / f"{model}_paddle_{hashlib.sha256(OPS.encode()).hexdigest()[:8]}", "paddle",
                 _inputs(model, 4, seed=1), OPS)
    x = np.load(SHARED / model / "case.npz")["in:x"]
    times: dict[tuple, list[float]] = {}
    cur = [""]

    def program(d: Path, int8: bool):
        c = CxxConfig()
        c.set_model_dir(str(d))
        c.set_threads(1)
        c.set_option("host_int8", int8)
        c.set_option("steady_path", False)  # (its bound calls would bypass the timed kernel.run)
        p = create_paddle_predictor(c)
        for ins in p.runtime_program.instructions:
            if ins.op.type in ("conv2d", "depthwise_conv2d", "fused_conv2d", "quantized_conv2d") and int(
                    ins.op.attrs.get("groups") or 1) > 1:
                def timed(feeds, run=ins.kernel.run):
                    t = time.thread_time()
                    out = run(feeds)
                    key = (cur[0], tuple(feeds["Input"][0].shape), tuple(feeds["Filter"][0].shape))
                    times.setdefault(key, []).append((time.thread_time() - t) * 1e3)
                    return out

                ins.kernel.run = timed
        return p

    pf, pq = program(SHARED / model, False), program(q, True)
    forms = (("fp32", pf, True), ("win", pq, True), ("fsum", pq, False))
    for _ in range(runs):
        for name, p, on in forms:
            cur[0] = name
            before = native._ext._set_qdw_integer(on)
            p.predict({"x": x})
            native._ext._set_qdw_integer(before)
    print(f"\n{model}: depthwise convs in the programs, ms of CPU time per call, 1 thread, medians\n")
    print("| input | filter | fp32 | int8 | int8 fsum | fp32 / int8 | fp32 / int8 fsum |")
    print("|---|---|---|---|---|---|---|")
    shapes = sorted({k[1:] for k in times}, key=lambda k: -k[0][2])
    tot = np.zeros(3)
    for shape in shapes:
        med = np.array([np.median(times[(f, *shape)]) for f, _, _ in forms])
        tot += med
        print(f"| {list(shape[0])} | {list(shape[1])} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | "
              f"{med[0] / med[1]:.2f}x | {med[0] / med[2]:.2f}x |")
    print(f"| all | | {tot[0]:.3f} | {tot[1]:.3f} | {tot[2]:.3f} | {tot[0] / tot[1]:.2f}x | {tot[0] / tot[2]:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
