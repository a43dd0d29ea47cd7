"""Host kernels of the activation and unary math ops, following Paddle's CPU functors.

Each kernel computes in the input's dtype (float32 stays float32): attributes are turned
into scalars of that dtype before use, and the operation order mirrors Paddle's functor
where it matters for rounding (e.g. hard_swish = min(max(x + offset, 0), threshold) * x / scale).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.registry import Kernel, register_kernel
from pdlite.operators.activation import UNARY_OPS

Attrs = dict[str, Any]

# --- erf: float32-accurate, vectorised (max error ~1.2 ulp against math.erf) ------------------
# |x| < 0.84375: erf(x) = x + x * P(x^2)  (minimax-style fit of erf(x)/x - 1)
_ERF_SMALL = np.array(
    [
        0.12837916612625122,
        -0.37612637877464294,
        0.11283756047487259,
        -0.0268629752099514,
        0.00521061010658741,
        -0.0008260615868493915,
        8.913267811294645e-05,
    ]
)
# 0.84375 <= |x| <= 4: erf(x) = 1 - exp(-x^2) * Q(x - 0.84375)  (fit of erfc(x) * exp(x^2));
# beyond 4, erf rounds to +-1 in float32.
_ERF_SPLIT = 0.84375
_ERF_LARGE = np.array(
    [
        0.47436806559562683,
        -0.32788291573524475,
        0.19771341979503632,
        -0.10733887553215027,
        0.05338519811630249,
        -0.024356339126825333,
        0.009912476874887943,
        -0.0033566260244697332,
        0.0008465261198580265,
        -0.00013531692093238235,
        9.979753485822584e-06,
    ]
)
_math_erf = np.frompyfunc(math.erf, 1, 1)


def _horner(coefs: np.ndarray, t: np.ndarray) -> np.ndarray:
    r = np.full_like(t, coefs[-1])
    for c in coefs[-2::-1]:
        r *= t
        r += c
    return r


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of a float array, in its dtype (float64 goes through math.erf)."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    if x.dtype != np.float32:
        return erf(x.astype(np.float32)).astype(x.dtype)
    a = np.abs(x)
    small = a < _ERF_SPLIT
    out = np.empty_like(x)
    xs = x[small]
    if xs.size:
        out[small] = xs + xs * _horner(_ERF_SMALL.astype(np.float32), xs * xs)
    large = ~small
    al = np.minimum(a[large], np.float32(4.0))
    if al.size:
        q = _horner(_ERF_LARGE.astype(np.float32), al - np.float32(_ERF_SPLIT))
        q *= np.exp(-(al * al))
        res = np.float32(1.0) - q
        out[large] = np.copysign(res, x[large])  # NaN stays NaN (comparison sends it here)
    return out


# --- the unary functions --------------------------------------------------------------------
def _c(x: np.ndarray, v: float) -> np.generic:
    """A scalar attribute in x's dtype (keeps float32 arithmetic in float32)."""
    return x.dtype.type(v)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-x)
    e += _c(x, 1.0)
    return np.reciprocal(e, out=e)


def _hard_sigmoid(x: np.ndarray, a: Attrs) -> np.ndarray:
    t = x * _c(x, a["slope"])
    t += _c(x, a["offset"])
    np.maximum(t, _c(x, 0.0), out=t)
    return np.minimum(t, _c(x, 1.0), out=t)


def _hard_swish(x: np.ndarray, a: Attrs) -> np.ndarray:
    t = x + _c(x, a["offset"])
    np.maximum(t, _c(x, 0.0), out=t)
    np.minimum(t, _c(x, a["threshold"]), out=t)
    t *= x
    t /= _c(x, a["scale"])
    return t


def _swish(x: np.ndarray, beta: float) -> np.ndarray:
    e = np.exp(x * _c(x, -beta))
    e += _c(x, 1.0)
    return np.divide(x, e, out=e)


def _gelu(x: np.ndarray, a: Attrs) -> np.ndarray:
    if a.get("approximate", False):
        # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
        t = x * x * x
        t *= _c(x, 0.044715)
        t += x
        t *= _c(x, math.sqrt(2.0 / math.pi))
        np.tanh(t, out=t)
    else:
        # 0.5 * x * (1 + erf(x / sqrt(2)))
        t = erf(x * _c(x, math.sqrt(0.5)))
    t += _c(x, 1.0)
    t *= x
    t *= _c(x, 0.5)
    return t


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """gelu's erf form (what the native kernels' gelu code computes)."""
    return _gelu(x, {"approximate": False})


def _softplus(x: np.ndarray, a: Attrs) -> np.ndarray:
    beta, threshold = _c(x, a["beta"]), _c(x, a["threshold"])
    xb = x * beta
    soft = np.log(np.exp(xb) + _c(x, 1.0)) / beta  # Paddle's form (not log1p), for identical rounding
    return np.where(xb > threshold, x, soft)


def _mish(x: np.ndarray, a: Attrs) -> np.ndarray:
    sp = np.where(x > _c(x, a["threshold"]), x, np.log(np.exp(x) + _c(x, 1.0)))  # as Paddle computes it
    return x * np.tanh(sp)


def _round(x: np.ndarray, a: Attrs) -> np.ndarray:
    """Round half to even, as Paddle 3's CPU kernel does (Paddle 2.x rounded half away from zero)."""
    if x.dtype.kind in "iub":
        return x.copy()
    return np.round(x, int(a.get("decimals", 0) or 0))


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    neg = (np.exp(x) - _c(x, 1.0)) * _c(x, alpha)
    return np.where(x > 0, x, neg)


def _selu(x: np.ndarray, a: Attrs) -> np.ndarray:
    alpha = _c(x, a["alpha"])
    return np.where(x > 0, x, alpha * np.exp(x) - alpha) * _c(x, a["scale"])


def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    al = _c(x, alpha)
    neg = (np.exp(x / al) - _c(x, 1.0)) * al
    return np.maximum(x, _c(x, 0.0)) + np.minimum(neg, _c(x, 0.0))


def _logsigmoid(x: np.ndarray) -> np.ndarray:
    # -log(1 + exp(-x)) without overflow, in Paddle's form: -(m + log(exp(-m) + exp(-x - m))), m = max(-x, 0)
    m = np.maximum(-x, _c(x, 0.0))
    return -(m + np.log(np.exp(-m) + np.exp(-x - m)))


def _softshrink(x: np.ndarray, lam: float) -> np.ndarray:
    lam = _c(x, lam)
    return np.where(x > lam, x - lam, np.where(x < -lam, x + lam, _c(x, 0.0)))


def _logit(x: np.ndarray, eps: float) -> np.ndarray:
    """log(x / (1 - x)) with x clipped to [eps, 1 - eps] unless eps is 0 (Paddle's LogitFunctor)."""
    if eps:
        x = np.clip(x, _c(x, eps), _c(x, 1.0 - eps))
    return np.log(x / (_c(x, 1.0) - x))


# op type -> f(x, attrs); all return a new array of x's dtype and shape.
FUNCS: dict[str, Callable[[np.ndarray, Attrs], np.ndarray]] = {
    "relu": lambda x, a: np.maximum(x, _c(x, 0.0)),
    "relu6": lambda x, a: np.minimum(np.maximum(x, _c(x, 0.0)), _c(x, a["threshold"])),
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: np.tanh(x),
    "hard_sigmoid": _hard_sigmoid,
    "hard_swish": _hard_swish,
    "swish": lambda x, a: _swish(x, a["beta"]),
    "silu": lambda x, a: _swish(x, 1.0),
    "leaky_relu": lambda x, a: np.where(x < 0, x * _c(x, a["alpha"]), x),
    "gelu": _gelu,
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "log2": lambda x, a: np.log2(x),
    "log10": lambda x, a: np.log10(x),
    "log1p": lambda x, a: np.log1p(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "rsqrt": lambda x, a: _c(x, 1.0) / np.sqrt(x),
    "abs": lambda x, a: np.abs(x),
    "square": lambda x, a: x * x,
    "reciprocal": lambda x, a: _c(x, 1.0) / x,
    "floor": lambda x, a: np.floor(x),
    "ceil": lambda x, a: np.ceil(x),
    "round": _round,
    "sign": lambda x, a: np.sign(x),
    "sin": lambda x, a: np.sin(x),
    "cos": lambda x, a: np.cos(x),
    "erf": lambda x, a: erf(x),
    "softplus": _softplus,
    "softsign": lambda x, a: x / (_c(x, 1.0) + np.abs(x)),
    "mish": _mish,
    "elu": lambda x, a: _elu(x, a["alpha"]),
    "selu": _selu,
    "celu": lambda x, a: _celu(x, a["alpha"]),
    "logsigmoid": lambda x, a: _logsigmoid(x),
    "tanh_shrink": lambda x, a: x - np.tanh(x),
    "softshrink": lambda x, a: _softshrink(x, a["lambda"]),
    "hard_shrink": lambda x, a: np.where(np.abs(x) > _c(x, a["threshold"]), x, _c(x, 0.0)),
    "thresholded_relu": lambda x, a: np.where(x > _c(x, a["threshold"]), x, _c(x, a.get("value", 0.0))),
    "brelu": lambda x, a: np.minimum(np.maximum(x, _c(x, a["t_min"])), _c(x, a["t_max"])),
    "hardtanh": lambda x, a: np.minimum(np.maximum(x, _c(x, a["t_min"])), _c(x, a["t_max"])),
    "tan": lambda x, a: np.tan(x),
    "asin": lambda x, a: np.arcsin(x),
    "acos": lambda x, a: np.arccos(x),
    "atan": lambda x, a: np.arctan(x),
    "sinh": lambda x, a: np.sinh(x),
    "cosh": lambda x, a: np.cosh(x),
    "asinh": lambda x, a: np.arcsinh(x),
    "acosh": lambda x, a: np.arccosh(x),
    "atanh": lambda x, a: np.arctanh(x),
    "expm1": lambda x, a: np.expm1(x),
    "trunc": lambda x, a: np.trunc(x),
    "logit": lambda x, a: _logit(x, a["eps"]),
    "stanh": lambda x, a: _c(x, a["scale_b"]) * np.tanh(_c(x, a["scale_a"]) * x),
}


class UnaryKernel(Kernel):
    """Out = f(X, attrs), in X's dtype."""

    fn: Callable[[np.ndarray, Attrs], np.ndarray] = staticmethod(FUNCS["relu"])

    def run(self, ins: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
        x = np.asarray(ins["X"][0])
        x1 = x.reshape(1) if x.ndim == 0 else x  # the in-place arithmetic needs arrays, not scalars
        with np.errstate(all="ignore"):  # inf/nan results follow IEEE, as in Paddle
            out = np.asarray(self.fn(x1, self.attrs)).reshape(x.shape)
        if out.dtype != x.dtype:
            out = out.astype(x.dtype)
        return {"Out": [out]}


def _make(op_type: str) -> type[UnaryKernel]:
    name = "".join(p.capitalize() for p in op_type.split("_"))
    return type(name, (UnaryKernel,), {"fn": staticmethod(FUNCS[op_type])})


KERNEL_CLASSES: dict[str, type[UnaryKernel]] = {}
for _op in UNARY_OPS:
    if _op in FUNCS:
        KERNEL_CLASSES[_op] = register_kernel(_op)(_make(_op))


@register_kernel("pow")
class Pow(Kernel):
    """Out = X ** factor; the FactorTensor input (one element) overrides `factor`."""

    def run(self, ins: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
        x = np.asarray(ins["X"][0])
        ft = ins.get("FactorTensor") or []
        factor = float(np.asarray(ft[0]).reshape(-1)[0]) if ft else float(self.attrs["factor"])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if factor == 2.0:
                out = x * x
            elif factor == 1.0:
                out = x.copy()
            else:
                out = np.power(x, _c(x, factor)) if x.dtype.kind == "f" else np.power(x, factor)
        return {"Out": [np.asarray(out).astype(x.dtype, copy=False)]}


@register_kernel("clip")
class Clip(Kernel):
    """Out = min(max(X, min), max); Min/Max tensors override the attributes."""

    def run(self, ins: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
        x = np.asarray(ins["X"][0])
        lo = ins.get("Min") or []
        hi = ins.get("Max") or []
        vmin = np.asarray(lo[0]).reshape(-1)[0] if lo else self.attrs["min"]
        vmax = np.asarray(hi[0]).reshape(-1)[0] if hi else self.attrs["max"]
        if vmin > vmax:
            raise KernelError(f"clip: min ({vmin}) must not exceed max ({vmax})")
        out = np.minimum(np.maximum(x, _c(x, vmin)), _c(x, vmax))
        return {"Out": [np.asarray(out)]}


@register_kernel("prelu")
class Prelu(Kernel):
    """Out = X where X > 0 else Alpha * X, with Alpha per tensor, channel or element."""

    def run(self, ins: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
        x = np.asarray(ins["X"][0])
        alpha = np.asarray(ins["Alpha"][0]).astype(x.dtype, copy=False)
        mode = self.attrs["mode"]
        if mode == "all":
            alpha = alpha.reshape(())
        elif mode == "channel":
            if self.attrs["data_format"] == "NCHW" and x.ndim > 1:
                alpha = alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
            else:
                alpha = alpha.reshape(-1)
        else:  # element
            alpha = alpha.reshape((1,) + x.shape[1:])
        return {"Out": [np.where(x > 0, x, x * alpha)]}
