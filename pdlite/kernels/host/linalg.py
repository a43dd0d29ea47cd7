"""Host kernels of pdlite.operators.linalg (NumPy; reductions accumulate in the input dtype except
logsumexp, which subtracts the maximum first as Paddle does)."""
from __future__ import annotations

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.host.extra import Ins, Outs, generic
from pdlite.kernels.registry import Kernel, register_kernel


@register_kernel("einsum")
class Einsum(Kernel):
    def run(self, ins: Ins) -> Outs:
        out = np.einsum(str(self.attrs["equation"]), *ins["Operands"])
        return {"Out": [np.asarray(np.asarray(out, ins["Operands"][0].dtype), order="C")]}


@register_kernel("inverse")
class Inverse(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["Input"][0]
        try:
            return {"Output": [np.linalg.inv(x.astype(np.float64)).astype(x.dtype)]}
        except np.linalg.LinAlgError as e:
            raise KernelError(f"inverse: Input {list(x.shape)} is singular ({e})") from None


@generic("kron")
class Kron(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.kron(ins["X"][0], ins["Y"][0])]}


@generic("trace")
class Trace(Kernel):
    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        x = ins["Input"][0]
        out = np.trace(x, int(a["offset"]), int(a["axis1"]), int(a["axis2"]))
        return {"Out": [np.asarray(out, x.dtype)]}


@generic("diag_v2")
class DiagV2(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, k = ins["X"][0], int(self.attrs["offset"])
        if x.ndim <= 1:
            v = x.reshape(-1)
            n = len(v) + abs(k)
            out = np.full((n, n), self.attrs["padding_value"], x.dtype)
            idx = np.arange(len(v))
            out[idx + max(-k, 0), idx + max(k, 0)] = v
            return {"Out": [out]}
        return {"Out": [np.asarray(np.diagonal(x, k), order="C")]}


def _axes(attrs: dict, key: str, rank: int) -> tuple[int, ...]:
    axes = [int(a) for a in attrs[key] or []]
    if attrs.get("reduce_all") or not axes:
        return tuple(range(rank))
    return tuple(a + rank if a < 0 else a for a in axes)


@register_kernel("logsumexp")
class Logsumexp(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axes = _axes(self.attrs, "axis", x.ndim)
        m = np.max(x, axis=axes, keepdims=True)
        m = np.where(np.isfinite(m), m, np.zeros_like(m))
        out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
        if not self.attrs["keepdim"]:
            out = np.squeeze(out, axis=axes)
        return {"Out": [np.asarray(out, x.dtype)]}


@register_kernel("frobenius_norm")
class FrobeniusNorm(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axes = _axes(self.attrs, "dim", x.ndim)
        out = np.sqrt(np.sum(x * x, axis=axes, keepdims=bool(self.attrs["keep_dim"])))
        return {"Out": [np.asarray(out, x.dtype)]}


@generic("cumprod")
class Cumprod(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = self.attrs
        dim = int(a["dim"]) % max(x.ndim, 1)
        v = np.flip(x, dim) if a["reverse"] else x
        out = np.cumprod(v, axis=dim, dtype=x.dtype)
        if a["exclusive"]:
            out = np.concatenate([np.ones_like(np.take(out, [0], axis=dim)), np.delete(out, -1, axis=dim)], axis=dim)
        return {"Out": [np.asarray(np.flip(out, dim) if a["reverse"] else out, order="C")]}


@register_kernel("squared_l2_norm")
class SquaredL2Norm(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        return {"Out": [np.asarray([np.sum(x * x)], x.dtype)]}
