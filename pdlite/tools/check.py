"""`pdlite check MODEL_DIR...`: check models against their reference outputs on every path pdlite has.

Each folder holds a model (any format) and `case.npz` (`in:<feed>` inputs, `out:<fetch>`
references, e.g. from Paddle Inference); `case_b4.npz` and other `case*.npz` are used too.
Paths checked, each a row of the report:

  host            full analysis pipeline, host kernels
  host-unfused    only the essential passes (no fusion, folding or memory reuse)
  nb              opt -> .nb -> MobileConfig (no analysis at load)
  delegate        a reference delegate replacing every run of convolutions (Delegate API)
  <device>        each installed NNAdapter device (intel_openvino, onnxruntime), as subgraphs

This is our own check over models we have not seen: point it at any folder of models.
Exit status 1 if any path fails.
"""
from __future__ import annotations

import argparse
import glob
import os
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, InputError
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES

ESSENTIAL = ESSENTIAL_PASSES
TOLERANCE = {"host": 1e-4, "host-unfused": 1e-4, "nb": 1e-4, "delegate": 1e-4}
DEVICE_TOLERANCE = 1e-3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="check models against their case.npz references on every path")
    p.add_argument("models", nargs="+", help="model folders (each with case.npz), or a folder of such folders")
    p.add_argument("--paths", default="host,host-unfused,nb,delegate,devices",
                   help="comma-separated subset of host,host-unfused,nb,delegate,devices")
    p.add_argument("--devices", default="intel_openvino,onnxruntime",
                   help="comma-separated NNAdapter devices the `devices` path checks (those installed)")
    p.set_defaults(func=main)


def discover(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        if glob.glob(os.path.join(p, "case*.npz")):
            out.append(p)
        elif os.path.isdir(p):
            out.extend(sorted(os.path.dirname(c) for c in glob.glob(os.path.join(p, "*", "case.npz"))))
    return out


def load_cases(d: str) -> list[tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]]:
    cases = []
    for path in sorted(glob.glob(os.path.join(d, "case*.npz"))):
        z = np.load(path)
        cases.append((os.path.basename(path), {k[3:]: z[k] for k in z.files if k.startswith("in:")},
                      {k[4:]: z[k] for k in z.files if k.startswith("out:")}))
    return cases


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    if got.shape != ref.shape:
        return float("inf")
    if ref.size == 0:
        return 0.0
    if not np.issubdtype(ref.dtype, np.floating):
        return 0.0 if np.array_equal(got, ref) else float("inf")
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) / scale


def _cxx(d: str, setup: Callable[[Any], None] | None = None) -> Any:
    from pdlite.api.config import CxxConfig
    from pdlite.api.predictor import create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(d)
    if setup:
        setup(cfg)
    return create_paddle_predictor(cfg)


def predictors(d: str, which: list[str], devices: list[str], tmp: str) -> dict[str, Callable[[], Any]]:
    """Makers of a predictor (plus a post-check) per path."""
    from pdlite.core.types import Place, PrecisionType, TargetType

    makers: dict[str, Callable[[], Any]] = {}
    if "host" in which:
        makers["host"] = lambda: _cxx(d)
    if "host-unfused" in which:
        makers["host-unfused"] = lambda: _cxx(d, lambda c: c.set_passes(ESSENTIAL))
    if "nb" in which:
        def nb() -> Any:
            from pdlite.api.mobile import MobileConfig
            from pdlite.api.predictor import create_paddle_predictor

            path = _cxx(d).save_optimized_model(os.path.join(tmp, os.path.basename(d.rstrip("/"))))
            mc = MobileConfig()
            mc.set_model_from_file(path)
            return create_paddle_predictor(mc)
        makers["nb"] = nb
    if "delegate" in which:
        def delegate() -> Any:
            from pdlite.delegate.reference import ReferenceConvDelegate

            dg = ReferenceConvDelegate()
            pred = _cxx(d, lambda c: c.set_delegate(dg))
            pred._check_note = f"{dg.replaced_runs} run(s) / {dg.replaced_ops} conv op(s) replaced"
            return pred
        makers["delegate"] = delegate
    if "devices" in which:
        for dev in devices:
            def device(dev: str = dev) -> Any:
                from pdlite.nnadapter.registry import get_driver

                drv = get_driver(dev)
                if not drv.available():
                    raise _Skip(drv.missing_message() if hasattr(drv, "missing_message") else f"{dev} not installed")

                def setup(c: Any) -> None:
                    c.set_nnadapter_device_names([dev])
                    c.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32),
                                        Place(TargetType.Host, PrecisionType.FP32)])
                return _cxx(d, setup)
            makers[dev] = device
    return makers


class _Skip(Exception):
    pass


def check_model(d: str, which: list[str], devices: list[str], tmp: str) -> list[tuple[str, str, str, bool]]:
    """Rows (path, case, result text, ok) for one model folder."""
    rows = []
    cases = load_cases(d)
    for path, make in predictors(d, which, devices, tmp).items():
        tol = TOLERANCE.get(path, DEVICE_TOLERANCE)
        try:
            pred = make()
        except _Skip as e:
            rows.append((path, "-", f"skipped: {e}", True))
            continue
        except Exception as e:  # noqa: BLE001 - reported per path
            rows.append((path, "-", f"FAILED to build: {type(e).__name__}: {str(e).splitlines()[0][:160]}", False))
            continue
        note = getattr(pred, "_check_note", "")
        for case, ins, outs in cases:
            try:
                got = pred.predict(ins)
                errs = {n: rel_error(g, outs[n]) for n, g in zip(pred.get_output_names(), got) if n in outs}
                worst = max(errs.values()) if errs else float("nan")
                ok = bool(errs) and worst <= tol
                text = f"max rel err {worst:.2e} (limit {tol:g})" + (f"; {note}" if note else "")
                rows.append((path, case, ("ok   " if ok else "FAIL ") + text, ok))
            except Exception as e:  # noqa: BLE001
                tb = traceback.format_exception_only(type(e), e)[-1].strip()
                rows.append((path, case, f"FAIL run: {tb[:200]}", False))
    return rows


PATHS = ("host", "host-unfused", "nb", "delegate", "devices")


def main(args: argparse.Namespace) -> int:
    which = [w.strip() for w in args.paths.split(",") if w.strip()]
    unknown = [w for w in which if w not in PATHS]
    if unknown or not which:
        raise ConfigError(f"--paths {args.paths!r}: expected a comma-separated subset of {','.join(PATHS)}")
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    models = discover(args.models)
    if not models:
        raise InputError(f"no model folders with case*.npz in {', '.join(args.models)}")
    all_ok = True
    with tempfile.TemporaryDirectory(prefix="pdlite_check_") as tmp:
        for d in models:
            print(f"== {d}")
            for path, case, text, ok in check_model(d, which, devices, tmp):
                print(f"  {path:<16} {case:<14} {text}")
                all_ok &= ok
    print("all checks passed" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1
