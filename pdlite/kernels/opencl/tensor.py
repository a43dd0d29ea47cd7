"""OpenCL kernels of the shape and data-movement ops: reshape, flatten, squeeze/unsqueeze (views), transpose,
concat, split, slice (strided copies), softmax, shape and fill_constant.

Output shapes come from the op definitions' helpers (pdlite.operators.tensor), as on the host.
Reshape-like kernels return views of the same buffer (tensors are never written in place).
Transpose, concat, split and slice are one strided-copy kernel (`copy_nd`: each element of an index
space read and written through strides and offsets, per element size: any dtype moves bit for bit). `shape` reads only the input's metadata and
returns a host int32 array; `fill_constant` makes its (small) tensor on the host; int32/int64 shape
arithmetic (slice / concat / reshape ... of shape tensors) runs on the host (host_side.py), so that
shape arithmetic never waits for the device.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.errors import KernelError
from pdlite.kernels.host_side import SLICE_TENSORS as _SLICE_TENSORS
from pdlite.kernels.host_side import register_shape_arithmetic
from pdlite.kernels.opencl.base import HOST_ANY, OPENCL, OpenCLKernel, add_source, opencl_kernel
from pdlite.kernels.opencl.elementwise import MAX_RANK, contiguous_strides
from pdlite.operators import tensor as T

add_source("tensor", r"""
/* meta: dims [MAX_RANK], source strides [MAX_RANK], destination strides [MAX_RANK]; one kernel per element
   size (copy_nd_1 / 2 / 4 / 8), so that any dtype moves bit for bit */
#define COPY_ND(NAME, E) \
__kernel void NAME(__global const E* src, __global E* dst, int n, int rank, __global const int* meta, int s_off, \
                   int d_off) { \
    int i = get_global_id(0); \
    if (i >= n) return; \
    int r = i, si = s_off, di = d_off; \
    for (int d = rank - 1; d >= 0; --d) { \
        int q = r % meta[d]; \
        r /= meta[d]; \
        si += q * meta[MAX_RANK + d]; \
        di += q * meta[2 * MAX_RANK + d]; \
    } \
    dst[di] = src[si]; \
}
COPY_ND(copy_nd_1, uchar)
COPY_ND(copy_nd_2, ushort)
COPY_ND(copy_nd_4, uint)
COPY_ND(copy_nd_8, ulong)
/* softmax over the middle axis of [outer, axis_n, inner] */
__kernel void softmax(__global const T* x, __global T* y, int outer, int axis_n, int inner) {
    int i = get_global_id(0);
    if (i >= outer * inner) return;
    int base = (i / inner) * axis_n * inner + i % inner;
    float mx = -FLT_MAX, sum = 0.0f;
    for (int k = 0; k < axis_n; ++k) mx = fmax(mx, LD(x, base + k * inner));
    for (int k = 0; k < axis_n; ++k) sum += exp(LD(x, base + k * inner) - mx);
    for (int k = 0; k < axis_n; ++k) ST(y, base + k * inner, exp(LD(x, base + k * inner) - mx) / sum);
}
""")


def host_values(ins: dict[str, list[Any]], *slots: str) -> dict[str, list[np.ndarray]]:
    """The present slots among `slots` as host arrays (shape tensors, axis tensors ...)."""
    return {s: [host_array(v) for v in ins[s]] for s in slots if ins.get(s)}


def copy_nd(k: OpenCLKernel, src: Any, dst: Any, dims: Sequence[int], src_strides: Sequence[int],
            dst_strides: Sequence[int], src_off: int = 0, dst_off: int = 0) -> None:
    """dst[dst_off + idx . dst_strides] = src[src_off + idx . src_strides] for every idx in `dims`."""
    n = int(np.prod(dims)) if len(dims) else 1
    if n == 0:
        return
    if len(dims) > MAX_RANK:
        raise KernelError(f"{k.op.type}: rank {len(dims)} is over the OpenCL kernels' {MAX_RANK}")
    meta = np.zeros(3 * MAX_RANK, np.int32)
    r = len(dims)
    meta[:r], meta[MAX_RANK:MAX_RANK + r], meta[2 * MAX_RANK:2 * MAX_RANK + r] = dims, src_strides, dst_strides
    key = meta.tobytes()
    cache = k.__dict__.setdefault("_metas", {})
    if key not in cache:
        cache[key] = k.dev.upload(meta)
    k.launch(f"copy_nd_{src.dtype.itemsize}", n, src, dst, n, r, cache[key], src_off, dst_off, local=(64,))


class _Shaped(OpenCLKernel):
    """Base: computes the output from X and the helpers; ShapeError becomes a KernelError. Any dtype."""

    any_dtype = True

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        try:
            return {"Out": [self.compute(x, ins)]}
        except T.ShapeError as e:
            raise KernelError(f"{self.op.type}: X {list(x.shape)} {x.dtype}: {e}") from None

    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        raise NotImplementedError


@opencl_kernel(["reshape2", "reshape"], inputs={"Shape": HOST_ANY, "ShapeTensor": HOST_ANY})
class Reshape(_Shaped):
    """Out: X reshaped (0 = copy dim, -1 = infer; ShapeTensor > Shape > attr `shape`)."""

    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        target = T.reshape_target(self.attrs, host_values(ins, "Shape", "ShapeTensor"))
        return x.reshape(T.reshape_shape(x.shape, target))


@opencl_kernel("flatten_contiguous_range")
class FlattenContiguousRange(_Shaped):
    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        return x.reshape(T.flatten_range_shape(x.shape, int(self.attrs["start_axis"]), int(self.attrs["stop_axis"])))


@opencl_kernel(["flatten2", "flatten"])
class Flatten2(_Shaped):
    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        return x.reshape(T.flatten2_shape(x.shape, int(self.attrs["axis"])))


@opencl_kernel(["squeeze2", "squeeze"])
class Squeeze(_Shaped):
    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        return x.reshape(T.squeeze_shape(x.shape, self.attrs["axes"]))


@opencl_kernel(["unsqueeze2", "unsqueeze"], inputs={"AxesTensor": HOST_ANY, "AxesTensorList": HOST_ANY})
class Unsqueeze(_Shaped):
    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        axes = T.unsqueeze_axes(self.attrs, host_values(ins, "AxesTensor", "AxesTensorList"))
        return x.reshape(T.unsqueeze_shape(x.shape, axes))


@opencl_kernel(["transpose2", "transpose"])
class Transpose(_Shaped):
    """Out: X with dims permuted (a contiguous copy)."""

    def compute(self, x: Any, ins: dict[str, list[Any]]) -> Any:
        perm = T.transpose_perm(self.attrs["axis"], x.ndim)
        dims = tuple(x.shape[p] for p in perm)
        st = contiguous_strides(x.shape)
        out = self.empty(dims, x.dtype)
        copy_nd(self, x, out, dims, [st[p] for p in perm], contiguous_strides(dims))
        return out


@opencl_kernel("concat", inputs={"AxisTensor": HOST_ANY})
class Concat(OpenCLKernel):
    """Out: the X tensors joined along `axis` (negative allowed; AxisTensor overrides). Any dtype."""

    any_dtype = True

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        xs = [self.tensor(ins, "X", i) for i in range(len(ins["X"]))]
        try:
            axis = T.concat_axis(self.attrs, host_values(ins, "AxisTensor"), xs[0].ndim)
            if any(x.ndim != xs[0].ndim or x.shape[:axis] + x.shape[axis + 1:] != xs[0].shape[:axis] +
                   xs[0].shape[axis + 1:] for x in xs):
                raise T.ShapeError("inputs differ outside the axis")
        except T.ShapeError as e:
            raise KernelError(f"concat: inputs {[list(x.shape) for x in xs]} (axis={self.attrs.get('axis')}): "
                              f"{e}") from None
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        if any(x.dtype != xs[0].dtype for x in xs):
            raise KernelError(f"concat: inputs of dtypes {[str(x.dtype) for x in xs]}")
        out = self.empty(shape, xs[0].dtype)
        ost = contiguous_strides(tuple(shape))
        off = 0
        for x in xs:
            copy_nd(self, x, out, x.shape, contiguous_strides(x.shape), ost, 0, off * ost[axis])
            off += x.shape[axis]
        return {"Out": [out]}


@opencl_kernel("split", inputs={"AxisTensor": HOST_ANY, "SectionsTensorList": HOST_ANY})
class Split(OpenCLKernel):
    """Out: X cut along `axis` into `num` equal parts or `sections`, as on the host. Any dtype."""

    any_dtype = True

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        try:
            axis, sizes = T.split_params(self.attrs, host_values(ins, "AxisTensor", "SectionsTensorList"), x.shape)
        except T.ShapeError as e:
            raise KernelError(f"split: X {list(x.shape)}: {e}") from None
        xst = contiguous_strides(x.shape)
        outs, off = [], 0
        for s in sizes:
            shape = (*x.shape[:axis], s, *x.shape[axis + 1:])
            out = self.empty(shape, x.dtype)
            copy_nd(self, x, out, shape, xst, contiguous_strides(shape), off * xst[axis], 0)
            outs.append(out)
            off += s
        return {"Out": outs}


@opencl_kernel("slice", inputs={s: HOST_ANY for s in _SLICE_TENSORS})
class Slice(OpenCLKernel):
    """Out: Input[starts:ends] on `axes` (clamped like Paddle), `decrease_axis` dims dropped. Any dtype."""

    any_dtype = True

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "Input")
        try:
            index, shape = T.slice_params(self.attrs, host_values(ins, *_SLICE_TENSORS), x.shape)
        except T.ShapeError as e:
            raise KernelError(f"slice: Input {list(x.shape)}: {e}") from None
        bounds = [sl.indices(d)[:2] for sl, d in zip(index, x.shape)]
        dims = [max(0, e - s) for s, e in bounds]
        xst = contiguous_strides(x.shape)
        out = self.empty(shape, x.dtype)
        copy_nd(self, x, out, dims, xst, contiguous_strides(tuple(dims)), sum(s * t for (s, _), t in zip(bounds, xst)))
        return {"Out": [out]}


@opencl_kernel("softmax")
class Softmax(OpenCLKernel):
    """Out = exp(X - max) / sum along `axis` (default -1)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = self.tensor(ins, "X")
        out = self.empty(x.shape)
        if x.ndim == 0 or x.size == 0:
            if x.size:
                self.launch("softmax", 1, x, out, 1, 1, 1, local=(64,))
            return {"Out": [out]}
        axis = T.norm_axis(int(self.attrs["axis"]), x.ndim)
        outer = int(np.prod(x.shape[:axis]))
        inner = int(np.prod(x.shape[axis + 1:]))
        self.launch("softmax", outer * inner, x, out, outer, x.shape[axis], inner, local=(64,))
        return {"Out": [out]}


register_shape_arithmetic(OPENCL)  # shape, fill_constant, int32/int64 shape arithmetic: on the host
