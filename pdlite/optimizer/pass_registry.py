"""Passes: a name, the targets they apply to, and `apply(graph, ctx) -> bool (modified)`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdlite.core.graph import Graph
from pdlite.core.registry import Registry
from pdlite.core.types import Place, TargetType


@dataclass
class PassContext:
    """What passes may read besides the graph: valid places, params, options, and what they report."""

    valid_places: list[Place]
    params: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    # facts passes leave for later passes and for the predictor (feed/fetch names, reports ...)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def targets(self) -> set[TargetType]:
        return {p.target for p in self.valid_places}


class Pass:
    """Base pass. Subclasses set `name` (by registration) and implement `apply`."""

    name: str = ""
    targets: tuple[TargetType, ...] = (TargetType.Any,)

    def applies_to(self, ctx: PassContext) -> bool:
        return TargetType.Any in self.targets or bool(set(self.targets) & ctx.targets)

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        raise NotImplementedError


PASSES: Registry[str, type[Pass]] = Registry("pass")


def register_pass(name: str, *, targets: tuple[TargetType, ...] = (TargetType.Any,),
                  override: bool = False) -> Callable[[type[Pass]], type[Pass]]:
    """Register a Pass subclass under `name` for `targets` (Any: every target)."""

    def deco(cls: type[Pass]) -> type[Pass]:
        cls.name = name
        cls.targets = tuple(targets)
        PASSES.add(name, cls, override=override)
        return cls

    return deco
