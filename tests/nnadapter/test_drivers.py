"""The device drivers' run contract on a tiny ONNX model, for the input-binding fast paths.

A driver's `run(model, inputs)` returns fresh arrays (a later run never writes into them, none shares memory
with an input) computed from the inputs' values at the time of the call, whatever the inputs are: the same
array object again (possibly changed in place since), a new one, a non-contiguous view, a read-only buffer,
another dtype. The model (relu(x) + x, Identity(x), Reshape(x)) is exact in fp32, so results are compared
exactly. And what a driver leaves running between runs: ONNX Runtime's pool threads spin only briefly once a run
ends (ONNXRUNTIME_SPINNING), measured as the process's CPU time while it sleeps after a run.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.nnadapter._models import DEVICES, need

SHAPE = (2, 3)


def _model() -> bytes:
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"]),
         helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Reshape", ["x", "shp"], ["flat"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE)),
         helper.make_tensor_value_info("same", TensorProto.FLOAT, list(SHAPE)),
         helper.make_tensor_value_info("flat", TensorProto.FLOAT, [6])],
        [helper.make_tensor("shp", TensorProto.INT64, [1], [6])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _want(x: np.ndarray) -> list[np.ndarray]:
    x = np.asarray(x, dtype=np.float32)
    return [np.maximum(x, 0) + x, x.copy(), x.reshape(-1).copy()]


@pytest.fixture(params=list(DEVICES))
def built(request):
    need(request.param)
    from pdlite.nnadapter.registry import get_driver
    from pdlite.registries import load_registries

    load_registries()
    drv = get_driver(request.param)()
    return drv, drv.build(_model(), {})


def _check(got: list[np.ndarray], x: np.ndarray) -> None:
    want = _want(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and np.array_equal(g, w), (g, w)


def test_same_array_changed_in_place_is_read_again(built):
    drv, model = built
    x = np.arange(6, dtype=np.float32).reshape(SHAPE) - 2
    first = drv.run(model, [x])
    kept = [a.copy() for a in first]
    _check(first, x)
    x *= -3  # the same object, new values: the next run must see them
    second = drv.run(model, [x])
    _check(second, x)
    for a, k in zip(first, kept):  # what the first run returned is untouched by the second
        assert np.array_equal(a, k)
    for a in first + second:
        assert not np.shares_memory(a, x)
    assert not any(np.shares_memory(a, b) for a in first for b in second)


def test_new_arrays_each_run(built):
    drv, model = built
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
        _check(drv.run(model, [x]), x)


def test_inputs_that_cannot_be_shared(built):
    drv, model = built
    base = np.random.default_rng(7).standard_normal((2, 6)).astype(np.float32)
    view = base[:, ::2]  # not contiguous
    _check(drv.run(model, [view]), view)
    base[...] += 1  # the same view object, changed through its base
    _check(drv.run(model, [view]), view)
    ro = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), dtype=np.float32).reshape(SHAPE)
    assert not ro.flags.writeable
    _check(drv.run(model, [ro]), ro)
    x = np.arange(6, dtype=np.float32).reshape(SHAPE)
    _check(drv.run(model, [x]), x)  # back to a shareable array after copies


def test_an_input_nothing_reads(built):
    """An ONNX input that no node reads (OpenVINO drops it from the compiled model): the arrays still map by
    position in the ONNX model's input order."""
    from onnx import TensorProto, helper

    drv, _ = built
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], "unused_first",
        [helper.make_tensor_value_info("size", TensorProto.INT32, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))])
    blob = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    model = drv.build(blob, {})
    x = np.arange(6, dtype=np.float32).reshape(SHAPE) - 3
    for _ in range(2):
        (y,) = drv.run(model, [np.array([4, 4], dtype=np.int32), x])
        assert np.array_equal(y, np.maximum(x, 0) + x)


def _matmul_model(w: np.ndarray) -> bytes:
    """x @ w with the constant `w`: big enough for ONNX Runtime to split the product across its pool threads."""
    from onnx import TensorProto, helper, numpy_helper

    n = w.shape[0]
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _idle_cpu_ms(driver, compiled, x: np.ndarray, pick=min) -> float:
    """CPU time this process uses while the caller sleeps 100 ms right after a run, the least of 3 (another
    runtime's threads left spinning by an earlier test can only add to one of them), or with pick=max the most
    (for the spinning control: on a loaded machine the OS may not schedule the spinning thread in one of them)."""
    import time

    used = []
    for _ in range(3):
        driver.run(compiled, [x])
        t = time.process_time()
        time.sleep(0.1)
        used.append((time.process_time() - t) * 1e3)
    return float(pick(used))


def test_onnxruntime_pool_threads_stop_spinning_when_a_run_ends() -> None:
    """ONNXRUNTIME_SPINNING: by default (`short`) the session's pool threads spin at most 300 us once a run
    returns, and with `run` they stop at once, so an idle predictor takes next to no CPU from the next one (with
    ONNX Runtime's own default, `always`, a pool thread stayed busy for ~45 of the 100 ms measured here); a bad
    value is refused, naming the property. Before ONNX Runtime 1.26 (no spin duration) `short` is `run`."""
    need("onnxruntime")
    from pdlite.errors import ConfigError
    from pdlite.nnadapter.drivers.onnxruntime import SPINNING, OnnxRuntimeDriver, _version

    driver = OnnxRuntimeDriver()
    w = np.random.default_rng(0).normal(size=(384, 384)).astype(np.float32)
    x = np.ones_like(w)
    idle = {}
    for mode in ("short", "run", "always", None):
        props = {"ONNXRUNTIME_INTRA_OP_NUM_THREADS": "2"} | ({"ONNXRUNTIME_SPINNING": mode} if mode else {})
        compiled = driver.build(_matmul_model(w), props)
        np.testing.assert_allclose(driver.run(compiled, [x])[0], x @ w, rtol=1e-4, atol=1e-3)
        idle[mode] = _idle_cpu_ms(driver, compiled, x, max if mode == "always" else min)
    assert idle["short"] < 5 and idle["run"] < 5 and idle[None] < 5, idle  # `short` is the default
    assert idle["always"] > max(10.0, 4 * idle["short"]), idle  # the control: without a limit a thread spins
    entries = driver.session_options({}).get_session_config_entry
    if _version(driver._ort.__version__) >= (1, 26):
        assert entries("session.intra_op.spin_duration_us") == SPINNING["short"]["session.intra_op.spin_duration_us"]
    else:
        assert entries("session.force_spinning_stop") == "1"
    assert _version("1.26.0.dev20260401") == (1, 26) and _version("1.9") == (1, 9)
    with pytest.raises(ConfigError, match="ONNXRUNTIME_SPINNING"):
        driver.session_options({"ONNXRUNTIME_SPINNING": "sometimes"})


def _attention_model(length: int | str) -> bytes:
    """softmax(q k^T) v over 4 heads of 16, q = k = v = x reshaped: the block OpenVINO's CPU plugin fuses into one
    snippet (a "Subgraph" node of its runtime model)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Reshape", ["x", "s4"], ["r"]),
             helper.make_node("Transpose", ["r"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["r"], ["k"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "q"], ["v"]),
             helper.make_node("Transpose", ["v"], ["y"], perm=[0, 2, 1, 3])]
    g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("s4", TensorProto.INT64, [4], [1, -1, 4, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_openvino_snippets_only_in_models_for_one_shape(tmp_path) -> None:
    """INTEL_OPENVINO_SNIPPETS: by default (`static`) a model with dynamic dims is compiled without OpenVINO's
    snippets (it would generate each one again at every new input shape) and a model for one shape with them;
    `all` and `none` say so for every model; the model cache keeps the mode (an exported model keeps its nodes,
    and the mode is part of the cache key); a bad value is refused, naming the property."""
    need("intel_openvino")
    from pdlite.errors import ConfigError
    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver

    drv = OpenVINODriver()

    def snippets(model: bytes, mode: str | None, cache: str | None = None) -> int:
        props = {"INTEL_OPENVINO_INFERENCE_NUM_THREADS": "1"} | ({"INTEL_OPENVINO_SNIPPETS": mode} if mode else {})
        compiled = drv.build(model, props, cache)
        x = np.random.default_rng(0).standard_normal((1, 12, 64)).astype(np.float32)
        s = x.reshape(1, 12, 4, 16).transpose(0, 2, 1, 3)
        e = np.exp(s @ s.transpose(0, 1, 3, 2) - (s @ s.transpose(0, 1, 3, 2)).max(-1, keepdims=True))
        want = ((e / e.sum(-1, keepdims=True)) @ s).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(drv.run(compiled, [x])[0], want, rtol=1e-4, atol=1e-5)
        ops = compiled.compiled.get_runtime_model().get_ordered_ops()
        return sum(op.get_rt_info()["layerType"].astype(str) == "Subgraph" for op in ops)

    dynamic, static = _attention_model("L"), _attention_model(12)
    assert snippets(static, None) > 0, "the control: OpenVINO fuses the block into a snippet"
    assert snippets(dynamic, None) == 0 and snippets(dynamic, "static") == 0
    assert snippets(dynamic, "all") > 0 and snippets(static, "none") == 0
    cache = str(tmp_path / "entry")
    assert snippets(dynamic, None, cache) == 0 and snippets(dynamic, None, cache) == 0  # compiled, then loaded
    assert drv.cache_token({}) != drv.cache_token({"INTEL_OPENVINO_SNIPPETS": "all"})
    with pytest.raises(ConfigError, match="INTEL_OPENVINO_SNIPPETS='sometimes'"):
        drv.build(dynamic, {"INTEL_OPENVINO_SNIPPETS": "sometimes"})


def test_openvino_cpu_threads_not_pinned_unless_asked(tmp_path) -> None:
    """INTEL_OPENVINO_CPU_PINNING: by default OpenVINO's CPU threads are not pinned to cores (OpenVINO pins them for a
    LATENCY model: a pinned thread waits on a core another process keeps busy); `on` pins them; a model loaded from
    the model cache keeps the setting; a bad value is refused, naming the property."""
    need("intel_openvino")
    from pdlite.errors import ConfigError
    from pdlite.nnadapter.drivers.intel_openvino import OpenVINODriver

    drv = OpenVINODriver()
    model = _attention_model(12)
    x = np.random.default_rng(0).standard_normal((1, 12, 64)).astype(np.float32)

    def pinned(props: dict, cache: str | None = None) -> bool:
        compiled = drv.build(model, {"INTEL_OPENVINO_INFERENCE_NUM_THREADS": "1", **props}, cache)
        drv.run(compiled, [x])
        return bool(compiled.compiled.get_property("ENABLE_CPU_PINNING"))

    assert not pinned({}) and not pinned({"INTEL_OPENVINO_CPU_PINNING": "off"})
    assert pinned({"INTEL_OPENVINO_CPU_PINNING": "on"}), "the control: OpenVINO pins when asked"
    cache = str(tmp_path / "entry")
    assert not pinned({}, cache) and not pinned({}, cache)  # compiled, then loaded
    with pytest.raises(ConfigError, match="INTEL_OPENVINO_CPU_PINNING='always'"):
        drv.build(model, {"INTEL_OPENVINO_CPU_PINNING": "always"})


@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_ties_keep_index_order_with_dynamic_dims(device: str, largest: int) -> None:
    """ONNX TopK orders equal values by index (as Paddle's top_k and the host's stable sort) on every device,
    in a model with dynamic dims too: OpenVINO's ONNX frontend makes its TopK unstable and its CPU plugin then
    ordered ties arbitrarily there (intel_openvino's build makes every TopK stable)."""
    need(device)
    from onnx import TensorProto, helper

    from pdlite.nnadapter.registry import get_driver
    from pdlite.registries import load_registries

    g = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=largest, sorted=1)], "topk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 3, "n"])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        [helper.make_tensor("k", TensorProto.INT64, [1], [4])])
    load_registries()
    drv = get_driver(device)()
    model = drv.build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), {})
    rng = np.random.default_rng(37)
    for shape in ((3, 3, 9), (2, 3, 12), (1, 3, 7)):
        x = np.round(rng.uniform(-3, 3, shape)).astype(np.float32)  # 7 distinct values: many ties
        order = np.argsort(x if not largest else -x, axis=-1, kind="stable")[..., :4]
        v, i = drv.run(model, [x])
        assert np.array_equal(i, order), (shape, i, order)
        assert np.array_equal(v, np.take_along_axis(x, order, axis=-1))
