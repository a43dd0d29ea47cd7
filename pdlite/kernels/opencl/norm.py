"""OpenCL batch_norm (inference statistics) and layer_norm kernels.

batch_norm: Y = X * a + b per channel, (a, b) computed once from the parameters by the host kernel's
`bn_affine` (float32, Paddle's order) and uploaded; the passes fold it into convs normally, so this is
for the batch_norms they leave. Batch statistics (training mode) and NHWC run on the host (`supports`).
layer_norm: per row over the axes from begin_norm_axis, mean then the biased variance of the
deviations (two passes, as the host), Scale / Bias optional; Mean / Variance are not produced
(inference programs do not read them).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.program import OpDesc
from pdlite.kernels.host.norm import bn_affine
from pdlite.kernels.opencl.base import WEIGHT, OpenCLKernel, add_source, opencl_kernel
from pdlite.operators.nn import is_channel_last

add_source("norm", r"""
__kernel void channel_affine(__global const T* x, __global T* y, __global const T* a, __global const T* b,
                             int n, int c, int inner) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ch = (i / inner) % c;
    ST(y, i, LD(x, i) * LD(a, ch) + LD(b, ch));
}
__kernel void layer_norm(__global const T* x, __global T* y, __global const T* scale, __global const T* bias,
                         int rows, int cols, float eps, int has_scale, int has_bias) {
    int r = get_global_id(0);
    if (r >= rows) return;
    int base = r * cols;
    float mean = 0.0f, var = 0.0f;
    for (int j = 0; j < cols; ++j) mean += LD(x, base + j);
    mean /= (float)cols;
    for (int j = 0; j < cols; ++j) { float d = LD(x, base + j) - mean; var += d * d; }
    float inv = 1.0f / sqrt(var / (float)cols + eps);
    for (int j = 0; j < cols; ++j) {
        float v = (LD(x, base + j) - mean) * inv;
        if (has_scale) v *= LD(scale, j);
        if (has_bias) v += LD(bias, j);
        ST(y, base + j, v);
    }
}
""")

_BN_PARAMS = ("Scale", "Bias", "Mean", "Variance")


@opencl_kernel("batch_norm", inputs={s: WEIGHT for s in _BN_PARAMS})
class BatchNorm(OpenCLKernel):
    """batch_norm -> Y with the running statistics (parameters), NCHW."""

    @classmethod
    def supports(cls, op: OpDesc) -> bool:
        a = op.attrs
        test_mode = bool(a["is_test"]) and not bool(a["trainable_statistics"])
        return (test_mode or bool(a["use_global_stats"])) and not is_channel_last(a["data_layout"])

    _affine: tuple[Any, Any] | None = None

    def prepare(self, params: Mapping[str, Any]) -> None:
        vals = [params.get(self.op.input(s)) for s in _BN_PARAMS]
        if all(v is not None for v in vals):
            a, b = bn_affine(*vals, float(self.attrs["epsilon"]))
            self._affine = (self.upload(a), self.upload(b))

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        ab = self._affine
        if ab is None:  # statistics that are not parameters: per run, on the host
            vals = [host_array(ins[s][0]) for s in _BN_PARAMS]
            a, b = bn_affine(*vals, float(self.attrs["epsilon"]))
            ab = (self.upload(a), self.upload(b))
        y = self.empty(x.shape)
        c = x.shape[1] if x.ndim > 1 else 1
        inner = int(np.prod(x.shape[2:])) if x.ndim > 2 else 1
        if x.size:
            self.launch("channel_affine", x.size, x, y, ab[0], ab[1], x.size, c, inner, local=(64,))
        return {"Y": [y]}


@opencl_kernel("layer_norm", inputs={"Scale": WEIGHT, "Bias": WEIGHT})
class LayerNorm(OpenCLKernel):
    """layer_norm -> Y over the axes from begin_norm_axis (Scale/Bias flattened onto them)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        axis = int(self.attrs["begin_norm_axis"])
        rows = int(np.prod(x.shape[:axis]))
        cols = int(np.prod(x.shape[axis:]))
        scale, bias = self.tensor(ins, "Scale"), self.tensor(ins, "Bias")
        y = self.empty(x.shape)
        if x.size:
            d = self.dummy()
            self.launch("layer_norm", rows, x, y, d if scale is None else scale, d if bias is None else bias, rows,
                        cols, float(self.attrs["epsilon"]), scale is not None, bias is not None, local=(64,))
        return {"Y": [y]}
