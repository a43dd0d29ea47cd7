"""The OpenCL runtime under the kernels: pyopencl, the device, its queue, and the program cache.

- `pyopencl` is an optional dependency (`pip install 'pdlite[opencl]'`) and needs an OpenCL driver
  (an ICD: a GPU vendor's, or PoCL's CPU device, `apt install pocl-opencl-icd`); importing this
  module without pyopencl, or choosing a device where no platform is installed, is a clear error.
- The device is a kernel-context setting, the config option `opencl_device`: "P:D" (platform and
  device index, as `pdlite doctor` lists them), "D" (device D of the first platform that has one),
  or a case-insensitive part of a device's name; without it, the first GPU, else the first device.
- One `ClDevice` (context, in-order queue, memory pool) per device, shared by every kernel.
- Programs are built once per (device, source, build options) in the process, and their binaries
  are kept on disk (option `opencl_cache_dir`, else `$XDG_CACHE_HOME/pdlite/opencl`, else
  `~/.cache/pdlite/opencl`), keyed by a hash of the source, the options and the device's name,
  driver and platform versions; a later process loads the binary instead of compiling.
"""
from __future__ import annotations

import hashlib
import math
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, KernelError, MissingDependencyError

INSTALL_HINT = ("pip install 'pdlite[opencl]' and an OpenCL driver (ICD): your GPU vendor's, or PoCL's CPU device "
                "(apt install pocl-opencl-icd)")

try:
    import pyopencl as cl
    import pyopencl.array as cla
    import pyopencl.tools as cltools
except ImportError as e:  # pragma: no cover - exercised only without pyopencl
    raise MissingDependencyError(f"the OpenCL target runs its kernels through pyopencl, which is missing: "
                                 f"{INSTALL_HINT} (or use Host places only)") from e


def platforms() -> list[Any]:
    """The installed OpenCL platforms ([] when the ICD loader finds none)."""
    try:
        return list(cl.get_platforms())
    except cl.Error:  # PLATFORM_NOT_FOUND_KHR: no ICD installed
        return []


def _devices(p: Any) -> list[Any]:
    try:
        return list(p.get_devices())
    except cl.Error:
        return []


def find_device(spec: str | None) -> tuple[int, int, Any]:
    """(platform index, device index, pyopencl device) named by the `opencl_device` option."""
    found = [(pi, di, d) for pi, p in enumerate(platforms()) for di, d in enumerate(_devices(p))]
    if not found:
        raise ConfigError(f"OpenCL places were given but no OpenCL platform/device is installed: {INSTALL_HINT}")
    if spec is None or str(spec) == "":
        gpus = [f for f in found if f[2].type & cl.device_type.GPU]
        return (gpus or found)[0]
    s = str(spec).strip()
    parts = s.split(":")
    if all(x.isdigit() for x in parts) and len(parts) in (1, 2):
        if len(parts) == 1:
            for f in found:
                if f[1] == int(parts[0]):
                    return f
        else:
            for f in found:
                if (f[0], f[1]) == (int(parts[0]), int(parts[1])):
                    return f
    else:
        for f in found:
            if s.lower() in f[2].name.lower():
                return f
    have = "; ".join(f"{pi}:{di} {d.name}" for pi, di, d in found)
    raise ConfigError(f"opencl_device option {spec!r} names no OpenCL device (give 'P:D', 'D' or part of a "
                      f"device name); installed: {have}")


def cache_dir(option: str | None = None) -> Path:
    """Where program binaries are kept: the option, $XDG_CACHE_HOME/pdlite/opencl or ~/.cache/pdlite/opencl."""
    if option:
        return Path(option)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pdlite" / "opencl"


@dataclass
class ClDevice:
    """One OpenCL device with its context, in-order queue, memory pool and built programs."""

    device: Any
    index: tuple[int, int]
    context: Any = None
    queue: Any = None
    allocator: Any = None
    programs: dict[tuple[str, str], Any] = field(default_factory=dict)
    kernels: dict[tuple[int, str], Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)
        self.allocator = cltools.MemoryPool(cltools.ImmediateAllocator(self.queue))

    @property
    def name(self) -> str:
        return str(self.device.name).strip()

    def fingerprint(self) -> str:
        d = self.device
        return f"{d.name}|{d.driver_version}|{d.version}|{d.platform.name}|{d.platform.version}|{cl.VERSION_TEXT}"

    def program(self, source: str, options: str = "", cache: str | None = None) -> Any:
        """The built program of `source` with `options` (built once per process; binary cached on disk)."""
        prog = self.programs.get((source, options))
        if prog is not None:
            return prog
        with self.lock:
            prog = self.programs.get((source, options))
            if prog is None:
                key = hashlib.sha256(f"{self.fingerprint()}\n{options}\n{source}".encode()).hexdigest()
                prog = self.programs[(source, options)] = self._build(key, source, options, cache)
        return prog

    def launch(self, program: Any, name: str, gsize: tuple[int, ...], lsize: tuple[int, ...] | None,
               args: list[Any]) -> None:
        """Enqueue `name` of `program` (kernel objects made once; arguments set and enqueued under the lock,
        so that predictors on several threads can share the device)."""
        key = (id(program), name)
        with self.lock:
            entry = self.kernels.get(key)
            if entry is None:
                kern = cl.Kernel(program, name)
                wg = int(kern.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device))
                entry = self.kernels[key] = (kern, wg)
            kern, wg = entry
            if lsize is not None and math.prod(lsize) > wg:
                lsize = self._fit(name, gsize, lsize, wg)
            kern(self.queue, gsize, lsize, *args)

    def _fit(self, name: str, gsize: tuple[int, ...], lsize: tuple[int, ...], wg: int) -> tuple[int, ...]:
        """A 1-D work-group shrunk to the kernel's limit on this device (a power of two: it divides the global
        size, a multiple of 64); tiled kernels need their whole tile."""
        if len(lsize) == 1:
            return (1 << (min(wg, lsize[0]).bit_length() - 1),)
        raise KernelError(f"OpenCL kernel {name!r} needs work-groups of {math.prod(lsize)} items {list(lsize)} but "
                          f"{self.name} allows {wg} for it")

    def _build(self, key: str, source: str, options: str, cache: str | None) -> Any:
        path = cache_dir(cache) / f"{key}.bin"
        opts = options.split()
        if path.is_file():
            try:
                return cl.Program(self.context, [self.device], [path.read_bytes()]).build(opts)
            except cl.Error:  # a stale or foreign binary: rebuild from source
                pass
        prog = cl.Program(self.context, source).build(opts, cache_dir=False)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(prog.get_info(cl.program_info.BINARIES)[0])
            tmp.replace(path)
        except OSError as e:
            warnings.warn(f"OpenCL program cache {path.parent}: cannot write ({e}); programs are rebuilt per process",
                          RuntimeWarning, stacklevel=2)
        return prog

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A new device array from the memory pool (under the lock: predictor clones share the device)."""
        with self.lock:
            return cla.empty(self.queue, tuple(int(s) for s in shape), dtype, allocator=self.allocator)

    def upload(self, a: Any) -> Any:
        """A host array copied into a new device array."""
        arr = np.asarray(a, order="C")
        with self.lock:
            return cla.to_device(self.queue, arr, allocator=self.allocator)


_DEVICES: dict[tuple[int, int], ClDevice] = {}
_LOCK = threading.Lock()


def get_device(spec: str | None = None) -> ClDevice:
    """The shared ClDevice named by an `opencl_device` option value (see find_device)."""
    pi, di, dev = find_device(spec)
    with _LOCK:
        d = _DEVICES.get((pi, di))
        if d is None:
            d = _DEVICES[(pi, di)] = ClDevice(dev, (pi, di))
    return d


def is_device_array(v: Any) -> bool:
    return isinstance(v, cla.Array)


def describe_platforms() -> dict[str, str]:
    """Each platform and device as `pdlite doctor` lists them ({} when none is installed); the device keys
    ("device P:D") are what the `opencl_device` option takes (P:D)."""
    out: dict[str, str] = {}
    for pi, p in enumerate(platforms()):
        out[f"platform {pi}"] = f"{p.name} ({p.version.strip()})"
        for di, d in enumerate(_devices(p)):
            kind = cl.device_type.to_string(d.type)
            fp16 = "cl_khr_fp16" in d.extensions
            out[f"device {pi}:{di}"] = (f"{d.name.strip()} [{kind}], {d.max_compute_units} compute units, "
                                        f"{d.global_mem_size // 2**20} MiB, fp16 arithmetic "
                                        f"{'yes' if fp16 else 'no (FP16 places store half, compute float)'}")
    return out
