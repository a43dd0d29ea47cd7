"""Every quantization op form against Paddle Inference (tests/fixtures/quant/ops_*, made by
tools/make_quant_fixtures.py): QDQ per tensor / per channel, int8 weights, 4/8/16 bits, both round types,
exact .5 ties, zero scales, only_observer, and the fake_* family.

Outputs holding quantized integers (quantize_linear, fake_quantize_*) must be equal; dequantized
outputs within 1e-6 * max|ref| (Paddle's float32 operation order is kept, so they are equal in practice).
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import PdliteError
from tests.quant._util import ESSENTIAL, ROOT, case, max_rel_err, run

OPS = sorted(p.name for p in ROOT.glob("ops_*") if (p / "case.npz").is_file())


@pytest.mark.parametrize("passes", [None, ESSENTIAL], ids=["default", "essential"])
@pytest.mark.parametrize("name", OPS)
def test_quant_ops_match_paddle(name: str, passes: list[str] | None) -> None:
    ins, ref, _ = case(ROOT / name)
    got = run(ROOT / name, ins, passes)
    assert sorted(got) == sorted(ref)
    for k, r in ref.items():
        g = got[k]
        assert g.dtype == r.dtype and g.shape == r.shape, f"{k}: {g.dtype}{g.shape} != {r.dtype}{r.shape}"
        if np.array_equal(r, np.round(r)) and "dequant" not in k and np.abs(r).max() > 1:
            np.testing.assert_array_equal(g, r, err_msg=f"{name}: {k} (quantized values)")
        else:
            assert max_rel_err(g, r) <= 1e-6, f"{name}: {k}: rel err {max_rel_err(g, r):.3g}"


def test_fixtures_present() -> None:
    assert {"ops_qdq", "ops_qdq_ties", "ops_fake", "ops_dequant_lite"} <= set(OPS)


def test_bad_per_channel_scale_is_a_clear_error(tmp_path) -> None:
    import pdlite.kernels.host  # noqa: F401
    from pdlite.core.program import OpDesc
    from pdlite.operators.registry import OPS as OPDEFS
    from pdlite.operators.registry import ShapeContext

    op = OPDEFS.get("dequantize_linear").attach(
        OpDesc("dequantize_linear", {"X": ["w"], "Scale": ["s"]}, {"Y": ["y"]}, {"quant_axis": 1}))
    ctx = ShapeContext(op, {"X": [np.zeros((4, 3), np.int8)], "Scale": [np.ones(4, np.float32)]})
    with pytest.raises(PdliteError, match="Scale has 4 values but X \\[4, 3\\] has 3 channels on quant_axis 1"):
        OPDEFS.get("dequantize_linear").infer_shape(ctx)
    op = OPDEFS.get("quantize_linear").attach(
        OpDesc("quantize_linear", {"X": ["w"], "Scale": ["s"]}, {"Y": ["y"]}, {"quant_axis": 2}))
    ctx = ShapeContext(op, {"X": [np.zeros((4, 3, 2), np.float32)], "Scale": [np.ones(2, np.float32)]})
    with pytest.raises(PdliteError, match="quant_axis must be -1"):
        OPDEFS.get("quantize_linear").infer_shape(ctx)
