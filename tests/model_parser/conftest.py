"""Fixtures of the model_parser tests: where the real models are."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, LEGACY_MODELS, SHARED, find_model, skip_reason

# model folder -> (program file, params file or None for non-combined), relative to the folder
LAYOUTS = {
    "mobilenet_v1": ("inference.pdmodel", "inference.pdiparams"),
    "mobilenet_v2": ("inference.pdmodel", "inference.pdiparams"),
    "mobilenet_v3_small": ("inference.pdmodel", "inference.pdiparams"),
    "mobilenet_v3_small_noncombined": ("__model__", None),
    "ppocr_cls_v2": ("inference.pdmodel", "inference.pdiparams"),
    "ppocr_det_v4": ("inference.pdmodel", "inference.pdiparams"),
    "resnet18": ("__model__", "__params__"),
    "transformer_encoder": ("inference.pdmodel", "inference.pdiparams"),
}
assert set(LAYOUTS) == set(LEGACY_MODELS)


@pytest.fixture(scope="session")
def shared_models_dir() -> Path:
    """The test-model root: tests/fixtures/models if present, else ../shared/models; skips if neither."""
    for root in (FIXTURES, SHARED):
        if root.is_dir():
            return root
    pytest.skip(f"no test models: neither {FIXTURES} nor {SHARED} exists")


def legacy_model(name: str) -> Path:
    """Folder of one legacy (ProgramDesc) test model, fixtures first; skips with the reason if absent."""
    d = find_model(name)
    if d is None:
        pytest.skip(skip_reason(name))
    return d


def available_models() -> list[str]:
    return [n for n in LEGACY_MODELS if find_model(n) is not None]
