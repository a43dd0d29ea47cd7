"""The cast ops on OpenCL: io_copy Host <-> OpenCL and calib FP32 <-> FP16 (inserted by type_target_cast_pass).

- host_to_opencl: a NumPy array -> a device array. A parameter (persistable input) is uploaded once
  in `prepare` and the same device array is returned on every run; a device array passes through.
- opencl_to_host: a device array -> a NumPy array (the queue is in order: `get` waits for the
  kernels that wrote it).
- calib: float32 <-> float16 on the device (`vstore_half_rte`: round to nearest even, as NumPy's
  astype); a result is reused while its input is the same array (a constant is converted once).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION
from pdlite.kernels.opencl.base import DEV_ANY, FP16, FP32, HOST_ANY, OPENCL, OpenCLKernel, add_source
from pdlite.kernels.opencl.device import cla
from pdlite.kernels.registry import TensorType, register_kernel

add_source("io_copy", r"""
__kernel void to_half(__global const float* x, __global half* y, int n) {
    int i = get_global_id(0);
    if (i < n) vstore_half_rte(x[i], i, y);
}
__kernel void to_float(__global const half* x, __global float* y, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = vload_half(i, x);
}
""")


@register_kernel("io_copy", target=OPENCL, precision=ANY_PRECISION, layout=ANY_LAYOUT, alias="host_to_opencl",
                 inputs={"Input": HOST_ANY}, outputs={"Out": DEV_ANY})
class HostToOpenCL(OpenCLKernel):
    """Out = Input on the device (parameters uploaded once; device arrays pass through)."""

    _const: Any = None

    def prepare(self, params: Mapping[str, Any]) -> None:
        src = params.get(self.op.input("Input"))
        if src is not None:
            self._const = self.dev.upload(src)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self._const is not None:
            return {"Out": [self._const]}
        x = ins["Input"][0]
        if isinstance(x, cla.Array):
            return {"Out": [x]}
        return {"Out": [self.dev.upload(np.asarray(x))]}


@register_kernel("io_copy", target=OPENCL, precision=ANY_PRECISION, layout=ANY_LAYOUT, alias="opencl_to_host",
                 inputs={"Input": DEV_ANY}, outputs={"Out": HOST_ANY})
class OpenCLToHost(OpenCLKernel):
    """Out = Input as a host NumPy array."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Out": [host_array(ins["Input"][0])]}


class _Calib(OpenCLKernel):
    """Out = Input converted to float16 (`to` FP16) or float32 on the device."""

    to = FP16
    _last: tuple[Any, Any] | None = None

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["Input"][0]
        if not isinstance(x, cla.Array):
            x = self.dev.upload(np.asarray(x, np.float16 if self.to == FP32 else np.float32))
        last = self._last
        if last is not None and last[0] is x:
            return {"Out": [last[1]]}
        out = self.dev.empty(x.shape, np.float16 if self.to == FP16 else np.float32)
        if x.size:
            self.launch("to_half" if self.to == FP16 else "to_float", x.size, x, out, x.size, local=(64,),
                        precision=FP32)
        self._last = (x, out)
        return {"Out": [out]}


@register_kernel("calib", target=OPENCL, precision=FP16, layout=ANY_LAYOUT, alias="fp32_to_fp16",
                 inputs={"Input": TensorType(OPENCL, FP32, ANY_LAYOUT)},
                 outputs={"Out": TensorType(OPENCL, FP16, ANY_LAYOUT)})
class CalibFp32ToFp16(_Calib):
    to = FP16


@register_kernel("calib", target=OPENCL, precision=FP32, layout=ANY_LAYOUT, alias="fp16_to_fp32",
                 inputs={"Input": TensorType(OPENCL, FP16, ANY_LAYOUT)},
                 outputs={"Out": TensorType(OPENCL, FP32, ANY_LAYOUT)})
class CalibFp16ToFp32(_Calib):
    to = FP32
