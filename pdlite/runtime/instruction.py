"""One instruction: an op (shape check and inference) and its picked kernel (launch)."""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.errors import InputError, KernelError, PdliteError
from pdlite.kernels.registry import Kernel, KernelContext, KernelDef
from pdlite.operators.registry import OpDef, ShapeContext


def describe(v: Any) -> str:
    shape = tuple(getattr(v, "shape", ()))
    dtype = str(getattr(v, "dtype", type(v).__name__)).replace("torch.", "")
    return f"{dtype}{list(shape)}"


class Instruction:
    """Runs one op: gather inputs from the scope, infer and check shapes, launch, store outputs."""

    def __init__(self, op: OpDesc, opdef: OpDef, kernel_def: KernelDef, kernel: Kernel | None = None,
                 context: KernelContext | None = None) -> None:
        self.op = op
        self.opdef = opdef
        self.kernel_def = kernel_def
        self.kernel = kernel if kernel is not None else kernel_def.create(op, context)
        self._in_slots = [(s, list(n)) for s, n in op.inputs.items() if n]
        self._shape_cache: tuple[tuple, dict[str, list[tuple]]] | None = None
        self.prepared = False

    def __repr__(self) -> str:
        return f"Instruction({self.op.type} -> {self.kernel_def.key})"

    @property
    def label(self) -> str:
        outs = self.op.output_names()
        return f"{self.op.type}({outs[0] if outs else ''})"

    def gather(self, scope: dict[str, Any]) -> dict[str, list[Any]]:
        ins: dict[str, list[Any]] = {}
        for slot, names in self._in_slots:
            vals = []
            for n in names:
                try:
                    vals.append(scope[n])
                except KeyError:
                    raise KernelError(
                        f"op {self.label}: input {slot}={n!r} has no value (not fed, not a parameter, "
                        "not produced by an earlier op)") from None
            ins[slot] = vals
        return ins

    def infer_shapes(self, ins: dict[str, list[Any]]) -> dict[str, list[tuple]] | None:
        fn = self.opdef.infer_shape
        if fn is None:
            return None
        key = tuple(tuple(v.shape) for vals in ins.values() for v in vals)
        if not self.opdef.value_dependent and self._shape_cache is not None and self._shape_cache[0] == key:
            return self._shape_cache[1]
        shapes = fn(ShapeContext(self.op, ins))
        if not self.opdef.value_dependent:
            self._shape_cache = (key, shapes)
        return shapes

    def run(self, scope: dict[str, Any]) -> None:
        ins = self.gather(scope)
        shapes = self.infer_shapes(ins)
        try:
            outs = self.kernel.run(ins)
        except PdliteError:
            raise
        except Exception as e:
            detail = ", ".join(f"{s}={[describe(v) for v in vals]}" for s, vals in ins.items())
            raise KernelError(f"kernel {self.kernel_def.key} failed on op {self.label} with inputs {detail}: "
                              f"{type(e).__name__}: {e}") from e
        for slot, vals in outs.items():
            names = self.op.outputs.get(slot)
            if not names:
                continue
            want = shapes.get(slot) if shapes else None
            for i, (n, v) in enumerate(zip(names, vals)):
                if want is not None and i < len(want) and tuple(v.shape) != tuple(want[i]):
                    raise KernelError(
                        f"op {self.label}: kernel {self.kernel_def.key} produced {slot}[{i}] ({n!r}) of shape "
                        f"{list(v.shape)} but shape inference says {list(want[i])}")
                scope[n] = v


def check_feed(name: str, value: np.ndarray, want_shape: list[int], want_dtype: np.dtype | None) -> None:
    """Refuse a feed of the wrong rank, fixed dims or dtype, naming the input."""
    if want_shape:
        if value.ndim != len(want_shape):
            raise InputError(f"input {name!r}: expected rank {len(want_shape)} (shape {want_shape}, -1 = any), "
                             f"got shape {list(value.shape)}")
        for i, (w, g) in enumerate(zip(want_shape, value.shape)):
            if w >= 0 and w != g:
                raise InputError(f"input {name!r}: dim {i} must be {w} (model shape {want_shape}), "
                                 f"got shape {list(value.shape)}")
    if want_dtype is not None and value.dtype != want_dtype:
        raise InputError(f"input {name!r}: expected dtype {want_dtype}, got {value.dtype}")
