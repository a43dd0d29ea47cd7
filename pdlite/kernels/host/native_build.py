"""How the native host kernels' extension (`_native`, built from `native_src/*.c`) is found and loaded: the build
in this source tree if it was made from these very sources (setup.py compiles the sources' SHA-256 in as
SOURCE_HASH), else an installed build of the same sources elsewhere on sys.path, else none (the NumPy kernels run);
`load_note` says which and why, `build_failure()` what the install's build recorded. pdlite/kernels/host/native.py
holds the typed wrappers over what this loads."""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent
_SOURCE_DIR = _HERE / "native_src"  # the extension's C sources (a source checkout; an install may ship them)
_EXT_NAME = "pdlite.kernels.host._native"
load_note = ""  # why the extension is not in use, or where it came from (for `pdlite doctor`)


def source_files() -> list[Path]:
    """The extension's .c and .h files in name order (setup.py compiles the .c files), [] when absent."""
    try:
        return sorted((p for p in _SOURCE_DIR.iterdir() if p.suffix in (".c", ".h")), key=lambda p: p.name)
    except OSError:
        return []


def _source_hash() -> str | None:
    """SHA-256 over (name, size, bytes) of each source file in order, as setup.py compiles in (SOURCE_HASH)."""
    files = source_files()
    if not files:
        return None
    h = hashlib.sha256()
    try:
        for f in files:
            data = f.read_bytes()
            h.update(f"{f.name}\0{len(data)}\0".encode())
            h.update(data)
    except OSError:
        return None
    return h.hexdigest()


def _installed_build(digest: str) -> Path | None:
    """A `_native` built from this very source by a non-editable install elsewhere on sys.path.

    `pip install .` compiles the extension into site-packages while `python -m pytest` in the checkout imports
    this source tree, which has no build. The build is used only if it embeds the hash of the `native_src/`
    sources beside this file (setup.py compiles it in), so it is the same code, not an older release."""
    for entry in sys.path:
        folder = (Path(entry or ".") / "pdlite" / "kernels" / "host").resolve()
        if folder == _HERE or not folder.is_dir():
            continue
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            f = folder / f"_native{suffix}"
            try:
                if f.is_file() and digest.encode() in f.read_bytes():
                    return f
            except OSError:
                continue
    return None


BUILD_RECORD = _HERE / "_native_build.json"  # written by setup.py's build_ext: how the install's build went


def build_failure() -> str | None:
    """Why the install could not build the extension, with what to install (setup.py records it), or None."""
    import json

    try:
        rec = json.loads(BUILD_RECORD.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("status") != "failed":
        return None
    return (f"the native build failed at install: {rec.get('reason', 'unknown reason')}; install "
            f"{rec.get('install', 'a C compiler and python3-dev')}, then reinstall pdlite "
            "(`pip install --force-reinstall --no-deps .` or `pip install -e .`); using the NumPy kernels")


def load_extension() -> ModuleType | None:
    """The extension module to use (None: the NumPy kernels), `load_note` set to why."""
    global load_note
    digest = _source_hash()
    try:
        from pdlite.kernels.host import _native as ext
    except ImportError:
        ext = None
    if ext is not None:
        if digest is not None and getattr(ext, "SOURCE_HASH", None) != digest:
            load_note = (f"the build at {ext.__file__} is stale (built from other native_src/ sources): rebuild it with "
                         "`pip install -e .` or `python setup.py build_ext --inplace`; using the NumPy kernels")
            # Loud: a stale in-place build silently slows every conv down and changes last bits (a dev tree only).
            warnings.warn(f"pdlite: {load_note}", RuntimeWarning, stacklevel=2)
            return None
        load_note = f"built from these sources: {ext.__file__}"
        return ext
    if digest is None:
        load_note = build_failure() or "not built (no C compiler at install time, or Windows): using the NumPy kernels"
        return None
    found = _installed_build(digest)
    if found is None:
        load_note = build_failure() or ("not built in this source tree and no installed build of the same source: "
                                        "`pip install .` or `pip install -e .` builds it; using the NumPy kernels")
        return None
    spec = importlib.util.spec_from_file_location(_EXT_NAME, found)
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    sys.modules[_EXT_NAME] = ext
    load_note = f"installed build of this source: {found}"
    return ext
