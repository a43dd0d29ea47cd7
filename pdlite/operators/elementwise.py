"""Binary elementwise ops with Paddle's legacy `axis` broadcasting.

Paddle aligns the lower-rank operand to the higher-rank one starting at dimension `axis`
(axis < 0 counts as |rank(X) - rank(Y)| + axis + 1, so -1 means NumPy's right alignment);
the aligned shapes then broadcast like NumPy (a dimension of 1 stretches). Trailing size-1
dims of the smaller operand that would overflow the larger one are trimmed, as Paddle's
CPU kernels do. (PIR's add, subtract, ... are mapped onto these ops with axis -1 by the PIR front end.)
"""
from __future__ import annotations

from collections.abc import Sequence

from pdlite.operators.registry import Shape, ShapeContext, register_op

BINARY_OPS = (
    "elementwise_add",
    "elementwise_sub",
    "elementwise_mul",
    "elementwise_div",
    "elementwise_max",
    "elementwise_min",
    "elementwise_pow",
    "elementwise_floordiv",
    "elementwise_mod",
)


class BroadcastError(ValueError):
    """Two shapes that Paddle's elementwise broadcasting rejects."""


def aligned_shapes(x: Sequence[int], y: Sequence[int], axis: int = -1) -> tuple[Shape, Shape, Shape]:
    """(x', y', out): X and Y padded with 1s to a common rank per Paddle's `axis` rule, and the result shape."""
    x, y = tuple(int(d) for d in x), tuple(int(d) for d in y)
    if x == y:
        return x, y, x
    big, small = (x, y) if len(x) >= len(y) else (y, x)
    nb, ns = len(big), len(small)
    ax = nb - ns if axis == -1 or nb == ns else (nb - ns + axis + 1 if axis < 0 else axis)
    if ax < 0 or ax > nb:
        raise BroadcastError(f"axis {axis} is out of range for shapes {list(x)} and {list(y)}")
    if ax + ns > nb:
        # Paddle trims trailing singular dims of the smaller operand before aligning it.
        while small and small[-1] == 1 and ax + len(small) > nb:
            small = small[:-1]
        if ax + len(small) > nb:
            raise BroadcastError(
                f"shape {list(small)} does not fit into {list(big)} starting at axis {axis}"
            )
    padded = (1,) * ax + small + (1,) * (nb - ax - len(small))
    out = []
    for i, (a, b) in enumerate(zip(big, padded)):
        if a != b and a != 1 and b != 1:
            raise BroadcastError(
                f"shapes {list(x)} and {list(y)} (axis={axis}) do not broadcast: dim {i} is {a} vs {b}"
            )
        out.append(b if a == 1 else a)
    xs, ys = (big, padded) if len(x) >= len(y) else (padded, big)
    return xs, ys, tuple(out)


def _binary_shape(ctx: ShapeContext) -> dict[str, list[Shape]]:
    """Out: X and Y broadcast per Paddle's `axis` rule."""
    try:
        _, _, out = aligned_shapes(ctx.shape("X"), ctx.shape("Y"), int(ctx.attrs.get("axis", -1)))
    except BroadcastError as e:
        ctx.fail(str(e))
    return {"Out": [out]}


for _t in BINARY_OPS:
    register_op(_t, inputs=["X", "Y"], outputs=["Out"], defaults={"axis": -1})(_binary_shape)
