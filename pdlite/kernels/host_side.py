"""Host-side kernels of a device target: ops on small host tensors (shape arithmetic) run the op's host kernel.

Shape tensors (the output of `shape`, `fill_constant`, and `slice` / `concat` / `scale` / elementwise
ops applied to them) stay on the host: a device kernel reading one would have to wait for the device.
A device target registers these kernels (`register_host_side`) with host inputs and outputs so that
the kernel pick prefers them whenever the inputs are int32/int64 (their declared input precision
matches, the float kernels' does not); they delegate to the op's host kernel, so Paddle's semantics
are written once. `register_shape_arithmetic(target)` registers the whole set a device target needs:
`shape` (reads only the input's metadata), `fill_constant` (made on the host), and the int32/int64 forms of
slice / concat / reshape / flatten / squeeze / unsqueeze / scale and the elementwise ops. Used by the CUDA
and OpenCL targets.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, PrecisionType, TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.registry import ANY_TENSOR, HOST_ANY, Kernel, TensorType, kernels_for, register_kernel
from pdlite.operators.elementwise import BINARY_OPS

INT_PRECISIONS = (PrecisionType.INT32, PrecisionType.INT64)


def host_ints(vals: Sequence[Any] | None) -> list[int] | None:
    """The integers of a tensor or a list of 1-element tensors (None when the slot is empty)."""
    if not vals:
        return None
    return [int(v) for a in vals for v in host_array(a).reshape(-1)]


def host_floats(vals: Sequence[Any]) -> list[float]:
    """The floats of a tensor or a list of 1-element tensors."""
    return [float(v) for a in vals for v in host_array(a).reshape(-1)]


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


class Shape(Kernel):
    """Out: Input's dims as a host int32 array (reads no data: nothing waits for the device)."""

    metadata_only = True

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Out": [np.array(tuple(ins["Input"][0].shape), dtype=np.int32)]}


SLICE_TENSORS = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")

# (op type, data slots, other host slots) of the shape arithmetic that stays on the host
SHAPE_ARITHMETIC: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("slice", ("Input",), SLICE_TENSORS),
    ("concat", ("X",), ("AxisTensor",)),
    ("reshape2", ("X",), ("Shape", "ShapeTensor")),
    ("reshape", ("X",), ("Shape", "ShapeTensor")),
    ("flatten_contiguous_range", ("X",), ()),
    ("squeeze2", ("X",), ()),
    ("unsqueeze2", ("X",), ("AxesTensor", "AxesTensorList")),
    ("scale", ("X",), ("ScaleTensor",)),
    *((t, ("X", "Y"), ()) for t in BINARY_OPS),
)


def register_shape_arithmetic(target: TargetType) -> None:
    """Register on `target`: `shape` (metadata only, a host int32 result), `fill_constant` (on the host) and the
    host-side int forms of SHAPE_ARITHMETIC, so that a device target's shape arithmetic never waits for it."""
    register_kernel("shape", target=target, precision=ANY_PRECISION, layout=ANY_LAYOUT,
                    inputs={"Input": ANY_TENSOR},
                    outputs={"Out": TensorType(HOST, PrecisionType.INT32, ANY_LAYOUT)})(Shape)
    register_kernel("fill_constant", target=target, precision=ANY_PRECISION, layout=ANY_LAYOUT,
                    inputs={s: HOST_ANY for s in ("ValueTensor", "ShapeTensor", "ShapeTensorList")},
                    outputs={"Out": HOST_ANY})(HostSide)
    for op_type, data, other in SHAPE_ARITHMETIC:
        register_host_side(op_type, target, data, other)
