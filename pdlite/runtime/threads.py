"""Compute threads per predictor run: `set_threads` honoured for one run, then BLAS restored.

`run_threads(n, native_gemm)` wraps a predictor's run: pdlite's native kernel pool runs `n`
threads, and the BLAS NumPy uses runs `n` (or 1 while the native pool runs the GEMMs, so that
the two pools do not compete) through threadpoolctl's controllers. Where torch is loaded (the CUDA
target, which also runs on torch's CPU), torch's intra-op threads (its OpenMP and MKL pools) run `n`
too. When the last run in progress (over all threads of the process) ends, each pool gets back the
thread count it had before, so a user's own NumPy or torch code is not left single-threaded. Where
threadpoolctl recognises no BLAS, the same is done on NumPy's OpenBLAS directly
(pdlite/kernels/host/blas.py).

The native kernels' results do not depend on the thread count, nor on which thread ran which part (threads
may take work from each other, native_src/threadpool.c); OpenBLAS's split does on some CPUs, so
results across thread counts agree within tolerance, not bit for bit (docs/determinism.md).
"""
from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pdlite.kernels.host import blas, native

_lock = threading.Lock()
_active = 0  # predictor runs in progress, over every thread
_restore: list[tuple[Any, int]] = []  # (controller, count) to put back when the last run in progress ends
_controllers: list[Any] | None = None
_native_now: int | None = None


def _blas_controllers() -> list[Any]:
    """What sets BLAS thread counts (made once): pdlite.kernels.host.blas for NumPy's OpenBLAS, threadpoolctl's
    controller for any other BLAS loaded. Each has get/set_num_threads. Not threadpoolctl's for NumPy's OpenBLAS:
    OpenBLAS's count is process-wide, and threadpoolctl (3.6+) lets only the first thread that set it set it again,
    others "silently do nothing" - a run on a worker thread (a clone) then ran with another thread count than it
    asked for, and OpenBLAS's sums depend on the split on some CPUs (not bit-equal to the same run on the main
    thread). pdlite serialises its own changes under `_lock`."""
    global _controllers
    if _controllers is None:
        from threadpoolctl import ThreadpoolController

        found = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        if blas.found():  # NumPy's OpenBLAS set through pdlite's own binding, never threadpoolctl's (see below)
            lib = os.path.realpath(blas.library()._name)  # type: ignore[union-attr]
            found = [blas] + [c for c in found if os.path.realpath(getattr(c, "filepath", "")) != lib]
        _controllers = found
    return _controllers


class _TorchThreads:
    """torch's intra-op thread count (torch.set_num_threads also sets the OpenMP and MKL pools torch loaded)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def get_num_threads(self) -> int:
        return int(self._torch.get_num_threads())

    def set_num_threads(self, n: int) -> None:
        self._torch.set_num_threads(n)


def _torch_controller() -> _TorchThreads | None:
    """torch's thread control when torch is already imported (never imports it)."""
    torch = sys.modules.get("torch")
    return _TorchThreads(torch) if torch is not None and hasattr(torch, "set_num_threads") else None


def _limit(n_blas: int, n_torch: int) -> list[tuple[Any, int]]:
    """Set every BLAS to `n_blas` threads and torch (if loaded) to `n_torch`; returns the (controller, previous
    count) of those that changed."""
    changed = []
    torch = _torch_controller()
    pools = [(c, n_blas) for c in _blas_controllers()] + ([(torch, n_torch)] if torch is not None else [])
    for c, n in pools:
        before = c.get_num_threads()
        if before is not None and before != n:
            c.set_num_threads(n)
            changed.append((c, int(before)))
    return changed


def _undo(changed: list[tuple[Any, int]]) -> None:
    for c, before in changed:
        c.set_num_threads(before)


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
            _restore = _limit(want, n)
        else:
            _limit(want, n)  # a later run's count while runs overlap; the first run's record restores
        _active += 1
        _set_native(n)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                saved, _restore = _restore, []
                _undo(saved)


def use_native_gemm(on: bool) -> None:
    """Kept for RuntimeProgram.run: the thread counts are set by `run_threads` around a predictor's run,
    which already knows whether the native kernels run the GEMMs; nothing to do here."""


def blas_thread_control() -> bool:
    """True when pdlite can set the BLAS thread count."""
    return bool(_blas_controllers())


def get_blas_threads() -> int | None:
    """The thread count of (the first) BLAS (None when unknown)."""
    ctls = _blas_controllers()
    return int(ctls[0].get_num_threads()) if ctls else None


def blas_library() -> Any:
    """The OpenBLAS library NumPy uses (see pdlite.kernels.host.blas.library)."""
    return blas.library()
