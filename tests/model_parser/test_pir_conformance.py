"""PIR at parity with legacy: every conformance model, as a PIR program, runs with the same numbers.

tests/fixtures/pir_conformance/<name> is the PIR twin of tests/fixtures/conformance/<name> (Paddle's
own translator, paddle.pir.translate_to_pir; tools/make_pir_fixtures.py --conformance), with
case.npz = the legacy case's inputs and Paddle's outputs on the twin. Checked here:
- pdlite on the twin matches Paddle on the twin: float outputs max|got - ref| <= 1e-4 * max|ref|,
  integer and bool outputs exactly, dtypes equal (the conformance zoo's rule);
- pdlite on the twin gives the same numbers as pdlite on the legacy model (one op set, two front
  ends): every output equal to 1e-6 * max|legacy| (integers exactly), except the outputs
  meta.json lists where Paddle's translator changed the program (differs_from_legacy);
- every conformance model has a twin, or Paddle's translator refuses it (UNTRANSLATABLE.json).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from tests.conformance.test_conformance import KNOWN_GAPS, check_outputs
from tests.conformance.test_conformance import MODELS as LEGACY_MODELS
from tests.conformance.test_conformance import ROOT as LEGACY_ROOT
from tests.conftest import assert_close_rel

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "pir_conformance"
TWINS = sorted(p.name for p in ROOT.iterdir() if (p / "case.npz").is_file()) if ROOT.is_dir() else []
SAME = 1e-6


def _params(names: list[str]) -> list:
    return [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_GAPS[n], strict=True)) if n in KNOWN_GAPS else n
            for n in names]


def _case(d: Path) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]]]:
    z = np.load(d / "case.npz")
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            [(k[4:], z[k]) for k in z.files if k.startswith("out:")])


def _run(model_dir: Path, ins: dict[str, np.ndarray]) -> list[np.ndarray]:
    config = CxxConfig()
    config.set_model_dir(model_dir)
    pred = create_paddle_predictor(config)
    assert sorted(pred.get_input_names()) == sorted(ins), f"{model_dir}: feeds {pred.get_input_names()}"
    return [np.array(o, copy=True) for o in pred.predict({k: v.copy() for k, v in ins.items()})]


@pytest.mark.skipif(not TWINS, reason=f"no PIR twins in {ROOT} (tools/make_pir_fixtures.py --conformance)")
@pytest.mark.parametrize("name", _params(TWINS))
def test_pir_twin_matches_paddle(name: str) -> None:
    ins, ref = _case(ROOT / name)
    got = _run(ROOT / name, ins)
    assert len(got) == len(ref), f"{name}: {len(got)} outputs, reference has {len(ref)}"
    check_outputs(f"{name} (PIR)", {n: g for (n, _), g in zip(ref, got)}, dict(ref))


@pytest.mark.skipif(not TWINS, reason=f"no PIR twins in {ROOT}")
@pytest.mark.parametrize("name", _params(TWINS))
def test_pir_twin_same_numbers_as_legacy(name: str) -> None:
    ins, ref = _case(ROOT / name)
    differs = set(json.loads((ROOT / name / "meta.json").read_text())["differs_from_legacy"])
    pir, legacy = _run(ROOT / name, ins), _run(LEGACY_ROOT / name, ins)
    compared = 0
    for (out, _), p, g in zip(ref, pir, legacy):
        if out in differs:
            continue
        assert p.dtype == g.dtype and p.shape == g.shape, f"{name} {out}: PIR {p.dtype}{p.shape}, legacy {g.dtype}{g.shape}"
        if g.dtype.kind in "biu":
            assert np.array_equal(p, g), f"{name} {out}: integer outputs differ"
        else:
            assert_close_rel(p, g, SAME, f"{name} {out}")
        compared += 1
    assert compared or len(differs) == len(ref), name


def test_every_conformance_model_has_a_twin() -> None:
    refused = json.loads((ROOT / "UNTRANSLATABLE.json").read_text())
    missing = sorted(set(LEGACY_MODELS) - set(TWINS) - set(refused))
    assert not missing, f"conformance models without a PIR twin: {missing} (run tools/make_pir_fixtures.py --conformance)"
    assert not set(TWINS) & set(refused), "a model is both twinned and listed as untranslatable"
    assert set(TWINS) <= set(LEGACY_MODELS), sorted(set(TWINS) - set(LEGACY_MODELS))
    assert all(isinstance(why, str) and why for why in refused.values()), "each refusal carries Paddle's message"


def test_twins_are_pir_programs_and_small() -> None:
    total = 0
    for name in TWINS:
        doc = json.loads((ROOT / name / "inference.json").read_text())
        assert doc["base_code"]["magic"] == "pir", name
        total += sum(f.stat().st_size for f in (ROOT / name).iterdir())
    assert total <= 3 * 1024 * 1024, f"PIR twins take {total} bytes (> 3 MiB)"
