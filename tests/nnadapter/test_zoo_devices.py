"""Devices never fail where the host succeeds, across the conformance zoo, legacy and PIR.

Every model of tests/fixtures/conformance and its PIR twin in tests/fixtures/pir_conformance runs
with each device installed: the ops a device cannot take stay on the host (capability refusals),
and nothing may fall back at run time (NNAdapterFallbackWarning is an error here: a fallback means
a converter produced a model the device could not build or run, or with other output shapes or
dtypes than the host kernels, as 0-D constants turned [1] once did). Outputs equal Paddle
Inference's reference: floats max|got - ref| <= 1e-3 * max|ref| (the NNAdapter tests' bar: the
devices fuse and reorder fp32 arithmetic), integers and bools exactly, dtypes and shapes equal.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pdlite import CxxConfig, create_paddle_predictor
from tests.conftest import assert_close_rel
from tests.nnadapter._models import DEVICES, REL, NNAdapterFallbackWarning, need

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ZOOS = {"legacy": FIXTURES / "conformance", "pir": FIXTURES / "pir_conformance"}
CASES = [(fmt, p.name) for fmt, root in ZOOS.items() if root.is_dir()
         for p in sorted(root.iterdir()) if (p / "case.npz").is_file()]


def _check(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, f"{what}: {got.dtype}{list(got.shape)}, " \
        f"Paddle {ref.dtype}{list(ref.shape)}"
    if ref.dtype.kind in "biu":
        assert np.array_equal(got, ref), f"{what}: {int(np.sum(got != ref))} of {ref.size} values differ"
    else:
        assert_close_rel(got, ref, REL, what)


@pytest.mark.skipif(not CASES, reason="no conformance fixtures")
@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize(("fmt", "name"), CASES, ids=[f"{f}-{n}" for f, n in CASES])
def test_zoo_model_on_device(fmt: str, name: str, device: str) -> None:
    need(device)
    folder = ZOOS[fmt] / name
    z = np.load(folder / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    refs = [(k[4:], z[k]) for k in z.files if k.startswith("out:")]
    cfg = CxxConfig()
    cfg.set_model_dir(folder)
    cfg.set_nnadapter_device_names([device])
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)
        pred = create_paddle_predictor(cfg)
        got = pred.predict({k: v.copy() for k, v in ins.items()})
    names = pred.get_output_names()
    assert len(got) == len(refs), f"{fmt}/{name}: {len(got)} outputs, Paddle {len(refs)}"
    if fmt == "legacy":  # legacy references are by fetch name, PIR ones by position
        by_name = dict(zip(names, got))
        pairs = [(by_name[n], r, n) for n, r in refs]
    else:
        pairs = [(g, r, n) for g, (n, r) in zip(got, refs)]
    for g, r, n in pairs:
        _check(np.asarray(g), r, f"{fmt}/{name} on {device}: {n}")
