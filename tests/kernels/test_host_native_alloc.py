"""A native kernel whose task cannot get its scratch memory raises MemoryError (never a silently incomplete output).

Allocation failures are injected through the extension's test hook (`_inject_alloc_failure(n)`: the n-th next
task scratch allocation fails) into each kernel family that allocates scratch in its tasks: depthwise (the
channel-blocked form on small maps, and without it the 3x3 stride-1, stride-2 and general forms), the blocked
GEMM with gathered im2col columns, the packed GEMM (small and wide forms), pooling and Winograd; on 1 and 2
threads. After the error the same call succeeds and gives the numbers it gave before.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pdlite.kernels.host import native
from tests.kernels._util import depthwise_rows, native_threads, shuffles16

pytestmark = pytest.mark.skipif(not native.available(), reason="native extension not built")
rng = np.random.default_rng(0)
F32 = np.float32


def _x(*shape: int) -> np.ndarray:
    return rng.normal(size=shape).astype(F32)


def _dw(x, w, blocked: bool, out: int, k, s, p):
    """A depthwise call (8 channels, out x out) with the channel-blocked form on small maps on or off (then the
    planar forms), whatever this CPU's default (the row-vector form off: it takes no scratch memory)."""
    def call():
        with shuffles16(blocked), depthwise_rows(False):
            return native.depthwise_conv2d(x, w, None, 8, out, out, k, s, (1, 1), p)
    return call


def _calls() -> dict:
    x = _x(1, 8, 12, 12)
    dw, dw5 = _x(8, 9), _x(8, 25)
    w = _x(16, 8, 3, 3)
    u = native.winograd_weights(w)
    calls = {
        "depthwise_s2": _dw(x, dw, False, 6, (3, 3), (2, 2), (1, 1)),
        "depthwise_5x5": _dw(x, dw5, False, 12, (5, 5), (1, 1), (2, 2)),
        "depthwise_3x3_same": _dw(x, dw, False, 12, (3, 3), (1, 1), (1, 1)),
        "depthwise_blocked": _dw(x, dw, True, 6, (3, 3), (2, 2), (1, 1)),
        "pool_max": lambda: native.pool2d(x, 6, 6, (3, 3), (2, 2), (1, 1), True, True),
        "winograd": lambda: native.winograd_conv3x3(x, u, None, 12, 12, (1, 1)),
    }
    if native.gemm_available():
        calls["gemm_im2col"] = lambda: native.conv2d_gemm(x, w.reshape(1, 16, 72), None, 12, 12, (3, 3), (1, 1),
                                                          (1, 1), (1, 1))
    big = _x(1, 128, 7, 7)
    small_w = native.pack_weights(_x(64, 128, 1, 1))
    wide_w = native.pack_weights(w, True)
    calls["packed_small"] = lambda: native.packed_conv(big, small_w, None, 64, 7, 7, (1, 1), (1, 1), (1, 1), (0, 0))
    calls["packed_wide"] = lambda: native.packed_conv(x, wide_w, None, 16, 12, 12, (3, 3), (1, 1), (1, 1), (1, 1),
                                                      wide=True)
    return calls


@pytest.mark.parametrize("name", sorted(_calls()))
@pytest.mark.parametrize("threads", [1, 2])
def test_scratch_allocation_failure_raises_memory_error(name: str, threads: int) -> None:
    call = _calls()[name]
    with native_threads(threads):
        try:
            ref = call()
            native._ext._inject_alloc_failure(1)
            with pytest.raises(MemoryError, match="scratch memory"):
                call()
            native._ext._inject_alloc_failure(0)
            np.testing.assert_array_equal(call(), ref)  # the next call is whole again
        finally:
            native._ext._inject_alloc_failure(0)


@pytest.mark.parametrize("threads", [1, 2])
def test_failure_raises_only_in_the_call_it_hit(threads: int) -> None:
    """Two Python threads call a native kernel over and over at once (the kernels release the GIL) while one
    allocation failure is injected: exactly one call raises MemoryError, the one whose task could not get its
    memory. (The count was process-wide: a call running at the same time raised too.)"""
    # stride 2 to 48x48: the planar stride-2 form (the row-vector form, which takes no scratch, off), scratch in every
    # task
    x, w = _x(1, 16, 96, 96), _x(16, 9)
    errors: list[int] = []
    started = threading.Barrier(3)
    stop = threading.Event()

    def loop(who: int) -> None:
        started.wait()
        while not stop.is_set():
            try:
                native.depthwise_conv2d(x, w, None, 16, 48, 48, (3, 3), (2, 2), (1, 1), (1, 1))
            except MemoryError:
                errors.append(who)

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    with native_threads(threads), depthwise_rows(False):
        try:
            for t in workers:
                t.start()
            started.wait()
            time.sleep(0.05)
            native._ext._inject_alloc_failure(1)
            deadline = time.time() + 5
            while not errors and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.1)  # calls that ran alongside the failing one have finished
        finally:
            stop.set()
            for t in workers:
                t.join()
            native._ext._inject_alloc_failure(0)
    assert len(errors) == 1, f"MemoryError in {len(errors)} calls (expected exactly the one that failed)"
