"""The PIR front end covers the op set: one op description, two front ends.

Every op type of pdlite's registry is produced by some PIR mapping, unless it is an op the legacy
format alone has (an older version whose PIR form maps onto its successor) or an op pdlite's own
passes make; both lists are explicit here. The mapping registry is a `Registry`, conversions declare
what they produce, and in-place variants resolve to their base op.
"""
from __future__ import annotations

import pytest

from pdlite.core.registry import Registry
from pdlite.model_parser.pir import PIR_OPS
from pdlite.model_parser.pir_convert import lookup, produced_by
from pdlite.operators.registry import OPS
from pdlite.registries import load_registries

# Legacy-only versions: Paddle 3 has no PIR op for them; PIR programs use the op on the right.
LEGACY_ONLY = {
    "bilinear_interp": "bilinear_interp_v2", "nearest_interp": "nearest_interp_v2", "matmul": "matmul_v2",
    "reshape": "reshape2", "transpose": "transpose2", "squeeze": "squeeze2", "unsqueeze": "unsqueeze2",
    "flatten": "flatten_contiguous_range", "flatten2": "flatten_contiguous_range", "expand": "expand_v2",
    "multiclass_nms": "multiclass_nms3", "multiclass_nms2": "multiclass_nms3",
    "generate_proposals": "generate_proposals_v2", "deformable_conv_v1": "deformable_conv",
    "fill_zeros_like": "fill_any_like", "lookup_table": "lookup_table_v2", "hardtanh": "brelu",
    "top_k": "top_k_v2", "lod_reset": "(LoD is not part of PIR)",
}
# Made by pdlite's passes and runtime, never read from a model file.
INTERNAL = {"calib", "io_copy", "layout", "subgraph", "fused_conv2d", "fusion_scale_activation",
            *(f"fusion_elementwise_{k}_activation" for k in ("add", "sub", "mul", "div", "max", "min"))}


@pytest.fixture(scope="module", autouse=True)
def _registries() -> None:
    load_registries(plugins=False)


def _produced() -> set[str]:
    out: set[str] = set()
    for fn in PIR_OPS.values():
        out |= set(produced_by(fn))
    return out


def test_every_legacy_op_has_a_pir_front_end() -> None:
    missing = sorted(set(OPS) - _produced() - set(LEGACY_ONLY) - INTERNAL)
    assert not missing, f"ops with no PIR mapping producing them (add one to pir_mapping*.py): {missing}"


def test_legacy_only_successors_are_mapped() -> None:
    produced = _produced()
    for old, new in LEGACY_ONLY.items():
        assert new in produced or new.startswith("("), f"{old}: its successor {new} has no PIR mapping"
    stale = sorted(n for n in set(LEGACY_ONLY) | INTERNAL if n in produced)
    assert not stale, f"listed as legacy-only / internal but a PIR mapping produces them: {stale}"


def test_mapping_registry_and_inplace_lookup() -> None:
    assert isinstance(PIR_OPS, Registry)
    assert lookup("pd_op.relu_") is lookup("pd_op.relu") is not None
    assert lookup("pd_op.share_data_") is not None and lookup("pd_op.no_such_op_") is None
    assert all(produced_by(fn) or name.startswith("builtin.") for name, fn in PIR_OPS.items()), \
        "every pd_op mapping declares the legacy ops it emits"
    with pytest.raises(Exception, match="already registered"):
        PIR_OPS.add("pd_op.relu", PIR_OPS["pd_op.relu"])
