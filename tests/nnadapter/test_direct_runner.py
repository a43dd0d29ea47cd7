"""The direct runner of a whole-program subgraph (feed -> subgraph -> fetch): the same outputs as the general run
path, new signatures served by the model for all shapes when it fits them, nothing done for one that it does not
fit (or falls back to the host), exclusive with the general path under threads, and only offered for programs of
that form. Outputs are compared exactly (the same compiled
model runs in both paths).
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.nnadapter.subgraph_kernel import direct_program
from tests.conftest import load_case, on_threads
from tests.nnadapter._models import DEVICES, need, predictor, subgraph_kernels

MODEL = "ppocr_cls_v2"


def _one_model(device: str, monkeypatch) -> None:
    """No static model for a hot signature (OpenVINO's promotion, test_shape_streams.py): one compiled model runs
    in both paths, so their outputs are compared exactly."""
    from pdlite.nnadapter.registry import get_driver

    monkeypatch.setattr(get_driver(device), "promote_hot_shapes", False)


def _direct(pred):
    return direct_program(pred.runtime_program, pred.get_input_names(), pred.get_output_names())


@pytest.mark.parametrize("device", list(DEVICES))
def test_direct_outputs_equal_the_general_path(device: str, monkeypatch) -> None:
    need(device)
    _one_model(device, monkeypatch)
    pred = predictor(MODEL, device)
    run = _direct(pred)
    assert run is not None
    ins, _ = load_case(MODEL)
    assert run(ins) is None, "a signature that was never built is left to the general path"
    general = [np.array(o, copy=True) for o in pred.predict(ins)]
    (k,) = subgraph_kernels(pred)
    first = run(ins)
    assert first is not None and len(first) == len(general)
    for g, d in zip(general, first):
        assert g.dtype == d.dtype and np.array_equal(g, d)
    kept = [np.array(o, copy=True) for o in first]
    x2 = {n: (v * 0.5 + 0.1).astype(v.dtype) for n, v in ins.items()}
    second = run(x2)
    for a, b in zip(first, kept):  # a later direct run does not write into what an earlier one returned
        assert np.array_equal(a, b)
    for g, d in zip(pred.predict(x2), second):
        assert np.array_equal(g, d)
    assert k.builds == 1
    wider = {n: np.concatenate([v, v], axis=0) for n, v in ins.items()}
    third = run(wider)  # batch 2 is new, but the model for all shapes fits it and the feed passes the checks
    assert third is not None and k.builds == 1
    for g, d in zip(pred.predict(wider), third):
        assert np.array_equal(g, d)
    four = {n: np.concatenate([v, v[:, :1]], axis=1) for n, v in ins.items()}  # 4 channels: the model fixes 3
    assert run(four) is None, "a signature the model does not fit is left to the general path"


def test_fallback_signature_is_left_to_the_general_path(monkeypatch) -> None:
    need("onnxruntime")
    from pdlite.nnadapter.registry import get_driver

    def broken(self, *a, **k):
        raise RuntimeError("device refused the model")

    monkeypatch.setattr(get_driver("onnxruntime"), "build", broken)
    pred = predictor(MODEL, "onnxruntime")
    ins, _ = load_case(MODEL)
    with pytest.warns(Warning, match="device refused"):
        pred.predict(ins)
    assert _direct(pred)(ins) is None


def test_only_whole_program_subgraphs(tmp_path) -> None:
    need("onnxruntime")
    cfg_file = tmp_path / "partition.txt"
    cfg_file.write_text("pool2d\n")
    split = predictor("mobilenet_v3_small", "onnxruntime", nnadapter_subgraph_partition_config_path=str(cfg_file))
    assert _direct(split) is None, "host ops between subgraphs: the general path"
    from pdlite import CxxConfig, create_paddle_predictor
    from tests.conftest import model_dir

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(MODEL)))
    assert _direct(create_paddle_predictor(cfg)) is None, "host kernels only"
    whole = predictor(MODEL, "onnxruntime")
    assert direct_program(whole.runtime_program, whole.get_input_names(), ["not_an_output"]) is None
    # a feed the subgraph does not read would skip the feed checks on the direct path: not offered
    assert direct_program(whole.runtime_program, whole.get_input_names() + ["unused"],
                          whole.get_output_names()) is None


@pytest.mark.parametrize("device", list(DEVICES))
def test_feeds_are_checked_after_direct_runs(device: str, monkeypatch) -> None:
    """Predictor.run takes the direct path without checking the feeds (it runs only signatures the checked path
    compiled): a wrong dtype or a wrong fixed dim after direct runs still gets the input's own error, and the
    next good feed runs direct again with the same outputs."""
    from pdlite.errors import InputError

    need(device)
    _one_model(device, monkeypatch)
    pred = predictor(MODEL, device)
    ins, _ = load_case(MODEL)
    (name,) = ins
    want = [np.array(o, copy=True) for o in pred.predict(ins)]
    pred.run()  # the direct path: this signature is compiled
    (k,) = subgraph_kernels(pred)
    with pytest.raises(InputError, match=f"input {name!r}: expected dtype float32"):
        pred.predict({name: ins[name].astype(np.float64)})
    bad = np.zeros(ins[name].shape[:1] + (ins[name].shape[1] + 1,) + ins[name].shape[2:], np.float32)
    with pytest.raises(InputError, match=f"input {name!r}: dim 1 must be {ins[name].shape[1]}"):
        pred.predict({name: bad})
    for g, w in zip(pred.predict(ins), want):
        assert np.array_equal(g, w)
    assert k.builds == 1


@pytest.mark.parametrize("device", list(DEVICES))
def test_direct_and_general_runs_on_threads(device: str) -> None:
    """Clones share the kernel: direct runs and general runs on threads each get their own input's outputs."""
    need(device)
    pred = predictor(MODEL, device)
    ins, _ = load_case(MODEL)
    rng = np.random.default_rng(0)
    xs = [{n: (v + 0.2 * rng.standard_normal(v.shape)).astype(v.dtype) for n, v in ins.items()} for _ in range(4)]
    want = [[np.array(o, copy=True) for o in pred.predict(x)] for x in xs]
    run = _direct(pred)
    clones = [pred.clone() for _ in range(4)]
    def work(i: int) -> None:
        for r in range(6):
            got = run(xs[i]) if (i + r) % 2 else clones[i].predict(xs[i])
            assert got is not None
            for g, w in zip(got, want[i]):
                assert np.array_equal(g, w), f"thread {i} round {r}"

    on_threads(4, work)


@pytest.mark.parametrize("device", list(DEVICES))
def test_one_subgraph_predictor_copy_semantics(device: str) -> None:
    """What the public API promises (tests/api/test_threads.py) holds for a program that is one device subgraph:
    outputs handed out are not overwritten by later runs, from_numpy copies, and an array given with share_data
    and changed in place between runs is read anew (the OpenVINO driver keeps such an array bound)."""
    need(device)
    pred = predictor(MODEL, device)
    ins, _ = load_case(MODEL)
    (name,) = ins
    a = ins[name]
    b = (a * -0.7 + 0.3).astype(a.dtype)
    want_a = [np.array(o, copy=True) for o in pred.predict({name: a})]
    want_b = [np.array(o, copy=True) for o in pred.predict({name: b})]
    assert not all(np.array_equal(x, y) for x, y in zip(want_a, want_b))
    x = a.copy()
    pred.get_input(0).from_numpy(x)
    x[...] = 0  # changed after from_numpy: the run still sees a
    pred.run()
    held = pred.get_output(0).raw()
    assert np.array_equal(held, want_a[0])
    predicted = pred.predict({name: a})[0]
    pred.get_input(0).from_numpy(b)
    pred.run()
    assert np.array_equal(held, want_a[0]) and np.array_equal(predicted, want_a[0])
    assert np.array_equal(pred.get_output(0).raw(), want_b[0])
    shared = a.copy()
    pred.get_input(0).share_data(shared)
    pred.run()
    assert np.array_equal(pred.get_output(0).raw(), want_a[0])
    shared[...] = b  # the same array, new values
    pred.run()
    assert np.array_equal(pred.get_output(0).raw(), want_b[0])
    assert not np.shares_memory(pred.get_output(0).raw(), shared)
