"""The on-disk cache of compiled device models: where it is, what a cached model is keyed on, loading it.

A subgraph's compiled artifact (OpenVINO's exported compiled model, ONNX Runtime's optimized model) is
stored as `<dir>/<sha256>.<device>`. The hash covers the model's content, never its path: the converted
ONNX bytes, the device name, the context properties, the driver's own token (ONNX Runtime: the resolved
providers) and the versions of pdlite and of the device's packages. Files are written atomically (a
temporary file renamed into place), so a process reading the folder never sees half an entry, and two
processes compiling the same model at once both end with a whole file.

The folder is `set_nnadapter_model_cache_dir(dir)`'s, else the `PDLITE_NNADAPTER_MODEL_CACHE_DIR`
environment variable's (empty: no cache). The `pdlite` command line sets that variable to
`user_cache_dir()` while a command runs (`default_model_cache`), so a second `pdlite ocr` process loads
what the first compiled; a library user opts in with either setting.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

ENV = "PDLITE_NNADAPTER_MODEL_CACHE_DIR"
log = logging.getLogger("pdlite.nnadapter")


def user_cache_dir() -> str:
    """`$XDG_CACHE_HOME/pdlite/nnadapter`, else `~/.cache/pdlite/nnadapter`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pdlite", "nnadapter")


def configured_dir(option: str | None) -> str | None:
    """The cache folder in use: the config's option, else the environment variable's (empty: none)."""
    return option or os.environ.get(ENV) or None


@contextlib.contextmanager
def default_model_cache() -> Iterator[None]:
    """While inside, configs without a cache folder use `user_cache_dir()` (unless ENV is set, even empty)."""
    if ENV in os.environ:
        yield
        return
    os.environ[ENV] = user_cache_dir()
    try:
        yield
    finally:
        os.environ.pop(ENV, None)


def _versions(driver: Any) -> str:
    parts = []
    for pkg in ("pdlite", *getattr(driver, "packages", ())):
        try:
            parts.append(f"{pkg}={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{pkg}=?")
    return ";".join(parts)


def entry_path(cache_dir: str, blob: bytes, device: str, props: Mapping[str, str], driver: Any) -> str:
    """Where the compiled form of ONNX model `blob` for `device` with `props` is kept."""
    h = hashlib.sha256(blob)
    for part in (device, repr(sorted(props.items())), driver.cache_token(props), _versions(driver)):
        h.update(b"\0" + part.encode())
    return os.path.join(cache_dir, f"{h.hexdigest()}.{device}")


def build_cached(driver: Any, blob: bytes, device: str, props: Mapping[str, str],
                 cache_dir: str | None) -> tuple[Any, str | None, bool]:
    """(compiled model, its cache file or None, whether it was loaded from there): the cached artifact when
    there is a good one, else a new build (written to the cache when there is one). A cached file the driver
    cannot load is replaced."""
    if not cache_dir:
        return driver.build(blob, props, None), None, False
    path = entry_path(cache_dir, blob, device, props, driver)
    if os.path.isfile(path):
        try:
            compiled = driver.build(blob, props, path)
            log.debug("NNAdapter %s: loaded the compiled model %s", device, path)
            return compiled, path, True
        except Exception as e:  # a stale or broken entry: rebuild it
            log.debug("NNAdapter %s: cached model %s not loaded (%s: %s); compiling", device, path,
                      type(e).__name__, e)
            with contextlib.suppress(OSError):
                os.unlink(path)
    return driver.build(blob, props, path), path, False


def forget(path: str | None) -> None:
    """Drop a cache entry (a loaded model that then failed its checks)."""
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def cache_state(program: Any) -> tuple[list[str], bool]:
    """(the model-cache files of a runtime program's device subgraphs, whether every model they built so far was
    loaded from there): what `auto` remembers to price a later process's first call as a load, not a compile."""
    kernels = [i.kernel for i in program.instructions if hasattr(i.kernel, "cache_hits")]
    files = [k._cache_file for k in kernels if getattr(k, "_cache_file", None)]
    built = [k for k in kernels if k.builds]
    return files, bool(built) and all(k.cache_hits >= k.builds for k in built)
