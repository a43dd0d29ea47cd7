"""The runtime's steady path (pdlite/runtime/steady.py): a run on feed shapes seen before runs the recorded steps,
with results bit-identical to the normal path (option steady_path off), re-checked where shapes depend on values,
on the normal path where feed shapes change, and with errors that still name the op."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pdlite.kernels.host  # noqa: F401  (registers the host kernels)
import pdlite.operators  # noqa: F401  (registers the ops)
from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.errors import KernelError
from pdlite.kernels.registry import kernels_for
from pdlite.runtime.build import build_runtime
from pdlite.runtime.runtime_program import RuntimeProgram
from tests.conftest import LEGACY_MODELS, PIR_MODELS, find_model, skip_reason

CONFORMANCE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"


def _predictor(d: Path, steady: bool, **options: object):
    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    cfg.set_option("steady_path", steady)
    for k, v in options.items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


def _feeds(d: Path) -> dict[str, np.ndarray]:
    z = np.load(d / "case.npz")
    return {k[3:]: z[k] for k in z.files if k.startswith("in:")}


def _plan(pred):
    runner = pred.runtime_program._steady
    return None if runner is None else runner.plans


def _run(pred, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.array(o, copy=True) for o in pred.predict({k: v.copy() for k, v in feeds.items()})]


def _assert_same(a: list[np.ndarray], b: list[np.ndarray], what: str) -> None:
    assert len(a) == len(b), what
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: output {i} {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        assert np.array_equal(x, y, equal_nan=True), f"{what}: output {i} differs (max {np.max(np.abs(x - y))})"


@pytest.mark.parametrize("name", LEGACY_MODELS + PIR_MODELS)
def test_models_steady_equals_normal(name: str) -> None:
    """Every shared model: the third run (the first on the recorded steps) and a fourth give the normal path's bits,
    and most instructions run as bound or generic steps."""
    d = find_model(name)
    if d is None:
        pytest.skip(skip_reason(name))
    feeds = _feeds(d)
    ref = _run(_predictor(d, False), feeds)
    pred = _predictor(d, True)
    for i in range(4):
        _assert_same(_run(pred, feeds), ref, f"{name} run {i + 1}")
    plans = _plan(pred)
    assert plans is not None and len(plans) == 1, "the steady path recorded no plan"
    plan = next(iter(plans.values()))
    counts = plan.counts()
    n = len(pred.runtime_program.instructions)
    assert len(plan.steps) == n and counts["checked"] <= 2, counts
    assert counts["bound"] + counts["generic"] + counts["constant"] >= n - 2, counts


CONFORMANCE_MODELS = sorted(p.name for p in CONFORMANCE.iterdir() if (p / "case.npz").is_file()) \
    if CONFORMANCE.is_dir() else []


@pytest.mark.skipif(not CONFORMANCE_MODELS, reason=f"no conformance models in {CONFORMANCE}")
def test_conformance_programs_steady_equals_normal() -> None:
    """The op suite's programs (tests/fixtures/conformance, control flow and tensor arrays included): the steady
    runs give the normal path's bits."""
    bad = []
    for name in CONFORMANCE_MODELS:
        d = CONFORMANCE / name
        feeds = _feeds(d)
        try:
            ref = _run(_predictor(d, False), feeds)
        except Exception:  # noqa: BLE001 - a model the normal path cannot run is not this test's concern
            continue
        pred = _predictor(d, True)
        try:
            for i in range(3):
                _assert_same(_run(pred, feeds), ref, f"{name} run {i + 1}")
        except AssertionError as e:
            bad.append(str(e))
    assert not bad, "\n".join(bad)


def test_feed_shapes_change_between_runs() -> None:
    """Alternating feed shapes: each set is recorded on its second run and later runs pick their plan; every run
    equals a normal-path predictor's on the same shapes."""
    name = "ppocr_det_v4"
    d = find_model(name)
    if d is None:
        pytest.skip(skip_reason(name))
    x = _feeds(d)["x"]
    normal, steady = _predictor(d, False), _predictor(d, True)
    shapes = [(320, 320), (256, 320), (320, 320), (256, 320), (320, 256), (320, 320), (256, 320), (320, 256)] * 2
    for i, (h, w) in enumerate(shapes):
        feeds = {"x": np.ascontiguousarray(x[:, :, :h, :w])}
        _assert_same(_run(steady, feeds), _run(normal, feeds), f"run {i} {h}x{w}")
    assert len(_plan(steady)) == 3


def test_recording_stops_when_plans_do_not_pay() -> None:
    """More varied feed shapes in turn than the plans kept (steady.PLANS): past RECORD_GRACE records with no steady
    run yet the program stops recording (each record costs about a run; recording every recurring key would evict
    plans before their use), the plans it made are used, and recording resumes once they have paid. Every run
    equals NumPy's."""
    from pdlite.runtime import steady

    rt = _program([OpDesc("relu", {"X": ["x"]}, {"Out": ["y"]}, {}),
                   OpDesc("scale", {"X": ["y"]}, {"Out": ["out"]}, {"scale": 2.0})])
    widths = list(range(1, steady.PLANS + 9))
    for w in widths * 3:
        x = np.linspace(-1, 1, w, dtype=np.float32)
        scope = {"x": x}
        rt.run(scope)
        np.testing.assert_array_equal(scope["out"], np.maximum(x, 0) * np.float32(2))
    runner = rt._steady
    assert runner.records == steady.RECORD_GRACE and runner.steady_runs == steady.RECORD_GRACE
    x = np.ones(3, np.float32)
    for _ in range(2 * steady.RECORD_PAYBACK * steady.RECORD_GRACE + 2):
        rt.run({"x": x})  # a key with a plan: steady runs until recording pays again
    assert runner.steady_runs > steady.RECORD_PAYBACK * steady.RECORD_GRACE
    before = runner.records
    for _ in range(2):
        rt.run({"x": np.ones(500, np.float32)})
    assert runner.records == before + 1


def test_more_recurring_shapes_than_an_instruction_keeps() -> None:
    """Twenty feed shapes in turn (OCR's recogniser meets ten line widths on the example pages): every one gets and
    keeps its plan (steady.PLANS, more than the instructions' RECENT_SHAPES), the last ones once the first have paid
    for their recording (RECORD_GRACE, RECORD_PAYBACK)."""
    rt = _program([OpDesc("relu", {"X": ["x"]}, {"Out": ["out"]}, {})])
    for _ in range(5):
        for w in range(1, 21):
            rt.run({"x": np.ones(w, np.float32)})
    assert len(rt._steady.plans) == 20 and rt._steady.records == 20


def test_clones_on_threads() -> None:
    """Clones share the program and its plans: four threads alternating two feed shapes (records and steady runs of
    one key racing with the other's) give the normal path's bits on every run."""
    import threading

    name = "ppocr_cls_v2"
    d = find_model(name)
    if d is None:
        pytest.skip(skip_reason(name))
    x = _feeds(d)["x"]
    cases = [{"x": x}, {"x": np.ascontiguousarray(x[..., :160])}]
    normal = _predictor(d, False)
    refs = [_run(normal, f) for f in cases]
    base = _predictor(d, True)
    errors: list[str] = []

    def work(k: int) -> None:
        pred = base.clone()
        for i in range(12):
            j = (i + k) % 2
            got = _run(pred, cases[j])
            if not all(np.array_equal(a, b) for a, b in zip(got, refs[j])):
                errors.append(f"thread {k} run {i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(base.runtime_program._steady.plans) == 2


def _host_kernel(op_type: str):
    return next(kd for kd in kernels_for(op_type) if kd.key.target == TargetType.Host)


def _program(ops: list[OpDesc]) -> RuntimeProgram:
    return build_runtime([(op, _host_kernel(op.type), None) for op in ops])


def test_value_dependent_reshape_is_rechecked() -> None:
    """reshape2 whose target shape is a feed's value: the same feed shapes with another value diverge at the
    reshape (re-checked each run), and the pool after it (a bound native call per input shape) runs on the normal
    path with the new shape."""
    rt = _program([
        OpDesc("reshape2", {"X": ["x"], "Shape": ["s"]}, {"Out": ["y"]}, {"shape": []}),
        OpDesc("pool2d", {"X": ["y"]}, {"Out": ["z"]}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2],
                                                        "paddings": [0, 0]}),
        OpDesc("relu", {"X": ["z"]}, {"Out": ["out"]}, {}),
    ])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 512)).astype(np.float32)

    def expect(shape: list[int]) -> np.ndarray:
        y = x.reshape(shape)
        n, c, h, w = y.shape
        return np.maximum(y.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5)), 0)

    for i, shape in enumerate([[1, 2, 16, 16]] * 3 + [[1, 8, 8, 8], [1, 2, 16, 16], [1, 32, 4, 4]] * 2):
        scope = {"x": x, "s": np.array(shape, np.int32)}
        rt.run(scope)
        np.testing.assert_array_equal(scope["out"], expect(shape), err_msg=f"run {i} shape {shape}")
    plan = next(iter(rt._steady.plans.values()))
    assert plan.kinds[0] == "checked" and plan.kinds[1] in ("bound", "generic")


def test_shape_computed_reshape_binds() -> None:
    """shape -> slice -> reshape2's ShapeTensor (PP-OCR cls's head): the shape and the slice become constant steps of
    the feed key (fresh copies each run: a caller that writes into one does not change the next run), the reshape
    binds, and a new feed shape records its own plan; every run equals NumPy's."""
    rt = _program([
        OpDesc("shape", {"Input": ["x"]}, {"Out": ["s"]}, {}),
        OpDesc("slice", {"Input": ["s"]}, {"Out": ["n"]}, {"axes": [0], "starts": [0], "ends": [1]}),
        OpDesc("reshape2", {"X": ["x"], "ShapeTensor": ["n", "k"]}, {"Out": ["y"]}, {"shape": []}),
        OpDesc("softmax", {"X": ["y"]}, {"Out": ["out"]}, {"axis": -1}),
    ])
    k = np.array([-1], np.int32)  # a parameter
    rt.prepare({"k": k})
    rng = np.random.default_rng(1)
    for i, shape in enumerate([(2, 3, 4)] * 4 + [(3, 2, 4)] * 3 + [(2, 3, 4)] * 2):
        x = rng.standard_normal(shape).astype(np.float32)
        scope = {"x": x, "k": k}
        rt.run(scope)
        y = x.reshape(shape[0], -1)
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(scope["out"], e / e.sum(axis=-1, keepdims=True), rtol=1e-6, err_msg=f"run {i}")
        assert scope["out"].shape == y.shape
        scope["s"][0] = 99  # the caller's copy
    assert len(rt._steady.plans) == 2
    for plan in rt._steady.plans.values():
        assert plan.kinds[:3] == ["constant", "constant", "bound"], plan.kinds


def test_reshape_of_many_fixed_parts_binds() -> None:
    """reshape2 whose ShapeTensor has five parts (PP-OCRv4 rec's attention: the instruction keeps no inference cache
    past four values read), four parameters and one computed from a shape op: bound, equal to NumPy's."""
    rt = _program([
        OpDesc("shape", {"Input": ["x"]}, {"Out": ["s"]}, {}),
        OpDesc("slice", {"Input": ["s"]}, {"Out": ["n"]}, {"axes": [0], "starts": [1], "ends": [2]}),
        OpDesc("reshape2", {"X": ["x"], "ShapeTensor": ["a", "n", "b", "c", "d"]}, {"Out": ["y"]}, {"shape": []}),
        OpDesc("transpose2", {"X": ["y"]}, {"Out": ["out"]}, {"axis": [0, 2, 1, 3, 4]}),
    ])
    params = {k: np.array([v], np.int32) for k, v in (("a", 0), ("b", 2), ("c", 3), ("d", -1))}
    rt.prepare(params)
    x = np.arange(2 * 5 * 24, dtype=np.float32).reshape(2, 5, 24)
    for _ in range(3):
        scope = {"x": x, **params}
        rt.run(scope)
        np.testing.assert_array_equal(scope["out"], x.reshape(2, 5, 2, 3, 4).transpose(0, 2, 1, 3, 4))
    assert next(iter(rt._steady.plans.values())).kinds == ["constant", "constant", "bound", "bound"]


def test_errors_on_the_steady_path_name_the_op() -> None:
    """A kernel error on the steady path (integer division by zero: same shapes, other values) is the normal path's
    message, naming the op."""
    rt = _program([OpDesc("elementwise_div", {"X": ["x"], "Y": ["y"]}, {"Out": ["q"]}, {"axis": -1}),
                   OpDesc("scale", {"X": ["q"]}, {"Out": ["out"]}, {"scale": 2.0})])
    x = np.array([7, -7, 9], np.int32)
    for _ in range(3):
        scope = {"x": x, "y": np.array([2, 2, 3], np.int32)}
        rt.run(scope)
        np.testing.assert_array_equal(scope["out"], [6, -6, 6])
    assert rt._steady.plans
    with pytest.raises(KernelError, match=r"elementwise_div.*division by zero"):
        rt.run({"x": x, "y": np.array([2, 0, 3], np.int32)})
    with pytest.raises(KernelError, match=r"op relu\(out\): input X='x' has no value"):
        rt2 = _program([OpDesc("relu", {"X": ["x"]}, {"Out": ["out"]}, {})])
        for _ in range(3):
            rt2.run({"x": np.ones(3, np.float32)})
        rt2.run({})


def test_option_off_and_hooks() -> None:
    """steady_path off records nothing; a hook (the profiler) sees every instruction on every run, steady runs
    included, and the precision profiler's statistics of a steady run are the normal path's."""
    d = find_model("mobilenet_v3_small")
    assert d is not None
    feeds = _feeds(d)
    off = _predictor(d, False, precision_profile=True)
    for _ in range(3):
        _run(off, feeds)
    assert not off.runtime_program.steady and _plan(off) is None
    prof = _predictor(d, True, profile=True, precision_profile=True)
    for _ in range(4):
        _run(prof, feeds)
    n = len(prof.runtime_program.instructions)
    assert sum(len(r.times) for r in prof.profiler.records.values()) == 4 * n
    assert prof.runtime_program._steady.steady_runs == 2
    last_steady, last_off = prof.precision_profiler.stats[-n:], off.precision_profiler.stats[-n:]
    assert [(s.op, s.name, s.shape, s.mean, s.std, s.min, s.max) for s in last_steady] == \
        [(s.op, s.name, s.shape, s.mean, s.std, s.min, s.max) for s in last_off]


def test_a_changed_parameter_takes_the_normal_path() -> None:
    """A parameter replaced by another object between runs (bound calls hold the old one; a generic step would not
    see a new shape): that run takes the normal path, with the new weights, and the steady path resumes when the
    prepared parameters are back."""
    d = find_model("mobilenet_v3_small")
    assert d is not None
    feeds = _feeds(d)
    pred = _predictor(d, True)
    ref = _run(pred, feeds)
    for _ in range(2):
        _run(pred, feeds)
    runner = pred.runtime_program._steady
    name = next(n for n in runner.params if n.endswith(".w_0") or "weights" in n)
    old = pred._params[name]
    calls = []
    real = runner._record
    runner._record = lambda scope: calls.append(1) or real(scope)
    try:
        pred._params[name] = old * np.float32(0.5)
        got = _run(pred, feeds)
        normal = _predictor(d, False)
        normal._params[name] = pred._params[name]
        _assert_same(got, _run(normal, feeds), "after a parameter change")
        assert not all(np.array_equal(a, b) for a, b in zip(got, ref)), "the new weights were not used"
        assert not runner.same_params({**pred._params})
    finally:
        pred._params[name] = old
    _assert_same(_run(pred, feeds), ref, "the prepared parameters back")
    assert not calls and len(runner.plans) == 1
