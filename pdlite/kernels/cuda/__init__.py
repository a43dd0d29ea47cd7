"""CUDA target kernels, written on PyTorch (cuDNN / cuBLAS underneath); see docs/cuda.md.

Importing this package registers every CUDA kernel (explicit imports, no scanning). It needs
torch, so the analysis imports it only when a valid place names the CUDA target.
"""
from __future__ import annotations

import pdlite.operators  # noqa: F401  (op definitions the kernels' helpers and aliases rely on)
from pdlite.kernels.cuda import (  # noqa: F401
    activation,
    conv,
    elementwise,
    fused,
    interp,
    io_copy,
    matmul,
    norm,
    pool,
    tensor,
)
