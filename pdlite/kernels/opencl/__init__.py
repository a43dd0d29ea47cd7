"""OpenCL target kernels, on pyopencl (GPUs of phones and boards, integrated GPUs, PoCL's CPU device); see
docs/opencl.md.

Importing this package registers every OpenCL kernel (explicit imports, no scanning). It needs
pyopencl, so the analysis imports it only when a valid place names the OpenCL target.
"""
from __future__ import annotations

import pdlite.operators  # noqa: F401  (op definitions the kernels' helpers rely on)
from pdlite.kernels.opencl import (  # noqa: F401
    activation,
    conv,
    elementwise,
    interp,
    io_copy,
    matmul,
    norm,
    pool,
    tensor,
)
