"""Client scripts written against the originals' APIs (tests/api/clients, only the import line is pdlite's),
run as separate processes on x86 and on the NNAdapter backend, compared with Paddle Inference's references."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, assert_close_rel, load_case, model_dir

CLIENTS = Path(__file__).parent / "clients"
REL = 1e-4  # max|got - ref| <= 1e-4 * max|ref| (fp32 host vs Paddle Inference)


def _client(script: str, *args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, str(CLIENTS / script), *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    if ok:
        assert res.returncode == 0, f"{script} {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}"
    return res


def _ref(name: str) -> np.ndarray:
    return next(iter(load_case(name)[1].values()))


@pytest.mark.parametrize("backend", ["x86", "nnadapter"])
def test_lite_full_then_light_api_demo(backend, tmp_path):
    """The full-API client optimizes and runs (x86, or intel_openvino through NNAdapter); the light-API client
    runs the .nb the full one wrote. Both match Paddle Inference."""
    if backend == "nnadapter":
        pytest.importorskip("openvino")
    d = model_dir("mobilenet_v3_small")
    extra = ["--nnadapter_device_names", "intel_openvino"] if backend == "nnadapter" else []
    res = _client("lite_full_api.py", "--model_dir", str(d), "--backend", backend, "--input_npz",
                  str(d / "case.npz"), "--save_output", "full.npy", *extra, cwd=tmp_path)
    assert res.stdout.startswith("mean:")
    assert_close_rel(np.load(tmp_path / "full.npy"), _ref("mobilenet_v3_small"), REL, f"full api {backend}")
    nb = tmp_path / f"opt_{backend}.nb"
    assert nb.is_file()
    from pdlite.model_parser.naive_buffer import load_naive_buffer

    ops = {op.type for op in load_naive_buffer(str(nb)).program.main.ops}
    assert ("subgraph" in ops) == (backend == "nnadapter"), ops  # the device really ran the model's subgraph
    _client("lite_light_api.py", "--model_dir", str(nb), "--input_npz", str(d / "case.npz"), "--save_output",
            "light.npy", cwd=tmp_path)
    assert_close_rel(np.load(tmp_path / "light.npy"), _ref("mobilenet_v3_small"), REL, f"light api {backend}")


def test_lite_demo_model_and_param_files_and_arm_place(tmp_path):
    """--model_file/--param_file, and an ARM place on an x86 machine: host kernels, said once in a warning."""
    d = model_dir("ppocr_cls_v2")
    res = _client("lite_full_api.py", "--model_file", str(d / "inference.pdmodel"), "--param_file",
                  str(d / "inference.pdiparams"), "--backend", "arm", "--input_npz", str(d / "case.npz"),
                  "--save_output", "out.npy", cwd=tmp_path)
    assert res.stderr.count("no ARM kernels") == 1, res.stderr
    assert_close_rel(np.load(tmp_path / "out.npy"), _ref("ppocr_cls_v2"), REL, "arm place")


def test_lite_demo_metal_says_there_is_no_such_target(tmp_path):
    d = model_dir("ppocr_cls_v2")
    res = _client("lite_full_api.py", "--model_dir", str(d), "--backend", "metal", cwd=tmp_path, ok=False)
    assert res.returncode != 0
    assert "pdlite has no Metal target" in res.stderr and "ConfigError" in res.stderr


def test_lite_demo_opencl_runs_on_the_opencl_target(tmp_path):
    """Paddle-Lite's demo places (OpenCL FP16 ImageDefault, then the CPU): pdlite's OpenCL kernels (buffers), or,
    without pyopencl / an OpenCL driver, an error naming pdlite[opencl] (docs/opencl.md)."""
    d = model_dir("ppocr_cls_v2")
    res = _client("lite_full_api.py", "--model_dir", str(d), "--backend", "opencl", "--input_npz", str(d / "case.npz"),
                  "--save_output", "out.npy", cwd=tmp_path, ok=False)
    try:
        from pdlite.kernels.opencl import device
    except ImportError:
        assert res.returncode != 0 and "pdlite[opencl]" in res.stderr, res.stderr[-2000:]
        return
    if not device.platforms():
        assert res.returncode != 0 and "pocl-opencl-icd" in res.stderr, res.stderr[-2000:]
        return
    assert res.returncode == 0, res.stderr[-2000:]
    assert_close_rel(np.load(tmp_path / "out.npy"), _ref("ppocr_cls_v2"), REL, "opencl demo")


@pytest.mark.parametrize("name,mode", [("ppocr_cls_v2", "cls"), ("ppocr_det_v4", "det"),
                                       ("mobilenet_v3_small_pir", "cls")])
def test_paddleocr_style_client(name, mode, tmp_path):
    d = model_dir(name)
    _client("ppocr_predictor.py", f"--{mode}_model_dir", str(d), "--mode", mode, "--enable_mkldnn", "true",
            "--cpu_threads", "2", "--input_npz", str(d / "case.npz"), "--save_output", "out.npy", cwd=tmp_path)
    assert_close_rel(np.load(tmp_path / "out.npy"), _ref(name), REL, f"ppocr client {name}")


@pytest.mark.parametrize("name", ["mobilenet_v3_small_pir", "ppocr_cls_v2"])
def test_paddledetection_style_client(name, tmp_path):
    """Config(model_dir, prefix): inference.json (PIR) or inference.pdmodel (legacy)."""
    d = model_dir(name)
    _client("ppdet_predictor.py", "--model_dir", str(d), "--enable_mkldnn", "--input_npz", str(d / "case.npz"),
            "--save_output", "out.npy", cwd=tmp_path)
    assert_close_rel(np.load(tmp_path / "out.npy"), _ref(name), REL, f"ppdet client {name}")


@pytest.mark.parametrize("name", ["ppocr_det_v4", "mobilenet_v3_small_pir"])
def test_rapidocr_style_client(name, tmp_path):
    d = model_dir(name)
    _client("rapidocr_session.py", "--model_dir", str(d), "--input_npz", str(d / "case.npz"), "--save_output",
            "out.npy", cwd=tmp_path)
    assert_close_rel(np.load(tmp_path / "out.npy"), _ref(name), REL, f"rapidocr client {name}")
