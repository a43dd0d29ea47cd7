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
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
NATIVE_DIR = ROOT / "pdlite" / "kernels" / "host" / "native_src"


def native_sources(folder: Path) -> list[Path]:
    """The extension's .c and .h files in name order (the order the source hash reads them in)."""
    return sorted((p for p in folder.iterdir() if p.suffix in (".c", ".h")), key=lambda p: p.name)


def source_hash(files: list[Path]) -> str:
    """SHA-256 over (name, size, bytes) of each file in order; pdlite/kernels/host/native_build.py computes the same."""
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
    # native_build.py refuses a build whose sources differ from the native_src/ beside it (a stale in-place build).
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


BUILD_RECORD = "_native_build.json"  # beside native.py: how the build went (pdlite doctor reads it)


def _diagnose(cmd: build_ext, error: BaseException) -> tuple[str, str]:
    """(what failed, what to install) for a failed build of the extension: the compiler or Python's headers."""
    import shutil
    import sysconfig

    cc = list(getattr(cmd.compiler, "compiler_so", None) or ["cc"])
    if not shutil.which(cc[0]):
        return f"no C compiler: `{cc[0]}` was not found", "a C compiler (gcc or clang)"
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.is_file():
        v = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return (f"Python's C headers are missing ({header})",
                f"Python's headers (Debian/Ubuntu: python3-dev or python{v}-dev; Fedora: python3-devel)")
    import re

    msg = str(error)  # distutils' message holds the whole command line: name the file and the status instead
    src, status = re.search(r"'-c', '([^']+)'", msg), re.search(r"exit (?:status|code) (-?\d+)", msg)
    if src:
        msg = f"compiling {src.group(1)} failed" + (f" (exit status {status.group(1)})" if status else "")
    return f"the C compiler `{cc[0]}` failed: {msg}", "a working C compiler (gcc or clang) and python3-dev"


def _parallel_compile(compiler):  # noqa: ANN001, ANN202  (a distutils CCompiler and its compile method)
    """compiler.compile with the sources compiled in parallel, one per CPU (distutils compiles them one by one: the
    kernels' files take minutes each under emulation, and a few seconds each natively)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,  # noqa: A001
                extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            if obj in build:  # (up to date otherwise)
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            list(pool.map(one, objects))
        return objects

    return compile


class BuildNative(build_ext):
    """build_ext that reports a failed build of the optional native kernels loudly (pip shows a build's output only
    with -v) and records how the build went in pdlite/kernels/host/_native_build.json, which `pdlite doctor` reads:
    pdlite still installs and runs on its NumPy kernels."""

    def _record(self, ext: Extension, info: dict) -> None:
        import json

        folders = {Path(self.get_ext_fullpath(ext.name)).parent}
        if self.inplace or getattr(self, "editable_mode", False):  # (the source tree's package, where native.py is)
            folders.add(Path(self.get_finalized_command("build_py").get_package_dir("pdlite.kernels.host")))
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / BUILD_RECORD).write_text(json.dumps(info, indent=1) + "\n")

    def build_extension(self, ext: Extension) -> None:
        self.compiler.compile = _parallel_compile(self.compiler)
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001  (any failure: the extension is optional)
            what, need = _diagnose(self, e)
            self._record(ext, {"status": "failed", "reason": what, "install": need})
            bar = "=" * 78
            print(f"\n{bar}\nWARNING: pdlite's native kernels were NOT built: {what}.\n"
                  f"pdlite is installed and works, but runs its slower NumPy kernels.\n"
                  f"To build them, install {need}, then reinstall pdlite\n"
                  f"(e.g. `pip install --force-reinstall --no-deps .`, or `pip install -e .`).\n"
                  f"`pdlite doctor` reports which kernels are in use.\n{bar}\n", file=sys.stderr)
            return
        self._record(ext, {"status": "built"})


setup(ext_modules=native_extension(), cmdclass={"build_ext": BuildNative})
