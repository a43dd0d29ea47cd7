"""OpenCL kernels of the binary elementwise ops (and their fused activations), with Paddle's `axis` broadcasting.

X and Y are aligned by the op definition's rule (`aligned_shapes`); each output element reads X and
Y through strides over the output's dims (0 along a broadcast dim), given to the kernel as a small
int buffer made once per pair of shapes. Same-shape operands skip the index arithmetic. The result
keeps X's dtype; arithmetic is in float (floordiv floors, mod takes the divisor's sign, as on the
host). Int32/int64 operands (shape arithmetic) run on the host (pdlite/kernels/host_side.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.opencl.base import OpenCLKernel, act_args, add_source, opencl_kernel
from pdlite.operators.elementwise import BroadcastError, aligned_shapes
from pdlite.operators.fused import FUSED_ELEMENTWISE, split_activation

MAX_RANK = 8
OP_CODES = {"elementwise_add": 0, "elementwise_sub": 1, "elementwise_mul": 2, "elementwise_div": 3,
            "elementwise_max": 4, "elementwise_min": 5, "elementwise_pow": 6, "elementwise_floordiv": 7,
            "elementwise_mod": 8}

add_source("elementwise", r"""
float binary_fn(float u, float v, int op) {
    switch (op) {
    case 0: return u + v;
    case 1: return u - v;
    case 2: return u * v;
    case 3: return u / v;
    case 4: return fmax(u, v);
    case 5: return fmin(u, v);
    case 6: return pow(u, v);
    case 7: return floor(u / v);
    default: { float r = fmod(u, v); return (r != 0.0f && ((r < 0.0f) != (v < 0.0f))) ? r + v : r; }
    }
}
/* meta: out dims [MAX_RANK], x strides [MAX_RANK], y strides [MAX_RANK]; rank 0: same shapes */
__kernel void binary(__global const T* x, __global const T* y, __global T* out, int n, int op,
                     __global const int* meta, int rank, int act, float a, float b, float c) {
    int i = get_global_id(0);
    if (i >= n) return;
    int xi = i, yi = i;
    if (rank > 0) {
        int r = i;
        xi = 0; yi = 0;
        for (int d = rank - 1; d >= 0; --d) {
            int q = r % meta[d];
            r /= meta[d];
            xi += q * meta[MAX_RANK + d];
            yi += q * meta[2 * MAX_RANK + d];
        }
    }
    ST(out, i, act_fn(binary_fn(LD(x, xi), LD(y, yi), op), act, a, b, c));
}
""")


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def broadcast_meta(xs: tuple[int, ...], ys: tuple[int, ...], out: tuple[int, ...]) -> np.ndarray:
    """The int32 [out dims, x strides, y strides] table (each MAX_RANK long) of aligned shapes."""
    if len(out) > MAX_RANK:
        raise KernelError(f"OpenCL elementwise: rank {len(out)} is over {MAX_RANK}")
    meta = np.zeros(3 * MAX_RANK, np.int32)
    meta[: len(out)] = out
    for k, s in ((1, xs), (2, ys)):
        st = contiguous_strides(s)
        meta[k * MAX_RANK: k * MAX_RANK + len(s)] = [0 if d == 1 and o != 1 else t for d, o, t in zip(s, out, st)]
    return meta


class Elementwise(OpenCLKernel):
    """Out = act(X <op> Y) (the op of the kernel's op type; act for the fused ops)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = self.tensor(ins, "X"), self.tensor(ins, "Y")
        base = FUSED_ELEMENTWISE.get(self.op.type, self.op.type)
        act = act_args(*split_activation(dict(self.attrs))) if base != self.op.type else act_args("", {})
        key = (x.shape, y.shape)
        cache = self.__dict__.setdefault("_meta", {})
        if key not in cache:
            try:
                xs, ys, out = aligned_shapes(x.shape, y.shape, int(self.attrs["axis"]))
            except BroadcastError as e:
                raise KernelError(f"{self.op.type}: {e}") from None
            same = xs == ys == out
            cache[key] = (out, 0 if same else len(out), self.dev.upload(broadcast_meta(xs, ys, out)))
        out_shape, rank, meta = cache[key]
        out = self.empty(out_shape)
        if out.size:
            self.launch("binary", out.size, x, y, out, out.size, OP_CODES[base], meta, rank, *act, local=(64,))
        return {"Out": [out]}


opencl_kernel([*OP_CODES, *FUSED_ELEMENTWISE])(Elementwise)  # int operands: host side (tensor.py)
