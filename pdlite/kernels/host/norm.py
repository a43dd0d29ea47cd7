"""Host batch_norm and layer_norm kernels (NumPy, float32).

batch_norm, inference (Paddle: test_mode = is_test and not trainable_statistics; running
statistics are used when test_mode or use_global_stats):
    inv_std = 1 / sqrt(Variance + eps);  a = Scale * inv_std;  b = Bias - Mean * inv_std * Scale
    Y = X * a + b   (per channel; channel axis 1, or last for NHWC)
otherwise the batch statistics over every axis but the channel one (biased variance) are used.

layer_norm: X flattened to [left, right] at begin_norm_axis (Mean/Variance shaped X.shape[:axis]);
    Mean = mean(x, 1), Variance = mean((x - Mean)^2, 1), Y = (x - Mean) / sqrt(Variance + eps) * Scale + Bias
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.kernels.host import native, native_plans
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel
from pdlite.operators.nn import is_channel_last

_BN_PARAMS = ("Scale", "Bias", "Mean", "Variance")


def bn_affine(
    scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with batch_norm(x) = x * a + b, computed in float32 like Paddle's CPU kernel."""
    f = np.float32
    scale, bias, mean, var = (np.asarray(v, dtype=f).reshape(-1) for v in (scale, bias, mean, var))
    inv_std = f(1.0) / np.sqrt(var + f(eps))
    a = inv_std * scale
    b = bias - mean * inv_std * scale
    return a, b


@register_kernel("batch_norm")
class BatchNorm(Kernel):
    """batch_norm -> Y (the running-statistics outputs are not produced)."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self._src: tuple[Any, ...] | None = None
        self._affine: tuple[np.ndarray, np.ndarray] | None = None
        a = self.attrs
        test_mode = bool(a["is_test"]) and not bool(a["trainable_statistics"])
        self.global_stats = test_mode or bool(a["use_global_stats"])
        self.channel_last = is_channel_last(a["data_layout"])
        self.eps = float(a["epsilon"])

    def prepare(self, params: Mapping[str, Any]) -> None:
        vals = [params.get(self.op.input(s)) for s in _BN_PARAMS]
        if self.global_stats and all(v is not None for v in vals):
            self._get_affine(tuple(vals))

    def _get_affine(self, vals: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
        if self._src is None or any(v is not s for v, s in zip(vals, self._src)):
            self._affine = bn_affine(*vals, self.eps)
            self._src = vals
        assert self._affine is not None
        return self._affine

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        c_axis = x.ndim - 1 if self.channel_last else 1
        bshape = [1] * x.ndim
        bshape[c_axis] = x.shape[c_axis]
        if self.global_stats:
            a, b = self._get_affine(tuple(ins[s][0] for s in _BN_PARAMS))
            y = np.multiply(x, a.reshape(bshape))
            y += b.reshape(bshape)
        else:
            axes = tuple(i for i in range(x.ndim) if i != c_axis)
            mean = x.mean(axis=axes, keepdims=True, dtype=np.float32)
            d = x - mean
            var = np.mean(d * d, axis=axes, keepdims=True, dtype=np.float32)
            scale = np.asarray(ins["Scale"][0], np.float32).reshape(bshape)
            bias = np.asarray(ins["Bias"][0], np.float32).reshape(bshape)
            y = d / np.sqrt(var + np.float32(self.eps)) * scale + bias
        return {"Y": [y.astype(x.dtype, copy=False)]}


@register_kernel("layer_norm")
class LayerNorm(Kernel):
    """layer_norm -> Y, Mean, Variance."""

    _use_native: bool | None = None  # native.use_native(context), looked up once
    _vecs: tuple[Any, ...] = (None, None, None, None)  # (Scale input, its vector, Bias input, its vector)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        axis = int(self.attrs["begin_norm_axis"])
        left = math.prod(x.shape[:axis])
        x2 = x.reshape(left, -1)
        if self._use_native is None:
            self._use_native = native.use_native(self.context)
        if x2.dtype == np.float32 and x2.flags.c_contiguous and x2.shape[1] > 0 and self._use_native:
            return self._native(ins, x, x2, axis)
        mean = x2.mean(axis=1, dtype=np.float32)
        d = x2 - mean[:, None]
        var = np.einsum("ij,ij->i", d, d) / np.float32(d.shape[1])
        inv = np.float32(1.0) / np.sqrt(var + np.float32(self.attrs["epsilon"]))
        y = d * inv[:, None].astype(d.dtype, copy=False)
        scale, bias = ins.get("Scale"), ins.get("Bias")
        if scale:
            y *= np.asarray(scale[0], dtype=y.dtype).reshape(1, -1)
        if bias:
            y += np.asarray(bias[0], dtype=y.dtype).reshape(1, -1)
        out = {"Y": [y.reshape(x.shape)]}
        if self.op.outputs.get("Mean"):
            out["Mean"] = [mean.reshape(x.shape[:axis])]
        if self.op.outputs.get("Variance"):
            out["Variance"] = [var.astype(np.float32, copy=False).reshape(x.shape[:axis])]
        return out

    def _vectors(self, ins: dict[str, list[Any]]) -> tuple[Any, ...]:
        """(Scale input, its vector, Bias input, its vector), made once per Scale / Bias input (~2 us a call)."""
        scale, bias = ins.get("Scale"), ins.get("Bias")
        s_in, b_in = scale[0] if scale else None, bias[0] if bias else None
        v = self._vecs
        if v[0] is not s_in or v[2] is not b_in:
            v = self._vecs = (s_in, _vec(scale), b_in, _vec(bias))
        return v

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """The native pass for X's shape, Scale and Bias held (Kernel.bind)."""
        x = ins["X"][0]
        if (ins.get("Scale") and "Scale" not in fixed) or (ins.get("Bias") and "Bias" not in fixed):
            return None
        axis = int(self.attrs["begin_norm_axis"])
        x2 = x.reshape(math.prod(x.shape[:axis]), -1)
        if self._use_native is None:
            self._use_native = native.use_native(self.context)
        if not (x2.dtype == np.float32 and x2.flags.c_contiguous and x2.shape[1] > 0 and self._use_native):
            return None
        v, outs = self._vectors(ins), self.op.outputs
        writes = ("Y", *(s for s in ("Mean", "Variance") if outs.get(s)))
        rows, cols = x2.shape
        plan = native_plans.layer_norm_plan(rows, cols, v[1], v[3], float(self.attrs["epsilon"]), len(writes) > 1)
        shape, lead = x.shape, x.shape[:axis]
        if len(writes) == 1:
            def run_y(x: np.ndarray) -> np.ndarray:
                return plan(x.reshape(rows, cols))[0].reshape(shape)

            return bound(run_y, ("X",), writes)
        mean_out, var_out = bool(outs.get("Mean")), bool(outs.get("Variance"))

        def run(x: np.ndarray) -> tuple[np.ndarray, ...]:
            y, mean, var = plan(x.reshape(rows, cols))
            res = [y.reshape(shape)]
            if mean_out:
                res.append(mean.reshape(lead))
            if var_out:
                res.append(var.reshape(lead))
            return tuple(res)

        return bound(run, ("X",), writes)

    def _native(self, ins: dict[str, list[Any]], x: np.ndarray, x2: np.ndarray, axis: int) -> dict[str, list[Any]]:
        """The same per row in one native pass (pdlite/kernels/host/native_src/)."""
        v = self._vectors(ins)
        outs = self.op.outputs
        y, mean, var = native.layer_norm(x2, v[1], v[3], float(self.attrs["epsilon"]),
                                         bool(outs.get("Mean") or outs.get("Variance")))
        out = {"Y": [y.reshape(x.shape)]}
        if outs.get("Mean"):
            out["Mean"] = [mean.reshape(x.shape[:axis])]
        if outs.get("Variance"):
            out["Variance"] = [var.reshape(x.shape[:axis])]
        return out


def _vec(v: list[Any] | None) -> np.ndarray | None:
    """An optional Scale / Bias input as a contiguous float32 vector."""
    return np.asarray(np.asarray(v[0], dtype=np.float32).reshape(-1), order="C") if v else None


@register_kernel("skip_layernorm")
class SkipLayerNorm(LayerNorm):
    """skip_layernorm -> Out = layer_norm(X + Y) (skip_layernorm_fuse_pass). Native: the sum and the rows' norm in one
    call, the sum one rounded float32 add per element as elementwise_add's, so the same bits as the two ops; NumPy:
    X + Y, then layer_norm's computation."""

    def _rows(self, x: Any, y: Any) -> tuple[int, int] | None:
        """(rows, cols) of the native call, or None where it does not apply."""
        if self._use_native is None:
            self._use_native = native.use_native(self.context)
        axis = int(self.attrs["begin_norm_axis"])
        if not (self._use_native and isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                and x.dtype == y.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous and x.ndim):
            return None
        rows = math.prod(x.shape[:axis])
        return (rows, x.size // rows) if rows and x.size // rows else None

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = ins["X"][0], ins["Y"][0]
        dims = self._rows(x, y)
        if dims is None:
            return {"Out": LayerNorm.run(self, {**ins, "X": [np.add(x, y)]})["Y"]}
        v = self._vectors(ins)
        out, _, _ = native.layer_norm(x.reshape(dims), v[1], v[3], float(self.attrs["epsilon"]), False,
                                      y.reshape(dims))
        return {"Out": [out.reshape(x.shape)]}

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        x, y = ins["X"][0], ins["Y"][0]
        if (ins.get("Scale") and "Scale" not in fixed) or (ins.get("Bias") and "Bias" not in fixed):
            return None
        dims = self._rows(x, y)
        if dims is None:
            return None
        v, shape = self._vectors(ins), x.shape
        plan = native_plans.skip_layer_norm_plan(*dims, v[1], v[3], float(self.attrs["epsilon"]))

        def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return plan(x.reshape(dims), y.reshape(dims)).reshape(shape)

        return bound(run, ("X", "Y"), ("Out",))
