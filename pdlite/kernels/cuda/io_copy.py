"""The cast ops on CUDA: io_copy Host <-> CUDA and calib FP32 <-> FP16 (inserted by type_target_cast_pass).

- host_to_cuda: a NumPy array -> a torch tensor on the device. A parameter (persistable input)
  is uploaded once in `prepare` and the same device tensor is returned on every run. A torch
  tensor already on the device passes through untouched: the zero-copy path for feeds.
- cuda_to_host: a device tensor -> a NumPy array. The copy of a fetched result (attribute
  `fetch_copy`, set by the pass) keeps the device tensor instead when the `cuda_device_outputs`
  option is on (a clone, so that a later run or graph replay cannot overwrite it).
- calib: casts between float32 and float16 on the device; a result is reused while its input is
  the same, unmodified tensor (so a constant is converted once, not on every run).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION
from pdlite.kernels.cuda.base import CUDA, DEV_ANY, FP16, FP32, HOST_ANY, TORCH_DTYPE, CudaKernel, to_numpy, to_torch
from pdlite.kernels.registry import TensorType, register_kernel


@register_kernel("io_copy", target=CUDA, precision=ANY_PRECISION, layout=ANY_LAYOUT, alias="host_to_cuda",
                 inputs={"Input": HOST_ANY}, outputs={"Out": DEV_ANY})
class HostToCuda(CudaKernel):
    """Out = Input on the device (parameters uploaded once; device tensors pass through)."""

    _const: torch.Tensor | None = None

    def prepare(self, params: Mapping[str, Any]) -> None:
        src = params.get(self.op.input("Input"))
        if src is not None:
            self._const = to_torch(src, self.device)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self._const is not None:
            return {"Out": [self._const]}
        x = ins["Input"][0]
        if isinstance(x, torch.Tensor) and x.device == self.device:
            return {"Out": [x]}
        return {"Out": [to_torch(x, self.device)]}


@register_kernel("io_copy", target=CUDA, precision=ANY_PRECISION, layout=ANY_LAYOUT, alias="cuda_to_host",
                 inputs={"Input": DEV_ANY}, outputs={"Out": HOST_ANY})
class CudaToHost(CudaKernel):
    """Out = Input as a host NumPy array (or kept on the device for fetched results, on request)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["Input"][0]
        if (isinstance(x, torch.Tensor) and self.attrs.get("fetch_copy")
                and self.context.option("cuda_device_outputs")):
            return {"Out": [x.clone()]}
        return {"Out": [to_numpy(x)]}


class _Calib(CudaKernel):
    """Out = Input converted to `to` (float16 or float32) on the device."""

    to = FP16

    _last: tuple[torch.Tensor, int, torch.Tensor] | None = None

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["Input"][0]
        if not isinstance(x, torch.Tensor):
            x = to_torch(x, self.device)
        last = self._last
        if last is not None and last[0] is x and last[1] == x._version:
            return {"Out": [last[2]]}
        out = x.to(TORCH_DTYPE[self.to])
        self._last = (x, x._version, out)
        return {"Out": [out]}


@register_kernel("calib", target=CUDA, precision=FP16, layout=ANY_LAYOUT, alias="fp32_to_fp16",
                 inputs={"Input": TensorType(CUDA, FP32, ANY_LAYOUT)}, outputs={"Out": TensorType(CUDA, FP16, ANY_LAYOUT)})
class CalibFp32ToFp16(_Calib):
    to = FP16


@register_kernel("calib", target=CUDA, precision=FP32, layout=ANY_LAYOUT, alias="fp16_to_fp32",
                 inputs={"Input": TensorType(CUDA, FP16, ANY_LAYOUT)}, outputs={"Out": TensorType(CUDA, FP32, ANY_LAYOUT)})
class CalibFp16ToFp32(_Calib):
    to = FP32

