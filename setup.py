"""Build of pdlite's optional native host kernels (pdlite/kernels/host/_native.c).

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

SOURCE = Path(__file__).parent / "pdlite" / "kernels" / "host" / "_native.c"


def native_extension() -> list[Extension]:
    """The extension, or none where it cannot build: it needs POSIX threads (Linux, macOS, BSDs; not MSVC)."""
    if sys.platform == "win32":
        return []
    # The SHA-256 of the source it was built from is compiled in (the module's SOURCE_HASH): pdlite/kernels/host/
    # native.py refuses a build whose source differs from the _native.c beside it (a stale in-place build).
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return [
        Extension(
            "pdlite.kernels.host._native",
            sources=[str(SOURCE.relative_to(Path(__file__).parent))],
            # -O3, IEEE semantics kept (no -ffast-math); FMA contraction allowed; no -march=native (portable
            # builds: the hot loops carry per-ISA clones chosen at load time).
            extra_compile_args=["-O3", "-fno-wrapv", "-ffp-contract=fast", "-pthread"],
            extra_link_args=["-pthread"],
            define_macros=[("PD_SOURCE_SHA256", f'"{digest}"')],
            optional=True,
        )
    ]


setup(ext_modules=native_extension())
