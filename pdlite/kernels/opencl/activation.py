"""OpenCL kernels of the activations (every one a fused op may carry), scale, fusion_scale_activation, dropout.

Formulas follow Paddle's functors as the host kernels do (pdlite/kernels/host/activation.py), written
once in OpenCL C (`act_fn` in base.HEADER, selected by code): hard_sigmoid = clamp(x * slope + offset,
0, 1); hard_swish = clamp(x + offset, 0, threshold) * x / scale; relu6 = clamp(x, 0, threshold);
swish = x / (1 + exp(-beta * x)); softplus = x where x * beta > threshold else log(1 + exp(x * beta)) /
beta; gelu exact (erf) or tanh-approximate. scale: X * s + b (bias_after_scale) or (X + b) * s, then
the activation of fusion_scale_activation (dropout at inference is a scale).
"""
from __future__ import annotations

from typing import Any

from pdlite.kernels.host_side import host_floats
from pdlite.kernels.opencl.base import (
    ACT_CODES,
    HOST_ANY,
    OpenCLKernel,
    act_args,
    add_source,
    opencl_kernel,
)
from pdlite.operators.fused import split_activation

add_source("activation", r"""
__kernel void unary_act(__global const T* x, __global T* y, int n, int act, float a, float b, float c) {
    int i = get_global_id(0);
    if (i < n) ST(y, i, act_fn(LD(x, i), act, a, b, c));
}
/* y = act(scale * (x + pre) + post) */
__kernel void scale_act(__global const T* x, __global T* y, int n, float scale, float pre, float post,
                        int act, float a, float b, float c) {
    int i = get_global_id(0);
    if (i < n) ST(y, i, act_fn((LD(x, i) + pre) * scale + post, act, a, b, c));
}
""")


def unary(k: OpenCLKernel, x: Any, act: tuple) -> Any:
    """act(x) as a new device array (act: act_args)."""
    y = k.empty(x.shape)
    if x.size:
        k.launch("unary_act", x.size, x, y, x.size, *act, local=(64,))
    return y


def scale_act(k: OpenCLKernel, x: Any, scale: float, pre: float, post: float, act: tuple) -> Any:
    y = k.empty(x.shape)
    if x.size:
        k.launch("scale_act", x.size, x, y, x.size, scale, pre, post, *act, local=(64,))
    return y


@opencl_kernel(list(ACT_CODES))
class Unary(OpenCLKernel):
    """Out = f(X) in the kernel's precision."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {"Out": [unary(self, self.tensor(ins, "X"), act_args(self.op.type, self.attrs))]}


@opencl_kernel(["scale", "fusion_scale_activation"], inputs={"ScaleTensor": HOST_ANY})
class Scale(OpenCLKernel):
    """Out = act(X * scale + bias) (bias_after_scale) or act((X + bias) * scale); ScaleTensor overrides scale."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        st = ins.get("ScaleTensor")
        scale = host_floats(st)[0] if st else float(self.attrs["scale"])
        bias = float(self.attrs["bias"])
        pre, post = (0.0, bias) if self.attrs["bias_after_scale"] else (bias, 0.0)
        act = act_args(*split_activation(dict(self.attrs))) if self.op.type != "scale" else act_args("", {})
        return {"Out": [scale_act(self, x, scale, pre, post, act)]}


@opencl_kernel("dropout")
class Dropout(OpenCLKernel):
    """Inference dropout: X unchanged (upscale_in_train) or X * (1 - p) (downgrade_in_infer)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        if str(self.attrs["dropout_implementation"]) == "upscale_in_train":
            return {"Out": [x]}
        return {"Out": [scale_act(self, x, 1.0 - float(self.attrs["dropout_prob"]), 0.0, 0.0, act_args("", {}))]}
