"""Compute threads per predictor run: `set_threads` honoured for one run, then BLAS restored.

`run_threads(n, native_gemm)` wraps a predictor's run: pdlite's native kernel pool runs `n`
threads, and the BLAS NumPy uses runs `n` (or 1 while the native pool runs the GEMMs, so that
the two pools do not compete) through threadpoolctl's limiter. When the last run in progress
(over all threads of the process) ends, BLAS gets back the thread count it had before, so a
user's own NumPy code is not left single-threaded. Without threadpoolctl, the same is done on
NumPy's OpenBLAS directly (pdlite/kernels/host/blas.py).

The thread count does not change results: BLAS and the native pool split a GEMM's output, not
its reductions.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pdlite.kernels.host import blas, native

_lock = threading.Lock()
_active = 0  # predictor runs in progress, over every thread
_restore: Any = None  # what undoes the first run's BLAS limit: a threadpoolctl limiter or ("count", n)
_controller: Any = None
_native_now: int | None = None


def _threadpool_controller() -> Any:
    """threadpoolctl's controller over the loaded BLAS libraries (made once; None without threadpoolctl)."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController().select(user_api="blas")
    return _controller or None


def _limit_blas(n: int) -> Any:
    """Set BLAS to `n` threads; returns what restores the previous count."""
    ctl = _threadpool_controller()
    if ctl is not None:
        return ctl.limit(limits=n)
    before = blas.get_num_threads()
    blas.set_num_threads(n)
    return ("count", before)


def _undo(saved: Any) -> None:
    if isinstance(saved, tuple):
        if saved[1] is not None:
            blas.set_num_threads(saved[1])
    elif saved is not None:
        saved.restore_original_limits()


def _set_native(n: int) -> None:
    global _native_now
    if n != _native_now:
        native.set_num_threads(n)
        _native_now = n


@contextmanager
def run_threads(n: int, native_gemm: bool = False) -> Iterator[None]:
    """Within the block, compute with `n` threads (BLAS 1 when `native_gemm`); BLAS restored after the last run."""
    global _active, _restore
    n = max(1, int(n))
    want = 1 if native_gemm else n
    with _lock:
        if _active == 0:
            _restore = _limit_blas(want)
        elif get_blas_threads() != want:
            _limit_blas(want)  # a later run's count while runs overlap; the first run's limiter restores
        _active += 1
        _set_native(n)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                saved, _restore = _restore, None
                _undo(saved)


def use_native_gemm(on: bool) -> None:
    """Kept for RuntimeProgram.run: the thread counts are set by `run_threads` around a predictor's run,
    which already knows whether the native kernels run the GEMMs; nothing to do here."""


def blas_thread_control() -> bool:
    """True when pdlite can set the BLAS thread count."""
    ctl = _threadpool_controller()
    return blas.found() or bool(ctl is not None and ctl.lib_controllers)


def get_blas_threads() -> int | None:
    """BLAS's current thread count (None when unknown)."""
    ctl = _threadpool_controller()
    if ctl is not None and ctl.lib_controllers:
        return int(ctl.lib_controllers[0].num_threads)
    return blas.get_num_threads()


def blas_library() -> Any:
    """The OpenBLAS library NumPy uses (see pdlite.kernels.host.blas.library)."""
    return blas.library()
