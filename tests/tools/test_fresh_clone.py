"""The README's test command on a fresh clone, which has no ../shared beside it (issue 38: one test opened
../shared/models/transformer_encoder/case.npz directly and failed there). Tests reach the test models only through
tests/conftest.py's helpers, which use the repo's copies (tests/fixtures/models) first and skip, saying
../shared/models is absent, for the models only the shared zoo has. .ci/fresh_clone_check.sh runs those tests on a
real clone."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import tests.conftest as conftest
from tests.conftest import REPO

# the CI's forbidden skip reasons (.ci/run): CI has ../shared, so its tests must not skip with these
FORBIDDEN = re.compile(r"not built|is neither in|does not exist|could not import|No module named|not installed"
                       r"|no .* device", re.I)


def test_no_test_opens_the_shared_zoo_directly():
    """Every test file reaches ../shared only through conftest's model_dir / load_case / find_model."""
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path == REPO / "tests" / "conftest.py" or path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text()
        for pattern in (r"\bSHARED\s*/", r"[\"']\.\./shared", r"parent\s*/\s*[\"']shared[\"']"):
            for m in re.finditer(pattern, text):
                line = text[:m.start()].count("\n") + 1
                offenders.append(f"{path.relative_to(REPO)}:{line}")
    assert not offenders, f"tests that open ../shared directly (use tests.conftest.model_dir): {offenders}"


def test_shared_only_models_skip_with_a_reason_ci_allows(monkeypatch, tmp_path):
    """Without ../shared/models (a fresh clone), a model the repo does not carry skips as 'absent': a wording CI's
    forbidden-skip check lets pass (CI has ../shared and runs them). With ../shared/models present but the model
    missing from it, the reason is one CI flags."""
    monkeypatch.setattr(conftest, "SHARED", tmp_path / "no_shared" / "models")
    with pytest.raises(pytest.skip.Exception) as info:
        conftest.model_dir("resnet18")
    reason = str(info.value)
    assert "../shared/models/resnet18 absent" in reason and not FORBIDDEN.search(reason), reason
    assert conftest.model_dir("transformer_encoder") == conftest.FIXTURES / "transformer_encoder"  # in the repo
    (tmp_path / "shared" / "models").mkdir(parents=True)
    monkeypatch.setattr(conftest, "SHARED", tmp_path / "shared" / "models")
    with pytest.raises(pytest.skip.Exception) as info:
        conftest.model_dir("resnet18")
    assert FORBIDDEN.search(str(info.value)), str(info.value)


def test_fixture_models_hold_their_reference_cases():
    """The models the repo carries (the fresh clone's) each have their case.npz."""
    names = [d.name for d in conftest.FIXTURES.iterdir() if d.is_dir()]
    assert {"mobilenet_v3_small", "ppocr_cls_v2", "ppocr_det_v4", "transformer_encoder"} <= set(names)
    for n in names:
        assert (conftest.FIXTURES / n / "case.npz").is_file(), n
