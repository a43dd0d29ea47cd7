"""The kernel registry: (op type, target, precision, layout) -> kernel class with declared tensor types."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pdlite.core.program import OpDesc
from pdlite.core.registry import Registry
from pdlite.core.types import (
    ANY_LAYOUT,
    ANY_PRECISION,
    ANY_TARGET,
    DataLayoutType,
    Place,
    PrecisionType,
    TargetType,
)


@dataclass(frozen=True)
class TensorType:
    """The type of a kernel's input or output tensor: where it lives, its precision and layout."""

    target: TargetType = TargetType.Host
    precision: PrecisionType = PrecisionType.FP32
    layout: DataLayoutType = DataLayoutType.NCHW

    def matches(self, other: TensorType) -> bool:
        """True when a tensor of type `other` can be read as this type without a cast."""
        return (
            (self.target == other.target or ANY_TARGET in (self.target, other.target))
            and (self.precision == other.precision or ANY_PRECISION in (self.precision, other.precision))
            and (self.layout == other.layout or ANY_LAYOUT in (self.layout, other.layout))
        )


RECENT_SHAPES = 8  # the input-shape sets an instruction (and a conv kernel's native plans) keeps


def remember(recent: dict, key: Any, value: Any, limit: int = RECENT_SHAPES) -> None:
    """RECENT[KEY] = VALUE as the newest entry, dropping the oldest past LIMIT (safe when clones on other threads
    do the same at once: at worst an entry is dropped early)."""
    recent.pop(key, None)
    recent[key] = value
    while len(recent) > limit:
        try:
            recent.pop(next(iter(recent)), None)
        except (RuntimeError, StopIteration):  # changed by another thread meanwhile
            break


# slot types device targets declare: any tensor (weights: a parameter is uploaded by the kernel), a host tensor
# of any precision (shape tensors, sizes), any tensor on a given target
ANY_TENSOR = TensorType(ANY_TARGET, ANY_PRECISION, ANY_LAYOUT)
WEIGHT = ANY_TENSOR
HOST_ANY = TensorType(TargetType.Host, ANY_PRECISION, ANY_LAYOUT)


def device_any(target: TargetType) -> TensorType:
    """Any tensor on `target` (io_copy's device side)."""
    return TensorType(target, ANY_PRECISION, ANY_LAYOUT)


@dataclass(frozen=True)
class KernelKey:
    op_type: str
    target: TargetType
    precision: PrecisionType
    layout: DataLayoutType
    alias: str = "def"

    @property
    def place(self) -> Place:
        return Place(self.target, self.precision, self.layout)

    def __str__(self) -> str:
        return f"{self.op_type}/{self.target.name}/{self.precision.name}/{self.layout.name}/{self.alias}"


@dataclass(frozen=True)
class KernelContext:
    """What a kernel may read besides its op: the config's options (e.g. `cuda_device`).

    One context is shared by every kernel of a runtime program; kernels made without one
    (tests, older code) get an empty context.
    """

    options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)


class Kernel:
    """Base of every kernel. A kernel is made for one op; `run` maps input slots to output slots.

    `prepare(params)` is called once before the first run with the persistable inputs
    (weights) so that a kernel can pre-transform them; `run(ins)` gets, per input slot, the
    list of input tensors (NumPy arrays on the host) and returns the output slots likewise.
    `self.context` (a KernelContext) carries the config's options.
    """

    context: KernelContext = KernelContext()

    def __init__(self, op: OpDesc, context: KernelContext | None = None) -> None:
        self.op = op
        self.attrs = op.attrs
        if context is not None:
            self.context = context

    @classmethod
    def supports(cls, op: OpDesc) -> bool:
        """Optional predicate on the op's attributes: False keeps the kernel from being picked for it."""
        return True

    def bind_program(self, program: Any) -> None:  # noqa: B027 - optional hook
        """Optional: see the whole program when the runtime is rebuilt from a stored one (a `.nb`);
        kernels of ops that own a sub-block (`subgraph`) bind it here."""

    def prepare(self, params: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Optional: see the persistable inputs once, by variable name."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        raise NotImplementedError

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """Optional: this op's run for inputs of exactly the shapes, dtypes and strides of `ins` (the values of a run
        that has just succeeded) as one call, for the runtime's steady path (pdlite/runtime/steady.py); None: the
        runtime calls `run` instead. Inputs of the slots in `fixed` have the same values on every call (the program's
        parameters, or values the feed shapes determine, such as a ShapeTensor computed from a shape op): the
        callable may hold them or what follows from them (a conv's packed weights, a reshape's target); the other
        inputs it reads through `Bound.reads` on each call, and it must keep no reference to them. Its outputs are
        new arrays, as run's."""
        return None


class Bound(NamedTuple):
    """A kernel's run bound to one set of input shapes (Kernel.bind): `fn(*values of reads)` returns the values of
    `writes`, a single value when there is one, else a tuple in that order. reads / writes are (slot, index)."""

    fn: Callable[..., Any]
    reads: tuple[tuple[str, int], ...]
    writes: tuple[tuple[str, int], ...]


def bound(fn: Callable[..., Any], reads: Sequence[str] = ("X",), writes: Sequence[str] = ("Out",)) -> Bound:
    """Bound(fn, ...) reading and writing the first value of each named slot."""
    return Bound(fn, tuple((s, 0) for s in reads), tuple((s, 0) for s in writes))


@dataclass
class KernelDef:
    key: KernelKey
    cls: type[Kernel]
    inputs: dict[str, TensorType] = field(default_factory=dict)
    outputs: dict[str, TensorType] = field(default_factory=dict)

    def input_type(self, slot: str) -> TensorType:
        return self.inputs.get(slot, TensorType(self.key.target, self.key.precision, self.key.layout))

    def output_type(self, slot: str) -> TensorType:
        return self.outputs.get(slot, TensorType(self.key.target, self.key.precision, self.key.layout))

    def create(self, op: OpDesc, context: KernelContext | None = None) -> Kernel:
        """A kernel instance for `op` with `context` (kernels whose __init__ takes only the op work too)."""
        kernel = self.cls(op)
        if context is not None:
            kernel.context = context
        return kernel


KERNELS: Registry[KernelKey, KernelDef] = Registry("kernel")


def register_kernel(
    op_type: str,
    *,
    target: TargetType = TargetType.Host,
    precision: PrecisionType = PrecisionType.FP32,
    layout: DataLayoutType = DataLayoutType.NCHW,
    alias: str = "def",
    inputs: Mapping[str, TensorType] | None = None,
    outputs: Mapping[str, TensorType] | None = None,
    override: bool = False,
) -> Callable[[type[Kernel]], type[Kernel]]:
    """Register a Kernel subclass. Undeclared slots have the kernel's own (target, precision, layout)."""

    def deco(cls: type[Kernel]) -> type[Kernel]:
        key = KernelKey(op_type, TargetType(target), PrecisionType(precision), DataLayoutType(layout), alias)
        KERNELS.add(key, KernelDef(key, cls, dict(inputs or {}), dict(outputs or {})), override=override)
        return cls

    return deco


def register_variants(
    cls: type[Kernel],
    op_types: str | Sequence[str],
    *,
    target: TargetType,
    precisions: Sequence[PrecisionType],
    layout: DataLayoutType = DataLayoutType.NCHW,
    alias: str = "def",
    inputs: Mapping[str, TensorType] | None = None,
    outputs: Mapping[str, TensorType] | None = None,
) -> type[Kernel]:
    """Register `cls` on `target` for each op type, one subclass per precision (its `precision` attribute set):
    how a device target registers a kernel written once for fp32 and fp16 (CUDA, OpenCL)."""
    types = [op_types] if isinstance(op_types, str) else list(op_types)
    for p in precisions:
        variant = type(f"{cls.__name__}{p.name}", (cls,), {"precision": p, "__module__": cls.__module__,
                                                          "__doc__": cls.__doc__})
        for t in types:
            register_kernel(t, target=target, precision=p, layout=layout, alias=alias, inputs=inputs,
                            outputs=outputs)(variant)
    return cls


def precision_variants(
    target: TargetType, default_precisions: Sequence[PrecisionType] = (PrecisionType.FP32, PrecisionType.FP16),
) -> Callable[..., Callable[[type[Kernel]], type[Kernel]]]:
    """A device target's registration decorator: `@deco(op_types, precisions=..., layout=, alias=, inputs=,
    outputs=)` registers the class on `target`, one variant per precision (register_variants)."""

    def register(op_types: str | Sequence[str], *, precisions: Sequence[PrecisionType] = default_precisions,
                 layout: DataLayoutType = DataLayoutType.NCHW, alias: str = "def",
                 inputs: Mapping[str, TensorType] | None = None,
                 outputs: Mapping[str, TensorType] | None = None) -> Callable[[type[Kernel]], type[Kernel]]:
        def deco(cls: type[Kernel]) -> type[Kernel]:
            return register_variants(cls, op_types, target=target, precisions=precisions, layout=layout,
                                     alias=alias, inputs=inputs, outputs=outputs)

        return deco

    return register


def kernels_for(op_type: str) -> list[KernelDef]:
    return [d for k, d in KERNELS.items() if k.op_type == op_type]


def targets_for(op_type: str) -> list[TargetType]:
    return sorted({d.key.target for d in kernels_for(op_type)})
