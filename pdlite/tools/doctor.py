"""`pdlite doctor`: what this installation runs with — native kernels (built? which ISA?), BLAS, devices, GPU.

Every line is read from the running process, not from configuration: the native extension reports the
instruction set it picked, BLAS is found the way pdlite finds it, a device counts as installed when its driver's
packages import, and the GPU line asks torch (when installed) whether CUDA is usable.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
from typing import Any

from pdlite.kernels.host import cpu_features
from pdlite.kernels.host.cpu_features import X86_FLAGS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="print the native build, ISA, BLAS, devices and GPU this installation uses")
    p.set_defaults(func=main)


FLAGS = X86_FLAGS  # (the x86 flags the cpu line lists; ARM_FEATURES on aarch64)


def cpu_info() -> tuple[str, list[str]]:
    """(CPU model name, its SIMD features of interest) as the OS reports them, on x86 and ARM (the benchmarks print
    it too): pdlite.kernels.host.cpu_features."""
    info = cpu_features.cpu_info()
    return info.model, list(info.features)


# what the native kernels' ISA names mean, for the doctor's line
ISA_NAMES = {"neon": " (ARM Advanced SIMD: NEON kernels in use)", "avx2": " (AVX2 + FMA)", "avx512": " (AVX-512)",
             "baseline": " (no vector ISA picked: the portable build)"}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# OpenBLAS's kernel sets (its `architecture`, OPENBLAS_CORETYPE's values) that use AVX-512
OPENBLAS_AVX512_CORES = {"skylakex", "cooperlake", "sapphirerapids"}


def openblas_hint(api: str | None, architecture: str | None, cpu_flags: list[str] | tuple[str, ...]) -> str:
    """A note when NumPy's OpenBLAS runs narrower kernels than the CPU has: OpenBLAS picks its Haswell (AVX2) set
    on AMD Zen 4/5, so NumPy's GEMMs (pdlite's Winograd products, im2col convs) run AVX2 on an AVX-512 CPU; the
    variable, set before Python starts, picks its AVX-512 set (PP-OCR det 0.84x, ResNet18 0.80x the time at one
    thread on a Zen 5 core: BENCHMARKS.md, helper 39A of session 49). '' when nothing is to be said."""
    if api != "openblas" or not architecture or "avx512f" not in cpu_flags:
        return ""
    if architecture.lower() in OPENBLAS_AVX512_CORES:
        return ""
    return (f"; note: OpenBLAS runs its {architecture} kernels on this AVX-512 CPU: `export "
            f"OPENBLAS_CORETYPE=SkylakeX` before starting Python lets NumPy's GEMMs use AVX-512")


def _blas() -> str:
    import numpy  # noqa: F401  (loads its BLAS so that threadpoolctl sees it)
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if blas:
        b = blas[0]
        hint = openblas_hint(b.get("internal_api"), b.get("architecture"), cpu_features.cpu_info().features)
        return (f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
                f"{b.get('num_threads')} threads) {b.get('filepath')}{hint}")
    from pdlite.kernels.host import blas as numpy_blas

    lib = numpy_blas.library()
    return f"OpenBLAS at {lib._name}" if lib is not None else "not found (BLAS thread control off)"


def _gpu() -> str:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "torch not installed (pip install pdlite[torch]): no CUDA target"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__}: no CUDA device visible (the CUDA kernels run on torch's CPU device)"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return f"torch {torch.__version__}, CUDA {torch.version.cuda}: {', '.join(names)}"


def _opencl() -> str | dict[str, str]:
    """The OpenCL platforms and devices the OpenCL target can use (pyopencl and an ICD needed)."""
    try:
        from pdlite.kernels.opencl import device
    except ImportError as e:
        return f"no OpenCL target: {e}"
    found = device.describe_platforms()
    return found or f"pyopencl {_version('pyopencl')}, but no OpenCL platform: {device.INSTALL_HINT}"


def report() -> dict[str, Any]:
    """The doctor's findings as a dict (printed by `main`)."""
    from pdlite import __version__
    from pdlite.kernels.host import native
    from pdlite.nnadapter.registry import DRIVERS
    from pdlite.registries import load_registries

    load_registries()
    cpu = cpu_features.cpu_info()
    devices = {}
    for name in sorted(DRIVERS):
        cls = DRIVERS[name]
        pkgs = ", ".join(f"{p} {_version(p) or ''}".strip() for p in cls.packages)
        devices[name] = f"installed ({pkgs})" if cls.available() else f"not installed: {cls.missing_message()}"
    info = native.build_info()
    return {
        "pdlite": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": (f"{cpu.model}; {'features' if cpu_features.is_arm64(cpu.arch) else 'flags'}: "
                f"{' '.join(cpu.features) or 'none of interest'} (from {cpu.source})"),
        "numpy": _version("numpy"),
        "native kernels": (f"yes, ISA {info['isa']}{ISA_NAMES.get(info['isa'], '')}, GEMM via {info['gemm']} "
                           f"({info['where']})"
                           if info["available"] else f"no: {info['where']}"),
        "blas": _blas(),
        "devices": devices,
        "gpu": _gpu(),
        "opencl": _opencl(),
    }


def main(args: argparse.Namespace) -> int:
    for key, value in report().items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        else:
            print(f"{key}: {value}")
    return 0
