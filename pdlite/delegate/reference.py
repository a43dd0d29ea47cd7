"""A reference delegate: replaces every run of convolutions with an independent NumPy implementation.

`pdlite check` uses it to exercise the Delegate API on any model (conv2d / depthwise_conv2d,
with a folded Bias and with `fused_conv2d`'s activation done by pdlite's own activation op
definitions), and `examples/delegate/` shows the same pattern in a standalone file.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.core.types import DataLayoutType, PrecisionType, TargetType
from pdlite.delegate.api import Delegate, DelegateModel, Kernel
from pdlite.kernels.registry import KERNELS, KernelKey
from pdlite.operators.fused import split_activation
from pdlite.operators.geometry import conv_out_sizes, raiser, resolve_padding, spatial
from pdlite.operators.registry import OPS

CONV_TYPES = ("conv2d", "depthwise_conv2d")
_fail = raiser("reference delegate conv2d")


def conv2d_nchw(x: np.ndarray, w: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """NCHW convolution by summing kernel taps (einsum per tap): paddings, SAME/VALID, strides, dilations, groups."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    strides = spatial(attrs["strides"], 2, "strides", _fail)
    p, (dh, dw) = resolve_padding(attrs["padding_algorithm"], attrs["paddings"], (h, wd), strides, (kh, kw),
                                  spatial(attrs["dilations"], 2, "dilations", _fail), _fail)
    assert p is not None
    sh, sw = strides
    g = int(attrs["groups"] or 1)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    oh, ow = conv_out_sizes((h, wd), (kh, kw), (dh, dw), p, strides)
    out = np.zeros((n, oc, oh, ow), np.float64)
    ocg = oc // g
    xg = xp.reshape(n, g, icg, xp.shape[2], xp.shape[3])
    wg = w.reshape(g, ocg, icg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j], optimize=True).reshape(n, oc, oh, ow)
    return out.astype(np.float32)


class ConvRunKernel(Kernel):
    """Executes a run of convolutions (with their folded bias and fused activation)."""

    def __init__(self, inputs, outputs, ops: list[Any]) -> None:
        super().__init__(inputs, outputs)
        self.ops = ops

    def prepare(self) -> None:
        self.weights = {t.name: t.numpy() for k in self.ops for t in k.inputs if t.is_const}
        self.activations = [_activation_kernel(k.attrs) for k in self.ops]

    def execute(self) -> None:
        env = {t.name: t.numpy() for t in self.inputs}
        env.update(self.weights)
        for k, act in zip(self.ops, self.activations):
            x = env[k.slots["inputs"]["Input"][0]]
            w = env[k.slots["inputs"]["Filter"][0]]
            y = conv2d_nchw(x, w, k.attrs)
            bias = k.slots["inputs"].get("Bias") or []
            if bias:
                y = y + env[bias[0]].reshape(1, -1, 1, 1)
            res = k.slots["inputs"].get("ResidualData") or []
            if res:  # fused_conv2d's residual, added before the activation
                y = y + env[res[0]]
            if act is not None:
                y = act.run({"X": [y]})["Out"][0]
            env[k.slots["outputs"]["Output"][0]] = y
        for t in self.outputs:
            t.from_numpy(env[t.name])


def _activation_kernel(attrs: dict[str, Any]) -> Any:
    """fused_conv2d's activation as pdlite defines it (attributes carried with an act_ prefix), or None."""
    act, act_attrs = split_activation(attrs)
    if not act:
        return None
    op = OPS[act].attach(OpDesc(act, {"X": ["x"]}, {"Out": ["y"]}, act_attrs))
    return KERNELS[KernelKey(act, TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW)].cls(op)


class ReferenceConvDelegate(Delegate):
    """Replaces each maximal run of NCHW conv kernels by one ConvRunKernel; counts what it replaced."""

    def __init__(self) -> None:
        self.replaced_runs = 0
        self.replaced_ops = 0

    @staticmethod
    def supports(k: Any) -> bool:
        typ = k.attrs.get("conv_type", k.type) if k.type == "fused_conv2d" else k.type
        return typ in CONV_TYPES and k.attrs.get("data_format", "NCHW") in ("NCHW", "AnyLayout")

    def build(self, model: DelegateModel) -> None:
        i = 0
        while i < len(model.kernels):
            if not self.supports(model.kernels[i]):
                i += 1
                continue
            j = i
            while j < len(model.kernels) and self.supports(model.kernels[j]):
                j += 1
            kernel = ConvRunKernel(model.graph_inputs(i, j), model.graph_outputs(i, j), list(model.kernels[i:j]))
            self.replaced_runs += 1
            self.replaced_ops += j - i
            i = model.replace(i, j, kernel)
