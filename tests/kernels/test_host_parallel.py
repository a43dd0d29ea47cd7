"""pdlite/kernels/host/parallel.py: big elementwise / scale / concat / upsampling work split over threads.

Checked: with 2 and 3 threads the kernels give bit-identical outputs to one thread (each element computed by the
same NumPy loop), on shapes over the split threshold with NumPy and Paddle (axis) broadcasting, both scale forms,
concat along inner axes and nearest upsampling split over N or over C; the split really happens (the slabs run
on pool threads); a slab's exception reaches the caller; and a forked child gets a working pool.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from pdlite.kernels.host import parallel
from tests.kernels._util import run_op


@contextmanager
def threads(n: int):
    before = parallel.threads()
    parallel.set_threads(n)
    try:
        yield
    finally:
        parallel.set_threads(before)


def _both(op: str, ins: dict, attrs: dict, slot: str = "Out") -> None:
    """The op's output on 2 and 3 threads equals its output on 1, and the work really was split."""
    calls = []
    split = parallel.run_slabs

    def counting(out, axis, work):
        calls.append(axis)
        split(out, axis, work)

    with threads(1):
        ref = run_op(op, ins, attrs)[slot][0]
    assert not calls
    for n in (2, 3):
        parallel.run_slabs = counting
        try:
            with threads(n):
                got = run_op(op, ins, attrs)[slot][0]
        finally:
            parallel.run_slabs = split
        assert calls, f"{op} did not split on {n} threads"
        calls.clear()
        assert got.dtype == ref.dtype and got.shape == ref.shape and np.array_equal(got, ref), (op, n)
        assert got.flags["C_CONTIGUOUS"]


rng = np.random.default_rng(0)
BIG = (2, 24, 64, 48)  # 147456 elements, over MIN_ELEMENTS


@pytest.mark.parametrize("op", ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_max"])
@pytest.mark.parametrize("y_shape, axis", [(BIG, -1), ((2, 24, 1, 1), -1), ((24,), 1), ((1, 1, 64, 48), -1),
                                           ((48,), -1)], ids=["same", "per_channel", "paddle_axis", "plane", "row"])
def test_elementwise_split_is_bit_identical(op: str, y_shape: tuple, axis: int) -> None:
    assert parallel.MIN_ELEMENTS <= int(np.prod(BIG))
    x = rng.normal(size=BIG).astype(np.float32)
    y = rng.normal(size=y_shape).astype(np.float32)
    _both(op, {"X": [x], "Y": [y]}, {"axis": axis})


def test_single_image_splits_over_channels() -> None:
    x = rng.normal(size=(1, 32, 80, 80)).astype(np.float32)
    _both("elementwise_add", {"X": [x], "Y": [x[:, ::-1].copy()]}, {"axis": -1})


@pytest.mark.parametrize("after, bias", [(True, 0.25), (False, 0.25), (True, 0.0)])
def test_scale_split_is_bit_identical(after: bool, bias: float) -> None:
    x = rng.normal(size=BIG).astype(np.float32)
    _both("scale", {"X": [x]}, {"scale": 0.6329658627510071, "bias": bias, "bias_after_scale": after})


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_concat_split_is_bit_identical(axis: int) -> None:
    xs = []
    for k in range(3):
        shape = list(BIG)
        shape[axis] = shape[axis] // 2 + k
        xs.append(rng.normal(size=shape).astype(np.float32))
    _both("concat", {"X": xs}, {"axis": axis})


@pytest.mark.parametrize("n", [1, 4])
def test_nearest_upsampling_split_is_bit_identical(n: int) -> None:
    x = rng.normal(size=(n, 24, 40, 40)).astype(np.float32)
    _both("nearest_interp_v2", {"X": [x]}, {"scale": [2.0, 2.0], "interp_method": "nearest", "align_corners": False})


def test_work_runs_on_pool_threads_and_errors_reach_the_caller() -> None:
    seen: set[int] = set()
    out = np.zeros((4, 1 << 16), np.float32)

    def work(sl: slice) -> None:
        seen.add(threading.get_ident())
        out[sl] = 1

    with threads(2):
        parallel.run_slabs(out, 0, work)
    assert len(seen) == 2 and out.all()

    def bad(sl: slice) -> None:
        if sl.start:
            raise ValueError("slab failed")

    with threads(2), pytest.raises(ValueError, match="slab failed"):
        parallel.run_slabs(out, 0, bad)


def test_small_tensors_stay_on_the_calling_thread() -> None:
    with threads(2):
        assert parallel.ufunc(np.add, np.ones(100, np.float32), np.ones(100, np.float32)) is None
        assert parallel.ufunc(np.add, np.ones(BIG, np.int32), np.ones(BIG, np.int32)) is None  # floats only
    with threads(1):
        assert parallel.ufunc(np.add, np.ones(BIG, np.float32), np.ones(BIG, np.float32)) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_forked_child_gets_a_working_pool() -> None:
    x = np.ones(BIG, np.float32)
    with threads(2):
        assert parallel.ufunc(np.add, x, x) is not None  # the parent's pool is started
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: would hang on the parent's (absent) threads without the at-fork reset
            ok = False
            try:
                got = parallel.ufunc(np.add, x, x)
                ok = got is not None and bool(np.all(got == 2))
            finally:
                os.write(w, b"1" if ok else b"0")
                os._exit(0)
        os.close(w)
        import select

        ready, _, _ = select.select([r], [], [], 30)
        result = os.read(r, 1) if ready else b"timeout"
        os.waitpid(pid, 0)
    assert result == b"1", result
