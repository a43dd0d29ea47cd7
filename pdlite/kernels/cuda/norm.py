"""CUDA batch_norm and layer_norm kernels.

batch_norm (inference statistics): Y = X * a + b per channel, with (a, b) computed once from the
parameters by the host kernel's `bn_affine` (float32, Paddle's order) and uploaded. With batch
statistics (not is_test) the mean and biased variance over all axes but the channel are used.
layer_norm: F.layer_norm over the axes from begin_norm_axis (Mean/Variance are not produced:
inference programs do not read them).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from pdlite.kernels.cuda.base import WEIGHT, CudaKernel, cuda_kernel, to_torch
from pdlite.kernels.host.norm import bn_affine
from pdlite.operators.nn import is_channel_last

_BN_PARAMS = ("Scale", "Bias", "Mean", "Variance")


@cuda_kernel("batch_norm", inputs={s: WEIGHT for s in _BN_PARAMS})
class BatchNorm(CudaKernel):
    """batch_norm -> Y (the running-statistics outputs are not produced)."""

    _affine: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def global_stats(self) -> bool:
        a = self.attrs
        test_mode = bool(a["is_test"]) and not bool(a["trainable_statistics"])
        return test_mode or bool(a["use_global_stats"])

    def prepare(self, params: Mapping[str, Any]) -> None:
        super().prepare(params)
        vals = [params.get(self.op.input(s)) for s in _BN_PARAMS]
        if self.global_stats and all(v is not None for v in vals):
            a, b = bn_affine(*vals, float(self.attrs["epsilon"]))
            self._affine = (to_torch(a, self.device, self.dtype), to_torch(b, self.device, self.dtype))

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        c_axis = x.dim() - 1 if is_channel_last(self.attrs["data_layout"]) else 1
        bshape = [1] * x.dim()
        bshape[c_axis] = x.shape[c_axis]
        eps = float(self.attrs["epsilon"])
        scale, bias = self.tensor(ins, "Scale").reshape(bshape), self.tensor(ins, "Bias").reshape(bshape)
        if self.global_stats:
            if self._affine is None:  # statistics that are not parameters: per run
                mean, var = self.tensor(ins, "Mean").reshape(bshape), self.tensor(ins, "Variance").reshape(bshape)
                inv = torch.rsqrt(var + eps)
                return {"Y": [x * (inv * scale) + (bias - mean * inv * scale)]}
            a, b = self._affine
            return {"Y": [torch.addcmul(b.reshape(bshape), x, a.reshape(bshape))]}
        axes = [i for i in range(x.dim()) if i != c_axis]
        var, mean = torch.var_mean(x, dim=axes, keepdim=True, correction=0)
        return {"Y": [(x - mean) / torch.sqrt(var + eps) * scale + bias]}


@cuda_kernel("layer_norm", inputs={"Scale": WEIGHT, "Bias": WEIGHT})
class LayerNorm(CudaKernel):
    """layer_norm -> Y over the axes from begin_norm_axis (Scale/Bias flattened onto them)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        axis = int(self.attrs["begin_norm_axis"])
        norm_shape = tuple(x.shape[axis:])
        scale, bias = self.tensor(ins, "Scale"), self.tensor(ins, "Bias")
        y = F.layer_norm(x, norm_shape, None if scale is None else scale.reshape(norm_shape),
                         None if bias is None else bias.reshape(norm_shape), float(self.attrs["epsilon"]))
        return {"Y": [y]}
