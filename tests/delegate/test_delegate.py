"""The Delegate API: replacing runs of kernels, true graph inputs/outputs, and clean fallbacks."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pdlite.delegate import Delegate, DelegateModel, Kernel
from pdlite.lite import CxxConfig, create_paddle_predictor
from tests.conftest import assert_close_rel, load_case, model_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "delegate"))
from numpy_delegate import NumpyConvDelegate  # noqa: E402

REL = 1e-4


def _run(name: str, delegate):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    cfg.set_delegate(delegate)
    pred = create_paddle_predictor(cfg)
    ins, outs = load_case(name)
    return pred, pred.predict(ins), outs


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "resnet18"])
def test_example_delegate_replaces_runs_and_matches(name):
    d = NumpyConvDelegate()
    pred, got, outs = _run(name, d)
    assert d.replaced_runs >= 1
    labels = [i.label for i in pred.runtime_program.instructions]
    assert any(lab.startswith("delegate:") for lab in labels)
    for g, ref in zip(got, outs.values()):
        assert_close_rel(g, ref, REL, name)


class _Recorder(Kernel):
    def __init__(self, inputs, outputs, fn):
        super().__init__(inputs, outputs)
        self.fn = fn
        self.calls = 0
        self.resized = 0

    def execute(self):
        self.calls += 1
        self.outputs[0].from_numpy(self.fn(self.inputs[0].numpy()))

    def resize(self):
        self.resized += 1


class _FirstPoolDelegate(Delegate):
    """Replaces the (global average) pool2d with its own kernel, checking graph_inputs/graph_outputs."""

    def build(self, model: DelegateModel) -> None:
        for i, k in enumerate(model.kernels):
            if k.type == "pool2d":
                ins, outs = model.graph_inputs(i, i + 1), model.graph_outputs(i, i + 1)
                assert [t.name for t in ins] == [t.name for t in k.inputs]
                assert [t.name for t in outs] == [t.name for t in k.outputs]
                assert model.get_primitive(k)["type"] == "pool2d"
                self.kernel = _Recorder(ins, outs, lambda x: x.mean(axis=(2, 3), keepdims=True))
                after = model.replace(i, i + 1, self.kernel)
                assert after == i + 1
                return


def test_single_kernel_replacement_and_resize():
    d = _FirstPoolDelegate()
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("mobilenet_v2")))
    cfg.set_delegate(d)
    pred = create_paddle_predictor(cfg)
    ins1, outs1 = load_case("mobilenet_v2")
    ins4, outs4 = load_case("mobilenet_v2", "case_b4.npz")
    assert_close_rel(pred.predict(ins1)[0], next(iter(outs1.values())), REL)
    assert_close_rel(pred.predict(ins4)[0], next(iter(outs4.values())), REL)
    assert d.kernel.calls == 2 and d.kernel.resized == 1


def test_graph_outputs_of_a_run_are_only_what_is_used_later():
    seen = {}

    class Probe(Delegate):
        def build(self, model):
            n = len(model.kernels)
            seen["all_out"] = [t.name for t in model.graph_outputs(0, n)]
            seen["all_in"] = [t for t in model.graph_inputs(0, n) if not t.is_const]

    _run("mobilenet_v3_small", Probe())
    ins, outs = load_case("mobilenet_v3_small")
    assert seen["all_out"] == list(outs), "a run of the whole program outputs exactly the fetched tensors"
    assert [t.name for t in seen["all_in"]] == list(ins)


@pytest.mark.parametrize("where", ["init", "build", "prepare", "execute"])
def test_failing_delegate_falls_back_cleanly(where):
    class Bad(Kernel):
        def prepare(self):
            if where == "prepare":
                raise RuntimeError("boom in prepare")

        def execute(self):
            raise RuntimeError("boom in execute")

    class BadDelegate(Delegate):
        def init(self):
            if where == "init":
                raise RuntimeError("boom in init")

        def build(self, model):
            if where == "build":
                raise RuntimeError("boom in build")
            model.replace(0, 3, Bad(model.graph_inputs(0, 3), model.graph_outputs(0, 3)))

    with pytest.warns(UserWarning, match="boom"):
        pred, got, outs = _run("ppocr_cls_v2", BadDelegate())
        if where == "execute":
            got = pred.predict(load_case("ppocr_cls_v2")[0])
    for g, ref in zip(got, outs.values()):
        assert_close_rel(g, ref, REL)


def test_replace_refuses_bad_ranges():
    from pdlite.errors import PdliteError

    class Greedy(Delegate):
        def build(self, model):
            k = Kernel(model.graph_inputs(0, 2), model.graph_outputs(0, 2))
            model.replace(0, 2, k)
            with pytest.raises(PdliteError, match="already replaced"):
                model.replace(0, 2, k)
            with pytest.raises(PdliteError, match="invalid run"):
                model.replace(5, 5, k)
            raise RuntimeError("stop here")

    with pytest.warns(UserWarning, match="stop here"):
        _run("ppocr_cls_v2", Greedy())
