"""CUDA kernels of the binary elementwise ops, with Paddle's `axis` broadcasting.

X and Y are reshaped (views) by `aligned_shapes` (the op definition's rule) so that torch's
broadcasting gives Paddle's; the result keeps X's dtype. Integer division truncates toward zero,
floordiv floors, mod takes the divisor's sign, as on the host. Int32/int64 operands (shape
arithmetic) run on the host instead (see pdlite/kernels/host_side.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pdlite.kernels.cuda.base import CudaKernel, cuda_kernel
from pdlite.operators.elementwise import BINARY_OPS, aligned_shapes

Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.div(x, y) if x.is_floating_point() else torch.div(x, y, rounding_mode="trunc")


def _pow(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point():
        return torch.pow(x, y)
    return torch.pow(x.double(), y.double()).to(x.dtype)


FUNCS: dict[str, Binary] = {
    "elementwise_add": torch.add,
    "elementwise_sub": torch.sub,
    "elementwise_mul": torch.mul,
    "elementwise_div": _div,
    "elementwise_max": torch.maximum,
    "elementwise_min": torch.minimum,
    "elementwise_pow": _pow,
    "elementwise_floordiv": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "elementwise_mod": torch.remainder,
}


def broadcast_operands(x: torch.Tensor, y: torch.Tensor, axis: int) -> tuple[torch.Tensor, torch.Tensor]:
    """X and Y reshaped so that torch broadcasting gives Paddle's `axis` broadcasting."""
    if axis == -1 or x.dim() == y.dim() or x.shape == y.shape:
        return x, y
    xs, ys, _ = aligned_shapes(x.shape, y.shape, axis)
    return x.reshape(xs), y.reshape(ys)


def elementwise(op_type: str, x: torch.Tensor, y: torch.Tensor, axis: int) -> torch.Tensor:
    """Out = X <op> Y with Paddle's broadcasting, in X's dtype."""
    x, y = broadcast_operands(x, y, axis)
    out = FUNCS[op_type](x, y)
    return out if out.dtype == x.dtype else out.to(x.dtype)


class Elementwise(CudaKernel):
    """Out = X <op> Y (the op of the kernel's op type)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = self.tensor(ins, "X"), self.tensor(ins, "Y")
        return {"Out": [elementwise(self.op.type, x, y, int(self.attrs["axis"]))]}


_ALL = list(BINARY_OPS)
cuda_kernel(_ALL)(Elementwise)  # int32/int64 operands: host-side kernels (tensor.py, register_shape_arithmetic)
