"""The OpenCL target's errors and extension points: missing pyopencl, no platform, an unknown device, and a
plugin adding an OpenCL kernel (with its own OpenCL C source) like any other target's."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pdlite.errors import ConfigError
from tests.conftest import REPO
from tests.opencl.conftest import SKIP, opencl_ready

needs_opencl = pytest.mark.skipif(not opencl_ready(), reason=SKIP)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def test_missing_pyopencl_names_the_extra_and_the_icd():
    """Without pyopencl: OpenCL places fail with MissingDependencyError naming pdlite[opencl] and the ICD."""
    res = _run("""
        import sys
        sys.modules["pyopencl"] = None
        from pdlite.errors import MissingDependencyError
        from pdlite.lite import CxxConfig, Place, TargetType, create_paddle_predictor
        cfg = CxxConfig()
        cfg.set_model_dir("tests/fixtures/models/ppocr_cls_v2")
        cfg.set_valid_places([Place(TargetType.OpenCL), Place(TargetType.Host)])
        try:
            create_paddle_predictor(cfg)
        except MissingDependencyError as e:
            print("MISSING:", e)
    """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "MISSING:" in res.stdout and "pip install 'pdlite[opencl]'" in res.stdout
    assert "pocl-opencl-icd" in res.stdout


@needs_opencl
def test_no_platform_and_unknown_device_are_config_errors(monkeypatch):
    from pdlite.kernels.opencl import device

    with pytest.raises(ConfigError, match="no such|names no OpenCL device.*installed: 0:0"):
        device.find_device("no such device")
    with pytest.raises(ConfigError, match="names no OpenCL device"):
        device.find_device("7:3")
    assert device.find_device("0:0")[:2] == (0, 0) and device.find_device(None) is not None
    monkeypatch.setattr(device, "platforms", lambda: [])
    with pytest.raises(ConfigError, match=r"no OpenCL platform/device is installed: pip install 'pdlite\[opencl\]'.*"
                                          r"apt install pocl-opencl-icd"):
        device.find_device(None)
    assert device.describe_platforms() == {}


@needs_opencl
def test_plugin_adds_an_opencl_kernel():
    """A plugin registers `exp` on OpenCL with its own source: relu -> exp -> relu then runs on OpenCL only, in a
    fresh process (registrations there do not leak into this test session's registries)."""
    res = _run("""
        import numpy as np
        from pdlite.core.types import PrecisionType, TargetType
        from pdlite.lite import Place
        from pdlite.optimizer.analysis import analyse
        from pdlite.optimizer.pipeline import default_passes
        from pdlite.registries import load_registries
        from tests.kernels._device_cases import host_in_the_middle_program

        def register():  # what a plugin's entry point does
            from pdlite.kernels.opencl.base import OpenCLKernel, add_source, opencl_kernel
            add_source("my_plugin_exp", '''
            __kernel void my_exp(__global const T* x, __global T* y, int n) {
                int i = get_global_id(0);
                if (i < n) ST(y, i, exp(LD(x, i)));
            }''')

            @opencl_kernel("exp")
            class Exp(OpenCLKernel):
                def run(self, ins):
                    x = self.tensor(ins, "X")
                    y = self.empty(x.shape)
                    self.launch("my_exp", x.size, x, y, x.size, local=(64,))
                    return {"Out": [y]}

        load_registries([TargetType.OpenCL])
        register()
        prog = host_in_the_middle_program()  # relu -> exp -> relu
        places = [Place(TargetType.OpenCL, PrecisionType.FP32), Place(TargetType.Host)]
        res = analyse(prog, {}, places, default_passes(), {})
        insts = res.runtime.instructions
        print("SEQ", [(i.op.type, i.kernel_def.key.target.name) for i in insts])
        x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
        scope = {"x": x}
        for inst in insts:
            inst.run(scope)
        np.testing.assert_allclose(scope["c"], np.exp(np.maximum(x, 0)), rtol=1e-6)
        print("OK")
    """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "('exp', 'OpenCL')" in res.stdout and res.stdout.count("io_copy") == 2, res.stdout
    assert "OK" in res.stdout


@needs_opencl
def test_work_group_limits():
    """A device allowing fewer work items per group than a kernel asks: 1-D groups shrink, tiles are an error."""
    from pdlite.errors import KernelError
    from pdlite.kernels.opencl.device import get_device

    dev = get_device()
    assert dev._fit("unary_act", (128,), (64,), 48) == (32,)  # noqa: SLF001
    with pytest.raises(KernelError, match=r"'gemm' needs work-groups of 256 items \[16, 16, 1\].*allows 128"):
        dev._fit("gemm", (16, 16, 1), (16, 16, 1), 128)  # noqa: SLF001


@needs_opencl
def test_program_binaries_are_cached_on_disk(tmp_path, monkeypatch):
    """The first build writes the program's binary under opencl_cache_dir; a later build (a new process: here the
    in-memory programs cleared) loads it and compiles nothing."""
    from pdlite.kernels.opencl import base, device

    dev = device.get_device()
    src, opts = base.program_source(), "-DT_HALF=0"
    dev.programs.pop((src, opts), None)
    dev.program(src, opts, str(tmp_path))
    bins = list(tmp_path.glob("*.bin"))
    assert len(bins) == 1 and bins[0].stat().st_size > 0
    real = device.cl.Program

    def only_binaries(*args):
        assert len(args) == 3, "compiled from source although a cached binary exists"
        return real(*args)

    dev.programs.pop((src, opts), None)
    monkeypatch.setattr(device.cl, "Program", only_binaries)
    assert dev.program(src, opts, str(tmp_path)) is not None
