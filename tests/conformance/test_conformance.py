"""Conformance zoo: every model in tests/fixtures/conformance against Paddle Inference's outputs.

The models are small legacy (ProgramDesc) programs made by tools/make_conformance_models.py, one
folder each (inference.pdmodel [+ inference.pdiparams] + case.npz). Each is checked with the
default pass pipeline (fusions, folding, memory plan) and with only the passes a program needs to
run at all, so a wrong kernel and a wrong fusion show up apart; one predictor runs the case twice
(state kept between runs shows up in the second). Tolerance: float outputs
max|got - ref| <= 1e-4 * max|ref|; integer and bool outputs must be equal, dtypes must match Paddle's.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES
from tests.conftest import assert_close_rel

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
MODELS = sorted(p.name for p in ROOT.iterdir() if (p / "case.npz").is_file()) if ROOT.is_dir() else []
ESSENTIAL = ESSENTIAL_PASSES
REL = 1e-4
# Models that fail for a known, reported reason (docs/conformance_status.md). strict: once the gap is
# closed the test XPASSes and fails, so the entry must be removed.
KNOWN_GAPS: dict[str, str] = {}


def _case(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    z = np.load(ROOT / name / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    outs = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
    return ins, outs


def run_model(name: str, passes: list[str] | None, runs: int = 1) -> list[dict[str, np.ndarray]]:
    """pdlite's outputs on the model's case, by fetch name, for `runs` runs of one predictor."""
    config = CxxConfig()
    config.set_model_dir(ROOT / name)
    if passes is not None:
        config.set_passes(passes)
    pred = create_paddle_predictor(config)
    ins, _ = _case(name)
    results = []
    for _ in range(runs):
        outs = pred.predict({k: v.copy() for k, v in ins.items()})
        results.append(dict(zip(pred.get_output_names(), [np.array(o, copy=True) for o in outs])))
    return results


def check_outputs(name: str, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(ref), f"{name}: outputs {sorted(got)} != reference {sorted(ref)}"
    bad = []
    for k, r in ref.items():
        g = np.asarray(got[k])
        try:
            assert g.dtype == r.dtype, f"{k}: dtype {g.dtype} != reference {r.dtype}"
            if r.dtype.kind in "biu":
                assert g.shape == r.shape, f"{k}: shape {g.shape} != reference {r.shape}"
                n = int(np.sum(g != r))
                assert n == 0, f"{k}: {n} of {r.size} values differ"
            else:
                assert_close_rel(g, r, REL, k)
        except AssertionError as e:
            bad.append(str(e))
    assert not bad, f"{name}: " + "; ".join(bad)


@pytest.mark.skipif(not MODELS, reason=f"no conformance models in {ROOT}")
@pytest.mark.parametrize("passes", ["default", "essential"])
@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.xfail(reason=KNOWN_GAPS[m], strict=True))
                                  if m in KNOWN_GAPS else m for m in MODELS])
def test_conformance(name: str, passes: str) -> None:
    """Both runs of one predictor must match (the second catches state kept between runs)."""
    ref = _case(name)[1]
    for i, got in enumerate(run_model(name, None if passes == "default" else ESSENTIAL, runs=2)):
        check_outputs(f"{name} (run {i + 1})", got, ref)


def test_zoo_is_present_and_small() -> None:
    """The zoo exists, each params file stays small and the whole set stays within its budget."""
    assert len(MODELS) >= 25, f"expected the conformance zoo in {ROOT}, found {len(MODELS)} models"
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert total <= 5 * 1024 * 1024, f"conformance fixtures take {total} bytes (> 5 MiB)"
    for name in MODELS:
        p = ROOT / name / "inference.pdiparams"
        assert not p.exists() or p.stat().st_size <= 200 * 1024, f"{p} is over 200 KiB"


def test_known_gaps_exist() -> None:
    """Every KNOWN_GAPS entry names a model of the zoo."""
    assert set(KNOWN_GAPS) <= set(MODELS), sorted(set(KNOWN_GAPS) - set(MODELS))


def test_checker_can_fail() -> None:
    """The comparison rejects a perturbed float output and a changed integer output."""
    ref = {"f": np.ones((2, 3), np.float32), "i": np.arange(4, dtype=np.int64)}
    check_outputs("self", dict(ref), ref)
    with pytest.raises(AssertionError):
        check_outputs("self", {"f": ref["f"] * (1 + 2 * REL), "i": ref["i"]}, ref)
    with pytest.raises(AssertionError):
        check_outputs("self", {"f": ref["f"], "i": ref["i"] + 1}, ref)
    with pytest.raises(AssertionError):
        check_outputs("self", {"f": ref["f"], "i": ref["i"].astype(np.int32)}, ref)
