"""Host kernels of matmul_v2, matmul, mul, softmax, log_softmax, scale, dropout, the reductions,
mean, sum, arg_max/arg_min and lookup_table(_v2).

Float kernels compute in the input's dtype (float32 matmuls go to BLAS sgemm). Ops that also meet
integer tensors in shape arithmetic (scale, sum, the reductions, arg_max/min) are registered
twice: FP32/NCHW and Any/Any.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION
from pdlite.errors import KernelError
from pdlite.kernels.host import native, native_plans
from pdlite.kernels.host.tensor import ANY, Ins, Outs
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel
from pdlite.operators import math as M
from pdlite.operators.tensor import ShapeError, norm_axis


def _both(op_type: str, **inputs):
    """Register a kernel class at FP32/NCHW and at Any/Any."""

    def deco(cls):
        register_kernel(op_type, inputs=inputs or None)(cls)
        register_kernel(op_type, precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs=inputs or None)(cls)
        return cls

    return deco


def _operands_error(op: str, x: np.ndarray, y: np.ndarray, e: Exception) -> KernelError:
    return KernelError(f"{op}: X {list(x.shape)} {x.dtype}, Y {list(y.shape)} {y.dtype}: {e}")


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.matmul, with [..., K] @ [K, N] done as one 2-D GEMM."""
    if x.ndim > 2 and y.ndim == 2:
        return (x.reshape(-1, x.shape[-1]) @ y).reshape(*x.shape[:-1], y.shape[-1])
    return np.asarray(np.matmul(x, y))


@register_kernel("matmul_v2")
class MatmulV2(Kernel):
    """Out = op(X) @ op(Y), op = transpose of the last two dims when trans_x / trans_y (not for 1-D)."""

    def run(self, ins: Ins) -> Outs:
        x0, y0 = ins["X"][0], ins["Y"][0]
        x = np.swapaxes(x0, -1, -2) if self.attrs["trans_x"] and x0.ndim > 1 else x0
        y = np.swapaxes(y0, -1, -2) if self.attrs["trans_y"] and y0.ndim > 1 else y0
        try:
            return {"Out": [matmul(x, y)]}
        except ValueError as e:
            raise _operands_error("matmul_v2", x0, y0, e) from None

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        tx = bool(self.attrs["trans_x"]) and ins["X"][0].ndim > 1
        ty = bool(self.attrs["trans_y"]) and ins["Y"][0].ndim > 1

        def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return matmul(x.swapaxes(-1, -2) if tx else x, y.swapaxes(-1, -2) if ty else y)

        return bound(run, ("X", "Y"))


@register_kernel("matmul")
class Matmul(Kernel):
    """Legacy matmul: Out = alpha * op(X) @ op(Y); 1-D X is a row vector, 1-D Y a column vector."""

    def run(self, ins: Ins) -> Outs:
        x0, y0 = ins["X"][0], ins["Y"][0]
        a = self.attrs
        try:
            xm, ym, out_shape = M.matmul_v1_shapes(x0.shape, y0.shape, bool(a["transpose_X"]), bool(a["transpose_Y"]))
        except ShapeError as e:
            raise _operands_error("matmul", x0, y0, e) from None
        x, y = x0.reshape(xm), y0.reshape(ym)
        if a["transpose_X"]:
            x = np.swapaxes(x, -1, -2)
        if a["transpose_Y"]:
            y = np.swapaxes(y, -1, -2)
        out = matmul(x, y)
        alpha = float(a["alpha"])
        if alpha != 1.0:
            out *= out.dtype.type(alpha)
        return {"Out": [out.reshape(out_shape)]}


@register_kernel("mul")
class Mul(Kernel):
    """Out = X as [prod(x[:xn]), -1] @ Y as [prod(y[:yn]), -1], reshaped to x[:xn] + y[yn:]."""

    def run(self, ins: Ins) -> Outs:
        x, y = ins["X"][0], ins["Y"][0]
        try:
            xm, ym, out = M.mul_shapes(x.shape, y.shape, int(self.attrs["x_num_col_dims"]), int(self.attrs["y_num_col_dims"]))
        except ShapeError as e:
            raise _operands_error("mul", x, y, e) from None
        return {"Out": [(x.reshape(xm) @ y.reshape(ym)).reshape(out)]}


@register_kernel("softmax")
class Softmax(Kernel):
    """Out = exp(X - max) * (1 / sum) along `axis` (Paddle's CPU order of operations)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        if x.ndim == 0:
            return {"Out": [np.ones_like(x)]}
        axis = norm_axis(int(self.attrs["axis"]), x.ndim)
        if (axis == x.ndim - 1 and x.dtype == np.float32 and x.flags.c_contiguous and x.size
                and native.use_native(self.context)):
            return {"Out": [native.softmax(x)]}  # the same per row, in one native pass
        e = x - x.max(axis=axis, keepdims=True)
        np.exp(e, out=e)
        s = e.sum(axis=axis, keepdims=True)
        e *= np.reciprocal(s, out=s)
        return {"Out": [e]}

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        if (x.ndim and norm_axis(int(self.attrs["axis"]), x.ndim) == x.ndim - 1 and x.dtype == np.float32
                and x.flags.c_contiguous and x.size and native.use_native(self.context)):
            return bound(native_plans.softmax_plan(x.shape))
        return None


@register_kernel("log_softmax")
class LogSoftmax(Kernel):
    """Out = X - max - log(sum(exp(X - max))) along `axis`."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        if x.ndim == 0:
            return {"Out": [np.zeros_like(x)]}
        axis = norm_axis(int(self.attrs["axis"]), x.ndim)
        shifted = x - x.max(axis=axis, keepdims=True)
        with np.errstate(divide="ignore"):
            lse = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        shifted -= lse
        return {"Out": [shifted]}


@_both("scale", ScaleTensor=ANY)
class Scale(Kernel):
    """Out = scale * X + bias (bias_after_scale) or scale * (X + bias); ScaleTensor overrides scale.

    For integer X, scale and bias are first converted to X's dtype (truncated), as Paddle does.
    """

    def _operands(self, x: np.ndarray, ins: Ins) -> tuple[Any, Any]:
        """(scale, bias) in X's dtype."""
        st = ins.get("ScaleTensor") or []
        scale = np.asarray(st[0]).reshape(-1)[0] if st else self.attrs["scale"]
        bias = self.attrs["bias"]
        t = x.dtype.type
        return (t(int(scale)), t(int(bias))) if x.dtype.kind in "iu" else (t(scale), t(bias))

    def run(self, ins: Ins) -> Outs:
        x = np.asarray(ins["X"][0])
        sc, b = self._operands(x, ins)
        if self.attrs["bias_after_scale"]:
            out = x * sc
            if b:
                out += b
        else:
            out = (x + b) * sc if b else x * sc
        return {"Out": [np.asarray(out, dtype=x.dtype)]}

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        if ins.get("ScaleTensor"):
            return None
        sc, b = self._operands(x, ins)
        dt, after = x.dtype, bool(self.attrs["bias_after_scale"])
        if not b:
            def run_scale(x: np.ndarray) -> np.ndarray:
                return np.asarray(x * sc, dtype=dt)

            return bound(run_scale)

        def run(x: np.ndarray) -> np.ndarray:
            if after:
                out = x * sc
                out += b
            else:
                out = (x + b) * sc
            return np.asarray(out, dtype=dt)

        return bound(run)


@register_kernel("dropout", inputs={"Seed": ANY})
class Dropout(Kernel):
    """Inference dropout: X * (1 - dropout_prob) for downgrade_in_infer, X itself for upscale_in_train."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        if self.attrs["dropout_implementation"] == "upscale_in_train":
            return {"Out": [x]}
        keep = np.float32(1.0) - np.float32(self.attrs["dropout_prob"])  # computed in float, like Paddle
        return {"Out": [np.asarray(x * x.dtype.type(keep), dtype=x.dtype)]}


# --- reductions ------------------------------------------------------------------------------
_REDUCERS = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
    "reduce_all": np.all,
    "reduce_any": np.any,
}


class Reduce(Kernel):
    """Out = f(X) over `dim` (all dims when reduce_all or `dim` is empty), keep_dim keeps 1s."""

    def run(self, ins: Ins) -> Outs:
        x = np.asarray(ins["X"][0])
        axes = M.reduce_axes(self.attrs, x.ndim)
        keep = bool(self.attrs["keep_dim"])
        op = self.op.type
        out_vt = int(self.attrs["out_dtype"])
        if out_vt >= 0:
            out_dtype = numpy_dtype(out_vt, f"{op}.out_dtype")
        elif op == "reduce_sum" and x.dtype in (np.bool_, np.int32):
            out_dtype = np.dtype(np.int64)  # Paddle 3 sums bool/int32 into int64
        elif op in ("reduce_all", "reduce_any"):
            out_dtype = np.dtype(np.bool_)
        else:
            out_dtype = x.dtype
        if x.size == 0 and op in ("reduce_max", "reduce_min") and any(x.shape[a] == 0 for a in axes):
            raise KernelError(f"{op}: cannot reduce X {list(x.shape)} over an empty dim")
        if op == "reduce_sum":
            out = np.sum(x, axis=axes, keepdims=keep, dtype=out_dtype)
        else:
            out = _REDUCERS[op](x, axis=axes, keepdims=keep)
        return {"Out": [np.asarray(out).astype(out_dtype, copy=False)]}


for _t in M.REDUCE_OPS:
    _both(_t)(type("".join(p.capitalize() for p in _t.split("_")), (Reduce,), {}))


@_both("mean")
class Mean(Kernel):
    """Out = mean of all of X (0-D)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        return {"Out": [np.asarray(np.mean(x)).astype(x.dtype)]}


@_both("sum")
class Sum(Kernel):
    """Out = X[0] + X[1] + ... (added in order, in X[0]'s dtype)."""

    def run(self, ins: Ins) -> Outs:
        xs = ins["X"]
        out = np.array(xs[0], copy=True)
        for x in xs[1:]:
            if x.shape != out.shape:
                raise KernelError(f"sum: inputs {[list(v.shape) for v in xs]} must share one shape")
            out += x
        return {"Out": [out]}


class ArgMinMax(Kernel):
    """Out = index of the first max (min) along `axis`, or in the flattened X; dtype int64 or `dtype`."""

    fn = staticmethod(np.argmax)

    def run(self, ins: Ins) -> Outs:
        x = np.asarray(ins["X"][0])
        a = self.attrs
        shape = M.arg_shape(x.shape, int(a["axis"]), bool(a["keepdims"]), bool(a["flatten"]))
        if x.size == 0:
            raise KernelError(f"{self.op.type}: X {list(x.shape)} is empty")
        if a["flatten"] or x.ndim == 0:
            idx = self.fn(x.reshape(-1))
        else:
            idx = self.fn(x, axis=norm_axis(int(a["axis"]), x.ndim))
        dt = int(a["dtype"])
        out_dtype = np.int64 if dt < 0 else numpy_dtype(dt, f"{self.op.type}.dtype")
        return {"Out": [np.asarray(idx).astype(out_dtype).reshape(shape)]}


@_both("arg_max")
class ArgMax(ArgMinMax):
    fn = staticmethod(np.argmax)


@_both("arg_min")
class ArgMin(ArgMinMax):
    fn = staticmethod(np.argmin)


# --- embedding -------------------------------------------------------------------------------
def lookup(op: str, w: np.ndarray, ids: np.ndarray, padding_idx: int) -> np.ndarray:
    """W's rows at ids (any shape), zeros where id == padding_idx (unless it is -1, no padding)."""
    ids = np.asarray(ids)
    pad = ids == padding_idx if padding_idx != -1 else None
    check = ids[~pad] if pad is not None else ids
    if check.size and (check.min() < 0 or check.max() >= w.shape[0]):
        raise KernelError(f"{op}: Ids must lie in [0, {w.shape[0]}), got values in [{check.min()}, {check.max()}]")
    out = np.take(w, ids.astype(np.intp, copy=False), axis=0, mode="clip")
    if pad is not None and pad.any():
        out[pad] = 0
    return out


@register_kernel("lookup_table_v2", inputs={"Ids": ANY})
class LookupTableV2(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [lookup("lookup_table_v2", ins["W"][0], ins["Ids"][0], int(self.attrs["padding_idx"]))]}


@register_kernel("lookup_table", inputs={"Ids": ANY})
class LookupTable(Kernel):
    def run(self, ins: Ins) -> Outs:
        ids = np.asarray(ins["Ids"][0])
        if ids.ndim == 0 or ids.shape[-1] != 1:
            raise KernelError(f"lookup_table: Ids must end with a dim of 1, got {list(ids.shape)}")
        out = lookup("lookup_table", ins["W"][0], ids[..., 0], int(self.attrs["padding_idx"]))
        return {"Out": [out]}


@register_kernel("bmm")
class Bmm(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.matmul(ins["X"][0], ins["Y"][0])]}


@register_kernel("atan2", precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs={"X1": ANY, "X2": ANY})
class Atan2(Kernel):
    """Float inputs keep their dtype; integer inputs give float64 (Paddle's Atan2 output type)."""

    def run(self, ins: Ins) -> Outs:
        a, b = ins["X1"][0], ins["X2"][0]
        if a.dtype.kind in "iub":
            return {"Out": [np.arctan2(a.astype(np.float64), b.astype(np.float64))]}
        return {"Out": [np.arctan2(a, b).astype(a.dtype, copy=False)]}
