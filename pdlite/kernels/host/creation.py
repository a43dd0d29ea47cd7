"""Host kernels of the creation, dtype and indexing ops (shape, shape64, assign_value, fill_constant, cast, range, expand,
tile, gather, where, ...). All are generic over dtype (precision Any, layout Any); outputs have
Paddle's dtypes (shape: int32, fill_constant: the `dtype` attribute, cast: `out_dtype`).
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import BF16_STORAGE, VarType, numpy_dtype
from pdlite.core.types import ANY_LAYOUT, HOST, PrecisionType
from pdlite.errors import KernelError
from pdlite.kernels.host.tensor import ANY, Ins, Outs, any_kernel
from pdlite.kernels.registry import Kernel, TensorType
from pdlite.operators import creation as C
from pdlite.operators.tensor import ShapeError


def _shape_error(op: str, e: Exception) -> KernelError:
    return KernelError(f"{op}: {e}")


@any_kernel("shape", outputs={"Out": TensorType(HOST, PrecisionType.INT32, ANY_LAYOUT)})
class ShapeOp(Kernel):
    """Out: Input's dims as int32."""

    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.array(ins["Input"][0].shape, dtype=np.int32)]}


@any_kernel("shape64", outputs={"Out": TensorType(HOST, PrecisionType.INT64, ANY_LAYOUT)})
class Shape64(Kernel):
    """Out: Input's dims as int64 (Paddle 3's pd_op.shape64)."""

    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.array(ins["Input"][0].shape, dtype=np.int64)]}


@any_kernel("assign_value", outputs={"Out": ANY})
class AssignValue(Kernel):
    """Out = the op's constant (built once; a copy per run so that consumers may write to it)."""

    def __init__(self, op) -> None:
        super().__init__(op)
        dt = numpy_dtype(int(self.attrs["dtype"]), f"assign_value {op.output_names()}")
        shape = [int(d) for d in self.attrs["shape"]]
        self._value = np.asarray(C.assign_values(self.attrs), dtype=dt).reshape(shape)

    def run(self, ins: Ins) -> Outs:
        return {"Out": [self._value.copy()]}


def _full(shape, value, dtype: np.dtype) -> np.ndarray:
    if dtype == BF16_STORAGE:
        return np.full(shape, f32_to_bf16(np.float32(value)), dtype=dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.full(shape, np.asarray(value).astype(dtype), dtype=dtype)


@any_kernel("fill_constant", ValueTensor=ANY, ShapeTensor=ANY, ShapeTensorList=ANY)
class FillConstant(Kernel):
    """Out: `shape` filled with ValueTensor / str_value / value, of dtype `dtype`."""

    def run(self, ins: Ins) -> Outs:
        dtype = C.attr_dtype(self.attrs)
        try:
            shape = C.fill_shape(self.attrs, ins)
        except ShapeError as e:
            raise _shape_error("fill_constant", e) from None
        if ins.get("ValueTensor"):
            value = np.asarray(ins["ValueTensor"][0]).reshape(-1)[0]
        else:
            value = C.fill_value(self.attrs, dtype)
        return {"Out": [_full(shape, value, dtype)]}


@any_kernel("fill_constant_batch_size_like")
class FillConstantBatchSizeLike(Kernel):
    def run(self, ins: Ins) -> Outs:
        dtype = C.attr_dtype(self.attrs)
        try:
            shape = C.batch_size_like_shape(self.attrs, ins["Input"][0].shape)
        except ShapeError as e:
            raise _shape_error("fill_constant_batch_size_like", e) from None
        return {"Out": [_full(shape, C.fill_value(self.attrs, dtype), dtype)]}


@any_kernel("fill_any_like")
class FillAnyLike(Kernel):
    """Out: X's shape filled with `value`; dtype `dtype` (-1: X's dtype)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        dt = int(self.attrs["dtype"])
        dtype = x.dtype if dt < 0 else numpy_dtype(dt, "fill_any_like.dtype")
        return {"Out": [_full(x.shape, self.attrs["value"], dtype)]}


@any_kernel("fill_zeros_like")
class FillZerosLike(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.zeros_like(ins["X"][0])]}


# --- cast ------------------------------------------------------------------------------------
def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even; NaN stays NaN."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), out).astype(np.uint16)


def bf16_to_f32(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32."""
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


@any_kernel("cast")
class Cast(Kernel):
    """Out: X converted to `out_dtype` (C++ static_cast semantics: floats truncate toward zero)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        out_vt = int(self.attrs["out_dtype"])
        if int(self.attrs["in_dtype"]) == VarType.BF16 and x.dtype == BF16_STORAGE:
            x = bf16_to_f32(x)
        if out_vt == VarType.BF16:
            return {"Out": [f32_to_bf16(x.astype(np.float32))]}
        dtype = numpy_dtype(out_vt, "cast.out_dtype")
        with np.errstate(invalid="ignore", over="ignore"):
            return {"Out": [np.asarray(x).astype(dtype)]}


@any_kernel("assign")
class Assign(Kernel):
    """Out: a copy of X."""

    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.array(ins["X"][0], copy=True)]}


@any_kernel("share_data")
class ShareData(Kernel):
    """Out: X itself (shares its data)."""

    def run(self, ins: Ins) -> Outs:
        return {"Out": [ins["X"][0]]}


@any_kernel("range", Start=ANY, End=ANY, Step=ANY)
class Range(Kernel):
    """Out: start, start + step, ... (accumulated in the dtype, as Paddle's loop does)."""

    def run(self, ins: Ins) -> Outs:
        try:
            start, end, step, integral = C.range_args(ins)
            n = C.range_size(start, end, step, integral)
        except ShapeError as e:
            raise _shape_error("range", e) from None
        dtype = np.asarray(ins["Start"][0]).dtype
        if integral or n == 0:
            return {"Out": [(start + np.arange(n, dtype=dtype) * step).astype(dtype)]}
        steps = np.full(n, step, dtype=dtype)
        steps[0] = start
        return {"Out": [np.cumsum(steps, dtype=dtype)]}


@any_kernel("expand_v2", Shape=ANY, expand_shapes_tensor=ANY)
class ExpandV2(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        try:
            shape = C.expand_shape(x.shape, C.expand_target(self.attrs, ins))
        except ShapeError as e:
            raise _shape_error(f"expand_v2: X {list(x.shape)}", e) from None
        return {"Out": [np.asarray(np.broadcast_to(x, shape), order="C")]}


@any_kernel("tile", RepeatTimes=ANY, repeat_times_tensor=ANY)
@any_kernel("expand", ExpandTimes=ANY, expand_times_tensor=ANY)
class Tile(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        attr = "expand_times" if self.op.type == "expand" else "repeat_times"
        try:
            reps = C.tile_repeats(self.attrs, ins, attr)
            C.tile_shape(x.shape, reps)
        except ShapeError as e:
            raise _shape_error(f"{self.op.type}: X {list(x.shape)}", e) from None
        return {"Out": [np.tile(x, reps)]}


@any_kernel("gather", Index=ANY, Axis=ANY)
class Gather(Kernel):
    """Out: X's slices at Index along `axis`; indices must lie in [0, dim)."""

    def run(self, ins: Ins) -> Outs:
        x, index = ins["X"][0], np.asarray(ins["Index"][0])
        try:
            axis = C.gather_axis(self.attrs, ins, x.ndim)
            C.gather_shape(x.shape, index.shape, axis)
        except ShapeError as e:
            raise _shape_error(f"gather: X {list(x.shape)}, Index {list(index.shape)}", e) from None
        idx = index.reshape(-1) if index.ndim == 2 else index
        if idx.size and (idx.min() < 0 or idx.max() >= x.shape[axis]):
            raise KernelError(
                f"gather: Index values must be in [0, {x.shape[axis]}), got [{idx.min()}, {idx.max()}]"
            )
        return {"Out": [np.take(x, idx, axis=axis)]}


@any_kernel("where", Condition=ANY)
class Where(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, y = ins["X"][0], ins["Y"][0]
        return {"Out": [np.where(ins["Condition"][0], x, y).astype(x.dtype, copy=False)]}


@any_kernel("where_index", Condition=ANY, outputs={"Out": TensorType(HOST, PrecisionType.INT64, ANY_LAYOUT)})
class WhereIndex(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.argwhere(ins["Condition"][0]).astype(np.int64)]}


@any_kernel("eye")
class Eye(Kernel):
    def run(self, ins: Ins) -> Outs:
        rows, cols = C.eye_shape(self.attrs)
        return {"Out": [np.eye(rows, cols, dtype=C.attr_dtype(self.attrs))]}
