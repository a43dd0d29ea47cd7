"""The full pipeline on every legacy test model: outputs match case.npz and the unfused run.

Also: no batch_norm survives in the conv nets, the MobileNets and ResNet keep under 60% of
their ops, the graph lints after every pass (graph_debug), and the runtime really releases
intermediates (only params, feeds and fetches are left in the scope after a run).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import CxxPredictor
from tests.conftest import LEGACY_MODELS, PIR_MODELS, assert_close_rel, load_case, model_dir
from tests.optimizer.util import BASE

CONV_NETS = {"mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined",
             "mobilenet_v3_small_pir", "ppocr_cls_v2", "ppocr_det_v4", "resnet18"}
SMALL_NETS = {"mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined",
              "mobilenet_v3_small_pir", "resnet18"}


def _predictor(name: str, passes: list[str] | None) -> CxxPredictor:
    cfg = CxxConfig()
    cfg.set_model_dir(model_dir(name))
    cfg.set_graph_debug(True)
    if passes is not None:
        cfg.set_passes(passes)
    return CxxPredictor(cfg)


def _original_ops(p: CxxPredictor) -> Counter[str]:
    return Counter(op.type for op in p.program.main.ops if op.type not in ("feed", "fetch"))


@pytest.mark.parametrize("name", LEGACY_MODELS + PIR_MODELS)
def test_optimized_model_matches_reference_and_unfused(name: str) -> None:
    ins, outs = load_case(name)
    unfused = _predictor(name, BASE)
    ref_unfused = unfused.predict(ins)
    before = sum(_original_ops(unfused).values())
    full = _predictor(name, None)
    got = full.predict(ins)
    for n, g, u in zip(full.get_output_names(), got, ref_unfused):
        assert_close_rel(g, outs[n], 1e-4, f"{name}:{n} vs case.npz")
        assert_close_rel(g, u, 1e-4, f"{name}:{n} vs the unfused run")
    after = Counter(i.op.type for i in full.runtime_program.instructions)
    assert sum(after.values()) < before
    if name in CONV_NETS:
        assert after["batch_norm"] == 0, f"{name}: batch_norm left: {after}"
    if name in SMALL_NETS:
        assert sum(after.values()) < 0.6 * before, f"{name}: {sum(after.values())} of {before} ops left"


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "transformer_encoder"])
def test_runtime_releases_every_intermediate(name: str) -> None:
    ins, outs = load_case(name)
    p = _predictor(name, None)
    plan = p.analysis.ctx.meta["memory_plan"]
    assert plan["bytes_shared_buffers"] < plan["bytes_no_reuse"] / 3
    assert plan["peak_live_bytes"] <= plan["bytes_shared_buffers"]
    params = p.analysis.ctx.params
    scope: dict[str, Any] = {**params, **ins}
    p.runtime_program.prepare(params)
    p.runtime_program.run(scope)
    extra = set(scope) - set(params) - set(ins) - set(p.get_output_names())
    assert not extra, f"intermediates still in the scope: {sorted(extra)[:5]}"
    for n in p.get_output_names():
        assert_close_rel(scope[n], outs[n], 1e-4, n)
