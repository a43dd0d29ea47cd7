"""int8 vs fp32 on the NNAdapter devices: speed-up and accuracy change of quantized models.

For each model of ../shared/models (classifiers and PP-OCR det) the script makes an int8 QDQ model
(`--quantizer paddle`: Paddle's PostTrainingQuantization, abs_max, onnx_format; `--quantizer pdlite`:
`pdlite quantize`, abs_max; both quantizing the op types of `--ops`, by default the quantizer's own: the
convs, the matmuls and the residual adds, and for pdlite the inputs of hard_swish / swish) from calibration
inputs (the case input plus noise), then, per device, builds one predictor for the fp32 model and one for the int8 model and times them interleaved
(A B A B ..., batch 1 unless `--batch`, 2 threads), `--repeats` times: the table gives the median speed-up and its range over
the repeats (a shared, noisy machine). Each predictor runs in a worker process of its own (benchmarks/compare.py's
workers: `--rounds` rounds of a block of runs each after an untimed one, the speed-up paired by round), so that
no runtime's idle threads land in the other model's timing (ONNX Runtime's pool threads kept spinning after each
run until pdlite's driver limited that by default, ONNXRUNTIME_SPINNING); `--in-process`: both in this process,
alternated run by run, medians of `--rounds` runs.

Accuracy change, on `--samples` inputs different from the calibration ones:
- classifiers: top-1 agreement between the fp32 and the int8 model on the same device, and between the int8
  model on the device and its fp32 simulation on the host (Paddle's semantics), with the largest
  |device - simulation| / max|simulation|;
- PP-OCR det: agreement of the text masks (probability > 0.3) and the mean |difference| of the maps, the same
  two comparisons.

Host (the integer kernels, issue 40): `--devices host` times pdlite's host fp32 model against the int8 model on
the host's integer path, once per instruction set of `--host-isas` (each pair of workers started with
PDLITE_NATIVE_ISA forced: avx512 runs the VNNI int8 kernels where the CPU has them, avxvnni the AVX-VNNI ones
(256-bit vpdpbusd, fp32 at AVX2: a CPU with avx_vnni and no AVX-512), avx2 the vpmaddwd ones, baseline plain C; the
fp32 model runs at the same forced ISA); its accuracy column compares the int8 path with the
host's fp32 simulation of the same program (`host_int8` False). `--layers` adds, per model, the host's per-conv
times (CPU time of each kernel call, 1 thread, in this process): fp32 conv against the int8 conv of the same
input and filter shape.

Usage: python benchmarks/int8_bench.py [--models mobilenet_v1 ...] [--devices host intel_openvino onnxruntime]
       [--host-isas avx512 avx2] [--layers] [--depthwise]
Prints Markdown tables (for BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "models"
CLASSIFIERS = ("mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "resnet18")
DETECTORS = ("ppocr_det_v4",)
OPS = "conv2d,depthwise_conv2d,mul,matmul,matmul_v2,elementwise_add"


def _inputs(model: str, n: int, seed: int) -> list[np.ndarray]:
    x = np.load(SHARED / model / "case.npz")["in:x"]
    rng = np.random.default_rng(seed)
    return [np.clip(x + rng.normal(0, 0.3, x.shape), -3, 3).astype(np.float32) for _ in range(n)]


def quantize(model: str, out: Path, quantizer: str, calib: list[np.ndarray], ops: str) -> Path:
    """An int8 QDQ model of ../shared/models/<model> in `out` (made once, then reused), quantizing the op types
    `ops` (comma-separated)."""
    if (out / "inference.pdmodel").is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "calib.npz", **{f"x_{i}": c for i, c in enumerate(calib)})
        if quantizer == "pdlite":
            cmd = [sys.executable, "-m", "pdlite", "quantize", str(SHARED / model), "--calib",
                   str(Path(tmp) / "calib.npz"), "--algo", "abs_max", "--ops", ops, "-o", str(out)]
        else:
            code = ("import os, sys; os.environ['FLAGS_enable_pir_api'] = '0'; sys.path.insert(0, sys.argv[1])\n"
                    "import numpy as np; from pathlib import Path; import make_quant_fixtures as M\n"
                    "z = np.load(sys.argv[3]); calib = [z[k] for k in z.files]\n"
                    "M._ptq(Path(sys.argv[2]), Path(sys.argv[4]), calib, 'x', True, 'abs_max', sys.argv[5].split(','))\n")
            cmd = [sys.executable, "-c", code, str(REPO / "tools"), str(SHARED / model),
                   str(Path(tmp) / "calib.npz"), str(out), ops]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def timed_in_workers(fp32: Path, int8: Path, device: str, threads: int, rounds: int,
                     repeats: int, batch: int = 1) -> list[tuple[float, float, float]]:
    """Per repeat (fp32 ms, int8 ms, speed-up), each model's predictor in a worker process of its own, started
    once (compare.py's workers: blocks of runs after an untimed one, alternated A B A B, a pause between blocks),
    so that neither runtime's idle threads run during the other's timing. The speed-up is paired by round (the
    median of fp32 / int8 over rounds), the times are medians."""
    import compare

    if not (int8 / "case.npz").exists():  # the workers read their input there
        (int8 / "case.npz").symlink_to((fp32 / "case.npz").resolve())
    workers = {k: [compare.start_worker(f"pdlite-{device}", d, batch, threads, 3, None)] for k, d in
               (("fp32", fp32), ("int8", int8))}
    runs = []
    try:
        for _ in range(repeats):
            per_round: dict[str, list[float | None]] = {}
            med = compare.bench_cell(workers, rounds, block=3, pause=0.05, block_ms=30.0, per_round=per_round)
            ratio = compare.paired_ratio(per_round, "fp32", "int8")
            assert ratio is not None
            runs.append((med["fp32"], med["int8"], ratio))
    finally:
        for ws in workers.values():
            for w in ws:
                w.kill()
    return runs


def predictor(model_dir: Path, device: str, threads: int, int8: bool = True):
    from pdlite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir))
    if device == "host":
        cfg.set_threads(threads)
        cfg.set_option("host_int8", int8)
        return create_paddle_predictor(cfg)
    cfg.set_nnadapter_device_names([device])
    cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
    cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads};"
                                         f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={threads}")
    return create_paddle_predictor(cfg)


def interleaved(a, b, x: np.ndarray, rounds: int) -> tuple[float, float]:
    for p in (a, b, a, b):
        p.predict({"x": x})
    ta, tb = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        a.predict({"x": x})
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        b.predict({"x": x})
        tb.append(time.perf_counter() - t)
    return float(np.median(ta)) * 1e3, float(np.median(tb)) * 1e3


def outputs(p, samples: list[np.ndarray]) -> list[np.ndarray]:
    return [np.array(p.predict({"x": s})[0], copy=True) for s in samples]


def agreement(model: str, fa: list[np.ndarray], fb: list[np.ndarray], max_err: bool = False) -> str:
    if model in DETECTORS:
        agree = np.mean([((p > 0.3) == (q > 0.3)).mean() for p, q in zip(fa, fb)])
        diff = np.mean([np.abs(p - q).mean() for p, q in zip(fa, fb)])
        return f"mask {agree * 100:.2f}%, mean abs diff {diff:.4f}"
    top1 = np.mean([int(p.argmax(-1)[0] == q.argmax(-1)[0]) for p, q in zip(fa, fb)])
    err = max(float(np.abs(p - q).max() / np.abs(q).max()) for p, q in zip(fa, fb))
    return f"top-1 {top1 * 100:.1f}%" + (f", max err {err:.3f}" if max_err else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=[*CLASSIFIERS, *DETECTORS])
    ap.add_argument("--devices", nargs="*", default=["intel_openvino", "onnxruntime"])
    ap.add_argument("--quantizer", choices=["paddle", "pdlite"], default="paddle")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "pdlite_int8_bench"))
    ap.add_argument("--ops", default=None, help="op types to quantize (default: pdlite quantize's own default "
                    f"for --quantizer pdlite, {OPS} for paddle; without elementwise_add residual adds stay "
                    "float, as Paddle's default quantizable_op_type)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="interleaved timings per model and device")
    ap.add_argument("--batch", type=int, default=1, help="the timed runs' batch (the case input repeated); the "
                    "accuracy samples stay batch 1")
    ap.add_argument("--host-isas", nargs="*", default=["avx512", "avx2"],
                    help="instruction sets the host cells force (PDLITE_NATIVE_ISA): avx512, avxvnni, avx2, baseline")
    ap.add_argument("--layers", action="store_true", help="also print the host's per-conv fp32 / int8 times")
    ap.add_argument("--depthwise", action="store_true", help="also print, per depthwise conv shape of each model, the "
                    "fp32 depthwise kernel against the int8 one (qdwconv), CPU time, 1 thread, this process's ISA")
    ap.add_argument("--cpu-time", action="store_true", help="also print whole-model host times as CPU time of the "
                    "calling thread (1 thread; robust on a loaded machine), per --host-isas, alternated run by run")
    ap.add_argument("--in-process", action="store_true", help="time both predictors in this process (A B A B "
                    "run by run) instead of one worker process each")
    args = ap.parse_args(argv)
    if args.ops is None:
        from pdlite.optimizer.quantization import DEFAULT_OPS

        args.ops = ",".join(DEFAULT_OPS) if args.quantizer == "pdlite" else OPS
    warnings.simplefilter("ignore")
    print(f"({len_note(args)})")
    print("| model | device | fp32 ms | int8 ms | speed-up (range) | int8 vs fp32, same device | "
          "int8 device vs host simulation |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models:
        tag = hashlib.sha256(args.ops.encode()).hexdigest()[:8]
        q = quantize(model, Path(args.work) / f"{model}_{args.quantizer}_{tag}", args.quantizer,
                     _inputs(model, 4, seed=1), args.ops)
        samples = _inputs(model, args.samples, seed=2)
        x = np.repeat(np.load(SHARED / model / "case.npz")["in:x"], args.batch, axis=0)
        sim = outputs(predictor(q, "host", args.threads, int8=False), samples)
        cells = [(d, isa) for d in args.devices for isa in (args.host_isas if d == "host" else [None])]
        for device, isa in cells:
            if isa is not None:
                os.environ["PDLITE_NATIVE_ISA"] = isa  # the workers (and this process's later imports) inherit it
            a, b = predictor(SHARED / model, device, args.threads), predictor(q, device, args.threads)
            if args.in_process:
                runs = [interleaved(a, b, x, args.rounds) for _ in range(args.repeats)]
                ratios = sorted(ms_a / ms_b for ms_a, ms_b in runs)
            else:
                runs3 = timed_in_workers(SHARED / model, q, device, args.threads, args.rounds, args.repeats,
                                         args.batch)
                runs = [(r[0], r[1]) for r in runs3]
                ratios = sorted(r[2] for r in runs3)
            ms_a, ms_b = (float(np.median([r[i] for r in runs])) for i in (0, 1))
            span = f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
            os.environ.pop("PDLITE_NATIVE_ISA", None)
            fb = outputs(b, samples)
            label = f"host ({host_isa_label(isa)})" if isa else device
            print(f"| {model} | {label} | {ms_a:.2f} | {ms_b:.2f} | {float(np.median(ratios)):.2f}x{span} | "
                  f"{agreement(model, outputs(a, samples), fb)} | {agreement(model, fb, sim, True)} |", flush=True)
    if args.cpu_time:
        print("\nhost, CPU time of one thread (ms, median of alternated runs):\n")
        print("| model | ISA (forced) | fp32 ms | int8 ms | int8 speed-up |")
        print("|---|---|---|---|---|")
        for model in args.models:
            tag = hashlib.sha256(args.ops.encode()).hexdigest()[:8]
            q = Path(args.work) / f"{model}_{args.quantizer}_{tag}"
            for isa in args.host_isas:
                f_ms, q_ms = cpu_times(model, q, isa, args.rounds)
                print(f"| {model} | {host_isa_label(isa)} ({isa}) | {f_ms:.2f} | {q_ms:.2f} | {f_ms / q_ms:.2f}x |",
                      flush=True)
    if args.layers:
        for model in args.models:
            tag = hashlib.sha256(args.ops.encode()).hexdigest()[:8]
            layer_table(model, Path(args.work) / f"{model}_{args.quantizer}_{tag}")
    if args.depthwise:
        for model in args.models:
            depthwise_table(model, args.rounds)
    return 0


def host_isa_label(forced: str) -> str:
    """The int8 kernels' instruction set under PDLITE_NATIVE_ISA=forced (asked of a fresh process)."""
    code = "from pdlite.kernels.host import quant_native as q, native; print(q.int8_isa(), native.isa())"
    env = {**os.environ, "PDLITE_NATIVE_ISA": forced}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split()
    return f"int8 {out[0]}, fp32 {out[1]}" if len(out) == 2 else forced


_CPU_CHILD = """
import sys, time, json, numpy as np
from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
x = np.load(sys.argv[3])["in:x"]
ps = []
for d, int8 in ((sys.argv[1], False), (sys.argv[2], True)):
    c = CxxConfig(); c.set_model_dir(d); c.set_threads(1); c.set_option("host_int8", int8)
    ps.append(create_paddle_predictor(c))
ts = ([], [])
for p in ps + ps:
    p.predict({"x": x})
for _ in range(int(sys.argv[4])):
    for i, p in enumerate(ps):
        t = time.thread_time(); p.predict({"x": x}); ts[i].append(time.thread_time() - t)
print(json.dumps([float(np.median(t)) * 1e3 for t in ts]))
"""


def cpu_times(model: str, q: Path, isa: str, rounds: int) -> tuple[float, float]:
    """(fp32 ms, int8 ms): CPU time of the calling thread per run, 1 thread, in a process with PDLITE_NATIVE_ISA=isa."""
    import json

    env = {**os.environ, "PDLITE_NATIVE_ISA": isa}
    out = subprocess.run([sys.executable, "-c", _CPU_CHILD, str(SHARED / model), str(q),
                          str(SHARED / model / "case.npz"), str(rounds)], env=env, capture_output=True, text=True,
                         check=True).stdout
    f_ms, q_ms = json.loads(out.strip().splitlines()[-1])
    return f_ms, q_ms


def conv_times(model_dir: Path, x: np.ndarray, int8: bool, runs: int = 10) -> dict[tuple, float]:
    """ms of CPU time per conv kernel call (1 thread), keyed by (input shape, filter shape, strides), in run order."""
    from pdlite.api.config import CxxConfig
    from pdlite.api.predictor import create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir))
    cfg.set_threads(1)
    cfg.set_option("host_int8", int8)
    cfg.set_option("steady_path", False)  # (its bound calls would bypass the timed kernel.run)
    p = create_paddle_predictor(cfg)
    times: dict[tuple, float] = {}
    kinds = ("conv2d", "depthwise_conv2d", "fused_conv2d", "quantized_conv2d")
    for ins in p.runtime_program.instructions:
        if ins.op.type not in kinds:
            continue
        run = ins.kernel.run

        def timed(feeds, run=run, op=ins.op):
            t = time.thread_time()
            out = run(feeds)
            key = (tuple(feeds["Input"][0].shape), tuple(feeds["Filter"][0].shape), tuple(op.attrs.get("strides", [])))
            times[key] = times.get(key, 0.0) + (time.thread_time() - t) * 1e3 / runs
            return out

        ins.kernel.run = timed
    p.predict({"x": x})
    times.clear()
    for _ in range(runs):
        p.predict({"x": x})
    return times


def layer_table(model: str, q: Path) -> None:
    x = np.load(SHARED / model / "case.npz")["in:x"]
    f32, i8 = conv_times(SHARED / model, x, False), conv_times(q, x, True)
    forced = os.environ.get("PDLITE_NATIVE_ISA", "")
    print(f"\n{model}: per-conv host times (ms, CPU time, 1 thread; {host_isa_label(forced)})\n")
    print("| input | filter | strides | fp32 ms | int8 ms | saved ms | fp32 / int8 |")
    print("|---|---|---|---|---|---|---|")
    for key, t in sorted(f32.items(), key=lambda kv: -(kv[1] - i8.get(kv[0], kv[1]))):  # by time saved
        t8 = i8.get(key)
        ratio = f"{t / t8:.2f}x" if t8 else "-"
        print(f"| {list(key[0])} | {list(key[1])} | {list(key[2])} | {t:.3f} | "
              f"{'-' if t8 is None else f'{t8:.3f}'} | {'-' if t8 is None else f'{t - t8:+.3f}'} | {ratio} |")
    print(f"| all | | | {sum(f32.values()):.3f} | {sum(i8.values()):.3f} | "
          f"{sum(f32.values()) / max(sum(i8.values()), 1e-9):.2f}x |")


def dw_layer(rng: np.random.Generator, shape: tuple[int, int, int, int], k: int, s: int) -> SimpleNamespace:
    """One depthwise layer's operands for the kernel tables (here and benchmarks/qdepthwise_bench.py): random input
    `xi` and its codes `xc` (scale 2.5), int8 weights as floats `wf` and packed `wq`/`comp`, zero bias, multiplier
    1e-3, output `oh` x `ow`, `geo` (kernel, stride, dilation, padding), `qp` / `cq` the input / output QParams."""
    from pdlite.kernels.host import quant_native as qn

    n, c, h, w = shape
    p = k // 2
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    xi = rng.standard_normal((n, c, h, w)).astype(np.float32)
    w8 = rng.integers(-127, 128, (c, 1, k, k)).astype(np.int8)
    wq, comp = qn.dw_weights(w8)
    qp = qn.QParam.of(2.5, 0)
    return SimpleNamespace(xi=xi, xc=qn.codes_of(xi, qp), wf=w8.reshape(c, -1).astype(np.float32), wq=wq, comp=comp,
                           b=np.zeros(c, np.float32), mul=np.full(c, 1e-3, np.float32), oh=oh, ow=ow,
                           geo=((k, k), (s, s), (1, 1), (p, p)), qp=qp, cq=qn.QParam.of(0.5, 0))


def depthwise_table(model: str, rounds: int) -> None:
    """The fp32 depthwise kernel against the int8 one as the int8 programs run it (quant_native.qdwconv reading and
    writing int8 codes: exact sums, the epilogue with relu, the output quantized to the next conv's codes) on each
    depthwise conv shape of the model (same padding k // 2), random data, CPU time per call, 1 thread, medians of
    rounds x 10 alternated calls."""
    from pdlite.kernels.host import native
    from pdlite.kernels.host import quant_native as qn

    x = np.load(SHARED / model / "case.npz")["in:x"]
    shapes = [k for k in conv_times(SHARED / model, x, False, runs=1) if k[1][1] == 1 and k[0][1] == k[1][0] > 1]
    native._ext.set_num_threads(1)
    relu = native.activation("relu", {})
    rng = np.random.default_rng(0)
    print(f"\n{model}: depthwise convs, fp32 kernel vs int8 qdwconv, codes in and out (ms, CPU time, 1 thread, int8 "
          f"{qn.int8_isa()})\n")
    print("| input | kernel, stride | fp32 ms | int8 ms | fp32 / int8 |")
    print("|---|---|---|---|---|")
    tot = [0.0, 0.0]
    for (n, c, h, w), (_, _, k, _), st in shapes:
        s = int(st[0])
        L = dw_layer(rng, (n, c, h, w), k, s)
        calls = (functools.partial(native.depthwise_conv2d, L.xi, L.wf, L.b, c, L.oh, L.ow, *L.geo, relu),
                 functools.partial(qn.qdwconv, L.xc, L.wq, L.comp, L.mul, L.b, L.oh, L.ow, *L.geo, L.qp, relu,
                                   codes=L.cq))
        ts: tuple[list[float], list[float]] = ([], [])
        for _ in range(rounds * 10):
            for i, f in enumerate(calls):
                t = time.thread_time()
                f()
                ts[i].append((time.thread_time() - t) * 1e3)
        f_ms, q_ms = float(np.median(ts[0])), float(np.median(ts[1]))
        tot[0] += f_ms
        tot[1] += q_ms
        print(f"| {[n, c, h, w]} | {k}x{k} / {s} | {f_ms:.3f} | {q_ms:.3f} | {f_ms / q_ms:.2f}x |")
    print(f"| all | | {tot[0]:.3f} | {tot[1]:.3f} | {tot[0] / max(tot[1], 1e-9):.2f}x |")


def len_note(args: argparse.Namespace) -> str:
    how = "run by run in one process" if args.in_process else "in blocks, one worker process per model"
    return (f"{args.samples} accuracy inputs, {args.repeats} x {args.rounds} interleaved rounds ({how}), "
            f"batch {args.batch}, {args.threads} threads, quantizer {args.quantizer}, ops {args.ops}")


if __name__ == "__main__":
    sys.exit(main())
