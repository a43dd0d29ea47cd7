"""Toolkit-like nets exported natively by Paddle 3 (tests/fixtures/pir_nets, tools/make_pir_nets.py).

Each net's `pir/` folder is `paddle.jit.save` under PIR (inference.json), its `legacy/` folder (where
Paddle 3.3 can still trace the net in legacy static mode) the same net and weights as a legacy
program. References: Paddle Inference on those files. Tolerance: float outputs
max|got - ref| <= 1e-4 * max|ref|, integer outputs (NMS box counts) exactly, dtypes and shapes equal.
The two formats of one net must also agree with each other to 1e-6 of max|out|.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from tests.conformance.test_conformance import check_outputs
from tests.conftest import assert_close_rel

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "pir_nets"
CASES = sorted(f"{d.parent.name}/{d.name}" for d in ROOT.glob("*/*") if (d / "case.npz").is_file()) \
    if ROOT.is_dir() else []
BOTH = sorted(n for n in {c.split("/")[0] for c in CASES} if f"{n}/legacy" in CASES and f"{n}/pir" in CASES)


def case(folder: Path) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]]]:
    z = np.load(folder / "case.npz")
    return ({k[3:]: z[k] for k in z.files if k.startswith("in:")},
            [(k[4:], z[k]) for k in z.files if k.startswith("out:")])


def run(folder: Path, ins: dict[str, np.ndarray]) -> list[np.ndarray]:
    config = CxxConfig()
    config.set_model_dir(folder)
    pred = create_paddle_predictor(config)
    return [np.array(o, copy=True) for o in pred.predict({k: v.copy() for k, v in ins.items()})]


@pytest.mark.skipif(not CASES, reason=f"no nets in {ROOT} (tools/make_pir_nets.py)")
@pytest.mark.parametrize("net", CASES)
def test_net_matches_paddle(net: str) -> None:
    ins, ref = case(ROOT / net)
    got = run(ROOT / net, ins)
    assert len(got) == len(ref), f"{net}: {len(got)} outputs, reference has {len(ref)}"
    check_outputs(net, {n: g for (n, _), g in zip(ref, got)}, dict(ref))


@pytest.mark.skipif(not BOTH, reason=f"no net in {ROOT} has both formats")
@pytest.mark.parametrize("name", BOTH)
def test_pir_and_legacy_give_the_same_numbers(name: str) -> None:
    ins, _ = case(ROOT / name / "pir")
    pir, legacy = run(ROOT / name / "pir", ins), run(ROOT / name / "legacy", ins)
    for i, (p, g) in enumerate(zip(pir, legacy)):
        assert p.dtype == g.dtype and p.shape == g.shape, f"{name} output {i}"
        assert_close_rel(p, g, 1e-6, f"{name} output {i}")


def test_the_nets_cover_what_they_claim() -> None:
    """The fixtures hold the forms this suite is for: a feedless program, tensor-valued attributes,
    0-D results, multiclass_nms3, RPN post-processing, an integer shape subgraph in a legacy program."""
    import json

    names = {c.split("/")[0] for c in CASES}
    assert {"constants_only", "op_forms", "picodet_like", "proposals_like", "liteseg_like", "lcnet_like"} <= names
    ops = {n: {o["#"] for o in json.loads((ROOT / n / "pir" / "inference.json").read_text())["program"]["regions"][0]
               ["blocks"][0]["ops"]} for n in names}
    assert "1.data" not in ops["constants_only"]
    assert {"1.one_hot", "1.linspace", "1.full_like", "1.add_n", "1.p_norm", "1.eye"} <= ops["op_forms"]
    assert {"1.multiclass_nms3", "1.arange", "1.meshgrid"} <= ops["picodet_like"]
    assert {"1.generate_proposals", "1.roi_align", "1.matrix_nms"} <= ops["proposals_like"]
    _, ref = case(ROOT / "op_forms" / "pir")
    assert any(r.ndim == 0 for _, r in ref)
    assert "liteseg_like/legacy" in CASES
