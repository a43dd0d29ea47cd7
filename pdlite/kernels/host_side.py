"""Host-side kernels of a device target: ops on small host tensors (shape arithmetic) run the op's host kernel.

Shape tensors (the output of `shape`, `fill_constant`, and `slice` / `concat` / `scale` / elementwise
ops applied to them) stay on the host: a device kernel reading one would have to wait for the device.
A device target registers these kernels (`register_host_side`) with host inputs and outputs so that
the kernel pick prefers them whenever the inputs are int32/int64 (their declared input precision
matches, the float kernels' does not); they delegate to the op's host kernel, so Paddle's semantics
are written once. Used by the CUDA and OpenCL targets.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, PrecisionType, TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.registry import Kernel, TensorType, kernels_for, register_kernel

INT_PRECISIONS = (PrecisionType.INT32, PrecisionType.INT64)
HOST_ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)


def host_array(v: Any) -> np.ndarray:
    """A host NumPy array of a value: NumPy as it is, a torch tensor or a pyopencl array copied back."""
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach"):  # torch
        return v.detach().cpu().numpy()
    if hasattr(v, "get") and hasattr(v, "queue"):  # pyopencl.array.Array
        return v.get()
    return np.asarray(v)


def host_kernel(kernel: Kernel) -> Kernel:
    """An instance of `kernel.op`'s host kernel (Any precision preferred, else FP32)."""
    best = None
    for kd in kernels_for(kernel.op.type):
        if kd.key.target != TargetType.Host:
            continue
        rank = (kd.key.precision not in (ANY_PRECISION, PrecisionType.FP32), kd.key.precision != ANY_PRECISION,
                kd.key.alias != "def")
        if best is None or rank < best[0]:
            best = (rank, kd)
    if best is None:
        raise PdliteError(f"host-side kernel of {kernel.op.type!r}: no host kernel is registered for it")
    return best[1].create(kernel.op, kernel.context)


class HostSide(Kernel):
    """Runs the op's host kernel on host (NumPy) values; device inputs are copied to the host."""

    _host: Kernel | None = None

    @property
    def host(self) -> Kernel:
        if self._host is None:
            self._host = host_kernel(self)
        return self._host

    def prepare(self, params: Mapping[str, Any]) -> None:
        self.host.prepare(params)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return self.host.run({k: [host_array(v) for v in vals] for k, vals in ins.items()})


def register_host_side(op_type: str, target: TargetType, data_slots: Sequence[str], other_slots: Sequence[str] = (),
                       outputs: Sequence[str] = ("Out",)) -> None:
    """Register HostSide for `op_type` on `target`: one alias per int precision of the data slots."""
    outs = {s: HOST_ANY for s in outputs}
    for p in INT_PRECISIONS:
        ins = {s: TensorType(HOST, p, ANY_LAYOUT) for s in data_slots}
        ins.update({s: HOST_ANY for s in other_slots})
        register_kernel(op_type, target=target, precision=ANY_PRECISION, layout=ANY_LAYOUT,
                        alias=f"host_{p.name.lower()}", inputs=ins, outputs=outs)(HostSide)
