"""Host kernels of the ops of pdlite.operators.pir_ops: shape64, assign_value, max_pool2d_with_index."""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.types import ANY_LAYOUT, HOST, PrecisionType
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.operators.pir_ops import assign_values, max_pool_with_index_geometry

ANY = TensorType(HOST, PrecisionType.Any, ANY_LAYOUT)


@register_kernel("shape64", precision=PrecisionType.Any, layout=ANY_LAYOUT, inputs={"Input": ANY},
                 outputs={"Out": TensorType(HOST, PrecisionType.INT64, ANY_LAYOUT)})
class Shape64(Kernel):
    """Out = the shape of Input, int64 (Paddle 3's pd_op.shape64)."""

    def run(self, ins):
        return {"Out": [np.asarray(ins["Input"][0].shape, dtype=np.int64)]}


@register_kernel("assign_value", precision=PrecisionType.Any, layout=ANY_LAYOUT, outputs={"Out": ANY})
class AssignValue(Kernel):
    """Out = the op's constant (built once; a copy per run so that consumers may write to it)."""

    def __init__(self, op) -> None:
        super().__init__(op)
        dt = numpy_dtype(int(self.attrs.get("dtype", 5)), f"assign_value {op.output_names()}")
        shape = [int(d) for d in self.attrs.get("shape", [])]
        self._value = np.asarray(assign_values(self.attrs), dtype=dt).reshape(shape)

    def run(self, ins):
        return {"Out": [self._value.copy()]}


def _bounds(i: int, size: int, out: int, k: int, s: int, p: int, adaptive: bool) -> tuple[int, int]:
    if adaptive:
        return (i * size) // out, -((-(i + 1) * size) // out)
    start = i * s - p
    return max(start, 0), min(start + k, size)


@register_kernel("max_pool2d_with_index", outputs={"Mask": TensorType(HOST, PrecisionType.INT32)})
class MaxPool2dWithIndex(Kernel):
    """Out = max over each window, Mask = its first argmax as h * W + w (Paddle's MaxPool2dWithIndex)."""

    def run(self, ins):
        x = ins["X"][0]
        n, c, h, w = x.shape
        k, s, p, (oh, ow) = max_pool_with_index_geometry(self.attrs, x.shape)
        adaptive = bool(self.attrs.get("adaptive"))
        out = np.empty((n, c, oh, ow), dtype=x.dtype)
        mask = np.empty((n, c, oh, ow), dtype=np.int32)
        for i in range(oh):
            h0, h1 = _bounds(i, h, oh, k[0], s[0], p[0], adaptive)
            for j in range(ow):
                w0, w1 = _bounds(j, w, ow, k[1], s[1], p[1], adaptive)
                win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
                if win.shape[2] == 0:  # a window wholly in the padding
                    out[:, :, i, j], mask[:, :, i, j] = -np.finfo(np.float32).max, -1
                    continue
                arg = win.argmax(axis=2)
                out[:, :, i, j] = np.take_along_axis(win, arg[..., None], axis=2)[..., 0]
                mask[:, :, i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
        return {"Out": [out], "Mask": [mask]}
