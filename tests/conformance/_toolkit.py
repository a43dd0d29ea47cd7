"""Helpers of the toolkit-model tests (tests/fixtures/toolkit): folders, cases, predictors.

A model folder holds `legacy/` and `pir/` programs and `case*.npz` with the inputs (`in:<name>`) and each
format's Paddle Inference outputs (`<fmt>.out:<fetch name>`), in fetch order.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite import CxxConfig, create_paddle_predictor

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "toolkit"


def folder(model: str, fmt: str, generator: str) -> Path:
    """The model's `fmt` folder; the test is skipped, naming the generator, when it is missing."""
    d = ROOT / model / fmt
    if not d.is_dir():
        pytest.skip(f"{d} is missing ({generator})")
    return d


def load_case(model: str, fmt: str, case: str, generator: str) -> tuple[dict[str, np.ndarray],
                                                                        list[tuple[str, np.ndarray]]]:
    """The inputs and this format's reference outputs (fetch name, array) in fetch order."""
    path = ROOT / model / case
    if not path.is_file():
        pytest.skip(f"{path} is missing ({generator})")
    z = np.load(path)
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    outs = [(k[len(fmt) + 5:], z[k]) for k in z.files if k.startswith(f"{fmt}.out:")]
    return ins, outs


def predictor(model_dir: Path, device: str | None):
    """A predictor on the host, or with the NNAdapter `device` named."""
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir))
    if device:
        cfg.set_nnadapter_device_names([device])
    return create_paddle_predictor(cfg)
