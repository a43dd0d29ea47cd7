"""Large memory-bound NumPy work (elementwise ops, scale, concat, upsampling copies) split over threads.

NumPy releases the GIL inside its loops, so a big `np.add(a, b, out=o)` cut into slabs along one axis runs on
several cores; on memory-bound ops two threads give ~1.8x. The slabs are disjoint parts of the output and each
element is computed by the same loop as without the split, so results are bit-identical whatever the thread
count. Small tensors (under MIN_ELEMENTS) run on the calling thread: handing work to a thread costs tens of
microseconds.

The thread count follows the predictor's `set_threads` for the duration of a run (pdlite/runtime/threads.py calls
`set_threads`); the helper threads are one process-wide pool, started on first use (and again in a forked
child, where the parent's threads do not exist).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MIN_ELEMENTS = 1 << 17  # below this many output elements: one thread
_threads = 1
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there; start a new pool on first use."""
    global _pool, _pool_size, _lock
    _pool, _pool_size, _lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def set_threads(n: int) -> None:
    """Threads used by `run_slabs` from now on (the calling thread included)."""
    global _threads
    _threads = max(1, int(n))


def threads() -> int:
    return _threads


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n:
            old = _pool
            _pool, _pool_size = ThreadPoolExecutor(n, thread_name_prefix="pdlite-host"), n
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def split_axis(shape: Sequence[int], n: int, below: int | None = None, skip: int | None = None) -> int | None:
    """The first axis (before `below`, other than `skip`) with at least `n` entries; None when the tensor is too
    small to be worth splitting or no such axis is long enough."""
    if n < 2 or int(np.prod(shape, dtype=np.int64)) < MIN_ELEMENTS:
        return None
    for axis, size in enumerate(shape[:below]):
        if size >= n and axis != skip:
            return axis
    return None


def at(axis: int, sl: slice) -> tuple[slice, ...]:
    """The index of slab `sl` along `axis`."""
    return (slice(None),) * axis + (sl,)


def run_slabs(out: np.ndarray, axis: int, work: Callable[[slice], None]) -> None:
    """Call `work(sl)` for slabs `sl` covering `out`'s `axis`, on `threads()` threads; `work` writes
    out[..., sl, ...] only. The first exception raised by any slab is re-raised."""
    n = min(_threads, out.shape[axis])
    bounds = np.linspace(0, out.shape[axis], n + 1).astype(int)
    slabs = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    if len(slabs) < 2:
        work(slice(None))
        return
    pending = [_executor(len(slabs) - 1).submit(work, sl) for sl in slabs[1:]]
    try:
        work(slabs[0])
    finally:
        errors = [f.exception() for f in pending]
    for e in errors:
        if e is not None:
            raise e


def _part(a: np.ndarray, ndim: int, axis: int, sl: slice) -> np.ndarray:
    """`a`'s part for output slab `sl` along `axis` under NumPy broadcasting to `ndim` dims."""
    k = axis - (ndim - a.ndim)
    if k < 0 or a.shape[k] == 1:
        return a
    index = [slice(None)] * a.ndim
    index[k] = sl
    return a[tuple(index)]


def ufunc(fn: np.ufunc, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """fn(x, y) with NumPy broadcasting, split over threads; None when it is not worth it (the caller computes it
    itself): one thread, a small result, or operands of other dtypes than one float type."""
    if _threads < 2 or x.dtype != y.dtype or x.dtype.kind != "f":
        return None
    shape = np.broadcast_shapes(x.shape, y.shape)
    axis = split_axis(shape, _threads)
    if axis is None:
        return None
    out = np.empty(shape, x.dtype)
    nd = len(shape)

    def work(sl: slice) -> None:
        fn(_part(x, nd, axis, sl), _part(y, nd, axis, sl), out=out[at(axis, sl)])

    run_slabs(out, axis, work)
    return out


def map_into(x: np.ndarray, fn: Callable[[np.ndarray, np.ndarray], None]) -> np.ndarray | None:
    """A new array `out` like float `x` with `fn(x_slab, out_slab)` run on slabs over threads (`fn` writes its
    out_slab from its x_slab only); None when not worth it."""
    if x.dtype.kind != "f":
        return None
    axis = split_axis(x.shape, _threads)
    if axis is None:
        return None
    out = np.empty(x.shape, x.dtype)
    run_slabs(out, axis, lambda sl: fn(x[at(axis, sl)], out[at(axis, sl)]))
    return out


def concat(xs: Sequence[np.ndarray], axis: int) -> np.ndarray | None:
    """np.concatenate(xs, axis) with the copies split over another axis (a leading one if it is long enough:
    contiguous slabs); None when not worth it."""
    if _threads < 2 or len({x.dtype for x in xs}) != 1 or any(x.ndim != xs[0].ndim for x in xs):
        return None
    shape = list(xs[0].shape)
    shape[axis] = sum(int(x.shape[axis]) for x in xs)
    split = split_axis(shape, _threads, skip=axis)
    if split is None:
        return None
    out = np.empty(shape, xs[0].dtype)

    def work(sl: slice) -> None:
        np.concatenate([x[at(split, sl)] for x in xs], axis=axis, out=out[at(split, sl)])

    run_slabs(out, split, work)
    return out
