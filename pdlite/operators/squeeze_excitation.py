"""`squeeze_excitation`: a squeeze-and-excitation block as one op (only the optimizer creates it:
pdlite/optimizer/passes/se_fuse.py).

    p[n, c]   = mean(X[n, c, :, :])                                  (global average pool)
    h[n]      = act1(W1 @ p[n] + B1)          W1: (C1, C, 1, 1)      (1x1 conv, its activation)
    s[n]      = act2(W2 @ h[n] + B2)          W2: (C, C1, 1, 1)      (1x1 conv, its activation)
    Out[n, c] = X[n, c] * s[n, c]                                    (the broadcasting multiply)

X is NCHW float32; B1 (C1) and B2 (C) are optional. The activations follow the fused ops' convention
(pdlite/operators/fused.py) with their own prefixes: `act1_type` with the activation's attributes as `act1_<name>`,
`act2_type` with `act2_<name>` ("" meaning none).
"""
from __future__ import annotations

from typing import Any

from pdlite.operators.registry import OPS, Shape, ShapeContext, register_op

ACT_KEYS = ("act1", "act2")


def se_activation(attrs: dict[str, Any], key: str) -> tuple[str, dict[str, Any]]:
    """(activation type, its attributes, defaults filled in) of `key` ("act1" or "act2") from the op's attributes."""
    act = str(attrs.get(f"{key}_type") or "")
    prefix = f"{key}_"
    own = {k[len(prefix):]: v for k, v in attrs.items() if k.startswith(prefix) and k != f"{key}_type"}
    opdef = OPS.get(act) if act else None
    return act, ({**opdef.defaults, **own} if opdef is not None else own)


@register_op("squeeze_excitation", inputs=["X", "W1", "W2"], optional_inputs=["B1", "B2"],
             defaults={"act1_type": "", "act2_type": ""})
def _squeeze_excitation_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X's shape (NCHW); W1 (C1, C, 1, 1), W2 (C, C1, 1, 1), B1 (C1), B2 (C)."""
    x, w1, w2 = ctx.shape("X"), ctx.shape("W1"), ctx.shape("W2")
    ctx.require(len(x) == 4, f"X must be NCHW (4-D), got shape {list(x)}")
    ctx.require(len(w1) == 4 and tuple(w1[2:]) == (1, 1) and w1[1] == x[1],
                f"W1 must be (C1, C={x[1]}, 1, 1), got {list(w1)}")
    c1 = w1[0]
    ctx.require(len(w2) == 4 and tuple(w2) == (x[1], c1, 1, 1), f"W2 must be ({x[1]}, {c1}, 1, 1), got {list(w2)}")
    for slot, n in (("B1", c1), ("B2", x[1])):
        if ctx.has(slot):
            b = ctx.shape(slot)
            ctx.require(len(b) == 1 and b[0] == n, f"{slot} must have shape [{n}], got {list(b)}")
    return {"Out": [tuple(x)]}
