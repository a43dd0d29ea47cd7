"""Every non-PIR model of the zoo on NNAdapter device `onnxruntime` matches its case.npz (1e-3 of max|ref|)."""
from __future__ import annotations

import pytest

from tests.nnadapter._models import LEGACY_MODELS, run_model_case


@pytest.mark.parametrize("model", LEGACY_MODELS)
def test_model_matches_reference(model: str) -> None:
    run_model_case(model, "onnxruntime")
