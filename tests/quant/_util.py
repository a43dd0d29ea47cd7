"""Helpers of the quantization tests: run a fixture folder (inference.pdmodel + case.npz) with pdlite."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "quant"
ESSENTIAL = ESSENTIAL_PASSES


def case(d: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.lib.npyio.NpzFile]:
    """(inputs, Paddle Inference outputs, the whole npz) of a fixture folder."""
    z = np.load(d / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    outs = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
    return ins, outs, z


def run(model: Path, ins: dict[str, np.ndarray], passes: list[str] | None = None,
        config: CxxConfig | None = None) -> dict[str, np.ndarray]:
    """pdlite's outputs by fetch name."""
    if config is None:
        config = CxxConfig()
        config.set_model_dir(model)
    if passes is not None:
        config.set_passes(passes)
    pred = create_paddle_predictor(config)
    outs = pred.predict({k: v.copy() for k, v in ins.items()})
    return dict(zip(pred.get_output_names(), [np.array(o, copy=True) for o in outs]))


def max_rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    """max|got - ref| / max|ref|."""
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) / max(scale, 1e-30)
