"""Targets, precisions, layouts and places, mirroring paddlelite's enums."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class TargetType(enum.IntEnum):
    """Where kernels run (paddlelite's TargetType, same values): Host, X86, CUDA, NNAdapter (device subgraphs)."""

    Unk = 0
    Host = 1
    X86 = 2
    CUDA = 3
    ARM = 4
    OpenCL = 5
    Any = 6
    FPGA = 7
    NPU = 8
    XPU = 9
    BM = 10
    MLU = 11
    RKNPU = 12
    APU = 13
    HUAWEI_ASCEND_NPU = 14
    IMAGINATION_NNA = 15
    INTEL_FPGA = 16
    Metal = 17
    NNAdapter = 18


class PrecisionType(enum.IntEnum):
    """The element type a kernel computes in (paddlelite's PrecisionType, same values): FP32, FP16, INT8, ..."""

    Unk = 0
    FP32 = 1
    INT8 = 2
    INT32 = 3
    Any = 4
    FP16 = 5
    BOOL = 6
    INT64 = 7
    INT16 = 8
    UINT8 = 9
    FP64 = 10


class DataLayoutType(enum.IntEnum):
    """Tensor memory layouts (paddlelite's DataLayoutType, same values); pdlite's host kernels use NCHW."""

    Unk = 0
    NCHW = 1
    Any = 2
    NHWC = 3
    ImageDefault = 4
    ImageFolder = 5
    ImageNW = 6
    MetalTexture2DArray = 7
    MetalTexture2D = 8


class PowerMode(enum.IntEnum):
    """paddlelite's CPU power modes (big / little cores); accepted and reported, pdlite does not bind cores."""

    LITE_POWER_HIGH = 0
    LITE_POWER_LOW = 1
    LITE_POWER_FULL = 2
    LITE_POWER_NO_BIND = 3
    LITE_POWER_RAND_HIGH = 4
    LITE_POWER_RAND_LOW = 5


@dataclass(frozen=True, init=False)
class Place:
    """Where and how a kernel runs: (target, precision, layout), and paddlelite's device index.

    Built as paddlelite's `Place(target, precision=FP32, layout=NCHW, device=0)`; the keyword
    `percision` (paddlelite's spelling) is accepted too.
    """

    target: TargetType = TargetType.Host
    precision: PrecisionType = PrecisionType.FP32
    layout: DataLayoutType = DataLayoutType.NCHW
    device: int = 0

    def __init__(self, target: TargetType | int = TargetType.Host, precision: PrecisionType | int = PrecisionType.FP32,
                 layout: DataLayoutType | int = DataLayoutType.NCHW, device: int = 0, *,
                 percision: PrecisionType | int | None = None) -> None:
        if percision is not None:
            precision = percision
        object.__setattr__(self, "target", TargetType(target))
        object.__setattr__(self, "precision", PrecisionType(precision))
        object.__setattr__(self, "layout", DataLayoutType(layout))
        object.__setattr__(self, "device", int(device))

    def is_valid(self) -> bool:
        """paddlelite's Place.is_valid: target, precision and layout are all known."""
        return (self.target != TargetType.Unk and self.precision != PrecisionType.Unk
                and self.layout != DataLayoutType.Unk)

    def __repr__(self) -> str:
        dev = f", device={self.device}" if self.device else ""
        return f"Place({self.target.name}, {self.precision.name}, {self.layout.name}{dev})"


HOST = TargetType.Host
X86 = TargetType.X86
ANY_TARGET = TargetType.Any
FP32 = PrecisionType.FP32
ANY_PRECISION = PrecisionType.Any
NCHW = DataLayoutType.NCHW
ANY_LAYOUT = DataLayoutType.Any

_PRECISION_OF_DTYPE = {
    np.dtype(np.float32): PrecisionType.FP32,
    np.dtype(np.float16): PrecisionType.FP16,
    np.dtype(np.float64): PrecisionType.FP64,
    np.dtype(np.int8): PrecisionType.INT8,
    np.dtype(np.uint8): PrecisionType.UINT8,
    np.dtype(np.int16): PrecisionType.INT16,
    np.dtype(np.int32): PrecisionType.INT32,
    np.dtype(np.int64): PrecisionType.INT64,
    np.dtype(np.bool_): PrecisionType.BOOL,
}


def precision_of_dtype(dtype: np.dtype) -> PrecisionType:
    """The PrecisionType matching a NumPy dtype (Unk when there is none)."""
    return _PRECISION_OF_DTYPE.get(np.dtype(dtype), PrecisionType.Unk)


# the targets with FP16 kernels: an fp16 request (Opt.enable_fp16, set_opencl_precision) puts an FP16 place
# before each of their FP32 places
FP16_TARGETS = (TargetType.CUDA, TargetType.OpenCL)


def with_fp16_places(places: list[Place], targets: tuple[TargetType, ...] = FP16_TARGETS) -> list[Place]:
    """`places` with Place(t, FP16, layout) put before each FP32 place of a target in `targets` (no duplicates)."""
    out: list[Place] = []
    for p in places:
        if p.target in targets and p.precision == PrecisionType.FP32:
            out.append(Place(p.target, PrecisionType.FP16, p.layout, p.device))
        out.append(p)
    return list(dict.fromkeys(out))


def register_target(name: str, value: int | None = None) -> TargetType:
    """Add a target to TargetType (for plugins): `TargetType.<name>` then exists like a built-in one.

    Returns the existing member when `name` is already a target. Values of new targets start at 100.
    """
    if name in TargetType.__members__:
        return TargetType[name]
    if not name.isidentifier():
        raise ValueError(f"target name {name!r} must be a Python identifier")
    if value is None:
        value = max(100, max(int(t) for t in TargetType) + 1)
    if value in TargetType._value2member_map_:
        raise ValueError(f"target value {value} is taken by {TargetType(value).name}")
    member = int.__new__(TargetType, value)
    member._name_ = name
    member._value_ = value
    member.__objclass__ = TargetType  # type: ignore[attr-defined]
    TargetType._member_map_[name] = member
    TargetType._value2member_map_[value] = member
    TargetType._member_names_.append(name)
    type.__setattr__(TargetType, name, member)
    return member
