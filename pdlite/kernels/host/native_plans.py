"""Bound native calls of the elementwise, fc, softmax and layer-norm host kernels for one input shape.

The conv and pool kernels keep their plans in native.py (`*_plan`); these serve the kernels whose `bind`
(pdlite/kernels/registry.py: the runtime's steady path, pdlite/runtime/steady.py) returns one: the arguments that
follow from the shapes and the output's allocation are fixed once, so a call is the native entry alone. Each makes
the call native.py's wrapper makes (the same entry, the same arguments: the same bits). Inputs are C-contiguous
float32 arrays of the bound shapes (the kernels bind only such, and the steady path keys on shapes and strides).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pdlite.kernels.host import native

Plan2 = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _ext() -> Any:
    ext = native._ext  # the extension these plans call, as native.py's wrappers do
    assert ext is not None
    return ext


def add_act_plan(shape: tuple[int, ...], act: native.Act) -> Plan2:
    """(x, y) -> native.add_act(x, y, act) for arrays of `shape`."""
    fn, alloc, size, (code, params) = _ext().add_act, native.allocator(shape), int(np.prod(shape)), act

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, y, out, size, code, params)
        return out

    return run


def mul_gates_plan(x: np.ndarray, y: np.ndarray) -> Plan2 | None:
    """(x, y) -> x * y as native.mul_gates_or_none computes it for arrays shaped as x and y (None where
    native.gate_operands does not apply)."""
    ops = native.gate_operands(x, y)
    if ops is None:
        return None
    swap = ops[0] is y
    big, small = ops
    fn, alloc, dims = _ext().mul_rows, native.allocator(big.shape), (small.size, big.size // small.size)
    if swap:
        def run_yx(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            out = alloc()
            fn(y, x, out, dims)
            return out

        return run_yx

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, y, out, dims)
        return out

    return run


def fc_plan(form: str, m: int, k: int, n: int, w: np.ndarray, bias: np.ndarray | None,
            act: native.Act) -> Callable[[np.ndarray], np.ndarray]:
    """x (m, k) -> act(x @ W + bias) (m, n) by native.packed_gemv ("gemv"), packed_fc ("packed"; w packed by
    pack_fc_weights for both) or fc_gemm ("gemm", w the (k, n) matrix)."""
    ext = _ext()
    code, params = act
    if form == "gemm":
        gemm, gemm_dims, gemm_alloc = ext.conv_gemm, (1, 1, m, k, n), native.allocator((m, n))

        def run_gemm(x: np.ndarray) -> np.ndarray:
            out = gemm_alloc()
            gemm(x, w, bias, out, gemm_dims, code, params, None, True)
            return out

        return run_gemm
    fn = ext.packed_gemv if form == "gemv" else ext.packed_fc
    alloc = partial(np.empty, (m, n), native.F32) if form == "gemv" else native.allocator((m, n))
    dims = (m, k, n)

    def run(x: np.ndarray) -> np.ndarray:
        out = alloc()
        fn(x, w, bias, out, dims, code, params)
        return out

    return run


def softmax_plan(shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """x -> native.softmax(x) for x of `shape` (over the last axis)."""
    fn, alloc, cols = _ext().softmax, native.allocator(shape), shape[-1]
    dims = (int(np.prod(shape)) // max(cols, 1), cols)

    def run(x: np.ndarray) -> np.ndarray:
        y = alloc()
        fn(x, y, dims)
        return y

    return run


def layer_norm_plan(rows: int, cols: int, scale: np.ndarray | None, bias: np.ndarray | None, eps: float,
                    stats: bool) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]:
    """x2 (rows, cols) -> native.layer_norm(x2, scale, bias, eps, stats): (y, mean, variance)."""
    fn, alloc, dims, eps = _ext().layer_norm, native.allocator((rows, cols)), (rows, cols), float(eps)
    if not stats:
        def run_y(x2: np.ndarray) -> tuple[np.ndarray, None, None]:
            y = alloc()
            fn(x2, scale, bias, y, None, None, dims, eps)
            return y, None, None

        return run_y
    f32 = native.F32

    def run(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        y = alloc()
        mean, var = np.empty(rows, dtype=f32), np.empty(rows, dtype=f32)
        fn(x2, scale, bias, y, mean, var, dims, eps)
        return y, mean, var

    return run
