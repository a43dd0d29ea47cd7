"""For the serving tests and benchmarks/serve_load.py: `mlserver start` on 127.0.0.1 (a folder of
model-settings.json files, free ports, the process stopped with SIGTERM, then SIGKILL), the models they serve,
and the local references (the predictor and the OCR app run on a worker thread, as the servers run them)."""
from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = "pdlite.integrations.mlserver.PdliteRuntime"
CNN = ROOT / "tests/fixtures/models/mobilenet_v3_small"
DET = ROOT / "tests/fixtures/toolkit/picodet_lcnet/legacy"
DET_CASE = ROOT / "tests/fixtures/toolkit/picodet_lcnet/case.npz"
IMAGE = ROOT / "examples/images/sample_en.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_repository(folder: Path, models: dict[str, dict[str, Any]], parallel_workers: int = 0) -> dict[str, int]:
    """FOLDER/settings.json (127.0.0.1, free ports, debug off) and FOLDER/NAME/model-settings.json for each of
    MODELS (name -> {"uri": ..., "extra": {...}, other model-settings fields}). Returns the ports."""
    ports = {"http_port": free_port(), "grpc_port": free_port(), "metrics_port": free_port()}
    settings = {"host": "127.0.0.1", "parallel_workers": parallel_workers, "debug": False,
                "metrics_endpoint": None, **ports}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings))
    for name, spec in models.items():
        spec = dict(spec)
        params = {"extra": spec.pop("extra", {})}
        if "uri" in spec:
            params["uri"] = str(spec.pop("uri"))
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "model-settings.json").write_text(
            json.dumps({"name": name, "implementation": RUNTIME, "parameters": params, **spec}))
    return ports


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"mlserver exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"mlserver not ready after {timeout} s")


@contextmanager
def mlserver(folder: Path, log: Path | None = None):
    """Run `mlserver start FOLDER` (its settings.json says the ports); yields (base URL, process)."""
    settings = json.loads((folder / "settings.json").read_text())
    url = f"http://127.0.0.1:{settings['http_port']}"
    exe = Path(sys.executable).with_name("mlserver")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = open(log, "wb") if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen([str(exe), "start", str(folder)], cwd=str(folder), env=env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_ready(url, proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if log is not None:
            out.close()


def local(model: Path):
    """The local predictor, run where the server runs it: on a worker thread (a main-thread run once differed
    from worker-thread runs in the last bits, ~1e-7 on MobileNetV3; a likely cause, since fixed: pdlite set the
    thread count of OpenCV's OpenBLAS instead of NumPy's in some processes, pdlite/kernels/host/blas.py)."""
    from pdlite.integrations import predictor_from_path

    pred = predictor_from_path(model)
    pool = ThreadPoolExecutor(1)
    return pred, lambda feeds: pool.submit(pred.predict, feeds).result()


def _code_digest() -> str:
    """A digest of the code a process importing pdlite now would run: pdlite's Python files, native_src/ and the
    native build (the build is used only when it matches native_src/, else the NumPy kernels)."""
    import hashlib

    pkg = ROOT / "pdlite"
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*")):
        if f.suffix in (".py", ".c", ".h", ".so") and "__pycache__" not in f.parts and f.is_file():
            try:
                h.update(f"{f.relative_to(pkg)}\0".encode() + f.read_bytes())
            except OSError:
                continue
    return h.hexdigest()


_CODE_AT_IMPORT = _code_digest()  # when the test modules (and pdlite) were imported


def kernels_changed() -> str | None:
    """Why a server started during this test session may run other code than this process, or None. In a working
    tree that other sessions edit and rebuild while tests run, a server (or subprocess) started later than the test
    process imports other kernels (an edited native_src/ makes the build stale: the NumPy kernels), and their
    floats may differ in the last bit."""
    if _code_digest() == _CODE_AT_IMPORT:
        return None
    return ("pdlite's code in this working tree changed after this test process imported it (another session's "
            "edit or native rebuild): the server may run other kernel code, so a bit-for-bit comparison with it "
            "says nothing")


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    """GOT (a server's answer) equals WANT (the local run) bit for bit; the test is skipped, saying why, when this
    working tree's native kernels changed while the tests ran (`kernels_changed`: the two ran other code)."""
    if not np.array_equal(got, want):
        why = kernels_changed()
        if why:
            import pytest

            pytest.skip(why)
    np.testing.assert_array_equal(got, want)


@functools.cache
def ocr_reference() -> dict[str, np.ndarray]:
    """The OCR app's answer for IMAGE, computed locally once (on a worker thread, as the servers run it)."""
    from pdlite.apps.ocr import OCR
    from pdlite.integrations.serving import ocr_answer

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: ocr_answer(OCR()(str(IMAGE)))).result()
