"""`pdlite doctor` and `pdlite --version` report what the process really runs with."""
from __future__ import annotations

import pytest

from pdlite.kernels.host import cpu_features, native
from pdlite.tools.cli import main
from pdlite.tools.doctor import FLAGS


def test_doctor_reports_native_isa_blas_devices_and_gpu(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for key in ("pdlite:", "cpu:", "native kernels:", "blas:", "devices:", "gpu:"):
        assert key in out, out
    if native.available():
        assert f"ISA {native.isa()}" in out
    else:
        assert "native kernels: no:" in out
    for name in ("intel_openvino", "onnxruntime"):
        assert f"  {name}: " in out
    cpu = next(line for line in out.splitlines() if line.startswith("cpu:"))
    info = cpu_features.cpu_info()
    if cpu_features.is_arm64(info.arch):  # the OS's ARM features, never x86 lines (qemu-user shows the host's)
        assert "flags:" not in cpu and not any(f in cpu for f in ("avx", "sse")), cpu
        listed = set(cpu.split("features:", 1)[1].split(" (from ", 1)[0].split())
        assert listed == set(info.features) or (not info.features and "none of interest" in cpu), cpu
        if native.available() and native.isa() == "neon":
            assert "ISA neon" in out and "NEON kernels in use" in out, out
        return
    if info.source.startswith("none"):
        return
    listed = set(cpu.split("flags:", 1)[1].split(" (from ", 1)[0].split())
    assert listed == set(info.features) or (not info.features and "none of interest" in cpu), cpu
    with open("/proc/cpuinfo") as f:  # (the flags themselves, read here independently of cpu_features)
        have = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    assert listed == {f for f in FLAGS if f in have}, (listed, have & set(FLAGS))


def test_openblas_hint_only_where_its_kernels_are_narrower_than_the_cpu():
    from pdlite.tools.doctor import openblas_hint

    hint = openblas_hint("openblas", "Haswell", ["avx2", "avx512f"])
    assert "Haswell kernels" in hint and "OPENBLAS_CORETYPE=SkylakeX" in hint
    assert openblas_hint("openblas", "SkylakeX", ["avx2", "avx512f"]) == ""
    assert openblas_hint("openblas", "Haswell", ["avx2", "fma"]) == ""  # an AVX2 CPU: Haswell is its best
    assert openblas_hint("mkl", "Haswell", ["avx512f"]) == ""
    assert openblas_hint("openblas", None, ["avx512f"]) == ""


def test_version_names_the_host_kernels(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    expected = f"native kernels: {native.isa()}" if native.available() else "native kernels: not built"
    assert expected in out, out
