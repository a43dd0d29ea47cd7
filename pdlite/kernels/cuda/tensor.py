"""CUDA kernels of the shape and data-movement ops: reshape, flatten, transpose, squeeze/unsqueeze,
concat, split, slice, softmax, shape and fill_constant.

Output shapes come from the op definitions' helpers (pdlite.operators.tensor), as on the host.
Reshape-like kernels return views (tensors are never written in place); transpose makes a
contiguous copy like the host kernel. XShape outputs are not produced (inference never reads them).
`shape` reads only the input's metadata and returns a host int32 array; `fill_constant` makes its
(small) tensor on the host; slice / concat / reshape of int32/int64 shape tensors run on the host
(pdlite/kernels/host_side.py), so that shape arithmetic never waits for the GPU.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pdlite.errors import KernelError
from pdlite.kernels.cuda.base import CUDA, HOST_ANY, CudaKernel, cuda_kernel, to_numpy
from pdlite.kernels.host_side import SLICE_TENSORS as _SLICE_TENSORS
from pdlite.kernels.host_side import register_shape_arithmetic
from pdlite.operators import tensor as T


def host_values(ins: dict[str, list[Any]], *slots: str) -> dict[str, list[np.ndarray]]:
    """The present slots among `slots` as host arrays (shape tensors, axis tensors ...)."""
    return {s: [to_numpy(v) for v in ins[s]] for s in slots if ins.get(s)}


class _Shaped(CudaKernel):
    """Base: computes the output from X and the helpers; ShapeError becomes a KernelError."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        try:
            return {"Out": [self.compute(x, ins)]}
        except T.ShapeError as e:
            raise KernelError(f"{self.op.type}: X {list(x.shape)} {x.dtype}: {e}") from None

    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        raise NotImplementedError


@cuda_kernel(["reshape2", "reshape"], inputs={"Shape": HOST_ANY, "ShapeTensor": HOST_ANY})
class Reshape(_Shaped):
    """Out: X reshaped (0 = copy dim, -1 = infer; ShapeTensor > Shape > attr `shape`)."""

    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        target = T.reshape_target(self.attrs, host_values(ins, "Shape", "ShapeTensor"))
        return x.reshape(T.reshape_shape(x.shape, target))


@cuda_kernel("flatten_contiguous_range")
class FlattenContiguousRange(_Shaped):
    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        return x.reshape(T.flatten_range_shape(x.shape, int(self.attrs["start_axis"]), int(self.attrs["stop_axis"])))


@cuda_kernel(["flatten2", "flatten"])
class Flatten2(_Shaped):
    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        return x.reshape(T.flatten2_shape(x.shape, int(self.attrs["axis"])))


@cuda_kernel(["transpose2", "transpose"])
class Transpose(_Shaped):
    """Out: X with dims permuted (a contiguous copy, as on the host)."""

    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        return x.permute(T.transpose_perm(self.attrs["axis"], x.dim())).contiguous()


@cuda_kernel(["squeeze2", "squeeze"])
class Squeeze(_Shaped):
    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        return x.reshape(T.squeeze_shape(x.shape, self.attrs["axes"]))


@cuda_kernel(["unsqueeze2", "unsqueeze"], inputs={"AxesTensor": HOST_ANY, "AxesTensorList": HOST_ANY})
class Unsqueeze(_Shaped):
    def compute(self, x: torch.Tensor, ins: dict[str, list[Any]]) -> torch.Tensor:
        axes = T.unsqueeze_axes(self.attrs, host_values(ins, "AxesTensor", "AxesTensorList"))
        return x.reshape(T.unsqueeze_shape(x.shape, axes))


@cuda_kernel("concat", inputs={"AxisTensor": HOST_ANY})
class Concat(CudaKernel):
    """Out: the X tensors joined along `axis` (negative allowed; AxisTensor overrides)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        xs = [self.tensor(ins, "X", i) for i in range(len(ins["X"]))]
        try:
            axis = T.concat_axis(self.attrs, host_values(ins, "AxisTensor"), xs[0].dim())
            return {"Out": [torch.cat(xs, dim=axis)]}
        except (T.ShapeError, RuntimeError) as e:
            raise KernelError(f"concat: inputs {[list(x.shape) for x in xs]} (axis={self.attrs.get('axis')}): "
                              f"{e}") from None


@cuda_kernel("split", inputs={"AxisTensor": HOST_ANY, "SectionsTensorList": HOST_ANY})
class Split(CudaKernel):
    """Out: X cut along `axis` into `num` equal parts or `sections` (views of X), as on the host."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        try:
            axis, sizes = T.split_params(self.attrs, host_values(ins, "AxisTensor", "SectionsTensorList"),
                                         tuple(x.shape))
        except T.ShapeError as e:
            raise KernelError(f"split: X {list(x.shape)}: {e}") from None
        return {"Out": list(torch.split(x, sizes, dim=axis))}


@cuda_kernel("slice", inputs={s: HOST_ANY for s in _SLICE_TENSORS})
class Slice(CudaKernel):
    """Out: Input[starts:ends] on `axes` (clamped like Paddle), `decrease_axis` dims dropped (a view)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "Input")
        try:
            index, shape = T.slice_params(self.attrs, host_values(ins, *_SLICE_TENSORS), tuple(x.shape))
        except T.ShapeError as e:
            raise KernelError(f"slice: Input {list(x.shape)}: {e}") from None
        return {"Out": [x[tuple(index)].reshape(shape)]}


@cuda_kernel("softmax")
class Softmax(CudaKernel):
    """Out = exp(X - max) / sum along `axis` (default -1)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        return {"Out": [torch.softmax(x, dim=int(self.attrs["axis"]))]}


register_shape_arithmetic(CUDA)  # shape, fill_constant, int32/int64 shape arithmetic: on the host
