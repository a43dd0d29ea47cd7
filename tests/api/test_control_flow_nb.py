"""Control-flow models through an optimized `.nb` and through clones: the sub-blocks travel with the
program and the while / conditional_block kernels bind them again (Kernel.bind_program) when the
runtime is rebuilt from stored kernel keys. References are the fixtures' Paddle Inference outputs;
float max|d| <= 1e-4 * max|ref|, integers exact.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.mobile import MobileConfig
from pdlite.api.predictor import create_paddle_predictor
from tests.conftest import assert_close_rel

FIX = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = [FIX / "conformance" / "cf_while_array", FIX / "conformance" / "cf_cond_in_loop",
          FIX / "pir_conformance" / "cf_cond_branches", FIX / "pir_nets" / "control_flow" / "pir"]


def _case(d: Path) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    z = np.load(d / "case.npz")
    return {k[3:]: z[k] for k in z.files if k.startswith("in:")}, [z[k] for k in z.files if k.startswith("out:")]


def _check(outs: list[np.ndarray], refs: list[np.ndarray]) -> None:
    assert len(outs) == len(refs)
    for i, (g, r) in enumerate(zip(outs, refs)):
        g = np.asarray(g)
        assert g.dtype == r.dtype and g.shape == r.shape, f"out {i}: {g.dtype}{list(g.shape)} vs {r.dtype}{list(r.shape)}"
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
        else:
            assert_close_rel(g, r, 1e-4, f"out {i}")


@pytest.mark.parametrize("model", MODELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_control_flow_through_nb_and_clones(model: Path, tmp_path: Path) -> None:
    ins, refs = _case(model)
    cfg = CxxConfig()
    cfg.set_model_dir(model)
    pred = create_paddle_predictor(cfg)
    pred.save_optimized_model(str(tmp_path / "m"))
    mc = MobileConfig()
    mc.set_model_from_file(str(tmp_path / "m.nb"))
    _check(create_paddle_predictor(mc).predict({k: v.copy() for k, v in ins.items()}), refs)
    results: list[list[np.ndarray]] = []
    clones = [pred.clone() for _ in range(3)]
    threads = [threading.Thread(target=lambda c=c: results.append(c.predict({k: v.copy() for k, v in ins.items()})))
               for c in clones]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    for outs in results:
        _check(outs, refs)
