"""The CPU this process runs on and its SIMD features, as the OS reports them (for `pdlite doctor`, the benchmarks
and the instruction-set tests).

x86: /proc/cpuinfo's `model name` and `flags`. aarch64: the kernel's hardware capabilities (getauxval(AT_HWCAP /
AT_HWCAP2): the features a process may use, which under qemu-user are the emulated CPU's), the core from
/proc/cpuinfo's `CPU implementer` / `CPU part` (or sysfs' MIDR_EL1) named where known. Under qemu-user emulation
/proc/cpuinfo may describe the host (an x86 `flags` line on an aarch64 process): those lines are never reported as
this CPU's. macOS: sysctl.
"""
from __future__ import annotations

import platform
import subprocess
import sys
from collections import Counter
from typing import NamedTuple

# the x86 flags that decide what the native kernels and the devices' int8 / bf16 kernels can use
X86_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
             "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
# aarch64 features of interest: Advanced SIMD (NEON), its fp16 / dot-product / fp16 FMLAL / int8 matrix / bf16
# extensions, SVE, SVE2, SME (Linux's names, as /proc/cpuinfo's `Features` and the HWCAP bits call them)
ARM_FEATURES = ("asimd", "asimdhp", "asimddp", "asimdfhm", "i8mm", "bf16", "sve", "sve2", "sme")
# Linux's AT_HWCAP / AT_HWCAP2 bits (arch/arm64/include/uapi/asm/hwcap.h) of those features
_HWCAP = {"asimd": 1, "asimdhp": 10, "asimddp": 20, "asimdfhm": 23, "sve": 22}
_HWCAP2 = {"sve2": 1, "i8mm": 13, "bf16": 14, "sme": 23}
_AT_HWCAP, _AT_HWCAP2 = 16, 26
# (implementer, part) of MIDR_EL1 -> core name; the cores of the boards and servers pdlite's users run
_ARM_CORES = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510", (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse-N2", (0x41, 0xD4B): "Cortex-A78C",
    (0x41, 0xD4D): "Cortex-A715", (0x41, 0xD4E): "Cortex-X3", (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD80): "Cortex-A520", (0x41, 0xD81): "Cortex-A720", (0x41, 0xD82): "Cortex-X4",
    (0x46, 0x001): "Fujitsu A64FX", (0x4E, 0x004): "NVIDIA Carmel", (0x51, 0x805): "Qualcomm Kryo 4xx Silver",
    (0x61, 0x022): "Apple M1 Icestorm", (0x61, 0x023): "Apple M1 Firestorm", (0xC0, 0xAC3): "Ampere-1",
    (0x48, 0xD01): "HiSilicon TSV110 (Kunpeng 920)",
}


class CpuInfo(NamedTuple):
    arch: str  # platform.machine(): x86_64, aarch64, arm64, ...
    model: str  # the CPU model or the cores, as far as the OS tells
    features: tuple[str, ...]  # the features of interest it has (X86_FLAGS or ARM_FEATURES, in their order)
    source: str  # where the features were read


def is_arm64(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("aarch64", "arm64")


def is_x86(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64", "i386", "i686")


def _proc_cpuinfo() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read().splitlines()
    except OSError:
        return []


def _field(lines: list[str], key: str) -> list[str]:
    return [ln.split(":", 1)[1].strip() for ln in lines if ln.split(":", 1)[0].strip() == key and ":" in ln]


def _x86(lines: list[str]) -> CpuInfo:
    model = next(iter(_field(lines, "model name")), "") or platform.processor() or platform.machine()
    have = set(next(iter(_field(lines, "flags")), "").split())
    return CpuInfo(platform.machine(), model, tuple(f for f in X86_FLAGS if f in have),
                   "/proc/cpuinfo flags" if have else "none (no /proc/cpuinfo flags)")


def _auxv() -> tuple[int, int] | None:
    """getauxval(AT_HWCAP), getauxval(AT_HWCAP2) of this process, None where libc has no getauxval."""
    import ctypes

    try:
        getauxval = ctypes.CDLL(None).getauxval
    except (OSError, AttributeError):
        return None
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    return int(getauxval(_AT_HWCAP)), int(getauxval(_AT_HWCAP2))


def arm_hwcaps() -> set[str] | None:
    """The ARM_FEATURES the kernel grants this process (its HWCAP bits), None where they cannot be read."""
    aux = _auxv()
    if not aux or not aux[0]:
        return None
    hw, hw2 = aux
    return {f for f, b in _HWCAP.items() if hw >> b & 1} | {f for f, b in _HWCAP2.items() if hw2 >> b & 1}


def _midr_sysfs() -> list[tuple[int, int]]:
    """(implementer, part) per CPU from sysfs' MIDR_EL1 registers."""
    cores = []
    for cpu in range(1024):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/regs/identification/midr_el1") as f:
                midr = int(f.read().strip(), 0)
        except (OSError, ValueError):
            break
        cores.append((midr >> 24 & 0xFF, midr >> 4 & 0xFFF))
    return cores


def _midr_cores(lines: list[str]) -> list[tuple[int, int]]:
    """(implementer, part) per CPU from /proc/cpuinfo, else from sysfs."""
    impl, part = _field(lines, "CPU implementer"), _field(lines, "CPU part")
    if impl and len(impl) == len(part):
        try:
            return [(int(i, 0), int(p, 0)) for i, p in zip(impl, part)]
        except ValueError:
            pass
    return _midr_sysfs()


def _core_name(core: tuple[int, int]) -> str:
    return _ARM_CORES.get(core, f"implementer 0x{core[0]:02x} part 0x{core[1]:03x}")


def _arm64(lines: list[str]) -> CpuInfo:
    arch = platform.machine()
    if sys.platform == "darwin":
        return _darwin(arch)
    caps = arm_hwcaps()
    if caps is not None:
        source = "the kernel's HWCAP (getauxval)"
    else:
        caps = set(next(iter(_field(lines, "Features")), "").split())
        source = "/proc/cpuinfo Features" if caps else "none"
    cores = Counter(_core_name(c) for c in _midr_cores(lines))
    if cores:
        model = " + ".join(f"{name} x{n}" for name, n in cores.items())
    elif _field(lines, "flags") or _field(lines, "vendor_id"):  # another architecture's lines: qemu-user
        model = ("an emulated aarch64 CPU (qemu-user: /proc/cpuinfo describes the host, not this CPU; the features "
                 "are the emulated CPU's)")
    else:
        model = next(iter(_field(lines, "model name") + _field(lines, "Hardware")), "") or "aarch64 (core not named)"
    return CpuInfo(arch, model, tuple(f for f in ARM_FEATURES if f in caps), source)


def _darwin(arch: str) -> CpuInfo:
    def sysctl(name: str) -> str:
        try:
            return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    have = {"asimd"}  # Advanced SIMD is part of every arm64 Mac
    for feat, key in (("asimddp", "FEAT_DotProd"), ("asimdhp", "FEAT_FP16"), ("asimdfhm", "FEAT_FHM"),
                      ("i8mm", "FEAT_I8MM"), ("bf16", "FEAT_BF16"), ("sme", "FEAT_SME")):
        if sysctl(f"hw.optional.arm.{key}") == "1":
            have.add(feat)
    return CpuInfo(arch, sysctl("machdep.cpu.brand_string") or "Apple silicon",
                   tuple(f for f in ARM_FEATURES if f in have), "sysctl hw.optional.arm")


def cpu_info() -> CpuInfo:
    """This CPU's model and its SIMD features of interest, per architecture (see the module's docstring)."""
    if is_arm64():
        return _arm64(_proc_cpuinfo())
    if sys.platform == "darwin":
        return CpuInfo(platform.machine(), platform.processor() or platform.machine(), (), "none")
    lines = _proc_cpuinfo()
    if is_x86() or not lines:
        return _x86(lines)
    return CpuInfo(platform.machine(), next(iter(_field(lines, "model name")), platform.machine()), (), "none")
