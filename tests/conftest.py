"""Shared test helpers: locating the test models and comparing against Paddle's reference outputs."""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "models"
SHARED = REPO.parent / "shared" / "models"

# every non-PIR model of the shared zoo, and the PIR ones
LEGACY_MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined",
                 "ppocr_cls_v2", "ppocr_det_v4", "resnet18", "transformer_encoder"]
PIR_MODELS = ["mobilenet_v3_small_pir"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--host-numpy", action="store_true",
                     help="run the host kernels on their pure-NumPy path (no native extension)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--host-numpy", default=False):
        from pdlite.kernels.host import native

        native.set_default_enabled(False)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """pdlite's per-user cache (the `auto` device's choices, compiled device models) in a temp folder."""
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def find_model(name: str) -> Path | None:
    for root in (FIXTURES, SHARED):
        if (root / name).is_dir():
            return root / name
    return None


def skip_reason(name: str) -> str:
    """Why a test model is missing. A fresh clone has no ../shared beside it: that skip is expected (wording CI's
    forbidden-skip check lets pass). Where ../shared/models exists but lacks the model, the wording is one CI's
    check flags (CI has ../shared, so such a skip there is a real problem)."""
    if not SHARED.is_dir():
        return f"../shared/models/{name} absent (the repo's shared models folder, beside a fresh clone there is none)"
    return f"model {name!r} is neither in {FIXTURES} nor in {SHARED}"


def model_dir(name: str) -> Path:
    """The folder of a test model (repo fixtures first, then ../shared/models); skips when absent."""
    d = find_model(name)
    if d is None:
        pytest.skip(skip_reason(name))
    return d


def load_case(name: str, case: str = "case.npz") -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(inputs, outputs) of a model's reference case; the non-combined re-save uses its twin's case."""
    d = model_dir(name)
    path = d / case
    if not path.exists():
        pytest.skip(f"{path} does not exist")
    z = np.load(path)
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    outs = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
    return ins, outs


def assert_close_rel(got: np.ndarray, ref: np.ndarray, rel: float, what: str = "") -> None:
    """max|got - ref| <= rel * max|ref| (the project's model-level tolerance)."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    assert err <= rel * max(scale, 1e-30), f"{what}: max|got-ref| = {err:.3g} > {rel} * max|ref| ({scale:.3g})"


def on_threads(n: int, work: Callable[[int], None]) -> None:
    """Run work(0..n-1) on n threads at once; re-raise the first failure (an assert included) here."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
