"""Shape arithmetic on the CUDA target: ops on small host tensors run the op's host kernel.

Shape tensors (the output of `shape`, `fill_constant`, and `slice` / `concat` / `scale` /
elementwise ops applied to them) stay on the host: a device kernel reading one would have to
wait for the GPU (and could not be captured in a CUDA graph). These kernels are registered on
the CUDA target with host inputs and outputs so that the kernel pick prefers them whenever the
inputs are int32/int64 (their declared input precision matches, the float kernels' does not),
and they delegate to the op's host kernel: Paddle's semantics are written once (the generic
pieces live in pdlite/kernels/host_side.py, shared with the OpenCL target).
"""
from __future__ import annotations

from collections.abc import Sequence

from pdlite.kernels import host_side as _generic
from pdlite.kernels.cuda.base import CUDA
from pdlite.kernels.host_side import INT_PRECISIONS, HostSide, host_kernel  # noqa: F401  (this target's names)


def register_host_side(op_type: str, data_slots: Sequence[str], other_slots: Sequence[str] = (),
                       outputs: Sequence[str] = ("Out",)) -> None:
    """Register HostSide for `op_type` on CUDA: one alias per int precision of the data slots."""
    _generic.register_host_side(op_type, CUDA, data_slots, other_slots, outputs)
