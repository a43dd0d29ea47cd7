"""Paddle's VarType data types and their NumPy equivalents; reading a (device) tensor value on the host."""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

from pdlite.errors import ModelFormatError


class VarType(enum.IntEnum):
    """framework.proto VarType.Type: tensor dtypes and variable kinds."""

    BOOL = 0
    INT16 = 1
    INT32 = 2
    INT64 = 3
    FP16 = 4
    FP32 = 5
    FP64 = 6
    LOD_TENSOR = 7
    SELECTED_ROWS = 8
    FEED_MINIBATCH = 9
    FETCH_LIST = 10
    STEP_SCOPES = 11
    LOD_RANK_TABLE = 12
    LOD_TENSOR_ARRAY = 13
    PLACE_LIST = 14
    READER = 15
    RAW = 17
    TUPLE = 18
    SIZE_T = 19
    UINT8 = 20
    INT8 = 21
    BF16 = 22
    COMPLEX64 = 23
    COMPLEX128 = 24
    STRING = 25
    STRINGS = 26
    VOCAB = 27
    FEED_LIST = 28
    PSTRING = 29
    SPARSE_COO = 30
    SPARSE_CSR = 31
    FP8_E4M3FN = 32
    FP8_E5M2 = 33


# bfloat16 has no NumPy dtype: it is held as uint16 bit patterns.
BF16_STORAGE = np.dtype(np.uint16)

_NP_OF_VARTYPE = {
    VarType.BOOL: np.dtype(np.bool_),
    VarType.INT16: np.dtype(np.int16),
    VarType.INT32: np.dtype(np.int32),
    VarType.INT64: np.dtype(np.int64),
    VarType.FP16: np.dtype(np.float16),
    VarType.FP32: np.dtype(np.float32),
    VarType.FP64: np.dtype(np.float64),
    VarType.UINT8: np.dtype(np.uint8),
    VarType.INT8: np.dtype(np.int8),
    VarType.BF16: BF16_STORAGE,
    VarType.COMPLEX64: np.dtype(np.complex64),
    VarType.COMPLEX128: np.dtype(np.complex128),
}
_VARTYPE_OF_NP = {v: k for k, v in _NP_OF_VARTYPE.items() if k != VarType.BF16}


def numpy_dtype(vt: int, where: str = "") -> np.dtype:
    """NumPy dtype of a tensor VarType; raises ModelFormatError naming `where` if unknown."""
    try:
        return _NP_OF_VARTYPE[VarType(vt)]
    except (ValueError, KeyError):
        raise ModelFormatError(
            f"{where + ': ' if where else ''}unknown or non-tensor data type {vt!r}; expected one of "
            + ", ".join(t.name for t in _NP_OF_VARTYPE)
        ) from None


def var_type_of(dtype: np.dtype) -> VarType:
    """VarType of a NumPy dtype (uint16 is taken as bfloat16 storage)."""
    dt = np.dtype(dtype)
    if dt == BF16_STORAGE:
        return VarType.BF16
    try:
        return _VARTYPE_OF_NP[dt]
    except KeyError:
        raise ModelFormatError(f"dtype {dt} has no Paddle data type") from None


def host_array(v: Any) -> np.ndarray:
    """A host NumPy array of a tensor value: NumPy as it is; a device tensor (torch's, or a pyopencl array of the
    OpenCL target) copied back; anything else through np.asarray. The one place device values are read on the host
    (shape inference of value-dependent ops, host-side kernels)."""
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach"):  # torch
        return v.detach().cpu().numpy()
    if hasattr(v, "get") and hasattr(v, "queue"):  # pyopencl.array.Array
        return v.get()
    return np.asarray(v)
