"""CUDA kernels of the fused ops (see pdlite/operators/fused.py for the design).

As on the host, a fused kernel runs the base op's CUDA kernel (same precision), then the
activation (pdlite.kernels.cuda.activation); `fc` lives in matmul.py.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import torch

from pdlite.errors import PdliteError
from pdlite.kernels.cuda.activation import activation
from pdlite.kernels.cuda.base import CUDA, NCHW, WEIGHT, CudaKernel, cuda_kernel
from pdlite.kernels.registry import KERNELS, Kernel, KernelKey
from pdlite.operators.fused import FUSED_ELEMENTWISE, base_desc, split_activation


class BasePlusActivation(CudaKernel):
    """Run the base op's CUDA kernel, then the activation on its single output slot."""

    out_slot = "Out"

    def base_type(self) -> str:
        raise NotImplementedError

    @cached_property
    def base(self) -> Kernel:
        t = self.base_type()
        kd = KERNELS.get(KernelKey(t, CUDA, self.precision, NCHW))
        if kd is None:
            raise PdliteError(f"{self.op.type}: no CUDA {self.precision.name} kernel for the base op {t!r}")
        return kd.create(base_desc(self.op, t), self.context)

    @cached_property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return activation(*split_activation(dict(self.attrs)))

    def prepare(self, params: Mapping[str, Any]) -> None:
        self.base.prepare(params)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        outs = self.base.run(ins)
        if self.act is not None:
            outs[self.out_slot] = [self.act(outs[self.out_slot][0])]
        return outs


@cuda_kernel("fused_conv2d", inputs={"Filter": WEIGHT, "Bias": WEIGHT})
class FusedConv2d(BasePlusActivation):
    """Output = act(conv(Input, Filter) + Bias) via the CUDA kernel of `conv_type`."""

    out_slot = "Output"

    def base_type(self) -> str:
        return str(self.attrs["conv_type"])


@cuda_kernel(list(FUSED_ELEMENTWISE))
class FusionElementwiseActivation(BasePlusActivation):
    """Out = act(X <op> Y) via the CUDA elementwise kernel."""

    def base_type(self) -> str:
        return FUSED_ELEMENTWISE[self.op.type]


@cuda_kernel("fusion_scale_activation")
class FusionScaleActivation(BasePlusActivation):
    """Out = act(scale(X)) via the CUDA scale kernel."""

    def base_type(self) -> str:
        return "scale"
