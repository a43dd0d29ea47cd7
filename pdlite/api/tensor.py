"""paddlelite's Tensor handle: how inputs go in and outputs come out of a predictor.

Copy semantics are the originals': `from_numpy` (and the `set_*_data` setters) copy the
caller's data, so changing the array afterwards does not change the next run; `numpy()` (and
the `*_data` getters) return a new array, which a later run does not overwrite. The zero-copy
opt-in is a torch tensor given to `from_numpy` (kept as it is, for the CUDA target; see
docs/cuda.md), or `share_external_data` on the paddle.inference handle.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.core.types import PrecisionType, TargetType, precision_of_dtype
from pdlite.errors import InputError

# paddlelite's typed setters/getters: set_<name>_data(list) / <name>_data() -> list
TYPED_DATA = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64, "float": np.float32}


def _is_torch(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "device")


class _State:
    """One thread's view of a tensor: its data, declared shape and LoD."""

    __slots__ = ("data", "shape", "lod")

    def __init__(self, shape: list[int] | None) -> None:
        self.data: Any = None
        self.shape = shape
        self.lod: list[list[int]] = []


class Tensor:
    """An input or output of a predictor, by name. Holds a host NumPy array and an optional LoD.

    The data is kept per thread: threads sharing one predictor each see the inputs they set and
    the outputs of their own runs (a thread that set nothing sees the latest data of any thread,
    so a predictor made in one thread can be used from another).
    """

    def __init__(self, name: str, dtype: np.dtype | None = None, shape: Sequence[int] | None = None) -> None:
        self.name = name
        self._dtype = np.dtype(dtype) if dtype is not None else None
        self._declared: list[int] | None = list(shape) if shape is not None else None
        self._local = threading.local()
        self._latest = _State(self._declared)

    def _st(self) -> _State:
        """This thread's state for reading (the latest of any thread when this one has none)."""
        st = getattr(self._local, "st", None)
        return st if st is not None else self._latest

    def _wst(self) -> _State:
        """This thread's state for writing (made on first write)."""
        st = getattr(self._local, "st", None)
        if st is None:
            st = self._local.st = _State(list(self._declared) if self._declared is not None else None)
        self._latest = st
        return st

    @property
    def _data(self) -> Any:
        return self._st().data

    @property
    def _shape(self) -> list[int] | None:
        return self._st().shape

    # -- data ---------------------------------------------------------------------------------
    def from_numpy(self, array: Any, place: TargetType | int = TargetType.Host) -> None:
        """Set the data: a copy of `array` (C-contiguous). A torch tensor is kept as it is (zero-copy)."""
        if _is_torch(array):
            self._set(array)
            return
        arr = np.array(array, order="C", copy=True)
        if arr.dtype == object:
            raise InputError(f"tensor {self.name!r}: cannot take an object array; give a numeric NumPy array")
        self._set(arr)

    def share_data(self, array: np.ndarray) -> None:
        """Zero-copy opt-in: use `array` itself (the caller must not change it until the run is over)."""
        if not isinstance(array, np.ndarray) or array.dtype == object:
            raise InputError(f"tensor {self.name!r}: share_data takes a numeric NumPy array, "
                             f"got {type(array).__name__}")
        self._set(np.asarray(array, order="C"))

    def numpy(self) -> np.ndarray:
        """A new NumPy array holding the data (a later run does not change it)."""
        d = self._require()
        if isinstance(d, np.ndarray):
            return d.copy()
        if _is_torch(d):
            return d.detach().cpu().numpy().copy()
        return np.array(d)

    def raw(self) -> Any:
        """The data as held (a NumPy array, or a device tensor on the zero-copy path); not a copy."""
        return self._data

    def _require(self) -> Any:
        if self._data is None:
            raise InputError(f"tensor {self.name!r} holds no data yet (set it with from_numpy, or run the predictor)")
        return self._data

    def _set(self, value: Any) -> None:
        st = self._wst()
        st.data = value
        st.shape = list(value.shape)

    # -- paddlelite's typed list setters and getters (set_float_data / float_data, ...) -------
    def _set_typed(self, data: Any, dtype: type, kind: str) -> None:
        arr: np.ndarray = np.asarray(data, dtype=dtype).reshape(-1)
        shape = self._shape if self._shape else [arr.size]
        if any(d < 0 for d in shape):
            raise InputError(f"tensor {self.name!r}: set_{kind}_data: the shape {shape} has free dims; "
                             "call resize(shape) first")
        if int(np.prod(shape)) != arr.size:
            raise InputError(f"tensor {self.name!r}: set_{kind}_data got {arr.size} values but the tensor's shape "
                             f"is {shape} ({int(np.prod(shape))} values); call resize(shape) first")
        self._set(arr.reshape(shape).copy())

    def _get_typed(self, dtype: type) -> list[Any]:
        return np.asarray(self.numpy(), dtype=dtype).reshape(-1).tolist()

    def set_int8_data(self, data: Any, type: TargetType | int = TargetType.Host) -> None:  # noqa: A002
        """Set the data from a flat sequence of int8 values, in the shape given by resize (or 1-D)."""
        self._set_typed(data, np.int8, "int8")

    def set_uint8_data(self, data: Any, type: TargetType | int = TargetType.Host) -> None:  # noqa: A002
        """Set the data from a flat sequence of uint8 values, in the shape given by resize (or 1-D)."""
        self._set_typed(data, np.uint8, "uint8")

    def set_int32_data(self, data: Any, type: TargetType | int = TargetType.Host) -> None:  # noqa: A002
        """Set the data from a flat sequence of int32 values, in the shape given by resize (or 1-D)."""
        self._set_typed(data, np.int32, "int32")

    def set_int64_data(self, data: Any, type: TargetType | int = TargetType.Host) -> None:  # noqa: A002
        """Set the data from a flat sequence of int64 values, in the shape given by resize (or 1-D)."""
        self._set_typed(data, np.int64, "int64")

    def set_float_data(self, data: Any, type: TargetType | int = TargetType.Host) -> None:  # noqa: A002
        """Set the data from a flat sequence of floats (float32), in the shape given by resize (or 1-D); `type` is
        paddlelite's target argument, ignored."""
        self._set_typed(data, np.float32, "float")

    def int8_data(self) -> list[int]:
        """The data as a flat list of int8 values."""
        return self._get_typed(np.int8)

    def uint8_data(self) -> list[int]:
        """The data as a flat list of uint8 values."""
        return self._get_typed(np.uint8)

    def int32_data(self) -> list[int]:
        """The data as a flat list of int32 values."""
        return self._get_typed(np.int32)

    def int64_data(self) -> list[int]:
        """The data as a flat list of int64 values."""
        return self._get_typed(np.int64)

    def float_data(self) -> list[float]:
        """The data as a flat list of floats (float32), as paddlelite's float_data()."""
        return self._get_typed(np.float32)

    # -- metadata -----------------------------------------------------------------------------
    def resize(self, shape: Sequence[int]) -> None:
        """Declare the shape; data set later must match. Existing data of another size is dropped."""
        shape = [int(s) for s in shape]
        st = self._wst()
        if st.data is not None and list(st.data.shape) != shape:
            st.data = None
        st.shape = shape

    def shape(self) -> list[int]:
        """The shape of the data (or, before any data, the shape given by resize; [] when neither)."""
        st = self._st()
        if st.data is not None:
            return list(st.data.shape)
        return list(st.shape or [])

    def set_lod(self, lod: Sequence[Sequence[int]]) -> None:
        """Set the level-of-detail offsets (one list of offsets per level)."""
        self._wst().lod = [list(map(int, level)) for level in lod]

    def lod(self) -> list[list[int]]:
        """The level-of-detail offsets (one list per level; [] for a plain tensor)."""
        return [list(level) for level in self._st().lod]

    def dtype(self) -> np.dtype | None:
        """The NumPy dtype of the data (or the model's declared one before data is set)."""
        d = self._data
        if d is not None:
            return np.dtype(str(d.dtype).replace("torch.", ""))
        return self._dtype

    def precision(self) -> PrecisionType:
        """The precision of the data's dtype (PrecisionType.FP32, ...; Unk before any data or declared dtype)."""
        dt = self.dtype()
        return precision_of_dtype(dt) if dt is not None else PrecisionType.Unk

    def target(self) -> TargetType:
        """Where the data lives: TargetType.CUDA for a torch CUDA tensor (the CUDA target's outputs), else
        TargetType.Host."""
        d = self._data
        if d is not None and _is_torch(d) and getattr(d.device, "type", "cpu") == "cuda":
            return TargetType.CUDA
        return TargetType.Host

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape()}, precision={self.precision().name})"
