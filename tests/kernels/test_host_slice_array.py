"""slice of a tensor array (a Python list at run time), from Paddle's SliceArrayKernel / SliceArrayDenseKernel
(paddle/phi/kernels/array_kernel.cc): start = starts[0], plus the array's length when negative, then at least
0; with decrease_axis Out is a copy of the element at start, else the sub-array [start, end) with end =
ends[0] (plus the length when negative, at most the length) greater than start. Legacy programs hold it as
`slice` on a LOD_TENSOR_ARRAY (Paddle 3 exports PaddleDetection's RPN so; PIR: pd_op.slice_array_dense)."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import KernelError
from pdlite.operators.registry import OPS, ShapeContext
from tests.kernels._util import kernel_class, make_op

ARR = [np.full((2, 3), k, np.float32) for k in range(4)]


def _slice(starts: list[int], ends: list[int], decrease: list[int], ins_extra: dict | None = None):
    attrs = {"axes": [0], "starts": starts, "ends": ends, "decrease_axis": decrease, "infer_flags": [1]}
    op = make_op("slice", {"Input": ARR[0]}, attrs)
    ins = {"Input": [ARR], **(ins_extra or {})}
    assert OPS["slice"].infer_shape(ShapeContext(op, ins)) == {}, "an array's slice has no inferred shape"
    return kernel_class("slice")(op).run(ins)["Out"][0]


@pytest.mark.parametrize("start, want", [(0, 0), (2, 2), (-1, 3), (-4, 0), (-9, 0)])
def test_element_at_start(start: int, want: int) -> None:
    out = _slice([start], [start + 1], [0])
    assert isinstance(out, np.ndarray) and out.shape == (2, 3) and np.all(out == want)
    assert out is not ARR[want], "a copy, as Paddle's phi::Copy"


def test_start_from_a_tensor() -> None:
    out = _slice([0], [1], [0], {"StartsTensor": [np.array([-2], np.int64)]})
    assert np.all(out == 2)


@pytest.mark.parametrize("start, end, want", [(1, 3, [1, 2]), (-3, -1, [1, 2]), (2, 99, [2, 3]), (-9, 1, [0])])
def test_sub_array(start: int, end: int, want: list[int]) -> None:
    out = _slice([start], [end], [])
    assert isinstance(out, list) and [int(a[0, 0]) for a in out] == want


@pytest.mark.parametrize("starts, ends, decrease", [([4], [5], [0]), ([2], [2], []), ([3], [-2], [])])
def test_out_of_range_is_refused(starts: list[int], ends: list[int], decrease: list[int]) -> None:
    with pytest.raises(KernelError, match="tensor array of 4"):
        _slice(starts, ends, decrease)
