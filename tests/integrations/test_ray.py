"""Batch inference on a local Ray instance (2 CPUs): map_batches(PdliteModel) and `pdlite batch --ray`
give exactly the outputs of one process (1 thread); pdlite errors come back naming the file."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="needs pip install pdlite[ray] (Ray)")
pytest.importorskip("ray.data", reason="needs pip install pdlite[ray] (Ray Data)")

from pdlite import errors  # noqa: E402
from pdlite.api import CxxConfig, create_paddle_predictor  # noqa: E402
from pdlite.errors import InputError  # noqa: E402
from pdlite.integrations.ray import PdliteModel, predict_dataset  # noqa: E402
from pdlite.tools.batch import run_batch  # noqa: E402
from tests.conftest import REPO, model_dir  # noqa: E402

OUT = "softmax_0.tmp_0"


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    if started:
        ray.shutdown()


def _single_process(model: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    cfg = CxxConfig()
    cfg.set_model_dir(model)
    cfg.set_threads(1)
    pred = create_paddle_predictor(cfg)
    return [pred.predict([x[None]])[0][0] for x in xs]


def test_map_batches_variable_shapes_equal_single_process(local_ray):
    cls = str(model_dir("ppocr_cls_v2"))
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((3, 48, 160 if i % 3 else 192)).astype(np.float32) for i in range(10)]
    ds = local_ray.data.from_items([{"id": i, "x": x} for i, x in enumerate(xs)])
    out = ds.map_batches(PdliteModel, fn_constructor_kwargs={"model": cls},
                         compute=local_ray.data.ActorPoolStrategy(size=2), batch_size=4)
    rows = sorted(out.take_all(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(10))
    for r, ref in zip(rows, _single_process(cls, xs)):
        assert r[OUT].dtype == np.float32 and np.array_equal(r[OUT], ref), r["id"]
    # the helper (ActorPoolStrategy) gives the same, with renamed columns
    rows2 = predict_dataset(ds, cls, concurrency=2, batch_size=3, outputs={OUT: "probs"}).take_all()
    assert {r["id"]: r["probs"].tobytes() for r in rows2} == {r["id"]: r[OUT].tobytes() for r in rows}


def test_pdlite_batch_on_ray_equals_process_pool(local_ray, tmp_path):
    cls = str(model_dir("ppocr_cls_v2"))
    rng = np.random.default_rng(8)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(6):
        np.save(inputs / f"item{i}.npy", rng.standard_normal((1, 3, 48, 96 + 32 * (i % 3))).astype(np.float32))
    np.savez(inputs / "item6.npz", x=rng.standard_normal((1, 3, 48, 64)).astype(np.float32))  # .npz beside .npy
    n = run_batch(cls, str(inputs), str(tmp_path / "ray"), ray_address="auto", workers=2, batch_size=2)
    assert n == 7
    run_batch(cls, str(inputs), str(tmp_path / "local"), workers=1)
    for i in range(7):
        got, ref = np.load(tmp_path / "ray" / f"item{i}.npz"), np.load(tmp_path / "local" / f"item{i}.npz")
        assert got.files == ref.files == [OUT]
        assert np.array_equal(got[OUT], ref[OUT])
    np.save(inputs / "item3.npy", np.zeros((1, 4, 48, 96), np.float32))  # 4 channels: the model takes 3
    with pytest.raises(InputError, match=r"item3\.npy"):
        run_batch(cls, str(inputs), str(tmp_path / "bad"), ray_address="auto", workers=2, batch_size=2)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_docs_example_runs_without_deprecation_and_a_bad_row_is_a_short_pdlite_error(local_ray):
    """docs/batch.md's Ray example as written (smaller, one row with 4 channels instead of 3): Ray 2.51+ logs no
    `concurrency` deprecation (the docs used `concurrency=`), and the bad row raises, inside the example's
    `pdlite_errors()`, pdlite's own InputError with its one-line message (it arrived in a 1.6 KB
    RayTaskError(UserCodeException))."""
    text = (REPO / "docs" / "batch.md").read_text()
    code = re.search(r"## Ray Data.*?```python\n(.*?)```", text, re.S).group(1)
    for old, new in (("ray.init()", "pass"), ("range(1000)", "range(5)"), ("size=2", "size=1"),
                     ("np.random.rand(3, 48, 192)", "np.random.rand(4 if i == 2 else 3, 48, 192)"),
                     ('"models/ppocr_cls_v2"', repr(str(model_dir("ppocr_cls_v2"))))):
        assert old in code, old
        code = code.replace(old, new)
    records = _Records()
    logger = logging.getLogger("ray.data")
    logger.addHandler(records)
    try:
        with pytest.raises(InputError) as info:
            exec(compile(code, "docs/batch.md", "exec"), {})
    finally:
        logger.removeHandler(records)
    assert not [m for m in records.messages if "deprecated" in m], records.messages
    assert type(info.value) is errors.InputError  # pdlite's class, not Ray's RayTaskError(InputError)
    msg = str(info.value)
    assert re.fullmatch(r"row \d+: input 'x': dim 1 must be 3 \(model shape \[-1, 3, -1, -1\]\), got shape "
                        r"\[1, 4, 48, 192\]", msg), msg
