"""Host kernels of the tensor-array ops and select_input / select_output (pdlite/operators/control_flow.py).

A tensor array is a Python list of NumPy arrays. The kernels never change a list they were given:
write_to_array returns a new one, so every SSA version of an array var stays what it was.
The kernels of `while` and `conditional_block` run sub-blocks and live in pdlite/optimizer/control_flow.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, TargetType
from pdlite.errors import InputError
from pdlite.kernels.registry import Kernel, TensorType, register_kernel

Ins = dict[str, list[Any]]
Outs = dict[str, list[Any]]
HOST_ANY = TensorType(TargetType.Host, ANY_PRECISION, ANY_LAYOUT)


def _any(op_type: str, *slots: str):
    return register_kernel(op_type, precision=ANY_PRECISION, layout=ANY_LAYOUT,
                           inputs={s: HOST_ANY for s in slots}, outputs={"Out": HOST_ANY, "OutIndex": HOST_ANY})


def _index(op: str, v: np.ndarray) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise InputError(f"op {op}: the index must hold one element, got shape {list(a.shape)}")
    return int(a.reshape(-1)[0])


def _array(op: str, v: Any) -> list:
    if not isinstance(v, list):
        raise InputError(f"op {op}: expected a tensor array (LOD_TENSOR_ARRAY), got {type(v).__name__}")
    return v


@_any("create_array")
class CreateArray(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [[]]}


@_any("write_to_array", "X", "I", "Array")
class WriteToArray(Kernel):
    def run(self, ins: Ins) -> Outs:
        arr = list(_array("write_to_array", ins["Array"][0])) if ins.get("Array") else []
        i = _index("write_to_array", ins["I"][0])
        if i < 0:
            raise InputError(f"op write_to_array: index {i} is negative")
        if i >= len(arr):
            arr.extend([None] * (i + 1 - len(arr)))
        arr[i] = ins["X"][0]
        return {"Out": [arr]}


@_any("read_from_array", "X", "I")
class ReadFromArray(Kernel):
    def run(self, ins: Ins) -> Outs:
        arr = _array("read_from_array", ins["X"][0])
        i = _index("read_from_array", ins["I"][0])
        if not 0 <= i < len(arr) or arr[i] is None:
            raise InputError(f"op read_from_array: index {i} is out of the array's range (length {len(arr)})")
        return {"Out": [arr[i]]}


@_any("lod_array_length", "X")
class LodArrayLength(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.array([len(_array("lod_array_length", ins["X"][0]))], np.int64)]}


@_any("tensor_array_to_tensor", "X")
class TensorArrayToTensor(Kernel):
    def run(self, ins: Ins) -> Outs:
        arr = _array("tensor_array_to_tensor", ins["X"][0])
        if not arr or any(t is None for t in arr):
            raise InputError(f"op tensor_array_to_tensor: the array is empty or has unset elements (length {len(arr)})")
        axis = int(self.attrs["axis"])
        if self.attrs["use_stack"]:
            out = np.stack(arr, axis=axis)
            index = np.ones(len(arr), np.int32)
        else:
            out = np.concatenate(arr, axis=axis)
            ax = axis + arr[0].ndim if axis < 0 else axis
            index = np.array([t.shape[ax] for t in arr], np.int32)
        return {"Out": [out], "OutIndex": [index]}


@_any("select_input", "X", "Mask")
class SelectInput(Kernel):
    def run(self, ins: Ins) -> Outs:
        xs = ins["X"]
        m = _index("select_input", ins["Mask"][0])
        if not 0 <= m < len(xs):
            raise InputError(f"op select_input: Mask {m} is out of range for {len(xs)} inputs")
        return {"Out": [xs[m]]}


@register_kernel("select_output", precision=ANY_PRECISION, layout=ANY_LAYOUT,
                 inputs={"X": HOST_ANY, "Mask": HOST_ANY}, outputs={"Out": HOST_ANY})
class SelectOutput(Kernel):
    def run(self, ins: Ins) -> Outs:
        n = len(self.op.outputs.get("Out") or [])
        m = _index("select_output", ins["Mask"][0])
        if not 0 <= m < n:
            raise InputError(f"op select_output: Mask {m} is out of range for {n} outputs")
        # only the selected output is written; the others hold None (their branch does not run)
        return {"Out": [ins["X"][0] if i == m else None for i in range(n)]}
