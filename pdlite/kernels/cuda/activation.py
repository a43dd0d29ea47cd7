"""CUDA kernels of the activations (every one a fused op may carry), scale and dropout.

Formulas follow Paddle's functors as the host kernels do (pdlite/kernels/host/activation.py):
hard_sigmoid = clamp(x * slope + offset, 0, 1); hard_swish = clamp(x + offset, 0, threshold) * x / scale;
relu6 = clamp(x, 0, threshold); swish = x / (1 + exp(-beta * x)); softplus = x where x * beta >
threshold else log(1 + exp(x * beta)) / beta; gelu exact (erf) or tanh-approximate.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from pdlite.kernels.cuda.base import HOST_ANY, CudaKernel, cuda_kernel, host_floats

Attrs = Mapping[str, Any]
Act = Callable[[torch.Tensor, Attrs], torch.Tensor]


def _hard_swish(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    t = torch.clamp(x + float(a["offset"]), 0.0, float(a["threshold"]))
    return t.mul_(x).div_(float(a["scale"]))


def _softplus(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    return F.softplus(x, beta=float(a["beta"]), threshold=float(a["threshold"]))


ACTIVATIONS: dict[str, Act] = {
    "relu": lambda x, a: torch.relu(x),
    "relu6": lambda x, a: torch.clamp(x, 0.0, float(a["threshold"])),
    "sigmoid": lambda x, a: torch.sigmoid(x),
    "tanh": lambda x, a: torch.tanh(x),
    "hard_sigmoid": lambda x, a: torch.clamp(x * float(a["slope"]) + float(a["offset"]), 0.0, 1.0),
    "hard_swish": _hard_swish,
    "swish": lambda x, a: x / (torch.exp(x * -float(a["beta"])) + 1.0),
    "silu": lambda x, a: F.silu(x),
    "leaky_relu": lambda x, a: F.leaky_relu(x, float(a["alpha"])),
    "gelu": lambda x, a: F.gelu(x, approximate="tanh" if a.get("approximate") else "none"),
    "elu": lambda x, a: F.elu(x, float(a["alpha"])),
    "mish": lambda x, a: x * torch.tanh(F.softplus(x, beta=1.0, threshold=float(a["threshold"]))),
    "softplus": _softplus,
}


def activation(act: str, attrs: Attrs) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """`x -> act(x)` with the activation's attributes (defaults attached by `split_activation`; "" gives None)."""
    if not act:
        return None
    fn = ACTIVATIONS[act]
    return lambda x: fn(x, attrs)


class Unary(CudaKernel):
    """Out = f(X) in the kernel's precision."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        return {"Out": [ACTIVATIONS[self.op.type](x, self.attrs)]}


cuda_kernel(list(ACTIVATIONS))(Unary)


@cuda_kernel("scale", inputs={"ScaleTensor": HOST_ANY})
class Scale(CudaKernel):
    """Out = X * scale + bias (bias_after_scale) or (X + bias) * scale; ScaleTensor overrides scale."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        st = ins.get("ScaleTensor")
        scale = float(host_floats(st)[0]) if st else float(self.attrs["scale"])
        bias = float(self.attrs["bias"])
        if self.attrs["bias_after_scale"]:
            out = x * scale if bias == 0.0 else torch.add(x * scale, bias)
        else:
            out = (x + bias) * scale
        return {"Out": [out]}


@cuda_kernel("dropout")
class Dropout(CudaKernel):
    """Inference dropout: X unchanged (upscale_in_train) or X * (1 - p) (downgrade_in_infer)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        if str(self.attrs["dropout_implementation"]) == "upscale_in_train":
            return {"Out": [x]}
        return {"Out": [x * (1.0 - float(self.attrs["dropout_prob"]))]}

