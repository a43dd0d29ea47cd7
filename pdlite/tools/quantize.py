"""`pdlite quantize MODEL --calib DIR|FILE.npz -o OUT`: post-training static int8 quantization.

Runs the float model on the host over the calibration batches, computes each quantized op's activation
scale (abs_max, hist or KL; pdlite.optimizer.quantization), quantizes conv / depthwise / transpose conv /
mul / matmul weights per channel and the inputs of those ops, of residual adds (elementwise_add of two
activations), of hard_swish / swish, of average pools and of products of two activations (squeeze-excitation
blocks; `--ops` narrows the list; docs/quantization.md), and writes OUT/inference.pdmodel + inference.pdiparams
in Paddle's QDQ format (quantize_linear / dequantize_linear, int8 weights), which Paddle Inference, OpenVINO and
pdlite load. Then it prints how far the int8 model is from the float one on the calibration batches, and the
measured speed of the float and the int8 model on each target this machine runs (the host, whose int8 path runs
integer kernels, and the installed NNAdapter devices), with a warning where int8 is the slower (`--no-bench`
skips the timing).

Calibration inputs: an .npz file whose arrays are batches for the model's input (single-input models;
any key names) or `<feed>_<i>` / `<feed>:<i>` keys (batch i of each feed); or a folder of such .npz files,
of .npy files (single-input models: one batch each) and of images (single-input models: one batch of 1 each,
preprocessed by the same flags as `pdlite batch`: --resize, --mean, --std, --scale, --bgr; its ImagePrep).
"""
from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, InputError, PdliteError
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES
from pdlite.optimizer.quantization import BOUNDED_OPS, DEFAULT_OPS
from pdlite.tools.batch import ImagePrep, add_image_args
from pdlite.tools.batch import image_prep as batch_image_prep
from pdlite.tools.common import IMAGE_SUFFIXES, int_at_least, source_config
from pdlite.tools.progress import Progress

ESSENTIAL = ESSENTIAL_PASSES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quantize", help="post-training int8 quantization into Paddle's QDQ format")
    p.add_argument("model", help="float model folder or program file")
    p.add_argument("--params", help="params file (default: found beside the program file)")
    p.add_argument("--calib", required=True, help="calibration inputs: a .npz file or a folder of .npz / .npy files")
    p.add_argument("-o", "--output", required=True, help="output folder (inference.pdmodel + inference.pdiparams)")
    p.add_argument("--algo", default="KL", choices=["abs_max", "hist", "KL"],
                   help="activation calibration (default KL, as Paddle's PostTrainingQuantization)")
    p.add_argument("--batches", type=int, default=0, help="use at most this many calibration batches (0: all)")
    p.add_argument("--ops", default=",".join(DEFAULT_OPS),
                   help="op types to quantize, comma-separated (default: %(default)s; leave out elementwise_add, "
                        "hard_swish, swish, pool2d and elementwise_mul for Paddle's default quantizable_op_type)")
    p.add_argument("--skip", action="append", default=[], metavar="VAR",
                   help="keep the op writing VAR in float (repeatable)")
    p.add_argument("--no-bench", action="store_true", help="do not time the float and int8 models afterwards")
    p.add_argument("--bench-threads", type=int_at_least(1), default=1,
                   help="threads of the speed comparison (default 1)")
    p.add_argument("--bench-runs", type=int_at_least(1), default=10,
                   help="timed runs per model and target, alternated (default 10; the medians are compared)")
    add_image_args(p.add_argument_group(f"calibration images ({'/'.join(IMAGE_SUFFIXES)} -> 1x3xHxW float32, "
                                        "as pdlite batch)"))
    p.set_defaults(func=main)


def image_prep(args: argparse.Namespace) -> ImagePrep:
    """`pdlite batch`'s image preprocessing from the same flags, with sizes and std checked."""
    prep = batch_image_prep(args)
    if 0.0 in prep.std or (prep.resize and min(prep.resize) < 1):
        raise ConfigError(f"--std {prep.std} / --resize {prep.resize}: std must be non-zero and sizes >= 1")
    return prep


def read_calibration(path: str, feeds: list[str], prep: ImagePrep | None = None) -> list[dict[str, np.ndarray]]:
    """Calibration batches, each a {feed name: array} dict (see the module docstring for the layouts; images through
    `prep`, pdlite batch's preprocessing)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".npz", ".npy") or f.suffix.lower() in IMAGE_SUFFIXES)
    elif p.is_file():
        files = [p]
    else:
        raise InputError(f"--calib {path!r}: no such file or folder")
    batches: list[dict[str, np.ndarray]] = []
    for f in files:
        if f.suffix.lower() in IMAGE_SUFFIXES:
            if len(feeds) != 1:
                raise InputError(f"{f}: an image batch needs a single-input model; this one has inputs {feeds}")
            batches.append({feeds[0]: (prep or ImagePrep())(str(f))})
            continue
        if f.suffix == ".npy":
            if len(feeds) != 1:
                raise InputError(f"{f}: a .npy batch needs a single-input model; this one has inputs {feeds}")
            batches.append({feeds[0]: np.load(f)})
            continue
        z = np.load(f)
        if set(feeds) <= set(z.files):  # one batch, by feed name
            batches.append({n: z[n] for n in feeds})
            continue
        indexed: dict[int, dict[str, np.ndarray]] = {}
        for k in z.files:
            m = re.fullmatch(r"(.+?)[_:](\d+)", k)
            if m and m.group(1) in feeds:
                indexed.setdefault(int(m.group(2)), {})[m.group(1)] = z[k]
            elif len(feeds) == 1:
                indexed.setdefault(len(indexed) + 100000, {})[feeds[0]] = z[k]
            else:
                raise InputError(f"{f}: key {k!r} names no input of the model {feeds} (use <input>_<i>)")
        for i in sorted(indexed):
            missing = [n for n in feeds if n not in indexed[i]]
            if missing:
                raise InputError(f"{f}: batch {i} has no {missing}")
            batches.append(indexed[i])
    if not batches:
        raise InputError(f"--calib {path!r}: no .npz, .npy or image batches found")
    return batches


def _predictor(config: Any, passes: list[str] | None = None) -> Any:
    from pdlite.api.predictor import create_paddle_predictor

    if passes is not None:
        config.set_passes(passes)
    return create_paddle_predictor(config)


def calibrate(args: argparse.Namespace, batches: list[dict[str, np.ndarray]], wanted: set[str],
              writers: dict[str, str] | None = None) -> dict[str, float]:
    """Activation scales of `wanted` vars over the batches, with a progress bar over the batches; `writers`: the
    type of the op writing each var (gates of BOUNDED_OPS are calibrated abs_max, calibration.py)."""
    from pdlite.optimizer.quantization import make_observer

    observers = {n: make_observer(args.algo, (writers or {}).get(n)) for n in wanted}
    two_pass = any(o.two_pass for o in observers.values())
    pred = _predictor(source_config(args.model, args.params, "quantize"), ESSENTIAL)
    second = False

    def see(name: str, value: Any) -> None:
        o = observers.get(name)
        if o is not None and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            o.update_hist(value) if second else o.update(value)

    pred.set_hook(lambda inst, _dt, scope: [see(n, scope.get(n)) for n in inst.op.output_names()])
    rounds = 2 if two_pass else 1
    with Progress(rounds * len(batches), f"calibrating ({args.algo})") as bar:
        for r in range(rounds):
            second = r == 1
            for b in batches:
                for n, v in b.items():
                    see(n, v)
                pred.predict(b)
                bar.update()
    return {n: o.scale() for n, o in observers.items()}


def report(float_outs: list[list[np.ndarray]], quant_outs: list[list[np.ndarray]], names: list[str]) -> str:
    """How far the int8 model is from the float one (per output: max and mean |diff| / max|float|, top-1)."""
    lines = ["accuracy of the int8 model against the float model on the calibration batches:"]
    for i, name in enumerate(names):
        f = [np.asarray(o[i], np.float64) for o in float_outs]
        q = [np.asarray(o[i], np.float64) for o in quant_outs]
        scale = max(float(np.abs(a).max()) for a in f) or 1.0
        mx = max(float(np.abs(a - b).max()) for a, b in zip(f, q)) / scale
        mean = float(np.mean([np.abs(a - b).mean() for a, b in zip(f, q)])) / scale
        line = f"  {name}: max |diff| {mx:.4g}, mean |diff| {mean:.4g} (of max |float| {scale:.4g})"
        if f[0].ndim == 2 and f[0].shape[1] > 1:
            agree = np.concatenate([a.argmax(-1) == b.argmax(-1) for a, b in zip(f, q)])
            line += f", top-1 agreement {100 * agree.mean():.1f}% of {agree.size}"
        lines.append(line)
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from pdlite.model_parser import LoDTensor, load_model, save_model
    from pdlite.optimizer.quantization import insert_qdq, quant_targets

    cfg = source_config(args.model, args.params, "quantize")
    model = load_model(**cfg.model_source())
    params = {k: t.array for k, t in model.params.items()}
    feeds = model.program.feed_names()
    batches = read_calibration(args.calib, feeds, image_prep(args))
    if args.batches > 0:
        batches = batches[:args.batches]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    targets = quant_targets(model.program, params, set(args.skip), ops)
    if not targets:
        raise ConfigError(f"{args.model}: no op to quantize among {ops} (conv2d, depthwise_conv2d, conv2d_transpose, "
                          "mul, matmul, matmul_v2 with float weights; elementwise_add of two float activations)")
    writers = {n: op.type for op in model.program.main.ops for n in op.output_names()}
    scales = calibrate(args, batches, {a for t in targets for a in t.activations}, writers)
    gates = sum(writers.get(n) in BOUNDED_OPS for n in scales)
    program, new_params = insert_qdq(model.program, params, scales, targets)
    out = Path(args.output)
    os.makedirs(out, exist_ok=True)
    persist = set(program.persistable_names())
    save_model(program, {n: LoDTensor(np.asarray(v, order="C")) for n, v in new_params.items() if n in persist},
               out / "inference.pdmodel", out / "inference.pdiparams")
    w = len({t.weight for t in targets if t.weight is not None})
    print(f"wrote {out}/inference.pdmodel + inference.pdiparams: {len(targets)} ops quantized "
          f"({w} int8 weights, {len(scales)} activation scales, {args.algo} over {len(batches)} batches"
          + (f"; abs_max for {gates} sigmoid / hard_sigmoid outputs" if gates and args.algo != "abs_max" else "")
          + ")")
    fpred = _predictor(source_config(args.model, args.params, "quantize"))
    qpred = _predictor(source_config(str(out), None, "quantize"))
    check = batches[:8]
    fo = [fpred.predict(b) for b in check]
    qo = [qpred.predict(b) for b in check]
    print(report(fo, qo, fpred.get_output_names()))
    if not getattr(args, "no_bench", False):
        print(speed_report(args, str(out), batches[0]))
    return 0


def _target_predictors(args: argparse.Namespace, qdir: str, target: str) -> tuple[Any, Any]:
    """(float, int8) predictors on `target` (host, or an NNAdapter device with the host as fallback)."""
    from pdlite.core.types import Place, PrecisionType, TargetType

    pair = []
    for model, params in ((args.model, args.params), (qdir, None)):
        cfg = source_config(model, params, "quantize")
        cfg.set_threads(args.bench_threads)
        if target != "host":
            cfg.set_nnadapter_device_names([target])
            cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
            n = args.bench_threads
            cfg.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={n};"
                                                 f"ONNXRUNTIME_INTRA_OP_NUM_THREADS={n}")
        pair.append(_predictor(cfg))
    return pair[0], pair[1]


def time_pair(fpred: Any, qpred: Any, feed: dict[str, np.ndarray], runs: int) -> tuple[float, float]:
    """Median ms of `runs` runs of each predictor, alternated run by run after two untimed ones each."""
    import time

    for p in (fpred, qpred, fpred, qpred):
        p.predict(feed)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for i, p in enumerate((fpred, qpred)):
            t = time.perf_counter()
            p.predict(feed)
            times[i].append(time.perf_counter() - t)
    return float(np.median(times[0])) * 1e3, float(np.median(times[1])) * 1e3


def speed_report(args: argparse.Namespace, qdir: str, feed: dict[str, np.ndarray]) -> str:
    """The float and int8 models timed on the host and on each installed device, a warning where int8 is slower."""
    from pdlite.api.auto import installed_devices
    from pdlite.kernels.host import quant_native

    isa = quant_native.int8_isa()
    lines = [f"speed on the first calibration batch ({args.bench_threads} thread(s), median of {args.bench_runs} "
             "alternated runs):"]
    for target in ["host", *installed_devices()]:
        try:
            fpred, qpred = _target_predictors(args, qdir, target)
            f_ms, q_ms = time_pair(fpred, qpred, feed, args.bench_runs)
        except PdliteError as e:  # a device that cannot take this model: say so, time the others
            lines.append(f"  {target}: not measured ({e})")
            continue
        what = f"host (int8 kernels: {isa or 'none, fp32 simulation'})" if target == "host" else target
        line = f"  {what}: fp32 {f_ms:.2f} ms, int8 {q_ms:.2f} ms, int8 speed-up {f_ms / q_ms:.2f}x"
        if q_ms > f_ms:
            line += "  WARNING: int8 is slower than fp32 here; serve the float model on this target"
        lines.append(line)
    return "\n".join(lines)
