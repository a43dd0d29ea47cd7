"""Models on TargetType.OpenCL (PoCL's CPU device in CI) against Paddle's reference outputs.

fp32: every fixture / shared model, legacy and PIR, with places [OpenCL FP32, Host FP32] matches its
case.npz within 1e-4 * max|ref|; the PP-OCRv4 recognizer shipped with pdlite (no case.npz) matches the
host within the same bound (the shipped detector and classifier are the fixtures ppocr_det_v4 / ppocr_cls_v2,
byte for byte). fp16 (opt-in, places [OpenCL FP16, OpenCL FP32, Host FP32]: half storage,
float arithmetic; docs/opencl.md): classifiers (legacy and PIR) within 5e-3 * max|ref|; the detector's probability map
within 2e-3 mean absolute error, its text mask (> 0.3, DB's threshold) the same on 99.5 % of pixels.
Also: io_copy at the feeds and fetches only (everything runs on OpenCL), host kernels between OpenCL
kernels get copies both ways, and a `.nb` saved with OpenCL kernel keys runs in a fresh process.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pdlite.core.types import PrecisionType, TargetType
from pdlite.lite import CxxConfig, MobileConfig, Place, create_paddle_predictor
from tests.conftest import LEGACY_MODELS, PIR_MODELS, REPO, assert_close_rel, load_case, model_dir
from tests.kernels._device_cases import host_in_the_middle_program

OPENCL, HOST = TargetType.OpenCL, TargetType.Host
FP32, FP16 = PrecisionType.FP32, PrecisionType.FP16
REC = REPO / "pdlite" / "apps" / "ocr" / "models" / "ch_PP-OCRv4_rec_infer"


def predictor(path: Path | str, fp16: bool = False):
    cfg = CxxConfig()
    cfg.set_model_dir(str(path))
    places = [Place(OPENCL, FP16)] if fp16 else []
    cfg.set_valid_places([*places, Place(OPENCL, FP32), Place(HOST, FP32)])
    return create_paddle_predictor(cfg)


@pytest.mark.parametrize("name", LEGACY_MODELS + PIR_MODELS)
def test_model_on_opencl_matches_reference(name):
    pred = predictor(model_dir(name))
    ins, outs = load_case(name)
    got = pred.predict(ins)
    for g, (k, ref) in zip(got, outs.items()):
        assert isinstance(g, np.ndarray)
        assert_close_rel(g, ref, 1e-4, f"{name}:{k}")
    insts = pred.runtime_program.instructions
    copies = [i for i in insts if i.op.type == "io_copy"]
    fed = {i.op.inputs["Input"][0] for i in copies if i.kernel_def.key.alias == "host_to_opencl"}
    back = {i.op.outputs["Out"][0] for i in copies if i.kernel_def.key.alias == "opencl_to_host"}
    params = set(pred._params)  # noqa: SLF001 - parameters in activation slots are uploaded once
    assert fed <= set(ins) | params and set(outs) == back and len(copies) == len(fed) + len(back), \
        "io_copy at the feeds, the fetches and parameters only"
    assert all(i.kernel_def.key.target == OPENCL for i in insts), "every op has an OpenCL kernel"


def test_ocr_recognizer_matches_host():
    """PP-OCRv4 rec (SVTR neck: layer_norm, matmul_v2, softmax, transposes, shape arithmetic) vs the host."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 160)).astype(np.float32)
    host = CxxConfig()
    host.set_model_dir(str(REC))
    ref = create_paddle_predictor(host).predict({"x": x})
    pred = predictor(REC)
    got = pred.predict({"x": x})
    for g, r in zip(got, ref):
        assert_close_rel(g, r, 1e-4, "ppocr rec")
    on_host = {i.op.type for i in pred.runtime_program.instructions if i.kernel_def.key.target == HOST}
    assert not on_host, f"ops left to the host: {on_host}"


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "mobilenet_v3_small_pir", "ppocr_cls_v2"])
def test_fp16_classifiers(name):
    pred = predictor(model_dir(name), fp16=True)
    ins, outs = load_case(name)
    for g, (k, ref) in zip(pred.predict(ins), outs.items()):
        assert g.dtype == ref.dtype
        assert_close_rel(g, ref, 5e-3, f"{name}:{k} fp16")
    types = [(i.op.type, i.kernel_def.key.precision) for i in pred.runtime_program.instructions]
    assert ("calib", FP16) in types and any(t == "fused_conv2d" and p == FP16 for t, p in types)


def test_fp16_detector():
    pred = predictor(model_dir("ppocr_det_v4"), fp16=True)
    ins, outs = load_case("ppocr_det_v4")
    (got,), (ref,) = pred.predict(ins), list(outs.values())
    assert float(np.mean(np.abs(got - ref))) < 2e-3
    assert float(np.mean((got > 0.3) == (ref > 0.3))) > 0.995


def test_host_kernel_between_opencl_kernels_gets_copies():
    from pdlite.optimizer.analysis import analyse
    from pdlite.optimizer.pipeline import default_passes

    res = analyse(host_in_the_middle_program(), {}, [Place(OPENCL, FP32), Place(HOST, FP32)], default_passes(), {})
    seq = [(i.op.type, i.kernel_def.key.target, i.kernel_def.key.alias) for i in res.runtime.instructions]
    assert [s[0] for s in seq] == ["io_copy", "relu", "io_copy", "exp", "io_copy", "relu", "io_copy"], seq
    assert seq[1][1] == OPENCL and seq[3][1] == HOST and seq[5][1] == OPENCL
    assert [s[2] for s in seq if s[0] == "io_copy"] == ["host_to_opencl", "opencl_to_host", "host_to_opencl",
                                                        "opencl_to_host"]
    x = np.random.default_rng(1).uniform(-2, 2, (3, 4)).astype(np.float32)
    scope = {"x": x}
    for inst in res.runtime.instructions:
        inst.run(scope)
    np.testing.assert_allclose(scope["c"], np.exp(np.maximum(x, 0)), rtol=1e-6)


def test_nb_with_opencl_kernels_loads_in_a_fresh_process(tmp_path):
    pred = predictor(model_dir("ppocr_cls_v2"))
    pred.save_optimized_model(str(tmp_path / "cls"))
    ins, outs = load_case("ppocr_cls_v2")
    np.savez(tmp_path / "ins.npz", **ins)
    code = textwrap.dedent(f"""
        import numpy as np
        from pdlite.lite import MobileConfig, create_paddle_predictor
        cfg = MobileConfig()
        cfg.set_model_from_file({str(tmp_path / 'cls.nb')!r})
        pred = create_paddle_predictor(cfg)
        targets = {{i.kernel_def.key.target.name for i in pred.runtime_program.instructions}}
        (out,) = pred.predict(dict(np.load({str(tmp_path / 'ins.npz')!r})))
        np.save({str(tmp_path / 'out.npy')!r}, out)
        print(sorted(targets))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "OpenCL" in res.stdout, res.stdout
    assert_close_rel(np.load(tmp_path / "out.npy"), next(iter(outs.values())), 1e-4, "cls from .nb")
    assert MobileConfig  # the API the subprocess uses


def test_clones_share_the_device_across_threads():
    """predictor.clone() on two threads: one device, its queue and memory pool shared; every result right."""
    import threading

    pred = predictor(model_dir("ppocr_cls_v2"))
    ins, outs = load_case("ppocr_cls_v2")
    ref = next(iter(outs.values()))
    errors: list[BaseException] = []

    def work(p) -> None:
        try:
            for _ in range(3):
                assert_close_rel(p.predict(ins)[0], ref, 1e-4, "clone")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(p,)) for p in (pred, pred.clone())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
