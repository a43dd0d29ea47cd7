"""Op definitions (the OpLite role): slots, attribute defaults, shape check and inference.

An op is described once here; kernels on every target and converters for every device
read attributes from `OpInfo.attrs`, already completed with these defaults.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.program import OpDesc
from pdlite.core.registry import Registry
from pdlite.errors import InputError, PdliteError

Shape = tuple[int, ...]


class ShapeContext:
    """What shape inference sees: the op, its attributes, input shapes and (host) input values."""

    def __init__(self, op: OpDesc, values: dict[str, list[Any]]) -> None:
        self.op = op
        self.attrs = op.attrs
        self._values = values

    def has(self, slot: str) -> bool:
        return bool(self._values.get(slot))

    def count(self, slot: str) -> int:
        return len(self._values.get(slot) or [])

    def shape(self, slot: str, i: int = 0) -> Shape:
        return tuple(self._get(slot, i).shape)

    def shapes(self, slot: str) -> list[Shape]:
        return [tuple(v.shape) for v in self._values.get(slot) or []]

    def dtype(self, slot: str, i: int = 0) -> np.dtype:
        return np.dtype(str(self._get(slot, i).dtype).replace("torch.", ""))

    def value(self, slot: str, i: int = 0) -> np.ndarray:
        """The input's data as a host NumPy array (for shape tensors and similar small inputs)."""
        return host_array(self._get(slot, i))

    def _get(self, slot: str, i: int) -> Any:
        vals = self._values.get(slot) or []
        if i >= len(vals):
            raise InputError(f"op {self.op.type}: input slot {slot!r} has no tensor #{i}")
        return vals[i]

    def fail(self, msg: str) -> None:
        raise InputError(f"op {self.op.type} ({_first_output(self.op)}): {msg}")

    def require(self, cond: bool, msg: str) -> None:
        if not cond:
            self.fail(msg)


def _first_output(op: OpDesc) -> str:
    names = op.output_names()
    return f"output {names[0]!r}" if names else "no outputs"


InferShape = Callable[[ShapeContext], dict[str, list[Shape]]]


@dataclass
class OpDef:
    """One op type: required and optional slots, attribute defaults, shape inference."""

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    optional_inputs: tuple[str, ...] = ()
    optional_outputs: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    infer_shape: InferShape | None = None
    # True when output shapes depend on input *values* (shape tensors): no shape caching.
    value_dependent: bool = False
    doc: str = ""
    # attributes the oracle (Paddle Inference 3.x) ignores: forced to these values at attach
    fixed: dict[str, Any] = field(default_factory=dict)

    def attach(self, desc: OpDesc) -> OpDesc:
        """A copy of `desc` with default attributes filled in, after checking its slots."""
        for slot in self.inputs:
            if not desc.inputs.get(slot):
                raise PdliteError(f"op {desc.type}: required input slot {slot!r} is missing or empty")
        for slot in self.outputs:
            if not desc.outputs.get(slot):
                raise PdliteError(f"op {desc.type}: required output slot {slot!r} is missing or empty")
        return self.complete(desc.copy())

    def complete(self, desc: OpDesc) -> OpDesc:
        """Fill in `desc`'s missing attributes with their defaults (and the fixed ones), in place."""
        for k, v in self.defaults.items():
            if k not in desc.attrs:
                desc.attrs[k] = copy.copy(v)  # a list default must not be shared between ops
        desc.attrs.update(self.fixed)
        return desc


OPS: Registry[str, OpDef] = Registry("op")


def complete_program(program: Any) -> None:
    """Attach the definitions' attribute defaults to every op of every block of `program`, in place.

    Every front end calls this when it builds a Program (legacy and PIR loaders, the `.nb` reader,
    and the analysis for programs built by hand), so that kernels, converters, delegates and passes
    read `op.attrs[k]` and never carry defaults of their own. Ops without a definition are left as
    they are (the kernel pick names them)."""
    for block in program.blocks:
        for op in block.ops:
            opdef = OPS.get(op.type)
            if opdef is not None:
                opdef.complete(op)


def register_op(
    op_type: str,
    *,
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = ("Out",),
    optional_inputs: Sequence[str] = (),
    optional_outputs: Sequence[str] = (),
    defaults: dict[str, Any] | None = None,
    value_dependent: bool = False,
    aliases: Sequence[str] = (),
    fixed: dict[str, Any] | None = None,
) -> Callable[[InferShape], InferShape]:
    """Register an op type; decorates its shape-inference function `f(ctx) -> {slot: [shape]}`."""

    def deco(fn: InferShape) -> InferShape:
        for t in (op_type, *aliases):
            OPS.add(
                t,
                OpDef(
                    t,
                    tuple(inputs),
                    tuple(outputs),
                    tuple(optional_inputs),
                    tuple(optional_outputs),
                    dict(defaults or {}),
                    fn,
                    value_dependent,
                    (fn.__doc__ or "").strip(),
                    dict(fixed or {}),
                ),
            )
        return fn

    return deco
