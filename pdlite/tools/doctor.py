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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="print the native build, ISA, BLAS, devices and GPU this installation uses")
    p.set_defaults(func=main)


# the CPU flags that decide what the native kernels and the devices' int8 / bf16 kernels can use
FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
         "amx_tile", "amx_int8", "amx_bf16")


def cpu_info() -> tuple[str, list[str]]:
    """(CPU model name, the FLAGS it has), from /proc/cpuinfo where there is one (the benchmarks print it too)."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    have = set(line.split(":", 1)[1].split())
                    flags = [f for f in FLAGS if f in have]
    except OSError:
        pass
    return model, flags


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _blas() -> str:
    import numpy  # noqa: F401  (loads its BLAS so that threadpoolctl sees it)
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if blas:
        b = blas[0]
        return (f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
                f"{b.get('num_threads')} threads) {b.get('filepath')}")
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
    model, flags = cpu_info()
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
        "cpu": f"{model}; flags: {' '.join(flags) or 'none of interest'}",
        "numpy": _version("numpy"),
        "native kernels": (f"yes, ISA {info['isa']}, GEMM via {info['gemm']} ({info['where']})"
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
