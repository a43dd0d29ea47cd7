"""OpenCL GEMM and the kernels on it: fc, matmul_v2, matmul, mul (and conv2d's 1x1 form, conv.py); lookup_table_v2.

`gemm` is one tiled kernel (16x16 tiles in local memory, float accumulation) computing, per batch b,
C[b] = act(alpha * A[b] @ B[b] + bias (+ residual)), where A and B are read through strides (so a
transposed operand is never copied) and the batch through per-operand batch strides (0 broadcasts a
matrix over the batch); batch dims that broadcast both ways are launched per batch with offsets.
fc: Input flattened at in_num_col_dims @ W [K, N] + Bias, then the activation. matmul_v2 / matmul:
numpy.matmul after the transposes (1-D operands as Paddle's), matmul's alpha. mul: X, Y flattened at
their num_col_dims. lookup_table_v2: rows of W gathered by the (host) Ids; padding_idx rows are zeros.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.opencl.base import HOST_ANY, WEIGHT, OpenCLKernel, act_args, add_source, opencl_kernel
from pdlite.operators.fused import split_activation
from pdlite.operators.math import matmul_v1_shapes, matmul_v2_shape, mul_shapes

TILE = 16
NO_ACT = act_args("", {})

add_source("matmul", r"""
/* C[b] = act(alpha * A[b] @ B[b] + bias + res[b]); bias_mode 1: per column n, 2: per row m */
__kernel void gemm(__global const T* A, __global const T* B, __global T* C, __global const T* bias,
                   __global const T* res, int M, int N, int K, int a_sm, int a_sk, int b_sk, int b_sn,
                   int a_off, int b_off, int c_off, int a_sb, int b_sb, int c_sb, float alpha, int bias_mode,
                   int has_res, int act, float a, float b, float c) {
    int n = get_global_id(0), m = get_global_id(1), bt = get_global_id(2);
    int ln = get_local_id(0), lm = get_local_id(1);
    __local float As[TS][TS + 1];
    __local float Bs[TS][TS + 1];
    int ao = a_off + bt * a_sb, bo = b_off + bt * b_sb, co = c_off + bt * c_sb;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int ka = k0 + ln, kb = k0 + lm;
        As[lm][ln] = (m < M && ka < K) ? LD(A, ao + m * a_sm + ka * a_sk) : 0.0f;
        Bs[lm][ln] = (n < N && kb < K) ? LD(B, bo + kb * b_sk + n * b_sn) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; ++kk) acc += As[lm][kk] * Bs[kk][ln];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N) {
        float v = acc * alpha;
        if (bias_mode == 1) v += LD(bias, n);
        else if (bias_mode == 2) v += LD(bias, m);
        if (has_res) v += LD(res, co + m * N + n);
        ST(C, co + m * N + n, act_fn(v, act, a, b, c));
    }
}
__kernel void embed(__global const long* ids, __global const T* w, __global T* out, int n, int d, int rows,
                    long pad) {
    int i = get_global_id(0);
    if (i >= n * d) return;
    long id = ids[i / d];
    float v = (id == pad || id < 0 || id >= rows) ? 0.0f : LD(w, id * d + i % d);
    ST(out, i, v);
}
""")


def gemm(k: OpenCLKernel, a: Any, b: Any, out: Any, m: int, n: int, kk: int, a_strides: tuple[int, int],
         b_strides: tuple[int, int], *, batch: int = 1, batch_strides: tuple[int, int, int] = (0, 0, 0),
         offsets: tuple[int, int, int] = (0, 0, 0), alpha: float = 1.0, bias: Any = None, bias_mode: int = 0,
         res: Any = None, act: tuple = NO_ACT) -> None:
    """out[b] = act(alpha * a[b] @ b[b] + bias + res[b]) with a[b][i, j] at a_off + b*sa + i*a_sm + j*a_sk."""
    if m == 0 or n == 0 or batch == 0:
        return
    dummy = k.dummy()
    k.launch("gemm", (n, m, batch), a, b, out, dummy if bias is None else bias, dummy if res is None else res,
             m, n, kk, *a_strides, *b_strides, *offsets, *batch_strides, alpha, bias_mode if bias is not None else 0,
             res is not None, *act, local=(TILE, TILE, 1))


def _batch_offsets(batch: Sequence[int], own: Sequence[int], size: int) -> np.ndarray:
    """Each broadcast batch index's element offset into an operand with batch dims `own` of `size` each."""
    own = (1,) * (len(batch) - len(own)) + tuple(own)
    idx = np.arange(int(np.prod(own)), dtype=np.int64).reshape(own)
    return np.broadcast_to(idx, tuple(batch)).reshape(-1) * size


def _linear(offs: np.ndarray) -> int | None:
    """The constant stride of `offs` (0 for all-equal), or None when it is not an arithmetic sequence."""
    if offs.size <= 1:
        return 0
    d = np.diff(offs)
    return int(d[0]) if offs[0] == 0 and np.all(d == d[0]) else None


def batched_matmul(k: OpenCLKernel, x: Any, y: Any, xm: Sequence[int], ym: Sequence[int], tx: bool, ty: bool,
                   out_shape: Sequence[int], alpha: float = 1.0) -> Any:
    """numpy.matmul of X (as the matrix-form shape xm) and Y (ym), each optionally transposed."""
    r1, c1 = xm[-2], xm[-1]
    r2, c2 = ym[-2], ym[-1]
    m, kk, a_st = (c1, r1, (1, c1)) if tx else (r1, c1, (c1, 1))
    n, b_st = (r2, (1, c2)) if ty else (c2, (c2, 1))
    batch = tuple(np.broadcast_shapes(tuple(xm[:-2]), tuple(ym[:-2])))
    nb = int(np.prod(batch)) if batch else 1
    out = k.empty(out_shape)
    xo, yo = _batch_offsets(batch, xm[:-2], r1 * c1), _batch_offsets(batch, ym[:-2], r2 * c2)
    sx, sy = _linear(xo), _linear(yo)
    if sx is not None and sy is not None:
        gemm(k, x, y, out, m, n, kk, a_st, b_st, batch=nb, batch_strides=(sx, sy, m * n), alpha=alpha)
    else:
        for i in range(nb):
            gemm(k, x, y, out, m, n, kk, a_st, b_st, offsets=(int(xo[i]), int(yo[i]), i * m * n), alpha=alpha)
    return out


@opencl_kernel("matmul_v2", inputs={"Y": WEIGHT})
class MatmulV2(OpenCLKernel):
    """Out = op(X) @ op(Y) with op a transpose of the last two axes when trans_x / trans_y."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = self.tensor(ins, "X"), self.tensor(ins, "Y")
        tx, ty = bool(self.attrs["trans_x"]), bool(self.attrs["trans_y"])
        out_shape = matmul_v2_shape(x.shape, y.shape, tx, ty)
        xm = (1, x.shape[0]) if x.ndim == 1 else x.shape
        ym = (y.shape[0], 1) if y.ndim == 1 else y.shape
        return {"Out": [batched_matmul(self, x, y, xm, ym, tx and x.ndim > 1, ty and y.ndim > 1, out_shape)]}


@opencl_kernel("matmul", inputs={"Y": WEIGHT})
class Matmul(OpenCLKernel):
    """Out = alpha * op(X) @ op(Y) (legacy matmul, transpose_X / transpose_Y)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = self.tensor(ins, "X"), self.tensor(ins, "Y")
        tx, ty = bool(self.attrs["transpose_X"]), bool(self.attrs["transpose_Y"])
        xm, ym, out_shape = matmul_v1_shapes(x.shape, y.shape, tx, ty)
        return {"Out": [batched_matmul(self, x, y, xm, ym, tx, ty, out_shape, float(self.attrs["alpha"]))]}


@opencl_kernel("mul", inputs={"Y": WEIGHT})
class Mul(OpenCLKernel):
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims)."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, y = self.tensor(ins, "X"), self.tensor(ins, "Y")
        xm, ym, out_shape = mul_shapes(x.shape, y.shape, int(self.attrs["x_num_col_dims"]),
                                       int(self.attrs["y_num_col_dims"]))
        return {"Out": [batched_matmul(self, x, y, xm, ym, False, False, out_shape)]}


@opencl_kernel("fc", inputs={"W": WEIGHT, "Bias": WEIGHT})
class FC(OpenCLKernel):
    """Out = act(Input.reshape(M, K) @ W + Bias).reshape(Input.shape[:k] + [N])."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w, bias = self.tensor(ins, "Input"), self.tensor(ins, "W"), self.tensor(ins, "Bias")
        kdim, n = w.shape
        lead = tuple(x.shape[: int(self.attrs["in_num_col_dims"])])
        m = int(np.prod(lead)) if lead else 1
        out = self.empty((*lead, n))
        act = act_args(*split_activation(dict(self.attrs), "activation_type"))
        gemm(self, x, w, out, m, n, kdim, (kdim, 1), (n, 1), bias=bias, bias_mode=1, act=act)
        return {"Out": [out]}


@opencl_kernel("lookup_table_v2", inputs={"Ids": HOST_ANY, "W": WEIGHT})
class LookupTableV2(OpenCLKernel):
    """Out[..., :] = W[Ids[...], :]; rows whose id is padding_idx are zeros."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        ids = np.asarray(ins["Ids"][0]).astype(np.int64)
        w = self.tensor(ins, "W")
        rows, d = w.shape
        if ids.size and (ids.min() < 0 or ids.max() >= rows):
            raise KernelError(f"lookup_table_v2: Ids hold {int(ids.min())}..{int(ids.max())} but W has {rows} rows")
        out = self.empty((*ids.shape, d))
        if out.size:
            self.launch("embed", out.size, self.dev.upload(ids), w, out, ids.size, d, rows,
                        np.int64(self.attrs["padding_idx"]), local=(64,))
        return {"Out": [out]}
