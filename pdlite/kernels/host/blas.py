"""The BLAS NumPy uses (OpenBLAS in NumPy's wheels): the library handle and its thread count.

The native host kernels call this library's `cblas_sgemm` (pdlite/kernels/host/native.py);
pdlite/runtime/threads.py sets its thread count per predictor run. The library is found with
threadpoolctl (a pdlite dependency) and, where threadpoolctl is not importable, by scanning
the OpenBLAS builds that NumPy ships or this process has loaded. `found()` is False for other
BLAS libraries: thread control is then a no-op and the native GEMMs fall back to np.matmul.
"""
from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable

_searched = False
_lib: ctypes.CDLL | None = None
_setter: Callable[[int], None] | None = None
_getter: Callable[[], int] | None = None


def _candidates() -> list[str]:
    """Paths of OpenBLAS libraries: threadpoolctl's answer first, then NumPy's bundled ones and loaded ones."""
    import numpy as np

    paths: list[str] = []
    try:
        from threadpoolctl import threadpool_info

        paths += [i["filepath"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
    except Exception:  # noqa: BLE001 - threadpoolctl missing or failing: scan ourselves
        pass
    base = os.path.dirname(np.__file__)
    paths += glob.glob(os.path.join(base, "..", "numpy.libs", "*openblas*"))
    paths += glob.glob(os.path.join(base, ".dylibs", "*openblas*"))
    try:
        with open("/proc/self/maps") as f:
            paths += sorted({ln.split()[-1] for ln in f if "openblas" in ln and ln.split()[-1].startswith("/")})
    except OSError:
        pass
    return list(dict.fromkeys(paths))


def _bind(lib: ctypes.CDLL) -> bool:
    global _lib, _setter, _getter
    for prefix in ("scipy_openblas_", "openblas_", ""):
        for suffix in ("64_", ""):
            set_name = f"{prefix}set_num_threads{suffix}" if prefix else f"openblas_set_num_threads{suffix}"
            fn = getattr(lib, set_name, None)
            if fn is None:
                continue
            fn.argtypes = [ctypes.c_int]
            fn.restype = None
            g = getattr(lib, set_name.replace("set_num_threads", "get_num_threads"), None)
            if g is not None:
                g.restype = ctypes.c_int
            _lib, _setter, _getter = lib, fn, g
            return True
    return False


def _find() -> None:
    global _searched
    _searched = True
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if _bind(lib):
            return


def found() -> bool:
    """True when NumPy's OpenBLAS was found (its thread count can be set, its sgemm called)."""
    if not _searched:
        _find()
    return _setter is not None


def library() -> ctypes.CDLL | None:
    """The OpenBLAS library NumPy uses (None when not found)."""
    found()
    return _lib


def get_num_threads() -> int | None:
    """BLAS's current thread count (None when unknown)."""
    if found() and _getter is not None:
        return int(_getter())
    return None


def set_num_threads(n: int) -> None:
    """Set BLAS's thread count (no-op when the library was not found)."""
    if found():
        assert _setter is not None
        _setter(max(1, int(n)))

