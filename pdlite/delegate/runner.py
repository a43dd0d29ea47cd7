"""Applying a Delegate to a runtime program: build the DelegateModel, swap replaced runs, fall back on failure."""
from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import OpDesc, Program
from pdlite.delegate.api import Delegate, DelegateModel, DelegateTensor, Kernel, KernelView, _ScopeRef
from pdlite.errors import KernelError
from pdlite.runtime.instruction import Instruction
from pdlite.runtime.runtime_program import RuntimeProgram

log = logging.getLogger(__name__)


class DelegateInstruction:
    """Runs a delegate Kernel in place of a run of pdlite instructions (kept for fallback)."""

    def __init__(self, kernel: Kernel, ref: _ScopeRef, original: list[Instruction], name: str) -> None:
        self.kernel = kernel
        self.ref = ref
        self.original = original
        self.op = OpDesc("delegate", {"X": [t.name for t in kernel.inputs]},
                         {"Out": [t.name for t in kernel.outputs]}, {"kernel": type(kernel).__name__})
        self.kernel_def = None
        self.label = f"delegate:{name}({len(original)} ops)"
        self.prepared = False
        self._failed = False
        self._last_shapes: tuple | None = None

    def _fallback(self, scope: dict[str, Any], why: str) -> None:
        if not self._failed:
            warnings.warn(f"delegate kernel {self.label} failed ({why}); running pdlite's own kernels for it",
                          stacklevel=3)
            self._failed = True
        for inst in self.original:
            inst.run(scope)

    def run(self, scope: dict[str, Any]) -> None:
        if self._failed:
            for inst in self.original:
                inst.run(scope)
            return
        self.ref.scope = scope
        try:
            shapes = tuple(tuple(t.shape()) for t in self.kernel.inputs)
            if self._last_shapes is not None and shapes != self._last_shapes:
                self.kernel.resize()
            self._last_shapes = shapes
            self.kernel.execute()
            missing = [t.name for t in self.kernel.outputs if t.name not in scope]
            if missing:
                raise KernelError(f"execute() did not write output(s) {missing}")
        except Exception as e:  # a third-party kernel: never let it take the run down
            for t in self.kernel.outputs:
                scope.pop(t.name, None)
            self._fallback(scope, f"{type(e).__name__}: {e}")


def _tensor_views(program: Program, runtime: RuntimeProgram, params: dict[str, Any],
                  ref: _ScopeRef) -> dict[str, DelegateTensor]:
    views: dict[str, DelegateTensor] = {}
    block = program.main
    for inst in runtime.instructions:
        for n in inst.op.input_names() + inst.op.output_names():
            if n in views:
                continue
            v = block.vars.get(n)
            try:
                dt = numpy_dtype(v.dtype) if v is not None and v.dtype is not None else None
            except Exception:
                dt = None
            const = params.get(n)
            if const is not None:
                dt = np.asarray(const).dtype
            views[n] = DelegateTensor(n, ref, list(v.shape) if v is not None else [], dt, const)
    return views


def apply_delegate(delegate: Delegate, program: Program, runtime: RuntimeProgram, params: dict[str, Any],
                   fetch_names: Sequence[str]) -> RuntimeProgram:
    """The runtime program with the delegate's replacements; unchanged if the delegate fails."""
    name = type(delegate).__name__
    ref = _ScopeRef()
    views = _tensor_views(program, runtime, params, ref)
    kernels = []
    for i, inst in enumerate(runtime.instructions):
        op = inst.op
        kd = inst.kernel_def
        kernels.append(KernelView(
            i, op.type, dict(op.attrs), [views[n] for n in dict.fromkeys(op.input_names())],
            [views[n] for n in dict.fromkeys(op.output_names())],
            {"inputs": {k: list(v) for k, v in op.inputs.items()}, "outputs": {k: list(v) for k, v in op.outputs.items()}},
            kd.key.target.name if kd is not None else "?"))
    model = DelegateModel(kernels, fetch_names)
    try:
        delegate.init()
        delegate.build(model)
    except Exception as e:
        warnings.warn(f"delegate {name} failed in init()/build() ({type(e).__name__}: {e}); "
                      "running pdlite's own kernels", stacklevel=2)
        return runtime
    if not model.replacements:
        return runtime
    new: list[Any] = []
    start_of: dict[int, tuple[list[int], Kernel]] = {}
    covered: set[int] = set()
    for idxs, kernel in model.replacements:
        start_of[min(idxs)] = (idxs, kernel)
        covered.update(idxs)
    for i, inst in enumerate(runtime.instructions):
        if i in start_of:
            idxs, kernel = start_of[i]
            original = [runtime.instructions[j] for j in sorted(idxs)]
            di = DelegateInstruction(kernel, ref, original, name)
            try:
                kernel.prepare()
                di.prepared = True
                new.append(di)
            except Exception as e:
                warnings.warn(f"delegate {name}: prepare() of the kernel replacing {len(idxs)} op(s) failed "
                              f"({type(e).__name__}: {e}); running pdlite's own kernels for them", stacklevel=2)
                new.extend(original)
        elif i not in covered:
            new.append(inst)
    log.debug("delegate %s replaced %d run(s)", name, len(model.replacements))
    out = RuntimeProgram(new)
    return out
