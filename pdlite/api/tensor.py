"""paddlelite's Tensor handle: how inputs go in and outputs come out of a predictor."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.core.types import PrecisionType, TargetType, precision_of_dtype
from pdlite.errors import InputError


class Tensor:
    """An input or output of a predictor, by name. Holds a host NumPy array and an optional LoD."""

    def __init__(self, name: str, dtype: np.dtype | None = None, shape: Sequence[int] | None = None) -> None:
        self.name = name
        self._dtype = np.dtype(dtype) if dtype is not None else None
        self._shape: list[int] | None = list(shape) if shape is not None else None
        self._data: Any = None
        self._lod: list[list[int]] = []

    # -- data ---------------------------------------------------------------------------------
    def from_numpy(self, array: Any) -> None:
        """Set the data (copied into a C-contiguous NumPy array; torch tensors are accepted too)."""
        if hasattr(array, "detach") and hasattr(array, "device"):  # a torch tensor: keep it (zero-copy path)
            self._data = array
            self._shape = list(array.shape)
            return
        arr = np.ascontiguousarray(array)
        if arr.dtype == object:
            raise InputError(f"tensor {self.name!r}: cannot take an object array; give a numeric NumPy array")
        self._data = arr
        self._shape = list(arr.shape)

    def numpy(self) -> np.ndarray:
        if self._data is None:
            raise InputError(f"tensor {self.name!r} holds no data yet (set it with from_numpy, or run the predictor)")
        d = self._data
        if not isinstance(d, np.ndarray):
            d = d.detach().cpu().numpy() if hasattr(d, "detach") else np.asarray(d)
        return d

    def raw(self) -> Any:
        """The data as held (a NumPy array, or a device tensor on the zero-copy path)."""
        return self._data

    def _set(self, value: Any) -> None:
        self._data = value
        self._shape = list(value.shape)

    # -- metadata -----------------------------------------------------------------------------
    def resize(self, shape: Sequence[int]) -> None:
        """Declare the shape; data set later must match. Existing data of another size is dropped."""
        shape = [int(s) for s in shape]
        if self._data is not None and list(self._data.shape) != shape:
            self._data = None
        self._shape = shape

    def shape(self) -> list[int]:
        if self._data is not None:
            return list(self._data.shape)
        return list(self._shape or [])

    def set_lod(self, lod: Sequence[Sequence[int]]) -> None:
        self._lod = [list(map(int, level)) for level in lod]

    def lod(self) -> list[list[int]]:
        return [list(level) for level in self._lod]

    def precision(self) -> PrecisionType:
        if self._data is not None:
            return precision_of_dtype(np.dtype(str(self._data.dtype).replace("torch.", "")))
        return precision_of_dtype(self._dtype) if self._dtype is not None else PrecisionType.Unk

    def target(self) -> TargetType:
        d = self._data
        if d is not None and hasattr(d, "device") and getattr(d.device, "type", "cpu") == "cuda":
            return TargetType.CUDA
        return TargetType.Host

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape()}, precision={self.precision().name})"
