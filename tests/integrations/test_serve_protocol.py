"""The serving layer without a server (pdlite.integrations.serving): V2 request checks and their messages, the
JSON and binary-extension decoding, admission control, a served model equal to its predictor."""
from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest

from pdlite.integrations import predictor_from_path
from pdlite.integrations.serving import (
    Admission,
    Overloaded,
    RequestError,
    ServedModel,
    TensorSpec,
    check_inputs,
    decode_v2_json,
    encode_v2_json,
    split_v2_body,
    v2_datatype,
)
from tests.integrations.serve_util import CNN, DET, ROOT

SPECS = [TensorSpec("x", "FP32", [-1, 3, 4, 4]), TensorSpec("k", "INT64", [-1])]


def ok_feeds(n: int = 2) -> dict[str, np.ndarray]:
    return {"x": np.zeros((n, 3, 4, 4), np.float32), "k": np.arange(n, dtype=np.int64)}


@pytest.mark.parametrize("change,words,status", [
    ({"x": np.zeros((2, 3, 4, 4), np.float64)}, ["'x'", "FP32", "FP64"], 400),
    ({"x": np.zeros((2, 3, 5, 4), np.float32)}, ["'x'", "[-1, 3, 4, 4]", "[2, 3, 5, 4]"], 400),
    ({"x": np.zeros((3, 4, 4), np.float32)}, ["'x'", "[-1, 3, 4, 4]"], 400),
    ({"x": None}, ["'x'", "missing", "FP32"], 400),
    ({"y": np.zeros(1, np.float32)}, ["'y'", "['x', 'k']"], 400),
    ({"x": np.zeros((0, 3, 4, 4), np.float32)}, ["'x'", "empty"], 400),
    ({"x": np.zeros((5000, 3, 4, 4), np.float32), "k": np.zeros(5000, np.int64)}, ["max_request_bytes"], 413),
])
def test_check_inputs_names_the_input(change, words, status):
    feeds = ok_feeds()
    for k, v in change.items():
        if v is None:
            del feeds[k]
        else:
            feeds[k] = v
    with pytest.raises(RequestError) as e:
        check_inputs(SPECS, feeds, max_bytes=100_000)
    assert e.value.status == status
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_check_inputs_accepts_any_batch():
    for n in (1, 7):
        check_inputs(SPECS, ok_feeds(n))


def test_v2_datatypes():
    assert [v2_datatype(t) for t in (np.float32, np.int64, np.uint8, bool, object)] == \
        ["FP32", "INT64", "UINT8", "BOOL", "BYTES"]


def test_admission_refuses_past_the_limit():
    adm = Admission(2, "model 'm'")
    with adm.enter(), adm.enter():
        with pytest.raises(Overloaded) as e, adm.enter():
            pass
        assert e.value.status == 503 and "model 'm'" in str(e.value)
    with adm.enter():  # the slots come back
        assert adm.inside == 1
    assert adm.refused == 1


def test_served_model_equals_its_predictor_and_decodes_json_and_binary():
    served = ServedModel(CNN, workers=2)
    pred = predictor_from_path(CNN)
    name = pred.get_output_names()[0]
    assert served.outputs[0].shape == [-1, 100]
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3, 224, 224], "data": x.ravel().tolist()}]}
    raw, binary = split_v2_body(json.dumps(body).encode(), None)
    feeds = decode_v2_json(raw, served, binary)
    np.testing.assert_array_equal(feeds["x"], x)
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3, 224, 224],
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    raw, binary = split_v2_body(head + x.tobytes(), str(len(head)))
    np.testing.assert_array_equal(decode_v2_json(raw, served, binary)["x"], x)
    ref = []
    t = threading.Thread(target=lambda: ref.append(pred.predict([x])[0]))  # on a thread, as a server runs it
    t.start()
    t.join()
    got = {}
    t = threading.Thread(target=lambda: got.update(served.run(feeds)))
    t.start()
    t.join()
    np.testing.assert_array_equal(got[name], ref[0])
    answer = json.loads(json.dumps(encode_v2_json("m", got)))["outputs"][0]
    np.testing.assert_array_equal(np.array(answer["data"], np.float32).reshape(answer["shape"]), ref[0])


@pytest.mark.parametrize("body,words", [
    ({"inputs": [{"name": "x", "datatype": "FP99", "shape": [1], "data": [1]}]}, ["'x'", "FP99"]),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, -2], "data": [1]}]}, ["'x'", "shape"]),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3]}]}, ["'x'", "[2, 2]"]),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [9, 9, 9, 9, 9, 9, 9], "data": [1]}]},
     ["'x'", "max_request_bytes"]),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 99}}]},
     ["'x'", "binary_data_size"]),
    ({"nothing": []}, ['"inputs"']),
])
def test_decode_v2_json_refusals(body, words):
    class Small:
        max_request_bytes = 1 << 20

    with pytest.raises(RequestError) as e:
        decode_v2_json(body, Small(), b"")
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_split_v2_body_refusals():
    with pytest.raises(RequestError, match="not JSON"):
        split_v2_body(b"{oops", None)
    with pytest.raises(RequestError, match="Inference-Header-Content-Length 99"):
        split_v2_body(b"{}", "99")


def test_follows_batch():
    assert ServedModel(CNN).follows_batch()
    assert not ServedModel(DET).follows_batch()  # NMS: rows are boxes, not images


def test_mlserver_refuses_adaptive_batching_for_nms():
    pytest.importorskip("mlserver", reason="needs MLServer: pip install pdlite[serve]")
    from mlserver.errors import MLServerError
    from mlserver.settings import ModelParameters, ModelSettings

    from pdlite.integrations.mlserver import PdliteRuntime

    def runtime(model, batch):
        return PdliteRuntime(ModelSettings(name="m", implementation=PdliteRuntime, max_batch_size=batch,
                                           parameters=ModelParameters(uri=str(model))))

    with pytest.raises(MLServerError, match="max_batch_size 4"):
        asyncio.run(runtime(DET, 4).load())
    assert asyncio.run(runtime(CNN, 4).load())
    assert asyncio.run(runtime(DET, 0).load())


def test_example_settings_are_valid():
    folder = ROOT / "examples/serving"
    for f in sorted(folder.glob("*/model-settings.json")):
        s = json.loads(f.read_text())
        assert s["implementation"] == "pdlite.integrations.mlserver.PdliteRuntime", f
        uri = s["parameters"].get("uri")
        assert uri is None or (f.parent / uri).is_dir(), (f, uri)
        assert uri is not None or s["parameters"]["extra"]["app"] == "ocr", f
    assert json.loads((folder / "settings.json").read_text())["host"] == "127.0.0.1"


def test_encode_v2_json_non_finite_as_null():
    body = encode_v2_json("m", {"y": np.array([1.5, np.nan, np.inf], np.float32)})
    assert json.loads(json.dumps(body, allow_nan=False))["outputs"][0]["data"] == [1.5, None, None]


@pytest.mark.parametrize("datatype,shape,data", [
    ("FP32", [2, 3], np.random.default_rng(1).standard_normal(6).astype(np.float32).tolist()),
    ("FP32", [2, 3], [[1.5, 2, 3], [4, 5, 6]]),  # nested (JSON): NumpyCodec's path
    ("FP32", [1], [None]),
    ("FP16", [2], [0.1, 65504.0]),
    ("INT64", [3], [1, -2, 3]),
    ("UINT8", [2], [0, 255]),
    ("BOOL", [2], [True, False]),
])
def test_mlserver_decodes_tensors_as_its_codec(datatype, shape, data):
    """The runtime's own decoding of MLServer's data lists (np.fromiter, faster on the event loop) gives what
    MLServer's NumpyCodec gives: dtype, shape and every bit."""
    pytest.importorskip("mlserver", reason="needs MLServer: pip install pdlite[serve]")
    from mlserver.codecs import NumpyCodec
    from mlserver.types import RequestInput

    from pdlite.integrations.mlserver import _tensor

    inp = RequestInput(name="x", datatype=datatype, shape=shape, data=data)
    got, want = _tensor(inp), NumpyCodec.decode_input(inp)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    with pytest.raises(OverflowError):  # answered 400 naming the input by PdliteRuntime._feeds
        _tensor(RequestInput(name="k", datatype="INT8", shape=[1], data=[300]))


def test_mlserver_grpc_raw_bytes_reach_the_runtime_as_arrays():
    """MLServer's gRPC request conversion, as patched by pdlite's runtime: for a pdlite model a numeric input's
    raw bytes become a read-only array over those bytes (no Python list: MLServer would unpack them into one),
    every bit as sent; other models, and every model while MLServer's response cache is on (its key is the
    request as JSON), keep MLServer's lists; BYTES keeps MLServer's unpacking; a length the shape does not give
    is refused naming the input. A model with MLServer's adaptive batching is not registered (its merge adds
    lists, and JSON requests mixed with gRPC ones would meet arrays)."""
    pytest.importorskip("mlserver", reason="needs MLServer: pip install pdlite[serve]")
    pytest.importorskip("grpc", reason="needs grpcio: pip install pdlite[serve]")
    from types import SimpleNamespace

    from mlserver.errors import InferenceError
    from mlserver.grpc import dataplane_pb2 as pb
    from mlserver.grpc.servicers import InferenceServicer
    from mlserver.settings import ModelSettings

    from pdlite.integrations.mlserver import _RAW_MODELS, PdliteRuntime, _tensor

    x = np.random.default_rng(2).standard_normal((2, 3, 4, 4)).astype(np.float32)
    k = np.array([7, -1, 1 << 40], np.int64)
    strings = b"".join(len(b).to_bytes(4, "little") + b for b in (b"ab", b"cde"))
    context = SimpleNamespace(invocation_metadata=lambda: ())

    def convert(model: str, a: np.ndarray = x, x_shape=(2, 3, 4, 4), cache=None):
        T = pb.ModelInferRequest.InferInputTensor
        req = pb.ModelInferRequest(model_name=model, raw_input_contents=[a.tobytes(), k.tobytes(), strings], inputs=[
            T(name="x", datatype="FP32", shape=list(x_shape)), T(name="k", datatype="INT64", shape=[3]),
            T(name="s", datatype="BYTES", shape=[2])])
        servicer = SimpleNamespace(_data_plane=SimpleNamespace(_response_cache=cache))
        return InferenceServicer._InsertHeaders(servicer, req, context)

    _RAW_MODELS.add("raw-test")
    try:
        req = convert("raw-test")
        gx, gk = (_tensor(i) for i in req.inputs[:2])
        assert isinstance(req.inputs[0].data.root, np.ndarray) and not gx.flags.writeable  # a view, no copy
        assert gx.dtype == np.float32 and gx.shape == x.shape and gx.tobytes() == x.tobytes()
        assert gk.dtype == np.int64 and gk.tolist() == k.tolist()
        assert list(req.inputs[2].data) == [b"ab", b"cde"]
        with pytest.raises(InferenceError, match=r"'x': 384 raw bytes, expected 480 .*FP32.*\[2, 3, 5, 4\]"):
            convert("raw-test", x_shape=(2, 3, 5, 4))
        cached = convert("raw-test", cache=object())
        assert isinstance(cached.inputs[0].data.root, list) and cached.model_dump_json()  # the cache key works
    finally:
        _RAW_MODELS.discard("raw-test")
    other = convert("not-pdlite")
    assert isinstance(other.inputs[0].data.root, list) and other.inputs[1].data.root == k.tolist()
    for batch, registered in ((1, True), (8, False)):
        PdliteRuntime(ModelSettings(name=f"raw-{batch}", implementation=PdliteRuntime, max_batch_size=batch))
        assert (f"raw-{batch}" in _RAW_MODELS) is registered
        _RAW_MODELS.discard(f"raw-{batch}")
