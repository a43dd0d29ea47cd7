"""Honouring `set_threads`: the threads of NumPy's BLAS (OpenBLAS, set through ctypes) and of
pdlite's native host kernels (pdlite/kernels/host/native.py, when the extension is built).

NumPy wheels bundle OpenBLAS (scipy-openblas); its `*_set_num_threads*` entry point is
found once by scanning the libraries loaded in this process. If none is found (another
BLAS), BLAS thread control is a no-op and `blas_thread_control()` says so.
"""
from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable

_setter: Callable[[int], None] | None = None
_getter: Callable[[], int] | None = None
_lib: ctypes.CDLL | None = None
_searched = False
_current: int | None = None  # threads requested (set_threads)
_native_gemm = False  # the native kernels run the GEMMs (then BLAS itself runs single-threaded)
_blas_now: int | None = None  # what BLAS was last set to


def _find() -> None:
    global _setter, _getter, _searched, _lib
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
                    _lib = lib
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


def blas_library() -> ctypes.CDLL | None:
    """The OpenBLAS library NumPy uses (None when not found)."""
    if not _searched:
        _find()
    return _lib


def _apply() -> None:
    global _blas_now
    n = _current or 1
    blas = 1 if _native_gemm else n
    if blas != _blas_now and blas_thread_control():
        assert _setter is not None
        _setter(int(blas))
        _blas_now = blas
    from pdlite.kernels.host import native

    native.set_num_threads(int(n))


def set_blas_threads(n: int) -> None:
    """Set the compute thread count: BLAS and the native host kernels (cheap when unchanged)."""
    global _current
    if n == _current:
        return
    _current = n
    _apply()


set_threads = set_blas_threads


def use_native_gemm(on: bool) -> None:
    """Whether the native kernels run the GEMMs on their own threads (each BLAS call then single-threaded,
    so that BLAS's threads and the native pool do not compete); RuntimeProgram.run sets it per program."""
    global _native_gemm
    if on == _native_gemm:
        return
    _native_gemm = on
    _apply()


def get_blas_threads() -> int | None:
    if blas_thread_control() and _getter is not None:
        return int(_getter())
    return None
