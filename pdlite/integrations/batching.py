"""Dynamic batching over NumPy arrays, free of any server: requests whose inputs have the same shapes past dim 0
and the same dtypes (`signature`) are stacked along dim 0 into one run (`stack`) and the outputs split back by
rows (`split`). Only for models whose every output keeps the batch in dim 0 (`ServedModel.follows_batch`).

`Batcher` is the asyncio queue that forms the batches for pdlite's MLServer runtime (`parameters.extra`
`max_batch_size`, `batch_wait_timeout_s`); the Ray Serve deployment forms them with Ray Serve's `@serve.batch`
and stacks with the same `stack` / `split`. Why pdlite batches for MLServer instead of MLServer's adaptive
batching: MLServer 1.7 merges requests as Python lists of numbers (its gRPC layer has already unpacked the raw
tensor bytes into lists; `sum(lists, [])`, then a new `RequestInput` and `np.array` over the merged list): for
eight 1x3x224x224 FP32 requests that costs ~100 ms on one core, more than MobileNetV3 takes for the batch.
Stacking the decoded arrays costs ~0.1 ms.

Policy: a batch starts when a run slot is free (one per predictor clone) and either `max_batch_size` requests of
one signature are queued, or the requests this server can expect are all there, or the wait is over. What it can
expect: the most requests seen in the server at once over the last `PEAK_WINDOW_S` (queued, running, and on their
way: `arriving`, the server's requests admitted but not yet handed to the batcher, e.g. still being decoded), less
those running in other slots. So a lone request (one client, or the last of a burst) waits for nothing (a timed wait
costs far more than `wait_s` on a loaded machine: the process must be scheduled again; MLServer at one client: 18 ms
p50 instead of 10), and under load a freed slot waits up to `wait_s` (from the later of its freeing and the oldest
request's arrival) for the clients just answered to send their next requests: with eight closed-loop clients and
one clone the batches are 8 instead of alternating k and 8 - k (the queued half, then the answered half; 3-4 on
average). A wait that ends short of what was expected lowers the expectation to what came, so clients that went
away cost one wait, not one per batch.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.errors import ConfigError

# how long the most requests seen at once counts as what the server can expect (a few batch runs)
PEAK_WINDOW_S = 1.0
# the servers' default batch wait: long enough for answered clients' next requests to come back through a server's
# decoding (MLServer ~4-5 ms a request on one core), short next to a batch run of a CNN worth batching
DEFAULT_BATCH_WAIT_S = 0.01

Feeds = Mapping[str, np.ndarray]


def signature(feeds: Feeds) -> tuple:
    """What requests must share to be stacked: input names, shapes past dim 0, dtypes."""
    return tuple((k, v.shape[1:], v.dtype.str) for k, v in sorted(feeds.items()))


def stack(items: Sequence[Feeds]) -> tuple[dict[str, np.ndarray], list[int]]:
    """ITEMS (one signature) stacked along dim 0, and each item's row count."""
    names = list(items[0])
    rows = [int(it[names[0]].shape[0]) for it in items]
    if len(items) == 1:
        return dict(items[0]), rows
    return {n: np.concatenate([it[n] for it in items]) for n in names}, rows


def split(outs: Mapping[str, np.ndarray], rows: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """The outputs of a stacked run cut back into each item's rows (views, no copies)."""
    parts, start = [], 0
    for r in rows:
        parts.append({k: v[start:start + r] for k, v in outs.items()})
        start += r
    return parts


@dataclass
class _Waiting:
    feeds: Feeds
    sig: tuple
    future: asyncio.Future
    since: float = field(default=0.0)


class Batcher:
    """Form batches of requests on the running event loop and run each with RUN (an awaitable over stacked feeds,
    e.g. a predictor clone on an executor thread). `await batcher(feeds)` gives (this request's outputs, the
    batch size it ran in). At most CONCURRENT batches run at once; ARRIVING (optional) says how many requests are on
    their way to it (none: start the batch now). A batch refused as a whole by RETRY_ALONE
    (e.g. a value one request's shapes make invalid) is run again request by request, so one bad request does
    not fail the others."""

    def __init__(self, run: Callable[[dict[str, np.ndarray]], Awaitable[Mapping[str, np.ndarray]]], *,
                 max_batch_size: int, wait_s: float, concurrent: int = 1,
                 retry_alone: tuple[type[BaseException], ...] = (),
                 arriving: Callable[[], int] | None = None) -> None:
        if int(max_batch_size) < 1 or float(wait_s) < 0 or int(concurrent) < 1:
            raise ConfigError(f"batching: max_batch_size {max_batch_size} (>= 1), wait {wait_s} s (>= 0), "
                              f"concurrent {concurrent} (>= 1)")
        self.run, self.retry_alone = run, retry_alone
        self.max_batch_size, self.wait_s, self.concurrent = int(max_batch_size), float(wait_s), int(concurrent)
        self.sizes: list[int] = []  # the batch sizes run, in order (benchmarks and tests read it)
        self.arriving = arriving
        self.inside = 0  # requests in the batcher: queued or running
        self._peak, self._peak_at = 0, 0.0  # the most requests seen in the server at once, and when
        self._queue: list[_Waiting] = []
        self._wake: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._collector: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()

    async def __call__(self, feeds: Feeds) -> tuple[dict[str, np.ndarray], int]:
        loop = asyncio.get_running_loop()
        if self._slots is None:  # created on the loop that uses them
            self._wake, self._slots = asyncio.Event(), asyncio.Semaphore(self.concurrent)
        item = _Waiting(feeds, signature(feeds), loop.create_future(), loop.time())
        self._queue.append(item)
        self.inside += 1
        try:
            self._seen(item.since, self.inside + self._arriving())
            self._wake.set()
            if self._collector is None or self._collector.done():
                self._collector = loop.create_task(self._collect())
            return await item.future
        finally:
            self.inside -= 1

    def _take(self) -> list[_Waiting]:
        head = self._queue[0]
        batch = [it for it in self._queue if it.sig == head.sig][:self.max_batch_size]
        taken = {id(it) for it in batch}
        self._queue = [it for it in self._queue if id(it) not in taken]
        return batch

    def _arriving(self) -> int:
        return max(0, self.arriving()) if self.arriving is not None else 0

    def _seen(self, now: float, n: int) -> None:
        """N requests in the server at NOW: the peak, kept for PEAK_WINDOW_S."""
        if n >= self._peak or now - self._peak_at > PEAK_WINDOW_S:
            self._peak, self._peak_at = n, now

    def _expected(self, now: float) -> int:
        """How many requests a batch starting NOW can expect: the recent peak less those running in other slots."""
        running = self.inside - len(self._queue)
        peak = self._peak if now - self._peak_at <= PEAK_WINDOW_S else self.inside + self._arriving()
        return max(1, peak - running)

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            await self._slots.acquire()
            free_at = loop.time()
            try:
                while True:
                    head = self._queue[0]
                    same = sum(it.sig == head.sig for it in self._queue)
                    now = loop.time()
                    if same >= self.max_batch_size:
                        break
                    arriving = self._arriving()
                    if same >= self._expected(now) and arriving <= 0:
                        break
                    left = max(head.since, free_at) + self.wait_s - now
                    if left <= 0:  # fewer came than expected: expect what is here from now on
                        self._peak, self._peak_at = self.inside + arriving, now
                        break
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), left)
                    except asyncio.TimeoutError:
                        pass
                batch = self._take()
            except BaseException:
                self._slots.release()
                raise
            task = loop.create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[_Waiting]) -> None:
        try:
            self.sizes.append(len(batch))
            results = await self._results(batch)
            for it, r in zip(batch, results):
                if it.future.done():  # the caller went away
                    continue
                if isinstance(r, BaseException):
                    it.future.set_exception(r)
                else:
                    it.future.set_result(r)
        finally:
            self._slots.release()

    async def _results(self, batch: list[_Waiting]) -> list[Any]:
        """Each request's (outputs, batch size), or the exception it gets."""
        try:
            stacked, rows = stack([it.feeds for it in batch])
            return [(p, len(batch)) for p in split(await self.run(stacked), rows)]
        except Exception as e:
            if len(batch) == 1 or not isinstance(e, self.retry_alone):
                return [e] * len(batch)
        results: list[Any] = []
        for it in batch:  # the batch was refused as a whole: find whose fault it was
            try:
                results.append((dict(await self.run(dict(it.feeds))), 1))
            except Exception as e:
                results.append(e)
        return results


__all__ = ["DEFAULT_BATCH_WAIT_S", "Batcher", "signature", "split", "stack"]
