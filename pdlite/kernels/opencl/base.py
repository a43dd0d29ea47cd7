"""What every OpenCL kernel shares: the device, the program, launches, weights uploaded once, registration.

OpenCL kernels take and return `pyopencl.array.Array`s on the kernel's device (buffers stay there
between kernels); `type_target_cast_pass` puts `io_copy` ops where a host kernel sits between
them. Each float kernel is registered twice, FP32 and FP16 (one variant class per precision). The
OpenCL C sources of every module are registered here (`add_source`) and built as one program per
(device, precision): FP32 stores and computes in float; FP16 stores in half (`vload_half` /
`vstore_half_rte`, core OpenCL, so every device has it, `cl_khr_fp16` or not) and computes in float.

Slot conventions (declared tensor types, as on the CUDA target):
- activations: the kernel's own type (OpenCL, its precision, NCHW): io_copy / calib are inserted;
- WEIGHT slots (Filter, Bias, Scale, W, matmul's Y ...): any target and precision. A parameter
  arrives there as a host array and is uploaded once, in `prepare`, in the kernel's precision; a
  device activation arrives as it is;
- HOST_ANY slots (shape tensors, StartsTensor ...): small int inputs read on the host.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.types import ANY_PRECISION, DataLayoutType, PrecisionType, TargetType
from pdlite.errors import KernelError
from pdlite.kernels.opencl.device import ClDevice, cla, get_device
from pdlite.kernels.registry import (  # noqa: F401  (slot types the OpenCL kernels import from here)
    ANY_TENSOR,
    HOST_ANY,
    WEIGHT,
    Kernel,
    device_any,
    precision_variants,
)

OPENCL = TargetType.OpenCL
FP32, FP16 = PrecisionType.FP32, PrecisionType.FP16
FLOATS = (FP32, FP16)
NCHW = DataLayoutType.NCHW

DEV_ANY = device_any(OPENCL)

NP_DTYPE = {FP32: np.dtype(np.float32), FP16: np.dtype(np.float16)}

# The common header: storage type T with LD / ST (float arithmetic), and the activations by code.
HEADER = r"""
#if T_HALF
typedef half T;
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half_rte((v), (i), (p))
#else
typedef float T;
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))
#endif

float softplus_(float x, float beta, float threshold) {
    return x * beta > threshold ? x : log1p(exp(x * beta)) / beta;
}

/* act codes: see ACT_CODES in base.py */
float act_fn(float x, int act, float a, float b, float c) {
    switch (act) {
    case 1: return fmax(x, 0.0f);
    case 2: return fmin(fmax(x, 0.0f), a);
    case 3: return x > 0.0f ? x : x * a;
    case 4: return fmin(fmax(x + a, 0.0f), b) * x / c;
    case 5: return fmin(fmax(x * a + b, 0.0f), 1.0f);
    case 6: return x / (1.0f + exp(-a * x));
    case 7: return x / (1.0f + exp(-x));
    case 8: return 1.0f / (1.0f + exp(-x));
    case 9: return tanh(x);
    case 10: return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    case 11: return 0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case 12: return x > 0.0f ? x : a * (exp(x) - 1.0f);
    case 13: return x * tanh(softplus_(x, 1.0f, a));
    case 14: return softplus_(x, a, b);
    default: return x;
    }
}

#define MAX_RANK 8
#define TS 16 /* GEMM tile (matmul.TILE) */
"""

# activation -> (code, attribute names giving the kernel's a, b, c)
ACT_CODES: dict[str, tuple[int, tuple[str, ...]]] = {
    "relu": (1, ()), "relu6": (2, ("threshold",)), "leaky_relu": (3, ("alpha",)),
    "hard_swish": (4, ("offset", "threshold", "scale")), "hard_sigmoid": (5, ("slope", "offset")),
    "swish": (6, ("beta",)), "silu": (7, ()), "sigmoid": (8, ()), "tanh": (9, ()), "gelu": (10, ()),
    "elu": (12, ("alpha",)), "mish": (13, ("threshold",)), "softplus": (14, ("beta", "threshold")),
}

_SOURCES: dict[str, str] = {}


def add_source(name: str, source: str) -> None:
    """Register a module's OpenCL C source; all are built together, after HEADER, per device and precision."""
    _SOURCES[name] = source


_SOURCE_CACHE: dict[tuple[str, ...], str] = {}


def program_source() -> str:
    """HEADER and every registered source, in name order (the same string object while nothing is added)."""
    names = tuple(sorted(_SOURCES))
    src = _SOURCE_CACHE.get(names)
    if src is None:
        src = _SOURCE_CACHE[names] = HEADER + "\n".join(_SOURCES[k] for k in names)
    return src


def act_args(act: str, attrs: Mapping[str, Any]) -> tuple[np.int32, np.float32, np.float32, np.float32]:
    """The (code, a, b, c) kernel arguments of an activation with its attributes ("" gives none)."""
    if not act:
        return np.int32(0), np.float32(0), np.float32(0), np.float32(1)
    if act not in ACT_CODES:
        raise KernelError(f"OpenCL kernels have no activation {act!r} (have {sorted(ACT_CODES)})")
    code, names = ACT_CODES[act]
    if act == "gelu" and attrs["approximate"]:
        code = 11
    vals = [float(attrs[n]) for n in names] + [0.0] * (3 - len(names))
    return np.int32(code), np.float32(vals[0]), np.float32(vals[1]), np.float32(vals[2])


def _arg(v: Any) -> Any:
    if isinstance(v, cla.Array):
        return v.data  # (kernels make no offset views: reshapes of whole arrays only)
    if isinstance(v, (bool, np.bool_)):
        return np.int32(v)
    if isinstance(v, (int, np.integer)) and not isinstance(v, (np.int32, np.int64, np.uint32)):
        return np.int32(v)
    if isinstance(v, (float, np.floating)) and not isinstance(v, np.float32):
        return np.float32(v)
    return v


def global_size(n: int, local: int = 64) -> int:
    return max(local, (int(n) + local - 1) // local * local)


class OpenCLKernel(Kernel):
    """Base of the OpenCL kernels: `self.dev`, `self.dtype`, weights uploaded in `prepare`, `launch`."""

    precision: PrecisionType = ANY_PRECISION  # set per registered variant
    any_dtype = False  # data-movement kernels (views, copies) take tensors of any dtype; the others float ones

    _dev: ClDevice | None = None

    @property
    def dev(self) -> ClDevice:
        if self._dev is None:
            self._dev = get_device(self.context.option("opencl_device"))
        return self._dev

    @property
    def dtype(self) -> np.dtype:
        """The storage dtype of the kernel's float tensors (float32 for precision-generic kernels)."""
        return NP_DTYPE.get(self.precision, np.dtype(np.float32))

    def program(self, precision: PrecisionType | None = None) -> Any:
        """The program of every registered source, built for this device and precision (FP16: half storage)."""
        half = (precision or self.precision) == FP16
        return self.dev.program(program_source(), f"-DT_HALF={int(half)}", self.context.option("opencl_cache_dir"))

    def launch(self, name: str, gsize: int | Sequence[int], *args: Any, local: Sequence[int] | None = None,
               precision: PrecisionType | None = None) -> None:
        """Enqueue kernel `name` over `gsize` work items (rounded up to `local`; kernels check their bounds)."""
        gs = (gsize,) if isinstance(gsize, int) else tuple(gsize)
        if local is None:
            lc: tuple[int, ...] | None = None
            gs = tuple(max(1, int(g)) for g in gs)
        else:
            lc = tuple(local)
            gs = tuple(global_size(g, loc) for g, loc in zip(gs, lc))
        self.dev.launch(self.program(precision), name, gs, lc, [_arg(a) for a in args])

    def empty(self, shape: Sequence[int], dtype: Any = None) -> Any:
        return self.dev.empty(tuple(shape), self.dtype if dtype is None else dtype)

    def upload(self, a: Any, dtype: Any = None) -> Any:
        """A host array on the device; floating data converted to `dtype` (default: the kernel's), ints as they are."""
        arr = np.asarray(a)
        if arr.dtype.kind == "f":
            arr = arr.astype(self.dtype if dtype is None else dtype, copy=False)
        return self.dev.upload(arr)

    def dummy(self) -> Any:
        """A one-element buffer for an absent optional input (kernels are told by a flag)."""
        d = self.__dict__.get("_dummy")
        if d is None:
            d = self.__dict__["_dummy"] = self.dev.upload(np.zeros(1, self.dtype))
        return d

    def prepare(self, params: Mapping[str, Any]) -> None:
        """Upload the parameters once, floats in the kernel's precision (`const` / `tensor` hand them out)."""
        self._consts = {name: self.upload(v) for name, v in params.items()}

    def const(self, slot: str, i: int = 0) -> Any:
        name = self.op.input(slot, i)
        return getattr(self, "_consts", {}).get(name) if name is not None else None

    def tensor(self, ins: dict[str, list[Any]], slot: str, i: int = 0) -> Any:
        """Input `slot`[i] as a device array in the kernel's storage dtype (None when absent)."""
        vals = ins.get(slot)
        if not vals or i >= len(vals):
            return None
        v = vals[i]
        if not self.any_dtype and np.dtype(v.dtype).kind != "f":
            raise KernelError(f"{self.op.type}: input {slot} is {v.dtype}; the OpenCL kernel computes on float "
                              "tensors (int ones are shape arithmetic, run on the host)")
        if isinstance(v, cla.Array):
            if v.dtype.kind == "f" and v.dtype != self.dtype:
                raise KernelError(f"{self.op.type}: input {slot} is {v.dtype} on the device but the "
                                  f"{self.precision.name} kernel stores {self.dtype} (a calib op is missing)")
            return v
        c = self.const(slot, i)
        return c if c is not None else self.upload(v)


# @opencl_kernel(op_types, precisions=(FP32, FP16), layout=NCHW, alias=, inputs=, outputs=): an OpenCLKernel
# subclass on the OpenCL target, one variant class per precision
opencl_kernel = precision_variants(OPENCL, FLOATS)
