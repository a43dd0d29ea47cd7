"""pdlite's int8 models against each runtime's own quantizer, on the same graphs and the same runtime.

Where `int8_bench.py` asks "how much faster is the int8 model than the fp32 one on this device", this script asks
"would the runtime's own int8 tooling do better on the same network", to tell a limit of pdlite's quantization
from a limit of the runtime's int8 kernels. For each model of ../shared/models:

- the fp32 ONNX graph pdlite hands each device (its fp32 predictor's subgraph, captured at the driver's build),
- pdlite's int8 graph for that device (`pdlite quantize`, abs_max, the default ops: the same model int8_bench
  makes, then the graph its int8 predictor hands the device: for onnxruntime after qdq_fusion's rewrites),
- onnxruntime: `onnxruntime.quantization.quantize_static` of the fp32 graph (QDQ, per-channel int8 weights,
  uint8 activations, MinMax calibration: ORT's recommended x86 setting),
- intel_openvino: NNCF's `nncf.quantize` of the fp32 graph (default preset, its fast bias correction),

both runtime quantizers calibrated on the inputs int8_bench calibrates pdlite with. Each graph runs as a bare
session with pdlite's driver settings (its onnxruntime session options: intra-op threads, pool threads spinning
at most 300 us; its OpenVINO config: f32 inference precision, LATENCY hint), all of a runtime's three interleaved in
one process, `--rounds` rounds of a block of runs each (`--threads`, default 1: no pool threads to disturb the
other sessions); the speed-up over fp32 is paired by round. Accuracy: top-1 agreement with the fp32 graph over
`--samples` other inputs (PP-OCRv4 det: agreement of the text masks, map > 0.3).

Needs `nncf` (pip install nncf) for the OpenVINO column; without it only onnxruntime is measured.
Usage: python benchmarks/int8_reference.py [--models mobilenet_v3_small ...] [--threads 1] [--rounds 12]
Prints a Markdown table (for BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import int8_bench  # noqa: E402  (its models, inputs and quantize step)

DEVICES = ("onnxruntime", "intel_openvino")


def device_graphs(model_dir: Path, device: str) -> bytes:
    """The ONNX model (serialized) pdlite's predictor of `model_dir` hands `device`'s driver: the driver's build
    is wrapped while the predictor builds and runs once; the model must go to the device whole (one subgraph)."""
    from pdlite.nnadapter.registry import get_driver
    from pdlite.registries import load_registries

    load_registries()
    cls = get_driver(device)
    seen: list[bytes] = []
    build = cls.build

    def capture(self, model: bytes, *a, **k):
        seen.append(bytes(model))
        return build(self, model, *a, **k)

    cls.build = capture
    try:
        p = int8_bench.predictor(model_dir, device, 1)
        p.predict({"x": np.load(model_dir / "case.npz")["in:x"]})
    finally:
        cls.build = build
    if len(seen) != 1:
        raise SystemExit(f"{model_dir}: {len(seen)} subgraphs reached {device}, expected the whole model as one")
    return seen[0]


def ort_quantized(fp32: Path, out: Path, calib: list[np.ndarray]) -> Path:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([{"x": c} for c in calib])

        def get_next(self):
            return next(self.it, None)

    if not out.exists():
        pre = out.with_suffix(".pre.onnx")
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
    return out


def nncf_quantized(fp32: Path, out: Path, calib: list[np.ndarray]) -> Path:
    import nncf
    import openvino as ov

    if not out.exists():
        q = nncf.quantize(ov.Core().read_model(str(fp32)), nncf.Dataset(calib), subset_size=len(calib))
        ov.save_model(q, str(out))
    return out


def ort_runner(path: Path, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """A bare session with the session options pdlite's onnxruntime driver uses."""
    import onnxruntime as ort

    from pdlite.nnadapter.drivers.onnxruntime import OnnxRuntimeDriver

    so = OnnxRuntimeDriver().session_options({"ONNXRUNTIME_INTRA_OP_NUM_THREADS": str(threads)})
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return lambda x: s.run(None, {name: x})[0]


def ov_runner(path: Path, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """A bare compiled model with the device and config pdlite's intel_openvino driver uses."""
    import openvino as ov

    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver

    device, cfg = OpenVINODriver.config({"INTEL_OPENVINO_INFERENCE_NUM_THREADS": str(threads)})
    core = ov.Core()
    c = core.compile_model(core.read_model(str(path)), device, cfg)
    r = c.create_infer_request()
    return lambda x: np.array(r.infer({0: x})[c.outputs[0]], copy=True)


def timed(runs: dict[str, Callable[[np.ndarray], np.ndarray]], x: np.ndarray, rounds: int,
          block: int = 10) -> dict[str, list[float]]:
    """Per runner, the median seconds of a block of runs, each round (runners interleaved)."""
    for f in runs.values():
        for _ in range(3):
            f(x)
    out: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, f in runs.items():
            ts = []
            for _ in range(block):
                t = time.perf_counter()
                f(x)
                ts.append(time.perf_counter() - t)
            out[k].append(statistics.median(ts))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=[*int8_bench.CLASSIFIERS, *int8_bench.DETECTORS])
    ap.add_argument("--devices", nargs="*", default=list(DEVICES))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "pdlite_int8_bench"))
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from pdlite.optimizer.quantization import DEFAULT_OPS

    ops = ",".join(DEFAULT_OPS)
    devices = list(args.devices)
    if "intel_openvino" in devices:
        try:
            import nncf  # noqa: F401
        except ImportError:
            print("(nncf is not installed: pip install nncf; measuring onnxruntime only)")
            devices.remove("intel_openvino")
    own = {"onnxruntime": "ORT quantize_static", "intel_openvino": "NNCF"}
    print(f"({args.threads} thread(s), {args.rounds} interleaved rounds of 10 runs, {args.samples} accuracy inputs; "
          f"pdlite quantize abs_max, ops {ops})")
    print("| model | device | fp32 ms | pdlite int8 ms | speed-up | runtime's own int8 ms | speed-up | "
          "pdlite int8 top-1 / mask vs fp32 | own int8 vs fp32 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        work = Path(args.work)
        tag = hashlib.sha256(ops.encode()).hexdigest()[:8]
        calib = int8_bench._inputs(model, 4, seed=1)
        q = int8_bench.quantize(model, work / f"{model}_pdlite_{tag}", "pdlite", calib, ops)
        samples = int8_bench._inputs(model, args.samples, seed=2)
        x = np.load(int8_bench.SHARED / model / "case.npz")["in:x"]
        for device in devices:
            ref = work / f"{model}_{device}_reference"
            ref.mkdir(parents=True, exist_ok=True)
            # this pdlite's graphs, captured afresh (they change with pdlite); the runtime's own quantization of
            # the fp32 graph is kept under that graph's hash
            fp32, mine = ref / "fp32.onnx", ref / f"pdlite_int8_{tag}.onnx"
            fp32.write_bytes(device_graphs(int8_bench.SHARED / model, device))
            mine.write_bytes(device_graphs(q, device))
            h = hashlib.sha256(fp32.read_bytes()).hexdigest()[:12]
            if device == "onnxruntime":
                theirs, runner = ort_quantized(fp32, ref / f"ort_int8_{h}.onnx", calib), ort_runner
            else:
                theirs, runner = nncf_quantized(fp32, ref / f"nncf_int8_{h}.xml", calib), ov_runner
            runs = {k: runner(p, args.threads) for k, p in (("fp32", fp32), ("pdlite", mine), ("own", theirs))}
            t = timed(runs, x, args.rounds)
            ms = {k: statistics.median(v) * 1e3 for k, v in t.items()}
            up = {k: statistics.median([a / b for a, b in zip(t["fp32"], t[k])]) for k in ("pdlite", "own")}
            outs = {k: [f(s) for s in samples] for k, f in runs.items()}
            print(f"| {model} | {device} | {ms['fp32']:.2f} | {ms['pdlite']:.2f} | {up['pdlite']:.2f}x | "
                  f"{ms['own']:.2f} ({own[device]}) | {up['own']:.2f}x | "
                  f"{int8_bench.agreement(model, outs['pdlite'], outs['fp32'])} | "
                  f"{int8_bench.agreement(model, outs['own'], outs['fp32'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
