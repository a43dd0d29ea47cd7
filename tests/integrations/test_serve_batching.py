"""Dynamic batching without a server (pdlite.integrations.batching): stacking and splitting by rows, batches
formed up to their size while the run slots are busy, one signature per batch, a batch refused as a whole run
again request by request, the concurrency bound."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pdlite.errors import ConfigError
from pdlite.integrations.batching import Batcher, signature, split, stack
from pdlite.integrations.serving import RequestError


def test_stack_and_split_round_trip():
    items = [{"x": np.full((r, 3), i, np.float32), "k": np.full((r,), i, np.int64)} for i, r in enumerate((1, 2, 1))]
    stacked, rows = stack(items)
    assert rows == [1, 2, 1] and stacked["x"].shape == (4, 3) and stacked["k"].tolist() == [0, 1, 1, 2]
    for item, part in zip(items, split(stacked, rows)):
        for n in item:
            np.testing.assert_array_equal(part[n], item[n])
    assert signature(items[0]) == signature(items[1]) != signature({"x": np.zeros((1, 4), np.float32),
                                                                    "k": np.zeros((1,), np.int64)})


class FakeModel:
    """y = 2 x; records the batch row counts and how many runs overlapped; refuses rows whose x is negative."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay, self.rows, self.inside, self.most = delay, [], 0, 0

    async def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.inside += 1
        self.most = max(self.most, self.inside)
        try:
            await asyncio.sleep(self.delay)
            if (feeds["x"] < 0).any():
                raise RequestError("input 'x': negative")
            self.rows.append(len(feeds["x"]))
            return {"y": feeds["x"] * 2}
        finally:
            self.inside -= 1


def run_all(batcher: Batcher, xs: list[np.ndarray]) -> list:
    async def main():
        return await asyncio.gather(*(batcher({"x": x}) for x in xs), return_exceptions=True)
    return asyncio.run(main())


def test_batches_fill_while_the_slot_is_busy():
    model = FakeModel()
    b = Batcher(model, max_batch_size=4, wait_s=0.02, concurrent=1)
    xs = [np.full((1, 3), i, np.float32) for i in range(6)]
    got = run_all(b, xs)
    assert b.sizes == [4, 2] and model.rows == [4, 2] and model.most == 1
    for x, (outs, _) in zip(xs, got):
        np.testing.assert_array_equal(outs["y"], x * 2)
    assert [k for _, k in got] == [4, 4, 4, 4, 2, 2]


def test_concurrent_batches_and_signatures():
    model = FakeModel()
    b = Batcher(model, max_batch_size=8, wait_s=0.02, concurrent=2)
    xs = [np.full((1, 3 if i % 2 else 5), i, np.float32) for i in range(6)]  # two signatures, never mixed
    got = run_all(b, xs)
    assert sorted(b.sizes) == [3, 3] and model.most == 2
    for x, (outs, _) in zip(xs, got):
        np.testing.assert_array_equal(outs["y"], x * 2)


def test_a_refused_batch_is_run_request_by_request():
    model = FakeModel(delay=0.0)
    b = Batcher(model, max_batch_size=4, wait_s=0.05, retry_alone=(RequestError,))
    xs = [np.full((1, 2), v, np.float32) for v in (1, -1, 2)]
    got = run_all(b, xs)
    assert isinstance(got[1], RequestError) and "'x'" in str(got[1])
    for i in (0, 2):
        outs, k = got[i]
        assert k == 1
        np.testing.assert_array_equal(outs["y"], xs[i] * 2)
    plain = Batcher(FakeModel(delay=0.0), max_batch_size=4, wait_s=0.05)  # no retry: the whole batch fails
    assert all(isinstance(r, RequestError) for r in run_all(plain, xs))


def test_bad_settings_refused():
    with pytest.raises(ConfigError, match="max_batch_size 0"):
        Batcher(FakeModel(), max_batch_size=0, wait_s=0.01)


def test_no_wait_when_nothing_is_on_its_way():
    """With `arriving` saying no other request is coming, a lone request runs at once, not after wait_s."""
    import time

    b = Batcher(FakeModel(delay=0.0), max_batch_size=8, wait_s=5.0, arriving=lambda: 0)
    t0 = time.perf_counter()
    (outs, k), = run_all(b, [np.ones((1, 2), np.float32)])
    assert k == 1 and time.perf_counter() - t0 < 2.0
    np.testing.assert_array_equal(outs["y"], np.full((1, 2), 2, np.float32))


async def closed_loop(batcher: Batcher, clients: int, requests: int, think: float = 0.0) -> list[float]:
    """CLIENTS each send REQUESTS one after another (client i pauses i x THINK before each resend, as answers and
    new requests take their time over a network); each request's latency in seconds."""
    async def client(i: int) -> list[float]:
        loop, lat = asyncio.get_running_loop(), []
        for r in range(requests):
            if r:
                await asyncio.sleep(i * think)
            t0 = loop.time()
            outs, _ = await batcher({"x": np.full((1, 2), i, np.float32)})
            lat.append(loop.time() - t0)
            np.testing.assert_array_equal(outs["y"], np.full((1, 2), 2 * i, np.float32))
        return lat

    return sum(await asyncio.gather(*(client(i) for i in range(clients))), [])


def test_a_freed_slot_waits_for_the_clients_just_answered():
    """Eight closed-loop clients whose next requests come back over 0-14 ms, one slot: the batches stay 8 (they
    alternated between the queued and the answered part before), and nothing is on its way by `arriving`."""
    b = Batcher(FakeModel(delay=0.02), max_batch_size=8, wait_s=0.1, arriving=lambda: 0)
    asyncio.run(closed_loop(b, clients=8, requests=6, think=0.002))
    assert b.sizes == [8] * 6


def test_one_client_never_waits_and_gone_clients_cost_one_wait():
    """A lone client's requests run at once; after eight clients leave but one, at most one batch waits wait_s."""
    wait = 0.3
    alone = Batcher(FakeModel(delay=0.0), max_batch_size=8, wait_s=wait, arriving=lambda: 0)
    assert max(asyncio.run(closed_loop(alone, clients=1, requests=5))) < wait
    b = Batcher(FakeModel(delay=0.0), max_batch_size=8, wait_s=wait, arriving=lambda: 0)

    async def leave():
        await closed_loop(b, clients=8, requests=1)  # the peak: 8 at once
        return await closed_loop(b, clients=1, requests=5)
    lat = asyncio.run(leave())
    assert sum(t >= wait * 0.9 for t in lat) <= 1 and sum(lat) < 2 * wait
    assert b.sizes[-5:] == [1] * 5
