"""What every CUDA kernel shares: the torch device, dtypes, weights uploaded once, registration.

CUDA kernels are written on torch (cuDNN / cuBLAS underneath) and take and return torch
tensors on the kernel's device. The device is a kernel-context setting, the config option
`cuda_device` ("cuda", "cuda:1", or "cpu": the same kernels on torch's CPU, which is how CI
tests them without a GPU); without it, "cuda" when torch sees a GPU.

Slot conventions (declared tensor types, so that type_target_cast_pass inserts the copies):
- activations: the kernel's own type (CUDA, its precision, NCHW): io_copy / calib are inserted;
- WEIGHT slots (Filter, Bias, Scale, W, matmul's Y ...): any target and precision. A parameter
  arrives there as a host array and is uploaded once, in `prepare`, already in the kernel's
  precision; a device activation arrives as it is;
- HOST_ANY slots (shape tensors, StartsTensor ...): small int inputs read on the host.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.types import (
    ANY_PRECISION,
    DataLayoutType,
    PrecisionType,
    TargetType,
)
from pdlite.errors import ConfigError, MissingDependencyError
from pdlite.kernels.host_side import host_floats, host_ints  # noqa: F401  (the CUDA kernels' names for them)
from pdlite.kernels.registry import (  # noqa: F401  (slot types the CUDA kernels import from here)
    ANY_TENSOR,
    HOST_ANY,
    WEIGHT,
    Kernel,
    KernelContext,
    TensorType,
    device_any,
    precision_variants,
)

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError("the CUDA target runs its kernels on PyTorch, which is not installed: "
                      "pip install 'pdlite[torch]' (or use Host places only)") from e

CUDA = TargetType.CUDA
FP32, FP16 = PrecisionType.FP32, PrecisionType.FP16
FLOATS = (FP32, FP16)
NCHW = DataLayoutType.NCHW

DEV_ANY = device_any(CUDA)

TORCH_DTYPE = {FP32: torch.float32, FP16: torch.float16}


def torch_device(context: KernelContext) -> torch.device:
    """The device named by the `cuda_device` option (default: "cuda" when torch sees a GPU)."""
    name = context.option("cuda_device")
    if name is None:
        if not torch.cuda.is_available():
            raise ConfigError("CUDA places were given but torch sees no GPU; set_cuda_device('cpu') runs the "
                              "CUDA kernels on torch's CPU device")
        return torch.device("cuda", torch.cuda.current_device())
    try:
        dev = torch.device(str(name))
    except RuntimeError as e:
        raise ConfigError(f"cuda_device option {name!r} is not a torch device: {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"cuda_device {name!r}: torch sees no GPU (torch {torch.__version__})")
        if dev.index is None:  # tensors report their index: compare like with like
            dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def to_torch(a: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A host array (or a torch tensor) on `device`; floating data converted to `dtype` if given."""
    if isinstance(a, torch.Tensor):
        t = a.to(device)
    else:
        arr = np.asarray(a)
        if not arr.flags.writeable or not arr.flags.c_contiguous:
            arr = np.array(arr)  # torch.from_numpy wants writeable, contiguous memory
        t = torch.from_numpy(arr).to(device)
    if dtype is not None and t.is_floating_point() and t.dtype != dtype:
        t = t.to(dtype)
    return t


def to_numpy(v: Any) -> np.ndarray:
    """A host NumPy array of a tensor value (for shape tensors and other small host inputs)."""
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def use_tf32(on: bool) -> None:
    """Let cuDNN convolutions and cuBLAS matmuls use TF32 (`cuda_allow_tf32` option) or keep exact fp32.

    torch's flags are process-wide (and torch lets cuDNN use TF32 by default): FP32 places mean
    fp32 arithmetic, so a CUDA predictor sets them when it is prepared (see docs/cuda.md).
    """
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


class CudaKernel(Kernel):
    """Base of the CUDA kernels: `self.device`, `self.dtype`, and weights uploaded in `prepare`."""

    precision: PrecisionType = ANY_PRECISION  # set per registered variant

    _device: torch.device | None = None

    @property
    def device(self) -> torch.device:
        if self._device is None:
            self._device = torch_device(self.context)
        return self._device

    @property
    def dtype(self) -> torch.dtype | None:
        """The floating dtype the kernel computes in (None for precision-generic kernels)."""
        return TORCH_DTYPE.get(self.precision)

    def prepare(self, params: Mapping[str, Any]) -> None:
        if self.device.type == "cuda":
            use_tf32(bool(self.context.option("cuda_allow_tf32", False)))
        self._consts = {name: to_torch(v, self.device, self.dtype) for name, v in params.items()}
        self.prepare_weights()

    def prepare_weights(self) -> None:  # noqa: B027 - optional hook
        """Optional: transform the uploaded parameters (`self._consts`) once."""

    def const(self, slot: str, i: int = 0) -> torch.Tensor | None:
        """The uploaded parameter in `slot` (None when the slot holds no parameter)."""
        name = self.op.input(slot, i)
        return getattr(self, "_consts", {}).get(name) if name is not None else None

    def tensor(self, ins: dict[str, list[Any]], slot: str, i: int = 0) -> torch.Tensor | None:
        """Input `slot`[i] as a device tensor in the kernel's precision (None when absent).

        Parameters come from the copies made by `prepare`; other host values are uploaded now.
        """
        vals = ins.get(slot)
        if not vals or i >= len(vals):
            return None
        v = vals[i]
        if isinstance(v, torch.Tensor):
            dt = self.dtype
            if dt is not None and v.is_floating_point() and v.dtype != dt:
                v = v.to(dt)
            return v if v.device == self.device else v.to(self.device)
        c = self.const(slot, i)
        return c if c is not None else to_torch(v, self.device, self.dtype)


# @cuda_kernel(op_types, precisions=(FP32, FP16), layout=NCHW, alias=, inputs=, outputs=): a CudaKernel subclass on
# the CUDA target, one variant class per precision
cuda_kernel = precision_variants(CUDA, FLOATS)
