"""pdlite on Ray Serve (`pip install pdlite[serve]`): a deployment speaking the KServe V2 protocol's REST
endpoints (JSON), with dynamic batching over predictor clones (pdlite's batcher, or Ray Serve's `@serve.batch`),
scaled out by Ray Serve's replicas across a cluster. See docs/serving.md.

    from ray import serve
    from pdlite.integrations.ray_serve import deployment

    serve.run(deployment("model_dir_or.nb", name="mnv3", max_batch_size=8, num_replicas=2), route_prefix="/")
    # POST http://127.0.0.1:8000/v2/models/mnv3/infer  {"inputs": [{"name": "x", "datatype": "FP32", ...}]}

Tensors come as JSON or in the V2 binary data extension (what tritonclient's HTTP client sends by default);
answers are JSON. Endpoints: GET /v2/health/live, /v2/health/ready, /v2/models/NAME (metadata), /v2/models/NAME/ready; POST
/v2/models/NAME/infer. From Python, `handle.infer.remote({"x": array})` returns the outputs by name.

Batching: requests whose inputs have the same shapes and dtypes are stacked along dim 0 into one run (up to
`max_batch_size` requests, waiting at most `batch_wait_timeout_s` for more) and the outputs split back; up to
`workers` batches run at once, each on its own predictor clone. `batcher="pdlite"` (default) forms a batch when
a clone is free, so requests that arrive while all clones are busy join the next batch
(`pdlite.integrations.batching.Batcher`); `batcher="serve"` is Ray Serve's `@serve.batch`, which closes a batch
`batch_wait_timeout_s` after its first request whether or not a clone is free, so under load its batches stay
as small as what arrived in that time and queue (BENCHMARKS.md, "Dynamic batching that pays"). Stacking changes which BLAS blocks a row goes
through, so a batched answer may differ from a one-request run in the last bits (~1e-7 relative on
MobileNetV3, where even a row's position shows: rows 5-8 of a batch round unlike rows 1-4); each answer equals,
bit for bit, its rows of a local run on the same stacked batch. Models whose
outputs do not keep the batch in dim 0 (NMS detectors, the OCR app) are never stacked. `max_batch_size=1`
turns batching off. Overload: Ray Serve's `max_ongoing_requests` (per replica) and `max_queued_requests` (per
caller) bound the queue; over them HTTP callers get 503 at once.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, MissingDependencyError
from pdlite.integrations.batching import DEFAULT_BATCH_WAIT_S, Batcher, signature, split, stack
from pdlite.integrations.serving import (
    DEFAULT_MAX_REQUEST_BYTES,
    RequestError,
    ServedModel,
    decode_v2_json,
    encode_v2_json,
    served,
    split_v2_body,
    v2_metadata,
)

try:
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import JSONResponse
except ImportError as e:
    raise MissingDependencyError(f"pdlite.integrations.ray_serve needs Ray Serve: pip install pdlite[serve] ({e})") from e


class PdliteServer:
    """One replica: a pdlite model (or the OCR app, `app="ocr"`) as `workers` predictor clones."""

    def __init__(self, model: str | os.PathLike | None = None, *, app: str | None = None, name: str = "model",
                 device: str = "host", threads: int = 1, workers: int = 2, max_batch_size: int = 8,
                 batch_wait_timeout_s: float = DEFAULT_BATCH_WAIT_S, batcher: str = "pdlite",
                 options: Mapping[str, Any] | None = None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if batcher not in ("pdlite", "serve"):
            raise ConfigError(f"batcher {batcher!r}: expected 'pdlite' (batches fill while the clones are busy) or "
                              "'serve' (Ray Serve's @serve.batch)")
        self.name = name
        self.service = served(app, model, device=device, threads=threads, workers=workers, options=options,
                              max_request_bytes=max_request_bytes)
        self._executor = ThreadPoolExecutor(int(workers), thread_name_prefix=f"pdlite-{name}")
        self.max_batch_size = int(max_batch_size)
        # stack only models whose every output follows the batch: checked once on batches of two and three
        self.stack_ok = self.max_batch_size > 1 and isinstance(self.service, ServedModel) and self.service.follows_batch()
        self._batched.set_max_batch_size(self.max_batch_size)
        self._batched.set_batch_wait_timeout_s(float(batch_wait_timeout_s))
        self._batcher = Batcher(self._run, max_batch_size=self.max_batch_size, wait_s=float(batch_wait_timeout_s),
                                concurrent=int(workers), retry_alone=(RequestError,),
                                arriving=lambda: self._inside - self._batcher.inside) \
            if self.stack_ok and batcher == "pdlite" else None
        self._inside = 0  # inference requests in this replica, from reading their body to their outputs
        self.batches: list[int] = []  # the batch sizes run (for tests and benchmarks: `stats()`)

    async def _run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.service.run, feeds)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005, max_concurrent_batches=2)
    async def _batched(self, items: list[dict[str, np.ndarray]]) -> list[tuple[dict[str, np.ndarray], int]]:
        groups: dict[tuple, list[int]] = {}
        for i, feeds in enumerate(items):
            groups.setdefault(signature(feeds), []).append(i)
        answers: list[Any] = [None] * len(items)

        async def one_group(idx: list[int]) -> None:
            stacked, rows = stack([items[i] for i in idx])
            for i, part in zip(idx, split(await self._run(stacked), rows)):
                answers[i] = (part, len(idx))
            self.batches.append(len(idx))

        await asyncio.gather(*(one_group(idx) for idx in groups.values()))
        return answers

    async def infer(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The outputs by name (checked first: a `RequestError` names the input at fault)."""
        self._inside += 1
        try:
            return (await self.infer_counted(feeds))[0]
        finally:
            self._inside -= 1

    async def infer_counted(self, feeds: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        self.service.check(feeds)
        if self._batcher is not None:
            return await self._batcher(dict(feeds))
        if self.stack_ok:
            return await self._batched(dict(feeds))
        outs = await self._run(feeds)
        self.batches.append(1)
        return outs, 1

    def stats(self) -> dict[str, Any]:
        sizes = self.batches + (self._batcher.sizes if self._batcher is not None else [])
        return {"batches": len(sizes), "requests": sum(sizes), "max_batch": max(sizes, default=0)}

    async def __call__(self, request: Request) -> JSONResponse:
        path = request.url.path.rstrip("/")
        base = f"/v2/models/{self.name}"
        try:
            if request.method == "GET" and path in ("/v2/health/live", "/v2/health/ready", base + "/ready"):
                return JSONResponse({"live": True} if path.endswith("live") else {"ready": True})
            if request.method == "GET" and path == base:
                return JSONResponse(v2_metadata(self.name, self.service))
            if request.method == "POST" and path == base + "/infer":
                self._inside += 1  # on its way to the batcher while its body is read and decoded
                try:
                    body, binary = split_v2_body(await request.body(),
                                                 request.headers.get("inference-header-content-length"))
                    feeds = decode_v2_json(body, self.service, binary)
                    outs, batch = await self.infer_counted(feeds)
                finally:
                    self._inside -= 1
                wanted = [o.get("name") for o in body.get("outputs") or []] or list(outs)
                missing = [n for n in wanted if n not in outs]
                if missing:
                    raise RequestError(f"requested output(s) {missing} do not exist; outputs are {list(outs)}")
                return JSONResponse(encode_v2_json(self.name, {n: outs[n] for n in wanted}, body.get("id"),
                                                   {"batch_size": batch}))
            return JSONResponse({"error": f"no route {request.method} {path}; the model is {base}"}, 404)
        except RequestError as e:
            return JSONResponse({"error": str(e)}, e.status)
        except Exception as e:  # the engine failed on a request it took: a 500 that says why, no traceback
            return JSONResponse({"error": f"model {self.name!r}: {type(e).__name__}: {e}"}, 500)


def deployment(model: str | os.PathLike | None = None, *, app: str | None = None, name: str = "model",
               num_replicas: int = 1, max_ongoing_requests: int = 32, max_queued_requests: int = 64,
               graceful_shutdown_timeout_s: float = 20.0, ray_actor_options: Mapping[str, Any] | None = None,
               **kwargs: Any) -> Any:
    """A bound Ray Serve application: `serve.run(deployment(...), route_prefix="/")`. KWARGS go to
    `PdliteServer` (device, threads, workers, max_batch_size, batch_wait_timeout_s, options, max_request_bytes);
    the others are Ray Serve's deployment options (a replica being stopped lets its requests in progress finish
    for up to `graceful_shutdown_timeout_s`)."""
    dep = serve.deployment(PdliteServer).options(
        name=f"pdlite-{name}", num_replicas=num_replicas, max_ongoing_requests=max_ongoing_requests,
        max_queued_requests=max_queued_requests, graceful_shutdown_timeout_s=graceful_shutdown_timeout_s,
        ray_actor_options=dict(ray_actor_options or {"num_cpus": 0}))
    return dep.bind(model, app=app, name=name, **kwargs)


__all__ = ["PdliteServer", "deployment"]
