"""Host kernels of the shape-manipulation ops (reshape, flatten, transpose, concat, split, stack,
slice, strided_slice, squeeze, unsqueeze). They work on any dtype (precision Any, layout Any).

Output shapes come from the op definitions' helpers (pdlite.operators.tensor), so kernels and
shape inference cannot disagree. Reshape-like kernels return views of their input (no copy):
tensors are never written in place. XShape outputs (Paddle's [0, *X.shape] shape carriers)
are produced as empty arrays when the op has that slot.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST
from pdlite.errors import KernelError
from pdlite.kernels.registry import Bound, Kernel, TensorType, bound, register_kernel
from pdlite.operators import tensor as T

ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
Ins = dict[str, list[np.ndarray]]
Outs = dict[str, list[np.ndarray]]


def any_kernel(op_type: str, outputs: dict[str, TensorType] | None = None, **inputs: TensorType):
    """Register a host kernel generic over dtype and layout, declaring the given input/output slot types."""
    return register_kernel(op_type, precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs=inputs, outputs=outputs)


class ShapeKernel(Kernel):
    """Base of the shape kernels: wraps ShapeError into KernelError and adds XShape."""

    def _out(self, out: np.ndarray, x: np.ndarray) -> Outs:
        res = {"Out": [out]}
        if self.op.outputs.get("XShape"):
            res["XShape"] = [np.empty((0, *x.shape), dtype=x.dtype)]
        return res

    def _err(self, e: Exception, x: np.ndarray) -> KernelError:
        return KernelError(f"{self.op.type}: X {list(x.shape)} {x.dtype}: {e}")

    def _bind_out(self, x: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> Bound:
        """Kernel.bind's call for X shaped as x: Out = fn(X), with _out's XShape."""
        if self.op.outputs.get("XShape"):
            xs, dt = (0, *x.shape), x.dtype

            def run_xs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                return fn(x), np.empty(xs, dtype=dt)

            return bound(run_xs, ("X",), ("Out", "XShape"))
        return bound(fn)

    def _bind_reshape(self, x: np.ndarray, shape: tuple[int, ...]) -> Bound:
        """_bind_out of Out = X reshaped to `shape` (a view)."""

        def run(x: np.ndarray) -> np.ndarray:
            return x.reshape(shape)

        return self._bind_out(x, run)


@any_kernel("reshape2", Shape=ANY, ShapeTensor=ANY)
@any_kernel("reshape", Shape=ANY, ShapeTensor=ANY)
class Reshape(ShapeKernel):
    """Out: X reshaped (0 = copy dim, -1 = infer; ShapeTensor > Shape > attr `shape`).

    With the target in the attribute, the output shape of the last input shape is kept (no re-derivation)."""

    _last: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        static = not ins.get("Shape") and not ins.get("ShapeTensor")
        last = self._last
        if static and last is not None and last[0] == x.shape:
            return self._out(x.reshape(last[1]), x)
        try:
            shape = T.reshape_shape(x.shape, T.reshape_target(self.attrs, ins))
        except T.ShapeError as e:
            raise self._err(e, x) from None
        if static:
            self._last = (x.shape, shape)
        return self._out(x.reshape(shape), x)

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        if any(ins.get(s) and s not in fixed for s in ("Shape", "ShapeTensor")):  # a target that may change
            return None
        x = ins["X"][0]
        return self._bind_reshape(x, T.reshape_shape(x.shape, T.reshape_target(self.attrs, ins)))


@any_kernel("flatten_contiguous_range")
class FlattenContiguousRange(ShapeKernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            shape = T.flatten_range_shape(x.shape, int(self.attrs["start_axis"]), int(self.attrs["stop_axis"]))
        except T.ShapeError as e:
            raise self._err(e, x) from None
        return self._out(x.reshape(shape), x)

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        return self._bind_reshape(x, T.flatten_range_shape(x.shape, int(self.attrs["start_axis"]),
                                                           int(self.attrs["stop_axis"])))


@any_kernel("flatten2")
@any_kernel("flatten")
class Flatten2(ShapeKernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            shape = T.flatten2_shape(x.shape, int(self.attrs["axis"]))
        except T.ShapeError as e:
            raise self._err(e, x) from None
        return self._out(x.reshape(shape), x)


@any_kernel("transpose2")
@any_kernel("transpose")
class Transpose(ShapeKernel):
    """Out: X with dims permuted (a contiguous copy, so that later reshapes stay views)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            perm = T.transpose_perm(self.attrs["axis"], x.ndim)
        except T.ShapeError as e:
            raise self._err(e, x) from None
        return self._out(np.asarray(np.transpose(x, perm), order="C"), x)

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        perm = T.transpose_perm(self.attrs["axis"], x.ndim)

        def run(x: np.ndarray) -> np.ndarray:
            return np.asarray(x.transpose(perm), order="C")  # (the method: np.transpose's wrapper costs ~0.5 us)

        return self._bind_out(x, run)


@any_kernel("squeeze2")
@any_kernel("squeeze")
class Squeeze(ShapeKernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            shape = T.squeeze_shape(x.shape, self.attrs["axes"])
        except T.ShapeError as e:
            raise self._err(e, x) from None
        return self._out(x.reshape(shape), x)

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        return self._bind_reshape(x, T.squeeze_shape(x.shape, self.attrs["axes"]))


@any_kernel("unsqueeze2", AxesTensor=ANY, AxesTensorList=ANY)
@any_kernel("unsqueeze", AxesTensor=ANY, AxesTensorList=ANY)
class Unsqueeze(ShapeKernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            shape = T.unsqueeze_shape(x.shape, T.unsqueeze_axes(self.attrs, ins))
        except T.ShapeError as e:
            raise self._err(e, x) from None
        return self._out(x.reshape(shape), x)

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        if any(ins.get(s) and s not in fixed for s in ("AxesTensor", "AxesTensorList")):
            return None
        x = ins["X"][0]
        return self._bind_reshape(x, T.unsqueeze_shape(x.shape, T.unsqueeze_axes(self.attrs, ins)))


@any_kernel("concat", AxisTensor=ANY)
class Concat(Kernel):
    """Out: the X tensors joined along `axis` (negative allowed; AxisTensor overrides)."""

    def run(self, ins: Ins) -> Outs:
        xs = ins["X"]
        try:
            axis = T.concat_axis(self.attrs, ins, xs[0].ndim)
            return {"Out": [np.concatenate(xs, axis=axis)]}
        except (T.ShapeError, ValueError) as e:
            shapes = [list(x.shape) for x in xs]
            raise KernelError(f"concat: inputs {shapes} (axis={self.attrs.get('axis')}): {e}") from None

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        if ins.get("AxisTensor") and "AxisTensor" not in fixed:
            return None
        xs = ins["X"]
        axis = T.concat_axis(self.attrs, ins, xs[0].ndim)

        def run(*xs: np.ndarray) -> np.ndarray:
            return np.concatenate(xs, axis=axis)

        return Bound(run, tuple(("X", i) for i in range(len(xs))), (("Out", 0),))


@any_kernel("split", AxisTensor=ANY, SectionsTensorList=ANY)
class Split(Kernel):
    """Out: X cut along `axis` into `num` equal parts or `sections` (views of X). Without AxisTensor and
    SectionsTensorList the cuts depend on X's shape only: their index tuples are kept for the last shape (np.split
    cost ~15 us a call, the indexing ~1 us: fc_siblings_fuse_pass's q / k / v split runs once per attention)."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._cuts: tuple[tuple[int, ...], list[tuple[slice, ...]]] | None = None

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        c = self._cuts
        if c is not None and c[0] == x.shape:
            return {"Out": [x[i] for i in c[1]]}
        try:
            axis, sizes = T.split_params(self.attrs, ins, x.shape)
        except T.ShapeError as e:
            raise KernelError(f"split: X {list(x.shape)}: {e}") from None
        lead = (slice(None),) * axis
        cuts, start = [], 0
        for s in sizes:
            cuts.append((*lead, slice(start, start + s)))
            start += s
        if not ins.get("AxisTensor") and not ins.get("SectionsTensorList"):
            self._cuts = (x.shape, cuts)
        return {"Out": [x[i] for i in cuts]}

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x, c = ins["X"][0], self._cuts
        if ins.get("AxisTensor") or ins.get("SectionsTensorList") or c is None or c[0] != x.shape:
            return None
        cuts = c[1]

        def run(x: np.ndarray) -> tuple[np.ndarray, ...]:
            return tuple([x[i] for i in cuts])

        return Bound(run, (("X", 0),), tuple(("Out", j) for j in range(len(cuts))))


@any_kernel("stack")
class Stack(Kernel):
    def run(self, ins: Ins) -> Outs:
        xs = ins["X"]
        try:
            axis = T.norm_axis(int(self.attrs["axis"]), xs[0].ndim + 1)
            return {"Y": [np.stack(xs, axis=axis)]}
        except (T.ShapeError, ValueError) as e:
            raise KernelError(f"stack: inputs {[list(x.shape) for x in xs]}: {e}") from None


@any_kernel("unstack")
class Unstack(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axis = T.norm_axis(int(self.attrs["axis"]), x.ndim)
        return {"Y": [np.take(x, i, axis=axis) for i in range(x.shape[axis])]}


@any_kernel("slice", StartsTensor=ANY, EndsTensor=ANY, StartsTensorList=ANY, EndsTensorList=ANY)
class Slice(Kernel):
    """Out: Input[starts:ends] on `axes`, clamped like Paddle; `decrease_axis` dims dropped."""

    def run(self, ins: Ins) -> Outs:
        x = ins["Input"][0]
        if isinstance(x, list):  # a tensor array: an element (decrease_axis) or a sub-array
            try:
                out = T.slice_array(self.attrs, ins, x)
            except T.ShapeError as e:
                raise KernelError(f"slice: {e}") from None
            return {"Out": [np.array(out) if isinstance(out, np.ndarray) else out]}
        try:
            index, shape = T.slice_params(self.attrs, ins, x.shape)
        except T.ShapeError as e:
            raise KernelError(f"slice: Input {list(x.shape)} {x.dtype}: {e}") from None
        return {"Out": [x[tuple(index)].reshape(shape)]}

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        if any(ins.get(s) and s not in fixed for s in ("StartsTensor", "EndsTensor", "StartsTensorList",
                                                         "EndsTensorList")):
            return None
        x = ins["Input"][0]
        index, shape = T.slice_params(self.attrs, ins, x.shape)
        index = tuple(index)

        def run(x: np.ndarray) -> np.ndarray:
            return x[index].reshape(shape)

        return bound(run, ("Input",))


@any_kernel(
    "strided_slice",
    StartsTensor=ANY,
    EndsTensor=ANY,
    StridesTensor=ANY,
    StartsTensorList=ANY,
    EndsTensorList=ANY,
    StridesTensorList=ANY,
)
class StridedSlice(Kernel):
    """Out: Input[starts:ends:strides] on `axes` (Paddle's index normalisation); a contiguous copy."""

    def run(self, ins: Ins) -> Outs:
        x = ins["Input"][0]
        try:
            index, shape = T.strided_slice_params(self.attrs, ins, x.shape)
        except T.ShapeError as e:
            raise KernelError(f"strided_slice: Input {list(x.shape)} {x.dtype}: {e}") from None
        return {"Out": [np.asarray(x[tuple(index)], order="C").reshape(shape)]}
