"""What the serving integrations share, free of any server: models as pools of predictor clones, the KServe V2
protocol's tensor conventions (datatypes, shapes with -1), request checks, admission control, and the OCR app's
answer layout.

`pdlite.integrations.mlserver` (an MLServer runtime) and `pdlite.integrations.ray_serve` (a Ray Serve
deployment) are thin shells around the classes here; docs/serving.md says how to use them.

- `ServedModel`: a model folder or `.nb` loaded once and cloned `workers` times (clones share weights); `run`
  takes a free clone (a request never waits on another's clone lock), `specs` are the inputs as the model
  declares them. `check` refuses a request before any run with a `RequestError` that names the input and what
  was expected, in the protocol's words (datatype FP32, shape [-1, 3, 224, 224]).
- `ServedOCR`: the OCR app (`pdlite.apps.ocr.OCR`), one instance per worker; image bytes in, lines out.
- `Admission`: at most `limit` requests in the service at once (running or waiting for a worker); the next is
  refused with `Overloaded` (HTTP 503) at once instead of queueing without bound.
"""
from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, InputError, PdliteError

# KServe V2 datatypes <-> NumPy (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/)
V2_DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(bool), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
}
_BY_DTYPE = {v: k for k, v in V2_DATATYPES.items()}

# the OCR app's tensors: one image in; per line a box, a score and a text out (and all of it as one JSON string)
OCR_INPUT = "image"
OCR_OUTPUTS = ("boxes", "scores", "texts", "lines")

DEFAULT_MAX_REQUEST_BYTES = 64 << 20  # a request's decoded tensors together (an oversized payload is a 413)


def v2_datatype(dtype: Any) -> str:
    """The V2 datatype name of a NumPy dtype (BYTES for strings and objects)."""
    dt = np.dtype(dtype)
    if dt.kind in "OSU":
        return "BYTES"
    try:
        return _BY_DTYPE[dt]
    except KeyError:
        raise ConfigError(f"dtype {dt} has no KServe V2 datatype") from None


class RequestError(PdliteError, ValueError):
    """A request the service refuses (HTTP `status`, 400 unless said): its message names the input at fault."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Overloaded(RequestError):
    """More requests than the service admits at once (HTTP 503): try again later."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 503)


@dataclass(frozen=True)
class TensorSpec:
    """An input or output as the protocol describes it: name, V2 datatype, shape (-1: any size)."""

    name: str
    datatype: str
    shape: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def check_inputs(specs: Sequence[TensorSpec], feeds: Mapping[str, np.ndarray],
                 max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
    """Refuse FEEDS that the model cannot take: unknown or missing inputs, another datatype, another rank or a
    fixed dim of another size (400), or more than MAX_BYTES in all (413). Messages name the input."""
    names = [s.name for s in specs]
    unknown = sorted(set(feeds) - set(names))
    if unknown:
        raise RequestError(f"unknown input(s) {unknown}: the model's inputs are {names}")
    total = 0
    for s in specs:
        if s.name not in feeds:
            raise RequestError(f"input {s.name!r} is missing: expected datatype {s.datatype} and shape "
                               f"{_shape_text(s.shape)} (the model's inputs are {names})")
        a = feeds[s.name]
        got = v2_datatype(a.dtype) if isinstance(a, np.ndarray) else type(a).__name__
        if got != s.datatype:
            raise RequestError(f"input {s.name!r}: expected datatype {s.datatype} and shape {_shape_text(s.shape)}, "
                               f"got {got} {_shape_text(np.shape(a))}")
        ok = a.ndim == len(s.shape) and all(d < 0 or d == g for d, g in zip(s.shape, a.shape))
        if not ok:
            raise RequestError(f"input {s.name!r}: expected shape {_shape_text(s.shape)} (-1: any size) with "
                               f"datatype {s.datatype}, got shape {_shape_text(a.shape)}")
        if 0 in a.shape:
            raise RequestError(f"input {s.name!r}: shape {_shape_text(a.shape)} is empty")
        total += a.nbytes
    if total > max_bytes:
        raise RequestError(f"input(s) {names}: {total} bytes in all, more than this service takes "
                           f"({max_bytes} bytes; parameter max_request_bytes)", 413)


class Admission:
    """At most LIMIT requests inside at once; `enter()` refuses the next one with `Overloaded` at once."""

    def __init__(self, limit: int, what: str = "the service") -> None:
        if int(limit) < 1:
            raise ConfigError(f"admission limit must be >= 1, got {limit}")
        self.limit = int(limit)
        self.what = what
        self.inside = 0
        self.refused = 0
        self._lock = threading.Lock()

    @contextmanager
    def enter(self) -> Iterator[None]:
        with self._lock:
            if self.inside >= self.limit:
                self.refused += 1
                raise Overloaded(f"{self.what} is at capacity ({self.limit} requests in progress, "
                                 "parameter max_queued); retry later")
            self.inside += 1
        try:
            yield
        finally:
            with self._lock:
                self.inside -= 1


class _Pool:
    """WORKERS objects handed out one request at a time (a request never waits on another's lock)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for it in items:
            self._free.put(it)
        self.size = len(items)

    @contextmanager
    def take(self) -> Iterator[Any]:
        item = self._free.get()
        try:
            yield item
        finally:
            self._free.put(item)


def _predictor(model: str | os.PathLike, device: str, threads: int, options: Mapping[str, Any] | None) -> Any:
    from pdlite.api.auto import apply_device
    from pdlite.api.config import CxxConfig
    from pdlite.api.from_path import configured
    from pdlite.integrations import predictor_from_path

    if device in ("host", "x86"):
        return predictor_from_path(model, threads=threads, options=options)
    cfg = configured(model, None, threads, dict(options or {}))
    if not isinstance(cfg, CxxConfig):
        raise ConfigError(f"model {os.fspath(model)!r}: an optimized .nb keeps the device it was saved with; "
                          f"device {device!r} needs a model folder")
    if device == "auto":
        cfg.set_nnadapter_device_names(["auto"])
    else:
        apply_device(cfg, device)
    from pdlite.api import create_paddle_predictor

    return create_paddle_predictor(cfg)


class ServedModel:
    """A Paddle model folder or `.nb` as a service: WORKERS predictor clones (shared weights), each running one
    request at a time on THREADS compute threads, on DEVICE (host, intel_openvino, onnxruntime, auto)."""

    def __init__(self, model: str | os.PathLike, *, device: str = "host", threads: int = 1, workers: int = 1,
                 options: Mapping[str, Any] | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if int(workers) < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.model = os.fspath(model)
        first = _predictor(model, device, int(threads), options)
        self.input_names: list[str] = first.get_input_names()
        self.output_names: list[str] = first.get_output_names()
        self.inputs = [TensorSpec(n, v2_datatype(t.dtype() or np.float32), [int(d) for d in t.shape()])
                       for n, t in ((n, first.get_input_by_name(n)) for n in self.input_names)]
        self.outputs: list[TensorSpec] = []  # known after a first run (dtype and rank); dim 0 always -1
        self._pool = _Pool([first] + [first.clone() for _ in range(int(workers) - 1)])
        self.max_request_bytes = int(max_request_bytes)
        self._warm_up()

    def _warm_up(self) -> None:
        """One run on zeros where every dim but the batch is fixed: the outputs' datatypes and ranks for the
        metadata (and the first-run costs paid before the first request)."""
        if any(d < 0 for s in self.inputs for d in s.shape[1:]):
            return
        feeds = {s.name: np.zeros([1 if d < 0 else d for d in s.shape], V2_DATATYPES[s.datatype])
                 for s in self.inputs}
        self.run(feeds)

    def check(self, feeds: Mapping[str, np.ndarray]) -> None:
        check_inputs(self.inputs, feeds, self.max_request_bytes)

    def follows_batch(self) -> bool:
        """True when requests may be stacked along dim 0 and the outputs split back: every input has a dynamic
        dim 0, and every output keeps the batch in dim 0 (checked on zeros, batches of 2 and 3: an NMS output's
        row count could match one of them by chance)."""
        if not self.outputs or any(not s.shape or s.shape[0] >= 0 for s in self.inputs):
            return False
        for n in (2, 3):
            feeds = {s.name: np.zeros([n] + s.shape[1:], V2_DATATYPES[s.datatype]) for s in self.inputs}
            if not all(a.shape[:1] == (n,) for a in self.run(feeds).values()):
                return False
        return True

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name for FEEDS (checked first: `RequestError` names the input at fault)."""
        self.check(feeds)
        with self._pool.take() as predictor:
            try:
                outs = predictor.predict(dict(feeds))
            except InputError as e:  # a value the model refuses (a shape its ops cannot take)
                raise RequestError(str(e)) from None
        result = dict(zip(self.output_names, outs))
        if not self.outputs:
            self.outputs = [TensorSpec(n, v2_datatype(a.dtype), [-1] + [int(d) for d in a.shape[1:]])
                            for n, a in result.items()]
        return result

    @property
    def workers(self) -> int:
        return self._pool.size


def ocr_answer(lines: Sequence[Any]) -> dict[str, np.ndarray]:
    """The OCR app's outputs for LINES (OCRLine: box, text, score): `boxes` INT32 [n, 4, 2] (corners clockwise
    from top-left, pixels), `scores` FP32 [n], `texts` BYTES [n] (UTF-8) and `lines` BYTES [1], all of it as
    one JSON string ([{"box": ..., "text": ..., "score": ...}, ...])."""
    boxes = np.array([ln.box for ln in lines], np.int32).reshape(len(lines), 4, 2)
    scores = np.array([ln.score for ln in lines], np.float32)
    texts = np.array([ln.text.encode("utf-8") for ln in lines], dtype=object)
    doc = json.dumps([{"box": ln.box, "text": ln.text, "score": float(ln.score)} for ln in lines], ensure_ascii=False)
    return {"boxes": boxes, "scores": scores, "texts": texts, "lines": np.array([doc.encode("utf-8")], dtype=object)}


class ServedOCR:
    """The OCR app as a service: WORKERS `pdlite.apps.ocr.OCR` instances (each loads the three networks),
    encoded image bytes (PNG, JPEG, ... what OpenCV reads) in, `ocr_answer` out."""

    inputs = [TensorSpec(OCR_INPUT, "BYTES", [1])]
    outputs = [TensorSpec("boxes", "INT32", [-1, 4, 2]), TensorSpec("scores", "FP32", [-1]),
               TensorSpec("texts", "BYTES", [-1]), TensorSpec("lines", "BYTES", [1])]

    def __init__(self, *, device: str = "host", threads: int = 1, workers: int = 1,
                 options: Mapping[str, Any] | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        from pdlite.apps.ocr import OCR, load_image

        if int(workers) < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self._load_image = load_image
        self.max_request_bytes = int(max_request_bytes)
        self._pool = _Pool([OCR(device=device, threads=int(threads), **dict(options or {}))
                            for _ in range(int(workers))])

    def image_bytes(self, feeds: Mapping[str, Any]) -> bytes:
        """The one encoded image of a request (refused: another input, not one BYTES element, too large)."""
        names = sorted(feeds)
        if names != [OCR_INPUT]:
            raise RequestError(f"input {OCR_INPUT!r} is missing or not alone: expected one input {OCR_INPUT!r} of "
                               f"datatype BYTES and shape [1] (an encoded image), got inputs {names}")
        value = feeds[OCR_INPUT]
        items = list(np.ravel(value)) if isinstance(value, np.ndarray) else [value]
        if len(items) != 1 or not isinstance(items[0], (bytes, bytearray)):
            raise RequestError(f"input {OCR_INPUT!r}: expected datatype BYTES and shape [1] (one encoded image), "
                               f"got {len(items)} element(s) of {type(items[0]).__name__ if items else 'nothing'}")
        data = bytes(items[0])
        if len(data) > self.max_request_bytes:
            raise RequestError(f"input {OCR_INPUT!r}: {len(data)} bytes, more than this service takes "
                               f"({self.max_request_bytes} bytes; parameter max_request_bytes)", 413)
        return data

    def check(self, feeds: Mapping[str, Any]) -> None:
        self.image_bytes(feeds)

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        data = self.image_bytes(feeds)
        try:
            img = self._load_image(data)
        except InputError as e:
            raise RequestError(f"input {OCR_INPUT!r}: {e} (expected an encoded image: PNG, JPEG, BMP, ...)") from None
        with self._pool.take() as ocr:
            lines = ocr(img)
        return ocr_answer(lines)

    @property
    def workers(self) -> int:
        return self._pool.size


def served(app: str | None, model: str | os.PathLike | None, **kwargs: Any) -> ServedModel | ServedOCR:
    """A ServedModel for MODEL, or the app APP ("ocr") with its own models."""
    if app in (None, "", "model"):
        if not model:
            raise ConfigError("no model: give a Paddle model folder or .nb (model-settings.json parameters.uri)")
        return ServedModel(model, **kwargs)
    if app == "ocr":
        return ServedOCR(**kwargs)
    raise ConfigError(f"app {app!r}: expected 'ocr' or none (a model folder or .nb)")


# -- the V2 protocol's JSON body, for servers without a codec of their own (the Ray Serve deployment) -------------
def split_v2_body(raw: bytes, header_length: str | None) -> tuple[Any, bytes]:
    """The JSON part of a V2 request body and the binary tensor data after it (the binary data extension:
    `Inference-Header-Content-Length` gives the JSON's length; tritonclient sends tensors this way)."""
    n = len(raw)
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            raise RequestError(f"Inference-Header-Content-Length {header_length!r} is not a number") from None
        if not 0 < n <= len(raw):
            raise RequestError(f"Inference-Header-Content-Length {n}: the body has {len(raw)} bytes")
    try:
        return json.loads(raw[:n]), raw[n:]
    except ValueError as e:
        raise RequestError(f"the request body is not JSON ({e})") from None


def decode_v2_json(body: Any, service: ServedModel | ServedOCR, binary: bytes = b"") -> dict[str, Any]:
    """Feeds from a V2 inference request body ({"inputs": [{"name", "datatype", "shape", "data"}, ...]}); BYTES
    elements of the OCR app's image are base64 text; an input with parameters.binary_data_size takes its bytes
    from BINARY (in order). Malformed tensors are refused naming the input."""
    import base64
    import binascii

    if not isinstance(body, Mapping) or not isinstance(body.get("inputs"), list):
        raise RequestError('the request body must be a JSON object with a list "inputs" (KServe V2)')
    total = 0
    feeds: dict[str, Any] = {}
    for i, inp in enumerate(body["inputs"]):
        if not isinstance(inp, Mapping) or not isinstance(inp.get("name"), str):
            raise RequestError(f"inputs[{i}]: expected an object with name, datatype, shape and data")
        name, datatype, shape = inp["name"], inp.get("datatype"), inp.get("shape")
        if name in feeds:
            raise RequestError(f"input {name!r} given twice")
        if datatype != "BYTES" and datatype not in V2_DATATYPES:
            raise RequestError(f"input {name!r}: datatype {datatype!r} is not a V2 datatype "
                               f"({', '.join(V2_DATATYPES)}, BYTES)")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise RequestError(f"input {name!r}: shape must be a list of sizes >= 0, got {shape!r}")
        size = int(np.prod(shape, dtype=np.int64))
        total += size * (V2_DATATYPES[datatype].itemsize if datatype in V2_DATATYPES else 1)
        if total > service.max_request_bytes:
            raise RequestError(f"input {name!r}: {total} bytes declared so far, more than this service takes "
                               f"({service.max_request_bytes} bytes; parameter max_request_bytes)", 413)
        size_b = (inp.get("parameters") or {}).get("binary_data_size")
        if size_b is not None:
            if not isinstance(size_b, int) or size_b < 0 or size_b > len(binary):
                raise RequestError(f"input {name!r}: binary_data_size {size_b!r}, {len(binary)} bytes left")
            chunk, binary = binary[:size_b], binary[size_b:]
            if datatype == "BYTES":  # elements as 4-byte little-endian length + bytes
                items, pos = [], 0
                while pos + 4 <= len(chunk):
                    k = int.from_bytes(chunk[pos:pos + 4], "little")
                    items.append(chunk[pos + 4:pos + 4 + k])
                    pos += 4 + k
                feeds[name] = np.array(items, dtype=object)
                continue
            try:
                feeds[name] = np.frombuffer(chunk, V2_DATATYPES[datatype]).reshape(shape)
            except ValueError as e:
                raise RequestError(f"input {name!r}: {len(chunk)} binary bytes do not make a {datatype} tensor "
                                   f"of shape {shape} ({e})") from None
            continue
        data = inp.get("data")
        if datatype == "BYTES":
            items = list(np.ravel(np.array(data, dtype=object))) if data is not None else []
            try:
                feeds[name] = np.array([base64.b64decode(str(x).encode("ascii"), validate=True) for x in items],
                                       dtype=object)
            except (binascii.Error, UnicodeEncodeError):
                raise RequestError(f"input {name!r}: BYTES elements in JSON must be base64 text") from None
            continue
        try:
            feeds[name] = np.array(data, V2_DATATYPES[datatype]).reshape(shape)
        except (ValueError, TypeError) as e:
            raise RequestError(f"input {name!r}: its data does not make a {datatype} tensor of shape {shape} "
                               f"({e})") from None
    return feeds


def encode_v2_json(model_name: str, outputs: Mapping[str, np.ndarray], request_id: str | None = None,
                   parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A V2 inference response body; BYTES outputs as UTF-8 text, numbers as JSON numbers (exact for FP32; NaN
    and infinities, which JSON lacks, as null)."""
    outs = []
    for name, a in outputs.items():
        if a.dtype == object:
            data = [x.decode("utf-8") if isinstance(x, (bytes, bytearray)) else str(x) for x in a.ravel()]
            outs.append({"name": name, "datatype": "BYTES", "shape": list(a.shape), "data": data})
        else:
            data = a.ravel().tolist()
            if a.dtype.kind == "f" and not np.isfinite(a).all():  # JSON has no NaN/inf: null, as MLServer writes NaN
                data = [x if np.isfinite(x) else None for x in data]
            outs.append({"name": name, "datatype": v2_datatype(a.dtype), "shape": list(a.shape), "data": data})
    body: dict[str, Any] = {"model_name": model_name, "outputs": outs}
    if request_id is not None:
        body["id"] = request_id
    if parameters:
        body["parameters"] = dict(parameters)
    return body


def v2_metadata(model_name: str, service: ServedModel | ServedOCR, platform: str = "pdlite") -> dict[str, Any]:
    """The V2 model metadata body: inputs and outputs with datatypes and shapes (-1: any size)."""
    return {"name": model_name, "versions": [], "platform": platform,
            "inputs": [s.as_dict() for s in service.inputs], "outputs": [s.as_dict() for s in service.outputs]}
