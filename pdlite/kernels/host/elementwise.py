"""Host kernels of the binary elementwise ops (Paddle's `axis` broadcasting, dtype-preserving).

Integer semantics follow Paddle's CPU functors: `elementwise_div` truncates toward zero,
`elementwise_floordiv` floors, `elementwise_mod` takes the divisor's sign (like Python),
`elementwise_pow` computes in double and truncates; integer division by zero is an error.
Each op is registered twice: FP32/NCHW (the float hot path) and Any/Any (shape arithmetic
on int tensors and other dtypes), with the same class.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION
from pdlite.errors import KernelError
from pdlite.kernels.host import native, native_plans
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel
from pdlite.operators.elementwise import BINARY_OPS, aligned_shapes

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if _is_int(x):
        q = np.floor_divide(x, y)
        # C++ integer division truncates: undo NumPy's flooring where the signs differ.
        return q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(x, y)


def _floordiv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(x, y)


def _mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.remainder(x, y)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if _is_int(x):
        with np.errstate(all="ignore"):
            return np.power(x.astype(np.float64), y.astype(np.float64))
    with np.errstate(all="ignore"):
        return np.power(x, y)


FUNCS: dict[str, Binary] = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": _div,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": _pow,
    "elementwise_floordiv": _floordiv,
    "elementwise_mod": _mod,
}
_INT_DIVISIONS = ("elementwise_div", "elementwise_floordiv", "elementwise_mod")


def broadcast_operands(x: np.ndarray, y: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """X and Y reshaped (views) so that NumPy broadcasting gives Paddle's `axis` broadcasting."""
    if axis == -1 or x.ndim == y.ndim or x.shape == y.shape:
        return x, y  # Paddle's rule is NumPy's here
    xs, ys, _ = aligned_shapes(x.shape, y.shape, axis)
    return x.reshape(xs), y.reshape(ys)


class ElementwiseKernel(Kernel):
    """Out = f(X, Y) with Paddle's broadcasting; the result keeps X's dtype."""

    fn: Binary = staticmethod(np.add)
    name = "elementwise_add"

    def run(self, ins: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
        x0, y0 = ins["X"][0], ins["Y"][0]
        if self.name == "elementwise_add":  # same-shape float32: on the native pool (NumPy's sums)
            out = native.add_act_or_none(x0, y0, self.context)
            if out is not None:
                return {"Out": [out]}
        elif self.name == "elementwise_mul":  # a map times per-channel gates: on the native pool
            out = native.mul_gates_or_none(x0, y0, self.context)
            if out is not None:
                return {"Out": [out]}
        axis = int(self.attrs["axis"])
        try:
            x, y = broadcast_operands(x0, y0, axis)
            if self.name in _INT_DIVISIONS and _is_int(y) and not np.all(y):
                raise KernelError(f"{self.op.type}: integer division by zero (Y holds a 0)")
            out = self.fn(x, y)
        except ValueError as e:  # NumPy's or aligned_shapes' broadcasting error
            raise KernelError(
                f"{self.op.type}: X {list(np.shape(x0))} {x0.dtype} and Y {list(np.shape(y0))} {y0.dtype} "
                f"do not broadcast with axis={axis}: {e}"
            ) from None
        if not isinstance(out, np.ndarray) or out.dtype != x.dtype:
            out = np.asarray(out).astype(x.dtype, copy=False)
        return {"Out": [out]}

    def bind(self, ins: dict[str, list[np.ndarray]], fixed: frozenset[str]) -> Bound | None:
        """run()'s computation for these shapes: the native add or gate product, else f on the broadcast views
        (not the integer divisions: their check of Y's values stays in run)."""
        x0, y0 = ins["X"][0], ins["Y"][0]
        if self.name == "elementwise_add" and native.add_act_applies(x0, y0) and native.use_native(self.context):
            return bound(native_plans.add_act_plan(x0.shape, native.NO_ACT), ("X", "Y"))
        if self.name == "elementwise_mul" and native.use_native(self.context):
            plan = native_plans.mul_gates_plan(x0, y0)
            if plan is not None:
                return bound(plan, ("X", "Y"))
        if self.name in _INT_DIVISIONS and _is_int(y0):
            return None
        x, y = broadcast_operands(x0, y0, int(self.attrs["axis"]))
        fn, dt = self.fn, x0.dtype
        xs, ys = (x.shape if x.shape != x0.shape else None), (y.shape if y.shape != y0.shape else None)

        def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            out = fn(x if xs is None else x.reshape(xs), y if ys is None else y.reshape(ys))
            if not isinstance(out, np.ndarray) or out.dtype != dt:
                out = np.asarray(out).astype(dt, copy=False)
            return out

        return bound(run, ("X", "Y"))


def _make(op_type: str) -> type[ElementwiseKernel]:
    name = "".join(p.capitalize() for p in op_type.split("_"))
    return type(name, (ElementwiseKernel,), {"fn": staticmethod(FUNCS[op_type]), "name": op_type})


KERNEL_CLASSES: dict[str, type[ElementwiseKernel]] = {}
for _op in BINARY_OPS:
    _cls = _make(_op)
    KERNEL_CLASSES[_op] = _cls
    register_kernel(_op)(_cls)
    register_kernel(_op, precision=ANY_PRECISION, layout=ANY_LAYOUT)(_cls)
