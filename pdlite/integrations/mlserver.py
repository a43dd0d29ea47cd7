"""pdlite as an MLServer inference runtime (`pip install pdlite[serve]`): any KServe V2 client can call it.

A model folder holds a `model-settings.json` (examples/serving/):

    {"name": "mnv3", "implementation": "pdlite.integrations.mlserver.PdliteRuntime",
     "parameters": {"uri": "./mobilenet_v3_small",
                    "extra": {"device": "host", "threads": 1, "workers": 2, "max_queued": 16}}}

and `mlserver start <folder>` serves it on http://HOST:8080/v2/models/mnv3/infer (gRPC on 8081).

`parameters.uri`: a Paddle model folder (any layout) or an optimized `.nb`, relative to the settings file.
`parameters.extra`:
  - `device`: host (default), intel_openvino, onnxruntime or auto; `threads`: compute threads per run (1);
  - `workers`: predictor clones, i.e. requests run at once in this process (default 1); they share the weights;
  - `max_queued`: requests admitted at once, running or waiting for a clone (default 4 x workers, with
    batching at least (workers + 1) x max_batch_size: full batches running and one forming); the next
    one is answered 503 at once (MLServer has no queue bound of its own);
  - `max_request_bytes`: a request's tensors in all (64 MiB); larger ones are answered 413;
  (over gRPC: 503 is UNAVAILABLE, 413 RESOURCE_EXHAUSTED, 400 INVALID_ARGUMENT; see GRPC_CODES)
  - `max_batch_size` (1: off), `batch_wait_timeout_s` (0.01): pdlite's dynamic batching (see below);
  - `app`: "ocr" serves the OCR app (no uri): input `image`, BYTES [1], one encoded image (base64 in JSON,
    raw bytes in gRPC); outputs `boxes` INT32 [n, 4, 2], `scores` FP32 [n], `texts` BYTES [n] and `lines`
    BYTES [1] (the same as one JSON string);
  - `options`: pdlite options (`config.set_option`), or the OCR app's keyword arguments.

Requests are checked before any run: an unknown or missing input, another datatype, a shape the model does
not take, bytes that are no image are answered 400 (MLServer's `InferenceError`, the V2 `{"error": ...}` body)
with a message naming the input and the datatype and shape expected; nothing a client sends gives a 500.
Dynamic batching: `extra.max_batch_size` N > 1 stacks up to N requests' decoded arrays along dim 0 into one run
on a free clone (`pdlite.integrations.batching.Batcher`: a batch starts when a clone is free and N requests are
queued, the oldest has waited `batch_wait_timeout_s`, or no other request is being decoded); answers carry
`parameters.batch_size`. Use it rather
than MLServer's own adaptive batching (`max_batch_size` / `max_batch_time` at the top of model-settings.json),
which works but merges requests as Python lists of numbers and costs more than it saves on an image CNN
(BENCHMARKS.md, "Dynamic batching that pays"). Either one only for models whose outputs all keep the batch in
dim 0; the load refuses both for the others (NMS detectors, the OCR app), whose answers would be split wrongly.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pdlite.errors import InputError, MissingDependencyError, PdliteError
from pdlite.integrations.batching import DEFAULT_BATCH_WAIT_S, Batcher
from pdlite.integrations.serving import (
    OCR_INPUT,
    V2_DATATYPES,
    Admission,
    RequestError,
    ServedModel,
    ServedOCR,
    TensorSpec,
    served,
)

try:
    from mlserver import MLModel
    from mlserver.codecs import NumpyCodec
    from mlserver.errors import InferenceError, MLServerError
    from mlserver.types import (
        InferenceRequest,
        InferenceResponse,
        MetadataModelResponse,
        MetadataTensor,
        Parameters,
        RequestInput,
        ResponseOutput,
    )
except ImportError as e:
    raise MissingDependencyError(f"pdlite.integrations.mlserver needs MLServer: pip install pdlite[serve] ({e})") from e


# gRPC codes for the HTTP statuses pdlite answers that MLServer's gRPC servicer does not map (its
# mlserver/grpc/utils.py STATUS_CODE_MAPPING has 400, 404, 422 and 500; any other status went out as UNKNOWN):
# 503 (overload) and 429 as gRPC's HTTP mapping gives them, UNAVAILABLE, which gRPC clients may retry; 413 (payload
# over max_request_bytes) as gRPC's own "message larger than max", RESOURCE_EXHAUSTED. Added once, in the MLServer
# process that serves gRPC (it imports this runtime class to build the model registry); MLServer's own entries kept.
GRPC_CODES = {503: "UNAVAILABLE", 429: "UNAVAILABLE", 413: "RESOURCE_EXHAUSTED"}


def _map_grpc_codes() -> None:
    try:
        import grpc
        from mlserver.grpc import utils
    except ImportError:  # MLServer without its gRPC server: nothing to map
        return
    for status, code in GRPC_CODES.items():
        utils.STATUS_CODE_MAPPING.setdefault(status, getattr(grpc.StatusCode, code))


_map_grpc_codes()

# The gRPC requests' raw tensor bytes as arrays, for pdlite's models: MLServer 1.7's gRPC servicer unpacks every
# raw_input_contents entry into a Python list (`mlserver.raw.inject_raw`: struct.unpack, then TensorData over the
# list) and a runtime can only turn that list back into an array: for a 1x3x224x224 FP32 tensor ~3-5 ms CPU a
# request on MLServer's one event loop, most of what the loop spends on a request. For requests to a model of this
# runtime (`_RAW_MODELS`) a numeric input's bytes become a flat read-only `np.frombuffer` view instead (no
# copy; `_tensor` reshapes it); a length other than the shape and datatype say is answered 400 naming the input
# (MLServer: INTERNAL, "unpack requires a buffer of N bytes"); BYTES, BOOL, other runtimes' models in the same
# server and models with MLServer's adaptive batching go through MLServer's own unpacking as before, and so does
# every request while MLServer's response cache is on (its cache key is the request as JSON, which an array
# would fail). Installed once per process that imports
# this module (the one that serves gRPC imports it to build its model registry); MLServer imports a runtime's module
# afresh for each model, so the names live on the installed function, which every copy of this module shares.
_raw_state = threading.local()  # set while the gRPC servicer converts a request to one of them


def _keep_raw_arrays() -> set[str]:
    """The names of the models whose raw tensors become arrays (installing the change on first call)."""
    try:
        from mlserver.grpc import converters, servicers
        from mlserver.types import TensorData
    except ImportError:  # MLServer without its gRPC server: nothing to change
        return set()
    if hasattr(converters.inject_raw, "pdlite_models"):
        return converters.inject_raw.pdlite_models
    models: set[str] = set()
    unpack, convert = converters.inject_raw, servicers.InferenceServicer._InsertHeaders

    def inject_raw(elems: list, raw_contents: list) -> list:
        if not getattr(_raw_state, "arrays", False):
            return unpack(elems, raw_contents)
        bare = [elem for elem in elems if not elem.data]  # MLServer's rule: inputs without data take raw entries
        if len(bare) > len(raw_contents):
            raise InferenceError(f"inputs {[e.name for e in bare]} have no data and raw_input_contents holds "
                                 f"{len(raw_contents)} entries")
        for elem, raw in zip(bare, raw_contents):
            dt = V2_DATATYPES.get(_datatype(elem))
            n = int(np.prod(elem.shape, dtype=np.int64)) if elem.shape else 1
            if dt is not None and (n < 0 or len(raw) != n * dt.itemsize):  # MLServer: struct.error, INTERNAL
                raise InferenceError(f"input {elem.name!r}: {len(raw)} raw bytes, expected {max(n, 0) * dt.itemsize}"
                                     f" for datatype {_datatype(elem)} and shape {list(elem.shape)}")
            if dt is not None and dt.kind in "fiu":
                elem.data = TensorData.model_construct(root=np.frombuffer(raw, dt.newbyteorder("<")))
            else:
                unpack([elem], [raw])
        return elems

    def insert_headers(servicer: Any, request: Any, context: Any) -> InferenceRequest:
        """MLServer's request conversion (ModelInfer, ModelStreamInfer), with arrays for pdlite's models."""
        plane = getattr(servicer, "_data_plane", None)
        _raw_state.arrays = request.model_name in models and getattr(plane, "_response_cache", True) is None
        try:
            return convert(servicer, request, context)
        finally:
            _raw_state.arrays = False

    inject_raw.pdlite_models = models
    converters.inject_raw = inject_raw
    servicers.InferenceServicer._InsertHeaders = insert_headers
    return models


_RAW_MODELS = _keep_raw_arrays()


def _error(e: RequestError) -> MLServerError:
    return InferenceError(str(e)) if e.status == 400 else MLServerError(str(e), e.status)


def _datatype(inp: RequestInput) -> str:
    return str(getattr(inp.datatype, "value", inp.datatype))


def _image_bytes(inp: RequestInput) -> bytes:
    """The encoded image of the OCR app's input: base64 text (JSON) or raw bytes (gRPC)."""
    data = getattr(inp.data, "root", inp.data)
    items = data if isinstance(data, list) else [data]
    if _datatype(inp) != "BYTES" or len(items) != 1:
        raise RequestError(f"input {inp.name!r}: expected datatype BYTES and shape [1] (one encoded image, base64 "
                           f"in JSON), got {_datatype(inp)} with {len(items)} element(s)")
    item = items[0]
    if isinstance(item, str):
        try:
            return base64.b64decode(item.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise RequestError(f"input {inp.name!r}: a BYTES element in JSON must be the image in base64 "
                               "(content_type base64); this one is not valid base64") from None
    if isinstance(item, (bytes, bytearray)):
        try:
            return base64.b64decode(bytes(item), validate=True)
        except binascii.Error:
            return bytes(item)
    raise RequestError(f"input {inp.name!r}: expected BYTES (an encoded image), got {type(item).__name__}")


def _declared_bytes(inp: RequestInput) -> int:
    dt = V2_DATATYPES.get(_datatype(inp))
    n = int(np.prod([max(int(d), 0) for d in inp.shape], dtype=np.int64)) if inp.shape else 1
    return n * (dt.itemsize if dt is not None else 1)


def _tensor(inp: RequestInput) -> np.ndarray:
    """A numeric input's tensor, as NumpyCodec.decode_input gives it: gRPC raw bytes arrive as a flat array
    (`_keep_raw_arrays`), reshaped here without a copy. Otherwise MLServer hands the data over as a flat Python
    list, and np.fromiter reads such a list faster than NumpyCodec's np.array (a 1x3x224x224 FP32 tensor: 1.36
    against 1.60 ms, on the event loop of every request); nested lists and BYTES go through NumpyCodec."""
    data = getattr(inp.data, "root", inp.data)
    if isinstance(data, np.ndarray):  # gRPC raw bytes, kept as an array (_keep_raw_arrays)
        return data.reshape(list(inp.shape))
    dt = V2_DATATYPES.get(_datatype(inp))
    if dt is None or dt.kind not in "fiu" or not isinstance(data, list) or (data and isinstance(data[0], list)):
        return NumpyCodec.decode_input(inp)
    return np.fromiter(data, dt, count=len(data)).reshape(list(inp.shape))


def _output(name: str, array: np.ndarray) -> ResponseOutput:
    if array.dtype == object:  # BYTES: UTF-8 text as JSON strings
        data = [x.decode("utf-8") if isinstance(x, (bytes, bytearray)) else str(x) for x in array.ravel()]
        return ResponseOutput(name=name, datatype="BYTES", shape=list(array.shape), data=data)
    out = NumpyCodec.encode_output(name, array)
    out.shape = list(array.shape)  # keep [] and [n] as they are (the codec would add a batch dim to a scalar)
    out.parameters = None
    return out


class PdliteRuntime(MLModel):
    """An MLServer runtime over pdlite predictor clones (see the module docstring for model-settings.json)."""

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        # also in the process that serves gRPC when parallel workers run the model; not with MLServer's adaptive
        # batching, whose merge adds lists (sum(lists, [])) and would meet arrays if JSON and gRPC requests mixed
        if (settings.max_batch_size or 1) <= 1:
            _RAW_MODELS.add(self.name)

    async def load(self) -> bool:
        params = self.settings.parameters
        extra = dict((params.extra if params is not None else None) or {})
        app = extra.pop("app", None)
        known = {"device", "threads", "workers", "max_queued", "max_request_bytes", "options", "max_batch_size",
                 "batch_wait_timeout_s"}
        unknown = sorted(set(extra) - known)
        if unknown:
            raise MLServerError(f"model {self.name!r}: unknown parameters.extra {unknown}; known: "
                                f"{sorted(known | {'app'})}", 422)
        model = None
        if app is None:
            from mlserver.utils import get_model_uri

            model = await get_model_uri(self.settings)
        workers = int(extra.get("workers", 1))
        kwargs = {k: extra[k] for k in ("device", "threads", "options", "max_request_bytes") if k in extra}
        loop = asyncio.get_running_loop()
        try:
            self._service = await loop.run_in_executor(None, lambda: served(app, model, workers=workers, **kwargs))
        except PdliteError as e:
            raise MLServerError(f"model {self.name!r}: {e}", 422) from None
        batch = int(extra.get("max_batch_size", 1))
        for where, n in (("max_batch_size", self.settings.max_batch_size), ("extra.max_batch_size", batch)):
            if n > 1 and not (isinstance(self._service, ServedModel) and self._service.follows_batch()):
                raise MLServerError(f"model {self.name!r}: {where} {n} (batching) needs a model whose outputs all "
                                    "keep the batch in dim 0; this one's do not (an NMS detector, the OCR app): "
                                    f"remove {where}", 422)
        queued = extra.get("max_queued", max(4 * workers, (workers + 1) * batch))  # room for batches to form
        self._admission = Admission(int(queued), f"model {self.name!r}")
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=f"pdlite-{self.name}")
        self._batcher = None
        if batch > 1:
            try:
                self._batcher = Batcher(self._run, max_batch_size=batch, concurrent=workers,
                                        wait_s=float(extra.get("batch_wait_timeout_s", DEFAULT_BATCH_WAIT_S)),
                                        retry_alone=(RequestError, InputError), arriving=self._arriving)
            except PdliteError as e:
                raise MLServerError(f"model {self.name!r}: {e}", 422) from None
        return True

    def _arriving(self) -> int:
        """Requests admitted but not yet at the batcher (being decoded): worth a batch's wait."""
        return self._admission.inside - self._batcher.inside

    async def _run(self, feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._service.run, feeds)

    async def unload(self) -> bool:
        _RAW_MODELS.discard(self.name)
        executor = getattr(self, "_executor", None)  # none when load failed
        if executor is not None:
            executor.shutdown(wait=True)
        return True

    def _specs(self, which: str) -> list[TensorSpec]:
        return list(getattr(self._service, which))

    async def metadata(self) -> MetadataModelResponse:
        meta = await super().metadata()
        meta.platform = meta.platform or "pdlite"
        if not meta.inputs:
            meta.inputs = [MetadataTensor(**s.as_dict()) for s in self._specs("inputs")]
        if not meta.outputs:
            meta.outputs = [MetadataTensor(**s.as_dict()) for s in self._specs("outputs")] or None
        return meta

    def _feeds(self, payload: InferenceRequest) -> dict[str, Any]:
        limit = self._service.max_request_bytes
        total = sum(_declared_bytes(inp) for inp in payload.inputs)
        if total > limit:
            names = [inp.name for inp in payload.inputs]
            raise RequestError(f"input(s) {names}: {total} bytes declared in all, more than this service takes "
                               f"({limit} bytes; parameter max_request_bytes)", 413)
        feeds: dict[str, Any] = {}
        for inp in payload.inputs:
            if inp.name in feeds:
                raise RequestError(f"input {inp.name!r} given twice")
            if isinstance(self._service, ServedOCR) and inp.name == OCR_INPUT:
                feeds[inp.name] = np.array([_image_bytes(inp)], dtype=object)
                continue
            try:
                feeds[inp.name] = _tensor(inp)
            except (ValueError, TypeError, OverflowError) as e:
                raise RequestError(f"input {inp.name!r}: its data does not make a {_datatype(inp)} tensor of "
                                   f"shape {list(inp.shape)} ({e})") from None
        return feeds

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        try:
            with self._admission.enter():
                feeds = self._feeds(payload)
                self._service.check(feeds)  # refuse here, before waiting for a worker
                if self._batcher is not None:
                    outs, batch = await self._batcher(feeds)
                else:
                    outs, batch = await self._run(feeds), 0
        except RequestError as e:
            raise _error(e) from None
        except MLServerError:
            raise
        except Exception as e:  # the engine failed on a request it took: a 500 that says why, no traceback
            raise MLServerError(f"model {self.name!r}: {type(e).__name__}: {e}", 500) from None
        wanted = [o.name for o in payload.outputs] if payload.outputs else list(outs)
        missing = [n for n in wanted if n not in outs]
        if missing:
            raise InferenceError(f"requested output(s) {missing} do not exist; outputs are {list(outs)}")
        return InferenceResponse(model_name=self.name, model_version=self.version, id=payload.id,
                                 outputs=[_output(n, outs[n]) for n in wanted],
                                 parameters=Parameters(batch_size=batch) if batch else None)


__all__ = ["PdliteRuntime"]
