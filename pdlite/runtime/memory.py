"""Keeping freed activation memory in the process, as Paddle Inference's caching allocator does.

A host run allocates its activations with NumPy and frees them as soon as their last reader ran
(memory_optimize_pass). glibc's malloc serves blocks over its mmap threshold (128 KiB, rising up
to 32 MiB as such blocks are freed) with fresh mmaps and gives them back on free, and it trims
the top of its heap back to the system past its trim threshold: so every run of a CNN faults in
and zeroes its large activations again (measured: about 13 % of PP-OCRv4 det's and 7 % of
MobileNetV2's CPU time at 1 thread on an AMD EPYC VM).

`retain_freed_memory()` raises both thresholds once per process (mallopt M_MMAP_THRESHOLD 64 MiB,
M_TRIM_THRESHOLD 512 MiB): blocks up to 64 MiB come from the heap, and up to 512 MiB freed at its
top is kept for the next run. It changes the process's malloc, not only pdlite's, so it is a
config option, `host_retain_memory` (default True; `config.set_option("host_retain_memory",
False)` leaves malloc alone). A no-op where the C library is not glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 512 << 20

_lock = threading.Lock()
_done: bool | None = None  # None: not tried; True: set; False: not glibc (or mallopt refused)


def retain_freed_memory() -> bool:
    """Raise glibc malloc's mmap and trim thresholds once per process; True when they are set."""
    global _done
    with _lock:
        if _done is None:
            _done = _set_thresholds()
        return _done


def _set_thresholds() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl's mallopt is a stub)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
