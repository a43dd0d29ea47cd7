"""Every kind of optimized model (.nb) loads and runs in a FRESH process, as a deployment does.

Saving and loading in one process hides registrations that only happen as a side effect of the
optimizer's imports (the `subgraph` op once was one). Here each `.nb` is written by a
CxxPredictor in this process, then loaded by MobileConfig/LightPredictor in a new interpreter
(`python -c`) that imports nothing but pdlite's public API; its outputs must equal this
process's run of the same `.nb` exactly (same kernels, same machine, one thread) and match the
model's Paddle Inference reference within the project's tolerance.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pdlite.api.mobile import MobileConfig
from pdlite.kernels.host import native
from pdlite.lite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor
from tests.conftest import assert_close_rel, load_case, model_dir

MODEL = "ppocr_cls_v2"
ROOT = Path(__file__).resolve().parents[2]


def _have(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def _plugin_installed() -> bool:
    return any(ep.name == "demo_target" for ep in importlib.metadata.entry_points(group="pdlite.plugins"))


# kind -> (CxxConfig setup, MobileConfig setup as source lines, skip reason or "")
KINDS = {
    "host": ("", "", ""),
    "cuda": ("cfg.set_valid_places([Place(TargetType.CUDA, PrecisionType.FP32), Place(TargetType.Host, "
             "PrecisionType.FP32)]); cfg.set_cuda_device('cpu')",
             "mc.set_cuda_device('cpu')", "" if _have("torch") else "torch not installed"),
    "intel_openvino": ("cfg.set_nnadapter_device_names(['intel_openvino'])", "",
                       "" if _have("openvino") and _have("onnx") else "openvino/onnx not installed"),
    "onnxruntime": ("cfg.set_nnadapter_device_names(['onnxruntime'])", "",
                    "" if _have("onnxruntime") and _have("onnx") else "onnxruntime/onnx not installed"),
    "delegate": ("", "from pdlite.delegate.reference import ReferenceConvDelegate\n"
                     "mc.set_delegate(ReferenceConvDelegate())", ""),
    "plugin": ("cfg.set_valid_places([Place(TargetType['DemoCPU'], PrecisionType.FP32), Place(TargetType.Host, "
               "PrecisionType.FP32)])", "",
               "" if _plugin_installed() else "pip install examples/plugin_target (CI does)"),
}

LOADER = """
import sys
import numpy as np
from pdlite.lite import MobileConfig, create_paddle_predictor
mc = MobileConfig()
mc.set_model_from_file(sys.argv[1])
mc.set_threads(1)
mc.set_option("host_native", {native_on})
{setup}
pred = create_paddle_predictor(mc)
ins = dict(np.load(sys.argv[2]))
outs = pred.predict(ins)
types = sorted({{i.op.type for i in pred.runtime_program.instructions}} | {{i.label.split(':')[0] for i in pred.runtime_program.instructions}})
np.savez(sys.argv[3], *[np.asarray(o) for o in outs], types=np.array(types))
"""


def _save(kind: str, tmp_path: Path) -> str:
    setup = KINDS[kind][0]
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(MODEL)))
    if kind == "plugin":
        from pdlite.registries import load_registries

        load_registries()  # the plugin's target name exists once plugins are loaded
    exec(setup, {"cfg": cfg, "Place": Place, "PrecisionType": PrecisionType, "TargetType": TargetType})
    return create_paddle_predictor(cfg).save_optimized_model(str(tmp_path / kind))


@pytest.mark.parametrize("kind", list(KINDS))
def test_nb_loads_and_runs_in_a_fresh_process(kind: str, tmp_path: Path) -> None:
    skip = KINDS[kind][2]
    if skip:
        pytest.skip(skip)
    path = _save(kind, tmp_path)
    ins, refs = load_case(MODEL)
    np.savez(tmp_path / "ins.npz", **ins)

    # this process's run of the same .nb
    mc = MobileConfig()
    mc.set_model_from_file(path)
    mc.set_threads(1)
    # the same host kernels here and there (`pytest --host-numpy` makes the NumPy ones this process's default)
    mc.set_option("host_native", native.DEFAULT_ON)
    exec(KINDS[kind][1], {"mc": mc})
    here = create_paddle_predictor(mc).predict(ins)

    script = textwrap.dedent(LOADER).format(setup=KINDS[kind][1], native_on=native.DEFAULT_ON)
    proc = subprocess.run([sys.executable, "-c", script, path, str(tmp_path / "ins.npz"), str(tmp_path / "out.npz")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"fresh process failed to load/run the {kind} .nb:\n{proc.stderr[-3000:]}"
    got = np.load(tmp_path / "out.npz")
    types = set(got["types"].tolist())
    if kind in ("intel_openvino", "onnxruntime"):
        assert "subgraph" in types, "the .nb should hold NNAdapter subgraphs"
    if kind == "delegate":
        assert "delegate" in types, "the delegate should have replaced the conv runs"
    if kind == "cuda":
        assert "io_copy" in types, "the .nb should hold CUDA kernels behind io_copy ops"
    outs = [got[f"arr_{i}"] for i in range(len(here))]
    for g, h, ref in zip(outs, here, refs.values()):
        np.testing.assert_array_equal(g, np.asarray(h))
        assert_close_rel(g, ref, 1e-3 if kind in ("intel_openvino", "onnxruntime") else 1e-4)
