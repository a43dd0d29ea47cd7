"""Paddle's LoDTensor serialization (the `.pdiparams` / `__params__` / per-variable files).

One tensor on disk, all integers little-endian:

    uint32  version (0)
    uint64  lod_level
    per level: uint64 byte size n, then n / 8 uint64 offsets
    uint32  tensor version (0)
    int32   byte size of the TensorDesc protobuf that follows
    bytes   TensorDesc {data_type, dims}
    bytes   raw data, numel * itemsize bytes (numel = prod(dims), 1 for dims [])

bfloat16 tensors are held as uint16 bit patterns and FP8 ones as uint8 (NumPy has
neither type); `LoDTensor.var_type` says what the bits mean.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError

from pdlite.core.dtypes import VarType, numpy_dtype, var_type_of
from pdlite.errors import ModelFormatError
from pdlite.model_parser import framework_proto as fp

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")

# Sanity limits: beyond these a header is taken to be corrupt rather than a real tensor.
MAX_LOD_LEVEL = 64
MAX_RANK = 32

# Data types Paddle can write whose bits NumPy holds in a same-width integer type.
_EXTRA_STORAGE = {VarType.FP8_E4M3FN: np.dtype(np.uint8), VarType.FP8_E5M2: np.dtype(np.uint8)}


def storage_dtype(vt: int, where: str = "") -> np.dtype:
    """NumPy dtype that holds tensors of data type `vt` (uint16 for BF16, uint8 for FP8)."""
    if vt in _EXTRA_STORAGE:
        return _EXTRA_STORAGE[VarType(vt)]
    return numpy_dtype(vt, where)


@dataclass(eq=False)
class LoDTensor:
    """A tensor as Paddle stores it: data, level-of-detail offsets, and its Paddle data type."""

    array: np.ndarray
    lod: list[list[int]] = field(default_factory=list)
    var_type: VarType | None = None  # None: derived from array.dtype (uint16 -> BF16)

    def __post_init__(self) -> None:
        self.array = np.asarray(self.array)
        if not self.array.dtype.isnative:
            self.array = self.array.astype(self.array.dtype.newbyteorder("="))
        if self.var_type is None:
            self.var_type = var_type_of(self.array.dtype)
        else:
            self.var_type = VarType(self.var_type)
            want = storage_dtype(self.var_type)
            if self.array.dtype != want:
                raise ModelFormatError(
                    f"LoDTensor of type {self.var_type.name} needs a {want} array, got {self.array.dtype}"
                )
        self.lod = [[int(x) for x in level] for level in self.lod]

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoDTensor):
            return NotImplemented
        return (
            self.var_type == other.var_type
            and self.lod == other.lod
            and self.array.shape == other.array.shape
            and self.array.tobytes() == other.array.tobytes()
        )


def _fail(source: str, name: str, what: str) -> ModelFormatError:
    return ModelFormatError(f"{source}: variable {name!r}: {what}")


def read_lod_tensor(
    buf: bytes | bytearray | memoryview, offset: int, source: str, name: str, copy: bool = True
) -> tuple[LoDTensor, int]:
    """Read one serialized LoDTensor at `offset` of `buf`; returns it and the offset just past it.

    `source` (file name) and `name` (variable) only label errors. With copy=False the array
    is a view into `buf` (read-only if `buf` is, possibly unaligned); otherwise one copy is made.
    """
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    end = len(mv)
    pos = offset
    if not 0 <= offset <= end:
        raise _fail(source, name, f"offset {offset} is outside the {end}-byte buffer")

    def take(n: int, what: str) -> int:
        nonlocal pos
        if n < 0 or pos + n > end:
            raise _fail(source, name, f"truncated: {what} needs {n} bytes at offset {pos}, {end - pos} left")
        start = pos
        pos += n
        return start

    (version,) = _U32.unpack_from(mv, take(4, "version"))
    if version != 0:
        raise _fail(source, name, f"unsupported LoDTensor version {version} at offset {offset} (expected 0)")
    (lod_level,) = _U64.unpack_from(mv, take(8, "lod_level"))
    if lod_level > MAX_LOD_LEVEL:
        raise _fail(source, name, f"absurd lod_level {lod_level} (at most {MAX_LOD_LEVEL} expected)")
    lod: list[list[int]] = []
    for level in range(lod_level):
        (size,) = _U64.unpack_from(mv, take(8, f"LoD level {level} size"))
        if size % 8:
            raise _fail(source, name, f"LoD level {level} byte size {size} is not a multiple of 8")
        start = take(size, f"LoD level {level}")
        lod.append(np.frombuffer(mv, dtype="<u8", count=size // 8, offset=start).tolist())
    (tversion,) = _U32.unpack_from(mv, take(4, "tensor version"))
    if tversion != 0:
        raise _fail(source, name, f"unsupported tensor version {tversion} (expected 0)")
    (desc_size,) = _I32.unpack_from(mv, take(4, "TensorDesc size"))
    if desc_size < 0:
        raise _fail(source, name, f"negative TensorDesc size {desc_size}")
    dstart = take(desc_size, "TensorDesc")
    desc = fp.TensorDesc()
    try:
        desc.ParseFromString(bytes(mv[dstart : dstart + desc_size]))
    except (DecodeError, ValueError, RuntimeError) as e:
        raise _fail(source, name, f"corrupt TensorDesc at offset {dstart}: {e}") from None
    if not desc.IsInitialized():
        raise _fail(source, name, f"corrupt TensorDesc at offset {dstart}: no (known) data_type")
    dt = storage_dtype(desc.data_type, f"{source}: variable {name!r}")
    dims = list(desc.dims)
    if len(dims) > MAX_RANK or any(d < 0 for d in dims) or math.prod(d for d in dims if d) * dt.itemsize >= 2**62:
        raise _fail(source, name, f"invalid dims {dims} in TensorDesc")
    numel = math.prod(dims)
    nbytes = numel * dt.itemsize
    if nbytes > end - pos:
        raise _fail(
            source, name,
            f"truncated data: dims {dims} x {dt.itemsize} bytes = {nbytes} bytes at offset {pos}, "
            f"only {end - pos} left",
        )  # fmt: skip
    arr = np.frombuffer(mv, dtype=dt.newbyteorder("<"), count=numel, offset=pos).reshape(dims)
    pos += nbytes
    if copy or not arr.dtype.isnative:
        arr = arr.astype(dt, copy=True)
    return LoDTensor(arr, lod, VarType(desc.data_type)), pos


def lod_tensor_chunks(t: LoDTensor) -> list[bytes | memoryview]:
    """The serialized form of `t` as a list of byte chunks (the data chunk is not copied when possible)."""
    dt = storage_dtype(t.var_type)
    arr = t.array
    if arr.dtype != dt:
        raise ModelFormatError(f"LoDTensor of type {t.var_type.name} holds a {arr.dtype} array, expected {dt}")
    arr = np.asarray(arr, dtype=dt.newbyteorder("<"), order="C")  # keeps 0-D arrays 0-D
    desc = fp.TensorDesc(data_type=int(t.var_type), dims=list(arr.shape)).SerializeToString()
    head = [_U32.pack(0), _U64.pack(len(t.lod))]
    for level in t.lod:
        head.append(_U64.pack(8 * len(level)))
        head.append(np.asarray(level, dtype="<u8").tobytes())
    head += [_U32.pack(0), _I32.pack(len(desc)), desc]
    return [b"".join(head), memoryview(arr.reshape(-1).view(np.uint8))]


def write_lod_tensor(t: LoDTensor) -> bytes:
    """Serialize `t` exactly as Paddle does."""
    return b"".join(lod_tensor_chunks(t))
