"""Build of pdlite's optional native host kernels (pdlite/kernels/host/native_src/*.c, one extension).

All metadata lives in pyproject.toml; this file only declares the C extension. It is optional:
without a C compiler (or on Windows, which lacks POSIX threads) the build skips it and pdlite runs its
pure-NumPy kernels.
Editable installs (`pip install -e .`) build it in place; so does `python setup.py build_ext --inplace`.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent
NATIVE_DIR = ROOT / "pdlite" / "kernels" / "host" / "native_src"


def native_sources(folder: Path) -> list[Path]:
    """The extension's .c and .h files in name order (the order the source hash reads them in)."""
    return sorted((p for p in folder.iterdir() if p.suffix in (".c", ".h")), key=lambda p: p.name)


def source_hash(files: list[Path]) -> str:
    """SHA-256 over (name, size, bytes) of each file in order; pdlite/kernels/host/native.py computes the same."""
    h = hashlib.sha256()
    for f in files:
        data = f.read_bytes()
        h.update(f"{f.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def native_extension() -> list[Extension]:
    """The extension, or none where it cannot build: it needs POSIX threads (Linux, macOS, BSDs; not MSVC)."""
    if sys.platform == "win32":
        return []
    files = native_sources(NATIVE_DIR)
    # The hash of the sources it was built from is compiled in (the module's SOURCE_HASH): pdlite/kernels/host/
    # native.py refuses a build whose sources differ from the native_src/ beside it (a stale in-place build).
    digest = source_hash(files)
    return [
        Extension(
            "pdlite.kernels.host._native",
            sources=[p.relative_to(ROOT).as_posix() for p in files if p.suffix == ".c"],
            depends=[p.relative_to(ROOT).as_posix() for p in files if p.suffix == ".h"],
            # -O3, IEEE semantics kept (no -ffast-math); FMA contraction allowed; no -march=native (portable
            # builds: the hot loops carry per-ISA clones chosen at load time). -g0 overrides the -g of Python's own
            # CFLAGS: no debug info, 15-25% less compile time (packed_gemm.c 24.8 -> 20.9 s of CPU) and a smaller .so.
            extra_compile_args=["-O3", "-g0", "-fno-wrapv", "-ffp-contract=fast", "-pthread"],
            extra_link_args=["-pthread"],
            define_macros=[("PD_SOURCE_SHA256", f'"{digest}"')],
            optional=True,
        )
    ]


setup(ext_modules=native_extension())
