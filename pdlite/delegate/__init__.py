"""The Delegate API, after MindSpore Lite's: a third-party framework takes over runs of kernels.

A `Delegate` is set on the config (`CxxConfig.set_delegate` / `MobileConfig.set_delegate`).
After pdlite has picked its own kernels, the predictor calls `delegate.init()` then
`delegate.build(model)` with a `DelegateModel` listing the kernels in execution order; the
delegate calls `model.replace(begin, end, kernel)` to swap a contiguous run for one
`Kernel` of its own, whose inputs and outputs are the run's true graph inputs and outputs.
If `init()`, `build()` or a kernel's `prepare()` fails, pdlite warns once and runs its own kernels.
"""
from __future__ import annotations

from pdlite.delegate.api import Delegate, DelegateModel, DelegateTensor, Kernel, KernelView

__all__ = ["Delegate", "DelegateModel", "DelegateTensor", "Kernel", "KernelView"]
