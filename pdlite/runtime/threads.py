"""Honouring `set_threads`: the number of threads of NumPy's BLAS (OpenBLAS), set through ctypes.

NumPy wheels bundle OpenBLAS (scipy-openblas); its `*_set_num_threads*` entry point is
found once by scanning the libraries loaded in this process. If none is found (another
BLAS), thread control is a no-op and `blas_thread_control()` says so.
"""
from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable

_setter: Callable[[int], None] | None = None
_getter: Callable[[], int] | None = None
_searched = False
_current: int | None = None


def _find() -> None:
    global _setter, _getter, _searched
    _searched = True
    import numpy as np

    candidates = []
    base = os.path.dirname(np.__file__)
    candidates += glob.glob(os.path.join(base, "..", "numpy.libs", "*openblas*"))
    candidates += glob.glob(os.path.join(base, ".dylibs", "*openblas*"))
    try:
        with open("/proc/self/maps") as f:
            candidates += sorted({line.split()[-1] for line in f if "openblas" in line and line.split()[-1].startswith("/")})
    except OSError:
        pass
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_", ""):
            for suffix in ("64_", ""):
                set_name = f"{prefix}set_num_threads{suffix}" if prefix else f"openblas_set_num_threads{suffix}"
                get_name = set_name.replace("set_num_threads", "get_num_threads")
                fn = getattr(lib, set_name, None)
                if fn is not None:
                    fn.argtypes = [ctypes.c_int]
                    fn.restype = None
                    _setter = fn
                    g = getattr(lib, get_name, None)
                    if g is not None:
                        g.restype = ctypes.c_int
                        _getter = g
                    return


def blas_thread_control() -> bool:
    """True when pdlite can set the BLAS thread count."""
    if not _searched:
        _find()
    return _setter is not None


def set_blas_threads(n: int) -> None:
    """Set the BLAS thread count (cheap when unchanged)."""
    global _current
    if n == _current:
        return
    if blas_thread_control():
        assert _setter is not None
        _setter(int(n))
    _current = n


def get_blas_threads() -> int | None:
    if blas_thread_control() and _getter is not None:
        return int(_getter())
    return None
