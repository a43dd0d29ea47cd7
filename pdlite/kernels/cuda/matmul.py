"""CUDA matmul_v2, fc and lookup_table_v2 kernels (cuBLAS through torch).

matmul_v2: torch.matmul after transposing the last two axes of X / Y where trans_x / trans_y
say so (1-D operands are never transposed; torch.matmul's 1-D rules are Paddle's). A parameter
Y is transposed once in `prepare`.
fc: F.linear on Input flattened at in_num_col_dims, with W [K, N] transposed once to [N, K],
then the activation. lookup_table_v2: F.embedding; rows of padding_idx (unless -1) are zeros.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from pdlite.kernels.cuda.activation import activation
from pdlite.kernels.cuda.base import DEV_ANY, WEIGHT, CudaKernel, cuda_kernel, to_torch
from pdlite.operators.fused import split_activation


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-1, -2) if x.dim() >= 2 else x


@cuda_kernel("matmul_v2", inputs={"Y": WEIGHT})
class MatmulV2(CudaKernel):
    """Out = op(X) @ op(Y) with op a transpose of the last two axes when trans_x / trans_y."""

    _yt: torch.Tensor | None = None

    def prepare_weights(self) -> None:
        y = self.const("Y")
        if y is not None and self.attrs["trans_y"]:
            self._yt = _t(y).contiguous()
            del self._consts[self.op.input("Y")]

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        if self.attrs["trans_x"]:
            x = _t(x)
        if self._yt is not None and not isinstance(ins["Y"][0], torch.Tensor):
            y = self._yt
        else:
            y = self.tensor(ins, "Y")
            if self.attrs["trans_y"]:
                y = _t(y)
        return {"Out": [torch.matmul(x, y)]}


@cuda_kernel("fc", inputs={"W": WEIGHT, "Bias": WEIGHT})
class FC(CudaKernel):
    """Out = act(Input.reshape(M, K) @ W + Bias).reshape(Input.shape[:k] + [N])."""

    _wt: torch.Tensor | None = None

    def prepare_weights(self) -> None:
        w = self.const("W")
        if w is not None:
            self._wt = w.t().contiguous()
            del self._consts[self.op.input("W")]

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "Input")
        if self._wt is not None and not isinstance(ins["W"][0], torch.Tensor):
            wt = self._wt
        else:
            wt = self.tensor(ins, "W").t()
        bias = self.tensor(ins, "Bias")
        k = int(self.attrs["in_num_col_dims"])
        lead = tuple(x.shape[:k])
        out = F.linear(x.reshape(-1, wt.shape[1]), wt, None if bias is None else bias.reshape(-1))
        out = out.reshape(*lead, wt.shape[0])
        act = self.act
        return {"Out": [act(out) if act is not None else out]}

    @cached_property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return activation(*split_activation(dict(self.attrs), "activation_type"))


@cuda_kernel("lookup_table_v2", inputs={"Ids": DEV_ANY, "W": WEIGHT})
class LookupTableV2(CudaKernel):
    """Out[..., :] = W[Ids[...], :]; rows whose id is padding_idx are zeros."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        ids = to_torch(ins["Ids"][0], self.device)
        w = self.tensor(ins, "W")
        out = F.embedding(ids.long(), w)
        pad = int(self.attrs["padding_idx"])
        if pad != -1:
            out = out.masked_fill((ids == pad).unsqueeze(-1), 0.0)
        return {"Out": [out]}
