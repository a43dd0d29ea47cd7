"""An example delegate: takes every run of conv2d / depthwise_conv2d / relu / relu6 / pool2d /
batch_norm / elementwise_add ops and executes it with its own implementation (here: an
independent NumPy implementation, standing in for a vendor's engine).

Usage:
    from pdlite.lite import CxxConfig, create_paddle_predictor
    from numpy_delegate import NumpyConvDelegate
    config = CxxConfig(); config.set_model_dir("tests/fixtures/models/mobilenet_v3_small")
    config.set_delegate(NumpyConvDelegate())
    predictor = create_paddle_predictor(config)
"""
from __future__ import annotations

import numpy as np

from pdlite.delegate import Delegate, DelegateModel, Kernel
from pdlite.delegate.reference import conv2d_nchw

SUPPORTED = {"conv2d", "depthwise_conv2d", "relu", "relu6", "pool2d", "batch_norm", "elementwise_add"}


def _conv(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """The "vendor engine" convolution: pdlite's independent reference implementation (einsum per tap)."""
    return conv2d_nchw(x, w, attrs)


def _pool(x: np.ndarray, attrs: dict) -> np.ndarray:
    if attrs.get("global_pooling") or (attrs.get("adaptive") and list(attrs.get("ksize")) == [1, 1]):
        red = np.max if attrs.get("pooling_type") == "max" else np.mean
        return red(x, axis=(2, 3), keepdims=True).astype(np.float32)
    raise NotImplementedError("only global pooling in this example")


class ConvRunKernel(Kernel):
    """Executes a run of supported ops, one after the other, on its own."""

    def __init__(self, inputs, outputs, ops):
        super().__init__(inputs, outputs)
        self.ops = ops  # (type, attrs, {slot: tensor}, {slot: tensor})

    def prepare(self) -> None:
        # weights are constants: fetch them once
        self.weights = {t.name: t.numpy() for _, _, ins, _ in self.ops for t in ins.values() if t.is_const}

    def execute(self) -> None:
        env = {t.name: t.numpy() for t in self.inputs}
        env.update(self.weights)
        for typ, attrs, ins, outs in self.ops:
            a = {k: env[t.name] for k, t in ins.items()}
            if typ in ("conv2d", "depthwise_conv2d"):
                y = _conv(a["Input"], a["Filter"], attrs)
                if "Bias" in a:  # pdlite's conv_bn / conv_bias folding gives convs a Bias input
                    y = y + a["Bias"].reshape(1, -1, 1, 1)
                key = "Output"
            elif typ == "relu":
                y, key = np.maximum(a["X"], 0), "Out"
            elif typ == "relu6":
                y, key = np.clip(a["X"], 0, attrs.get("threshold", 6.0)), "Out"
            elif typ == "pool2d":
                y, key = _pool(a["X"], attrs), "Out"
            elif typ == "batch_norm":
                shape = (1, -1, 1, 1)
                inv = 1.0 / np.sqrt(a["Variance"] + attrs.get("epsilon", 1e-5))
                y = (a["X"] - a["Mean"].reshape(shape)) * (a["Scale"] * inv).reshape(shape) + a["Bias"].reshape(shape)
                key = "Y"
            else:  # elementwise_add, same shapes or 1-D bias on axis 1
                xx, yy = a["X"], a["Y"]
                if yy.ndim == 1 and xx.ndim == 4 and attrs.get("axis", -1) == 1:
                    yy = yy.reshape(1, -1, 1, 1)
                y, key = xx + yy, "Out"
            env[outs[key].name] = y.astype(np.float32)
        for t in self.outputs:
            t.from_numpy(env[t.name])


class NumpyConvDelegate(Delegate):
    """Replaces every maximal run of supported ops (conv2d, relu, pool2d, ...) by one ConvRunKernel."""

    def __init__(self) -> None:
        self.replaced_runs = 0

    @staticmethod
    def supports(k) -> bool:
        if k.type not in SUPPORTED:
            return False
        if k.type == "pool2d" and not (k.attrs.get("global_pooling") or
                                       (k.attrs.get("adaptive") and list(k.attrs.get("ksize")) == [1, 1])):
            return False
        if k.type in ("conv2d", "depthwise_conv2d") and k.attrs.get("data_format", "NCHW") == "NHWC":
            return False
        return True

    def build(self, model: DelegateModel) -> None:
        i = 0
        while i < len(model.kernels):
            if not self.supports(model.kernels[i]):
                i += 1
                continue
            j = i
            while j < len(model.kernels) and self.supports(model.kernels[j]):
                j += 1
            ops = []
            for k in model.kernels[i:j]:
                ins = {slot: k.input(slot) for slot, names in k.slots["inputs"].items() if names}
                outs = {slot: k.output(slot) for slot, names in k.slots["outputs"].items() if names}
                ops.append((k.type, k.attrs, ins, outs))
            kernel = ConvRunKernel(model.graph_inputs(i, j), model.graph_outputs(i, j), ops)
            i = model.replace(i, j, kernel)
            self.replaced_runs += 1
