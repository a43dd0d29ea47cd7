"""The NNAdapter registries: op converters (Paddle op -> ONNX nodes) and device drivers.

A converter turns one Paddle op into ONNX nodes through a `ConvertContext` (see
`pdlite.nnadapter.convert`): it reads the op's attributes (defaults already filled in by the
op definition), the ONNX names of its inputs, the known shapes/dtypes/values, and adds nodes
and initializers. An optional `supports(op, info) -> str | None` predicate refuses an op
(returning the reason) for attribute or shape combinations the converter does not handle.

What a device can run is derived from this table alone: every driver consumes the same
device-neutral IR (ONNX), so partitioning never asks a device anything.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdlite.core.registry import Registry
from pdlite.errors import PdliteError
from pdlite.registries import load_registries

if TYPE_CHECKING:  # pragma: no cover
    from pdlite.core.program import OpDesc
    from pdlite.nnadapter.drivers.base import Driver


class ConversionError(PdliteError):
    """An op (or a subgraph) cannot be expressed in the device-neutral IR."""


# fn(ctx: convert.ConvertContext, op) and supports(op, info: convert.TensorInfo); typed loosely here
# because convert.py builds on this registry (the registry stays below it)
ConvertFn = Callable[[Any, "OpDesc"], None]
SupportsFn = Callable[["OpDesc", Any], "str | None"]


@dataclass(frozen=True)
class Converter:
    """One op type's converter and its optional capability predicate."""

    op_type: str
    convert: ConvertFn
    supports: SupportsFn | None = None

    def refusal(self, op: OpDesc, info: Any) -> str | None:
        """None when the op converts, else the reason it does not."""
        if self.supports is None:
            return None
        try:
            return self.supports(op, info)
        except Exception as e:  # a predicate that trips over odd attributes refuses the op
            return f"capability check failed: {type(e).__name__}: {e}"


CONVERTERS: Registry[str, Converter] = Registry("nnadapter converter")
DRIVERS: Registry[str, type[Driver]] = Registry("nnadapter driver")


def register_converter(*op_types: str, supports: SupportsFn | None = None,
                       override: bool = False) -> Callable[[ConvertFn], ConvertFn]:
    """Register `fn(ctx, op)` as the converter of each of `op_types`."""

    def deco(fn: ConvertFn) -> ConvertFn:
        for t in op_types:
            CONVERTERS.add(t, Converter(t, fn, supports), override=override)
        return fn

    return deco


def register_driver(name: str, *, override: bool = False) -> Callable[[type[Driver]], type[Driver]]:
    """Register a Driver subclass under a device name (e.g. "intel_openvino")."""

    def deco(cls: type[Driver]) -> type[Driver]:
        cls.name = name
        DRIVERS.add(name, cls, override=override)
        return cls

    return deco


def get_driver(name: str) -> type[Driver]:
    load_registries()
    cls = DRIVERS.get(name)
    if cls is None:
        raise PdliteError(f"unknown NNAdapter device {name!r}; known devices: {sorted(DRIVERS)}")
    return cls
