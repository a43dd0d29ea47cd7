"""LoDTensor (de)serialization: byte layout, every dtype, LoD levels, validation of corrupt input."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdlite.core.dtypes import VarType
from pdlite.errors import ModelFormatError
from pdlite.model_parser import LoDTensor, read_lod_tensor, write_lod_tensor
from pdlite.model_parser.lod_tensor import lod_tensor_chunks

DTYPES = {
    VarType.FP32: np.float32, VarType.FP64: np.float64, VarType.FP16: np.float16, VarType.BF16: np.uint16,
    VarType.INT8: np.int8, VarType.UINT8: np.uint8, VarType.INT16: np.int16, VarType.INT32: np.int32,
    VarType.INT64: np.int64, VarType.BOOL: np.bool_, VarType.COMPLEX64: np.complex64,
    VarType.COMPLEX128: np.complex128, VarType.FP8_E4M3FN: np.uint8, VarType.FP8_E5M2: np.uint8,
}  # fmt: skip


def _expected_bytes(arr: np.ndarray, vt: int, lod: list[list[int]]) -> bytes:
    """The format written out by hand, independent of the code under test."""
    out = struct.pack("<IQ", 0, len(lod))
    for level in lod:
        out += struct.pack("<Q", 8 * len(level)) + struct.pack(f"<{len(level)}Q", *level)
    desc = bytes([0x08, vt])  # data_type (field 1, varint; all types < 128)
    for d in arr.shape:  # dims (field 2, varint, unpacked); small non-negative dims fit one byte
        desc += bytes([0x10, d])
    out += struct.pack("<Ii", 0, len(desc)) + desc
    return out + arr.astype(arr.dtype.newbyteorder("<")).tobytes()


@pytest.mark.parametrize("vt", list(DTYPES), ids=lambda v: v.name)
@pytest.mark.parametrize("lod", [[], [[0, 2, 3]], [[0, 1, 2], [0, 1, 3, 6]]], ids=["lod0", "lod1", "lod2"])
def test_every_dtype_round_trips_byte_exact(vt, lod):
    rng = np.random.default_rng(int(vt))
    raw = rng.integers(0, 256, size=2 * 3 * np.dtype(DTYPES[vt]).itemsize, dtype=np.uint8)
    if vt == VarType.BOOL:
        raw = raw % 2
    arr = raw.view(DTYPES[vt]).reshape(2, 3)
    t = LoDTensor(arr, lod, vt)
    data = write_lod_tensor(t)
    assert data == _expected_bytes(arr, int(vt), lod)
    back, end = read_lod_tensor(data, 0, "f.pdiparams", "v")
    assert end == len(data)
    assert back.var_type == vt and back.lod == lod and back.array.dtype == DTYPES[vt]
    assert back.array.shape == (2, 3) and back.array.tobytes() == arr.tobytes()
    assert write_lod_tensor(back) == data


def test_matches_paddle_serialization():
    """Paddle's own serializer writes the same bytes for every dtype, with LoD."""
    paddle = pytest.importorskip("paddle")
    core = paddle.base.core
    for vt, dt in DTYPES.items():
        if vt in (VarType.FP8_E4M3FN, VarType.FP8_E5M2):
            continue  # numpy cannot hand paddle an fp8 array
        arr = (np.arange(12).reshape(3, 4) % 5).astype(dt)
        t = core.DenseTensor()
        t.set(arr, paddle.CPUPlace())
        t.set_lod([[0, 1, 3]])
        ref = core.save_dense_tensor_to_memory(t)
        assert write_lod_tensor(LoDTensor(arr, [[0, 1, 3]], vt)) == ref, vt.name
        back, _ = read_lod_tensor(ref, 0, "paddle", "t")
        assert back.var_type == vt and np.array_equal(back.array, arr) and back.lod == [[0, 1, 3]]


_SHAPES = st.lists(st.integers(0, 5), min_size=0, max_size=4)
_LODS = st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=5), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(DTYPES)), _SHAPES, _LODS, st.binary(max_size=7), st.binary(max_size=7), st.data())
def test_round_trip_hypothesis(vt, shape, lod, before, after, data):
    dt = np.dtype(DTYPES[vt])
    n = int(np.prod(shape)) * dt.itemsize
    raw = data.draw(st.binary(min_size=n, max_size=n))
    arr = np.frombuffer(raw, dtype=np.uint8).view(dt).reshape(shape)
    if vt == VarType.BOOL:
        arr = arr.view(np.uint8) % 2 == 1
    blob = write_lod_tensor(LoDTensor(arr, lod, vt))
    buf = before + blob + after  # at an offset, with bytes after it
    t, end = read_lod_tensor(buf, len(before), "f", "v")
    assert end == len(before) + len(blob)
    assert (t.var_type, t.lod, list(t.array.shape)) == (vt, lod, shape)
    assert t.array.tobytes() == arr.tobytes() and t.array.dtype == dt
    assert write_lod_tensor(t) == blob


def test_bf16_and_dtype_checks():
    bits = np.array([0x3F80, 0xC000, 0x7FC0], dtype=np.uint16)  # 1.0, -2.0, nan as bfloat16
    t = LoDTensor(bits)
    assert t.var_type == VarType.BF16
    back, _ = read_lod_tensor(write_lod_tensor(t), 0, "f", "v")
    assert back.var_type == VarType.BF16 and back.array.dtype == np.uint16 and back.array.tolist() == bits.tolist()
    as_f32 = (back.array.astype(np.uint32) << 16).view(np.float32)
    assert as_f32[:2].tolist() == [1.0, -2.0] and np.isnan(as_f32[2])
    with pytest.raises(ModelFormatError, match="BF16 needs a uint16 array"):
        LoDTensor(np.zeros(3, np.float32), [], VarType.BF16)
    with pytest.raises(ModelFormatError, match="no Paddle data type"):
        LoDTensor(np.zeros(3, np.uint32))
    assert LoDTensor(np.zeros(3, np.float32)) == LoDTensor(np.zeros(3, np.float32), [], VarType.FP32)
    assert LoDTensor(np.zeros(3, np.float32)) != LoDTensor(np.zeros(3, np.float32), [[0, 3]])


def test_copy_and_view():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = bytearray(write_lod_tensor(LoDTensor(arr)))
    owned, _ = read_lod_tensor(data, 0, "f", "v")
    view, _ = read_lod_tensor(data, 0, "f", "v", copy=False)
    assert owned.array.flags.owndata and owned.array.flags.writeable
    assert np.shares_memory(view.array, np.frombuffer(data, np.uint8))
    data[-4:] = np.float32(9).tobytes()
    assert view.array[1, 2] == 9 and owned.array[1, 2] == 5
    ro, _ = read_lod_tensor(bytes(data), 0, "f", "v", copy=False)
    assert not ro.array.flags.writeable
    mv, _ = read_lod_tensor(memoryview(bytes(data)), 0, "f", "v")
    assert mv.array[1, 2] == 9


def test_non_contiguous_and_big_endian_arrays_are_written_little_endian():
    arr = np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]
    t = LoDTensor(arr)
    assert t.var_type == VarType.INT32 and t.array.dtype.isnative
    data = write_lod_tensor(t)
    assert data == _expected_bytes(np.ascontiguousarray(arr.astype("<i4")), int(VarType.INT32), [])
    back, _ = read_lod_tensor(data, 0, "f", "v")
    assert back.array.tolist() == arr.tolist()
    assert b"".join(lod_tensor_chunks(LoDTensor(arr))) == data


def _valid() -> bytes:
    return write_lod_tensor(LoDTensor(np.arange(6, dtype=np.float32).reshape(2, 3), [[0, 1, 2]]))


def _patch(offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(_valid())
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


# offsets in _valid(): 0 version, 4 lod_level, 12 level size, 20..44 offsets, 44 tensor version, 48 desc size
@pytest.mark.parametrize(
    "data, message",
    [
        (_patch(0, "<I", 1), "unsupported LoDTensor version 1"),
        (_patch(4, "<Q", 2**40), "absurd lod_level"),
        (_patch(12, "<Q", 2**62), "truncated: LoD level 0 needs"),
        (_patch(12, "<Q", 7), "not a multiple of 8"),
        (_patch(44, "<I", 3), "unsupported tensor version 3"),
        (_patch(48, "<i", -5), "negative TensorDesc size"),
        (_patch(48, "<i", 2**30), "truncated: TensorDesc needs"),
        (_patch(52, "<B", 0xFF), "corrupt TensorDesc"),
        (_patch(53, "<B", 99), "corrupt TensorDesc"),  # data_type 99: unknown enum value
        (_patch(53, "<B", 7), "non-tensor data type"),  # data_type LOD_TENSOR
        (_patch(55, "<B", 100), r"truncated data: dims \[100, 3\]"),
        (_valid()[:-1], r"truncated data: dims \[2, 3\] x 4 bytes = 24 bytes at offset 58, only 23 left"),
        (_valid()[:3], "truncated: version needs 4 bytes"),
        (_valid()[:30], "truncated: LoD level 0 needs 24 bytes"),
        (b"", "truncated: version"),
    ],
)
def test_corrupt_tensors_raise_model_format_error(data, message):
    with pytest.raises(ModelFormatError, match=message) as e:
        read_lod_tensor(data, 0, "dir/inference.pdiparams", "conv1.w_0")
    assert "dir/inference.pdiparams" in str(e.value) and "conv1.w_0" in str(e.value)


@pytest.mark.parametrize("dims, message", [([-1, 2], r"invalid dims \[-1, 2\]"), ([1] * 33, "invalid dims")])
def test_bad_dims_rejected(dims, message):
    from pdlite.model_parser import framework_proto as fp

    desc = fp.TensorDesc(data_type=5, dims=dims).SerializeToString()
    data = struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + b"\0" * 64
    with pytest.raises(ModelFormatError, match=message):
        read_lod_tensor(data, 0, "f", "v")


def test_offset_outside_buffer():
    with pytest.raises(ModelFormatError, match="offset -1 is outside the 3-byte buffer"):
        read_lod_tensor(b"abc", -1, "f", "v")
    with pytest.raises(ModelFormatError, match="truncated: version needs 4 bytes at offset 3, 0 left"):
        read_lod_tensor(b"abc", 3, "f", "v")


def test_empty_and_zero_d_tensors():
    for arr in (np.zeros((0, 3), np.float32), np.float64(2.5).reshape(()), np.zeros((2, 0), np.int8)):
        data = write_lod_tensor(LoDTensor(arr))
        back, end = read_lod_tensor(data, 0, "f", "v")
        assert end == len(data) and back.array.shape == arr.shape and back.array.tobytes() == arr.tobytes()
