"""pdlite.kernels.host.cpu_features: the CPU and its SIMD features as the OS reports them, on x86 and aarch64.

The aarch64 readers are checked here on any machine with recorded /proc/cpuinfo texts (an RK3588's big.LITTLE cores,
qemu-user showing the x86 host's lines) and a stubbed getauxval."""
from __future__ import annotations

import pytest

from pdlite.kernels.host import cpu_features

RK3588 = """processor\t: 0
BogoMIPS\t: 48.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x2
CPU part\t: 0xd05
CPU revision\t: 0
""" * 4 + """processor\t: 4
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU part\t: 0xd0b
""" * 4

QEMU_ON_X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma avx512f
"""


@pytest.fixture
def arm(monkeypatch):
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpu_features.sys, "platform", "linux")
    monkeypatch.setattr(cpu_features, "_midr_sysfs", lambda: [])


def test_arm_cores_named_and_features_from_cpuinfo(arm, monkeypatch):
    monkeypatch.setattr(cpu_features, "arm_hwcaps", lambda: None)
    info = cpu_features._arm64(RK3588.splitlines())
    assert info.model == "Cortex-A55 x4 + Cortex-A76 x4"
    assert info.features == ("asimd", "asimdhp", "asimddp") and info.source == "/proc/cpuinfo Features"


def test_arm_features_from_hwcap_and_never_the_x86_host_lines(arm, monkeypatch):
    # qemu-user: /proc/cpuinfo is the x86 host's, getauxval the emulated CPU's (asimd, asimddp, sve, i8mm)
    hw = {1: "asimd", 20: "asimddp", 22: "sve"}
    monkeypatch.setattr(cpu_features, "_auxv", lambda: (sum(1 << b for b in hw), 1 << 13))
    info = cpu_features._arm64(QEMU_ON_X86.splitlines())
    assert info.features == ("asimd", "asimddp", "i8mm", "sve") and "HWCAP" in info.source
    assert "emulated" in info.model and "EPYC" not in info.model and "avx" not in " ".join(info.features)


def test_unknown_core_named_by_its_ids(arm, monkeypatch):
    monkeypatch.setattr(cpu_features, "arm_hwcaps", lambda: {"asimd"})
    lines = ["CPU implementer\t: 0x99", "CPU part\t: 0x123"]
    assert cpu_features._arm64(lines).model == "implementer 0x99 part 0x123 x1"


def test_x86_flags(monkeypatch):
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "x86_64")
    info = cpu_features._x86(QEMU_ON_X86.splitlines())
    assert info.model == "AMD EPYC" and info.features == ("avx", "avx2", "fma", "avx512f")
