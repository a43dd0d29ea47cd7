"""Host kernel of `squeeze_excitation` (pdlite/operators/squeeze_excitation.py: the maths).

Native (float32 NCHW, both activations native ones): one call of native_src/se.c, the global average pool with the
pool2d op's lane partials (its bits), the two products on weights transposed once at prepare, the scaling pass on
the native pool; `bind` gives the runtime's steady path that call for X's shape. Otherwise NumPy: the mean, the two
products and the activations' own host kernels, then the broadcasting multiply.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.kernels.host import native
from pdlite.kernels.host.fused import host_kernel
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel
from pdlite.operators.registry import OPS
from pdlite.operators.squeeze_excitation import ACT_KEYS, se_activation

F32 = np.dtype(np.float32)
SLOTS = ("W1", "W2", "B1", "B2")


def _numpy_act(act: str, attrs: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    if not act:
        return lambda v: v
    k = host_kernel(OPS[act].attach(OpDesc(act, {"X": ["x"]}, {"Out": ["out"]}, attrs)))
    return lambda v: k.run({"X": [v]})["Out"][0]


@register_kernel("squeeze_excitation")
class SqueezeExcitation(Kernel):
    """Out = X * act2(W2 @ act1(W1 @ mean_hw(X) + B1) + B2), per image and channel."""

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        acts = [se_activation(dict(op.attrs), k) for k in ACT_KEYS]
        self.numpy_acts = [_numpy_act(a, at) for a, at in acts]
        native_acts = [native.activation(a, at) for a, at in acts]
        self.native_acts = None if None in native_acts else native_acts
        self.weights: tuple[Any, ...] | None = None
        self.sources: tuple[Any, ...] = ()

    def prepare(self, params: Mapping[str, Any]) -> None:
        """The products' operands from the parameters; weights computed by other ops (weight-only quantization's
        dequantize_linear) are taken on the first run instead."""
        names = [(self.op.inputs.get(s) or [None])[0] for s in SLOTS]
        if all(n is None or params.get(n) is not None for n in names):
            self._set_weights([None if n is None else params[n] for n in names])

    def _set_weights(self, vals: list[Any]) -> None:
        """The products' operands from W1, W2, B1, B2 (kept by identity: a replaced parameter is prepared again)."""
        self.sources = tuple(vals)
        w1, w2, b1, b2 = (None if v is None else np.asarray(v, dtype=np.float32) for v in vals)
        assert w1 is not None and w2 is not None
        c1, c = w1.shape[:2]
        # (C1, C, 1, 1) -> (C, C1) and (C, C1, 1, 1) -> (C1, C): the products' layout (se.c)
        self.weights = (w1.reshape(c1, c), w2.reshape(c, c1),
                        np.asarray(w1.reshape(c1, c).T, order="C"), np.asarray(w2.reshape(c, c1).T, order="C"),
                        None if b1 is None else np.asarray(b1.reshape(c1), order="C"),
                        None if b2 is None else np.asarray(b2.reshape(c), order="C"))

    def _current(self, ins: dict[str, list[Any]]) -> None:
        vals = [ins[s][0] if ins.get(s) else None for s in SLOTS]
        if self.weights is None or any(v is not old for v, old in zip(vals, self.sources)):
            self._set_weights(vals)

    def _native_plan(self, x: Any) -> Callable[[np.ndarray], np.ndarray] | None:
        if (self.native_acts is None or self.weights is None or not native.use_native(self.context)
                or type(x) is not np.ndarray or x.dtype != F32 or x.ndim != 4 or not x.flags.c_contiguous
                or x.shape[2] * x.shape[3] == 0):
            return None
        _, _, w1t, w2t, b1, b2 = self.weights
        n, c, h, w = x.shape
        if w1t.shape[0] != c:
            return None
        fn, alloc = native._ext.squeeze_excitation, native.allocator(x.shape)  # noqa: SLF001 - the kernels' module
        dims, (k1, p1), (k2, p2) = (n, c, w1t.shape[1], h * w), *self.native_acts

        def run(xv: np.ndarray) -> np.ndarray:
            out = alloc()
            fn(xv, w1t, b1, w2t, b2, out, dims, k1, p1, k2, p2)
            return out

        return run

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        self._current(ins)
        plan = self._native_plan(x)
        if plan is not None:
            return {"Out": [plan(x)]}
        return {"Out": [self.reference(np.asarray(x))]}

    def reference(self, x: np.ndarray) -> np.ndarray:
        """NumPy: the mean, the two products with their activations, the multiply."""
        assert self.weights is not None
        w1, w2, _, _, b1, b2 = self.weights
        p = x.mean(axis=(2, 3), dtype=np.float32).astype(x.dtype, copy=False)
        h = p @ w1.T
        if b1 is not None:
            h = h + b1
        s = self.numpy_acts[1]((self.numpy_acts[0](h.astype(np.float32)) @ w2.T + (0 if b2 is None else b2))
                               .astype(np.float32))
        return (x * s[:, :, None, None]).astype(x.dtype, copy=False)

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        if not fixed.issuperset(s for s in SLOTS if ins.get(s)):
            return None  # weights that change between runs: run() each time
        self._current(ins)
        plan = self._native_plan(ins["X"][0])
        return None if plan is None else bound(plan)
