"""Build of pdlite's optional native host kernels (pdlite/kernels/host/_native.c).

All metadata lives in pyproject.toml; this file only declares the C extension. It is optional:
without a C compiler the build skips it and pdlite runs its pure-NumPy kernels.
Editable installs (`pip install -e .`) build it in place; so does `python setup.py build_ext --inplace`.
"""
from __future__ import annotations

import sys

from setuptools import Extension, setup

if sys.platform == "win32":
    compile_args: list[str] = ["/O2"]
    link_args: list[str] = []
else:
    # -O3, IEEE semantics kept (no -ffast-math); FMA contraction allowed; no -march=native (portable builds:
    # the hot loops carry per-ISA clones chosen at load time).
    compile_args = ["-O3", "-fno-wrapv", "-ffp-contract=fast", "-pthread"]
    link_args = ["-pthread"]

setup(
    ext_modules=[
        Extension(
            "pdlite.kernels.host._native",
            sources=["pdlite/kernels/host/_native.c"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            optional=True,
        )
    ]
)
