"""A failed build of the native kernels is reported at install time and by `pdlite doctor` (issue 39).

setup.py's build_ext prints a warning naming what failed and what to install, and records it in
pdlite/kernels/host/_native_build.json, which native.py turns into the doctor's line. Simulated here with a compiler
that fails (CC=false) and one that is missing, each built into a temp folder (every source fails at once: a second or
two each)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdlite.kernels.host import native

REPO = Path(__file__).resolve().parents[2]
RECORD = Path("pdlite") / "kernels" / "host" / "_native_build.json"
def _setuptools_major() -> int:
    try:
        import setuptools
    except ImportError:
        return 0
    return int(setuptools.__version__.split(".")[0])


def _build(tmp_path: Path, cc: str) -> tuple[subprocess.CompletedProcess, dict]:
    if _setuptools_major() < 77:  # (pip builds in an isolated env that has it; `python setup.py` uses this one's)
        pytest.skip("setup.py needs setuptools>=77 (pyproject.toml's build-system) in this environment")
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"), "--build-temp",
                        str(tmp_path / "tmp")], cwd=REPO, env=dict(os.environ, CC=cc), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]  # pdlite itself still builds and installs
    return r, json.loads((tmp_path / "lib" / RECORD).read_text())


@pytest.mark.skipif(sys.platform == "win32", reason="setup.py builds the native kernels with POSIX compilers only")
def test_failing_compiler_is_reported_and_recorded(tmp_path):
    r, rec = _build(tmp_path, "false")
    assert "WARNING: pdlite's native kernels were NOT built" in r.stderr and "NumPy kernels" in r.stderr
    assert rec["status"] == "failed" and "`false` failed: compiling pdlite/kernels/host/native_src/" in rec["reason"]
    assert "python3-dev" in rec["install"] and "python3-dev" in r.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="setup.py builds the native kernels with POSIX compilers only")
def test_missing_compiler_is_named(tmp_path):
    r, rec = _build(tmp_path, "/nonexistent/bin/cc")
    assert rec["reason"] == "no C compiler: `/nonexistent/bin/cc` was not found", rec
    assert "a C compiler (gcc or clang)" in rec["install"] and "a C compiler (gcc or clang)" in r.stderr


def test_doctor_line_says_what_failed_and_what_to_install(tmp_path, monkeypatch):
    rec = tmp_path / "_native_build.json"
    from pdlite.kernels.host import native_build

    monkeypatch.setattr(native_build, "BUILD_RECORD", rec)
    assert native.build_failure() is None  # no record: nothing failed
    rec.write_text(json.dumps({"status": "built"}))
    assert native.build_failure() is None
    rec.write_text(json.dumps({"status": "failed", "reason": "no C compiler: `cc` was not found",
                               "install": "a C compiler (gcc or clang)"}))
    note = native.build_failure()
    assert note.startswith("the native build failed at install: no C compiler: `cc` was not found; install a C "
                           "compiler (gcc or clang), then reinstall pdlite"), note
    assert "using the NumPy kernels" in note and "`pip install .` builds it" not in note
