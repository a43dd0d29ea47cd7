"""The host kernel of fused_attention (pdlite/optimizer/passes/attention_fuse.py): multi-head self-attention of
X (B, S, 3 H D), q, k and v side by side, head h at columns h*D of each third -> Out (B, S, H D).

Native: one call per run (native_src/norm_softmax.c at_task: per head the scores, their softmax and the product with
v in scratch memory, written straight to Out's columns), in place of the ~12 ops the pass replaced (a split, three
reshape + transpose pairs, two matmuls, the softmax, a transpose and a reshape). NumPy: those ops' own computation.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.kernels.host import native, native_plans
from pdlite.kernels.host.tensor import Ins, Outs
from pdlite.kernels.registry import Bound, Kernel, bound, register_kernel


def attention_numpy(x: np.ndarray, heads: int, alpha: float) -> np.ndarray:
    """The unfused ops' computation: reshape / transpose to (B, H, S, D), q @ k^T, * alpha, softmax (the host softmax
    kernel's NumPy form), @ v, back to (B, S, H D)."""
    b, s, c = x.shape
    d = c // (3 * heads)
    q, k, v = (x[:, :, i * heads * d:(i + 1) * heads * d].reshape(b, s, heads, d).transpose(0, 2, 1, 3)
               for i in range(3))
    e = np.matmul(q, k.transpose(0, 1, 3, 2))
    if alpha != 1.0:
        e *= np.asarray(alpha, dtype=e.dtype)
    e -= e.max(axis=-1, keepdims=True)
    np.exp(e, out=e)
    t = e.sum(axis=-1, keepdims=True)
    e *= np.reciprocal(t, out=t)
    return np.asarray(np.matmul(e, v).transpose(0, 2, 1, 3), order="C").reshape(b, s, heads * d)


@register_kernel("fused_attention")
class FusedAttention(Kernel):
    """Out = the heads' softmax(alpha * q k^T) v, side by side."""

    def _native(self, x: Any) -> bool:
        return (isinstance(x, np.ndarray) and x.ndim == 3 and x.dtype == np.float32 and x.flags.c_contiguous
                and x.size > 0 and native.use_native(self.context))

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        heads, alpha = int(self.attrs["head_number"]), float(self.attrs["alpha"])
        if self._native(x):
            return {"Out": [native.attention(x, heads, alpha)]}
        return {"Out": [attention_numpy(np.asarray(x), heads, alpha)]}

    def bind(self, ins: Ins, fixed: frozenset[str]) -> Bound | None:
        x = ins["X"][0]
        if not self._native(x):
            return None
        return bound(native_plans.attention_plan(x.shape, int(self.attrs["head_number"]), float(self.attrs["alpha"])))
