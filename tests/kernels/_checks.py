"""Small helpers shared by the host-kernel tests of the extra, rnn, detection and 3-D ops.

`check`: float max|got - ref| <= tol * max(1, max|ref|) (tol 1e-5 unless told); integer/bool exact.
"""
from __future__ import annotations

import math

import numpy as np

from pdlite.operators.registry import OPS, ShapeContext
from tests.kernels._util import make_op

f32 = np.float32


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(f32)


def sig(v: float) -> float:
    """The logistic function of one float (reference loops)."""
    return 1.0 / (1.0 + math.exp(-v))


def infer(op_type: str, ins: dict, attrs: dict, outs: dict | None = None) -> dict:
    """The op's shape inference alone (where a bad attribute is refused before any kernel runs)."""
    values = {k: (v if isinstance(v, list) else [v]) for k, v in ins.items()}
    return OPS[op_type].infer_shape(ShapeContext(make_op(op_type, ins, attrs, outs), values))


def check(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = 1e-5) -> None:
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    if ref.dtype.kind in "biu":
        assert got.dtype == ref.dtype and np.array_equal(got, ref), f"{what}: {got} != {ref}"
        return
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    bound = tol * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    assert err <= bound, f"{what}: max|got-ref| = {err:.3g} > {bound:.3g}"
