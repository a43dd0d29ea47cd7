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


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]


def _numpy_linked() -> str | None:
    """The path of the OpenBLAS NumPy's core extension is linked against (None where that cannot be told): an
    OpenBLAS symbol looked up through the extension's own handle (dlsym searches the libraries it depends on, in
    their order), located with dladdr. Other OpenBLAS builds may be loaded too (OpenCV's wheels bundle 0.3.15),
    and threadpoolctl lists loaded libraries in no fixed order (a set of /proc/self/maps paths, whose order moves
    with PYTHONHASHSEED): binding its first OpenBLAS bound OpenCV's in some processes, and then NumPy's
    matmul kept its own thread count (threadpoolctl's setter is a no-op off the thread that first set it) and a
    run's last bits depended on the process's hash seed (the OCR app's scores: issue 42)."""
    import numpy as np

    core = getattr(np, "_core", None) or getattr(np, "core", None)
    ext = getattr(getattr(core, "_multiarray_umath", None), "__file__", None)
    try:
        dladdr = ctypes.CDLL(None).dladdr
        handle = ctypes.CDLL(ext) if ext else None
    except (OSError, AttributeError):
        return None
    for name in _SET_NAMES:
        fn = getattr(handle, name, None)
        info = _DlInfo()
        if fn is not None and dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(os.fsdecode(info.dli_fname))  # OpenBLAS whatever its file's name (libblas.so.3)
    return None


def _candidates() -> list[str]:
    """Paths of OpenBLAS libraries: the one NumPy is linked against first, then NumPy's bundled ones,
    threadpoolctl's answer and the loaded ones."""
    import numpy as np

    linked = _numpy_linked()
    base = os.path.dirname(np.__file__)
    paths: list[str] = [linked] if linked else []
    paths += sorted(glob.glob(os.path.join(base, "..", "numpy.libs", "*openblas*")))
    paths += sorted(glob.glob(os.path.join(base, ".dylibs", "*openblas*")))
    try:
        from threadpoolctl import threadpool_info

        paths += [i["filepath"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
    except Exception:  # noqa: BLE001 - threadpoolctl missing or failing: scan ourselves
        pass
    try:
        with open("/proc/self/maps") as f:
            paths += sorted({ln.split()[-1] for ln in f if "openblas" in ln and ln.split()[-1].startswith("/")})
    except OSError:
        pass
    return list(dict.fromkeys(paths))


# OpenBLAS's set_num_threads under the names its builds export (scipy-openblas's prefix, 64-bit integer suffix)
_SET_NAMES = tuple(f"{prefix}set_num_threads{suffix}" for prefix in ("scipy_openblas_", "openblas_")
                   for suffix in ("64_", ""))


def _bind(lib: ctypes.CDLL) -> bool:
    global _lib, _setter, _getter
    for set_name in _SET_NAMES:
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

