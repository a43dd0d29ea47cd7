"""The `auto` device: measured on the real input, only devices that agree with the host, cached per shape."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pdlite.api import auto
from pdlite.api.auto import choose_device
from pdlite.errors import ConfigError
from pdlite.lite import create_paddle_predictor
from pdlite.tools.cli import main
from pdlite.tools.common import config_for
from tests.conftest import load_case, model_dir

pytest.importorskip("onnxruntime")
CANDS = ["host", "onnxruntime"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "pdlite" / "auto" / "choices.json"


def _cfg():
    return config_for(str(model_dir("ppocr_cls_v2")))


def test_measures_every_candidate_and_keeps_the_fastest(cache):
    ins, _ = load_case("ppocr_cls_v2")
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=3)
    assert set(c.medians_ms) == set(CANDS) and not c.refused and not c.cached
    assert c.device == min(c.medians_ms, key=c.medians_ms.get)
    assert cache.exists()


def test_choice_is_cached_per_model_and_shape(cache):
    ins, _ = load_case("ppocr_cls_v2")
    first = choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=2)
    built = []

    def counting(cfg):
        built.append(cfg)
        return create_paddle_predictor(cfg)

    again = choose_device(_cfg(), ins, counting, candidates=CANDS, rounds=2)
    assert again.cached and again.device == first.device and built == [], "a cache hit builds no predictor"
    wider = {k: np.concatenate([v, v], axis=3) for k, v in ins.items()}  # another input shape: measured anew
    other = choose_device(_cfg(), wider, counting, candidates=CANDS, rounds=2)
    assert not other.cached and built
    # other context properties (a device's precision hint, a value it refuses): measured anew
    props = _cfg()
    props.set_nnadapter_context_properties("ONNXRUNTIME_SPINNING=bad")
    refused = choose_device(props, ins, create_paddle_predictor, candidates=CANDS, rounds=2)
    assert not refused.cached and "ONNXRUNTIME_SPINNING" in refused.refused["onnxruntime"]
    assert choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=2).cached
    props.set_nnadapter_context_properties("ONNXRUNTIME_SPINNING=run")
    fixed = choose_device(props, ins, create_paddle_predictor, candidates=CANDS, rounds=2)
    assert not fixed.cached and "onnxruntime" not in fixed.refused, fixed.refused


def test_a_device_whose_outputs_differ_from_the_host_is_refused(cache, monkeypatch):
    ins, _ = load_case("ppocr_cls_v2")
    monkeypatch.setattr(auto, "AGREE_REL", -1.0)  # nothing can agree: every device must be refused
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=1, use_cache=False)
    assert c.device == "host" and "differs from the host" in c.refused["onnxruntime"]


def test_a_device_that_cannot_be_built_is_refused_with_its_reason(cache):
    ins, _ = load_case("ppocr_cls_v2")
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=["host", "no_such_device"], rounds=1, use_cache=False)
    assert c.device == "host" and "no_such_device" in c.refused["no_such_device"]


def test_optimized_models_keep_their_device():
    from pdlite.api.mobile import MobileConfig

    with pytest.raises(ConfigError, match="CxxConfig"):
        choose_device(MobileConfig(), {}, create_paddle_predictor)


def test_bench_device_auto_prints_the_choice_and_runner_up(cache, capsys):
    d = model_dir("ppocr_cls_v2")
    assert main(["bench", str(d), "--input", f"x={d / 'case.npz'}", "--repeats", "2", "--warmup", "1",
                 "--device", "auto"]) == 0
    out = capsys.readouterr().out
    assert "auto chose " in out and ("runner-up" in out or "not used" in out), out


def test_reference_devices_are_not_candidates():
    from pdlite.nnadapter.registry import DRIVERS

    names = auto.installed_devices()
    assert all(DRIVERS[n].auto_candidate for n in names)
    if "demo_reference" in DRIVERS:  # the example plugin's ONNX reference evaluator
        assert "demo_reference" not in names


def test_a_far_slower_candidate_is_not_measured(cache, monkeypatch):
    ins, _ = load_case("ppocr_cls_v2")
    monkeypatch.setattr(auto, "SLOW_FACTOR", 0.0)  # every candidate but the fastest counts as far slower
    monkeypatch.setattr(auto, "SLOW_MARGIN_MS", 0.0)
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=1, use_cache=False)
    assert list(c.medians_ms) == [c.device] and len(c.refused) == 1
    assert "x the fastest" in next(iter(c.refused.values()))


def test_a_device_slow_in_its_first_runs_is_timed_once_it_settled(cache, monkeypatch):
    """A device's first runs after its first call can be far slower than its later ones (OpenVINO's first inferences
    on dynamic dims, the subgraph kernel's static model for a hot signature): here onnxruntime's first three runs
    after its first call take 0.1 s more each. Timed from its second run (as before), it was refused as far slower
    than the host; it is timed once its runs settled, so it is measured and chosen (it is scripted the faster)."""
    import time

    ins, _ = load_case("ppocr_cls_v2")
    monkeypatch.setattr(auto, "SLOW_FACTOR", 3.0)
    monkeypatch.setattr(auto, "SLOW_MARGIN_MS", 0.0)
    monkeypatch.setattr(auto, "paired_scores", lambda blocks: {d: 0.5 if d != "host" else 1.0 for d in blocks})
    slow_runs = []

    def build(cfg):
        pred = create_paddle_predictor(cfg)
        if cfg.nnadapter_device_names() == ["onnxruntime"]:
            run, left = pred.run, [4]  # its first call (predict), then three slow runs

            def slow_first_runs():
                if left[0] > 0:
                    left[0] -= 1
                    if left[0] < 3:
                        slow_runs.append(1)
                        time.sleep(0.1)
                run()

            pred.run = slow_first_runs
        return pred

    c = choose_device(_cfg(), ins, build, candidates=CANDS, rounds=1, use_cache=False)
    # (the host may be refused in its turn: on the NumPy kernels, --host-numpy, it is far slower than the device)
    assert len(slow_runs) == 3 and "onnxruntime" not in c.refused, c.refused
    assert c.device == "onnxruntime" and "onnxruntime" in c.medians_ms
    assert set(c.medians_ms) | set(c.refused) == set(CANDS)


def test_api_auto_on_a_fixed_input_measures_on_the_third_call_and_gives_the_reference(cache):
    """The first calls run on the host (the reference); three calls on one input shape get the fixed-shape
    measurement (choose_device), whose choice then runs."""
    from pdlite.lite import CxxConfig, create_paddle_predictor
    from tests.conftest import assert_close_rel

    ins, outs = load_case("ppocr_cls_v2")
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.set_nnadapter_device_names(["auto"])
    pred = create_paddle_predictor(cfg)
    assert pred.auto_choice is None
    got = pred.predict(ins)
    assert pred.auto_choice.device == "host" and pred._auto.fixed is None
    for _ in range(3):
        got = pred.predict(ins)
        assert_close_rel(got[0], next(iter(outs.values())), 1e-4)
    assert pred._auto.fixed is not None and pred.auto_choice.device in ["host"] + auto.installed_devices()
    assert cfg.nnadapter_device_names() == ["auto"], "the user's config is left as it was"
    with pytest.raises(ConfigError, match="alone"):
        cfg.set_nnadapter_device_names(["auto", "onnxruntime"])
        create_paddle_predictor(cfg)


def test_quantized_programs_get_the_int8_tolerance(cache):
    """An int8 device differs from the host's fp32 simulation by rounding: auto must not refuse it for that."""
    qdir = model_dir("ppocr_cls_v2").parents[1] / "quant" / "ptq_ppocr_det_qdq"  # OpenVINO differs by up to ~0.5
    if not (qdir / "case.npz").exists():
        pytest.skip(f"{qdir} not found")
    z = np.load(qdir / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    c = choose_device(config_for(str(qdir)), ins, create_paddle_predictor, candidates=["host", "intel_openvino"], rounds=1, use_cache=False)
    assert "differs from the host" not in c.refused.get("intel_openvino", ""), c.refused


def test_paired_scores_cancel_load_that_hits_a_whole_round():
    """Rounds 1, 3 and 4 ran under load for A; B's rounds 1 and 3 too. Separate medians would pick B (11 vs 40 ms);
    round by round B is 1.1x A in four rounds of five, so A is faster."""
    blocks = {"A": [10.0, 40.0, 10.0, 40.0, 40.0], "B": [11.0, 44.0, 11.0, 44.0, 11.0]}
    scores = auto.paired_scores(blocks)
    assert scores["A"] < scores["B"]
    assert scores["B"] == pytest.approx(1.1 * scores["A"])
    assert auto.paired_scores({"A": [5.0, 6.0, 7.0]}) == {"A": 6.0}


def test_a_close_call_is_measured_again_and_decides(cache, monkeypatch):
    """Scripted block times (no clock): the first rounds put onnxruntime within CLOSE of host; the extra rounds,
    of just those two, show host faster; the choice is the lowest of the times reported."""
    ins, _ = load_case("ppocr_cls_v2")
    calls = []

    def scripted(preds, blocks, rounds, est_ms):
        calls.append(sorted(preds))
        first = len(calls) == 1
        for _ in range(rounds):
            for dev in preds:
                blocks[dev].append({"host": 10.0, "onnxruntime": 9.5 if first else 12.0}[dev])

    monkeypatch.setattr(auto, "_interleave", scripted)
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=CANDS, rounds=3, use_cache=False)
    assert calls == [sorted(CANDS), sorted(CANDS)], "a close call gets a second measurement of the two"
    assert c.device == "host" == min(c.medians_ms, key=c.medians_ms.get)


def test_the_measured_predictor_is_the_one_that_runs(cache, monkeypatch):
    """The API's auto keeps the chosen device's predictor that the fixed-shape measurement built (no second build:
    the instance measured is the instance used); a cached choice builds it, on the first call."""
    from pdlite.lite import CxxConfig

    kept = []

    def pick(config, feeds, build, **kw):  # onnxruntime wins, and we see what auto hands back
        monkeypatch.setattr(auto, "paired_scores", lambda blocks: {d: 0.5 if d != "host" else 1.0 for d in blocks})
        c = choose_device(config, feeds, build, **{**kw, "candidates": CANDS, "rounds": 1})
        kept.append((c.cached, c.predictor))
        return c

    monkeypatch.setattr(auto, "choose_device", pick)
    ins, outs = load_case("ppocr_cls_v2")
    for cached in (False, True):
        cfg = CxxConfig()
        cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
        cfg.set_nnadapter_device_names(["auto"])
        pred = create_paddle_predictor(cfg)
        # the online part after the measurement: scripted per-call costs (host 1 ms, onnxruntime 0.5 ms)
        pred._auto.policy.cands = {n: c for n, c in pred._auto.policy.cands.items() if n in CANDS}
        pred._auto.timer = lambda name, sig, fn: (fn(), 1.0 if name == "host" else 0.5)[1]
        for _ in range(1 if cached else 3):
            got = pred.predict(ins)
        got = pred.predict(ins)
        assert pred.auto_choice.device == "onnxruntime" and pred.auto_choice.predictor is None
        assert pred._auto.policy.current == "onnxruntime"
        if cached:
            assert len(kept) == 1, "a cached fixed choice measures nothing"
        else:
            assert kept[-1][0] is False and pred._auto.preds["onnxruntime"] is kept[-1][1]
        np.testing.assert_allclose(got[0], next(iter(outs.values())), rtol=0, atol=1e-4)


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs pip install pdlite[openvino]")
def test_openvino_pinned_threads_are_a_variant_measured_chosen_cached_and_applied(cache, monkeypatch):
    """OpenVINO with its threads pinned (its driver's auto_variants) is a candidate of its own where the context
    properties leave pinning unset: a winning variant is the choice's `variant`, its measured predictor the pinned
    one, the cache keeps it, and apply_device(cfg, choice.key) adds its property; a user's own setting is not
    measured against, and an unknown variant is refused."""
    ins, _ = load_case("ppocr_cls_v2")
    cands = ["host", "intel_openvino"]

    def scripted(preds, blocks, rounds, est_ms):  # block times, no clock: the pinned variant fastest
        for _ in range(rounds):
            for dev in preds:
                blocks[dev].append({"host": 10.0, "intel_openvino": 8.0, "intel_openvino[pinned]": 5.0}[dev])

    monkeypatch.setattr(auto, "_interleave", scripted)
    c = choose_device(_cfg(), ins, create_paddle_predictor, candidates=cands, rounds=2, keep=True)
    assert set(c.medians_ms) == {"host", "intel_openvino", "intel_openvino[pinned]"} and not c.refused
    assert (c.device, c.variant, c.key) == ("intel_openvino", "pinned", "intel_openvino[pinned]")
    assert "auto chose intel_openvino[pinned]" in c.describe() and "runner-up intel_openvino (" in c.describe()
    (kernel,) = [i.kernel for i in c.predictor.runtime_program.instructions if i.op.type == "subgraph"]
    assert kernel.options.properties.get("INTEL_OPENVINO_CPU_PINNING") == "on"
    (model,) = {id(e): e for e in kernel._entries.values()}.values()
    assert model.model.compiled.get_property("ENABLE_CPU_PINNING") is True
    again = choose_device(_cfg(), ins, create_paddle_predictor, candidates=cands, rounds=2)
    assert again.cached and again.key == "intel_openvino[pinned]"
    cfg = _cfg()
    auto.apply_device(cfg, again.key)
    assert cfg.nnadapter_device_names() == ["intel_openvino"]
    assert "INTEL_OPENVINO_CPU_PINNING=on" in cfg.nnadapter_context_properties()
    own = _cfg()
    own.set_nnadapter_context_properties("INTEL_OPENVINO_CPU_PINNING=off")
    mine = choose_device(own, ins, create_paddle_predictor, candidates=cands, rounds=1, use_cache=False)
    assert set(mine.medians_ms) == set(cands) and mine.key == "intel_openvino"
    with pytest.raises(ConfigError, match="no variant 'fast'"):
        auto.apply_device(_cfg(), "intel_openvino[fast]")


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs pip install pdlite[openvino]")
def test_the_api_auto_runs_the_variant_its_fixed_measurement_chose(cache, monkeypatch):
    """A predictor with device "auto": the fixed-shape measurement of its first calls times OpenVINO's pinned variant
    too; when that wins, the device runs pinned: the measured predictor kept, and in a later process (the cached
    choice, no measurement) the device built pinned."""
    from pdlite.lite import CxxConfig

    def scripted(preds, blocks, rounds, est_ms):  # block times (ms, the scale of the calls' timer below)
        for _ in range(rounds):
            for dev in preds:
                blocks[dev].append({"host": 1.0, "intel_openvino": 0.8, "intel_openvino[pinned]": 0.5}[dev])

    monkeypatch.setattr(auto, "_interleave", scripted)
    ins, outs = load_case("ppocr_cls_v2")
    measured = []
    pick = auto.choose_device
    monkeypatch.setattr(auto, "choose_device", lambda *a, **kw: measured.append(1) or pick(*a, **kw))
    for cached in (False, True):
        cfg = CxxConfig()
        cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
        cfg.set_nnadapter_device_names(["auto"])
        pred = create_paddle_predictor(cfg)
        pred._auto.policy.cands = {n: c for n, c in pred._auto.policy.cands.items() if n in ("host", "intel_openvino")}
        pred._auto.timer = lambda name, sig, fn: (fn(), 1.0 if name == "host" else 0.5)[1]
        for _ in range(4):
            got = pred.predict(ins)
        assert len(measured) == 1, "measured once, then taken from the cache"
        assert pred._auto.variants == {"intel_openvino": "pinned"} and pred._auto.policy.current == "intel_openvino"
        assert pred.auto_choice.device == "intel_openvino"
        (kernel,) = [i.kernel for i in pred._auto.preds["intel_openvino"].runtime_program.instructions
                     if i.op.type == "subgraph"]
        assert kernel.options.properties.get("INTEL_OPENVINO_CPU_PINNING") == "on", cached
        np.testing.assert_allclose(got[0], next(iter(outs.values())), rtol=0, atol=1e-4)
