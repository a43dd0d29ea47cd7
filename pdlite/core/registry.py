"""The one registration idiom: typed registries filled by explicit decorators.

Ops, kernels, passes, converters and device drivers each have a Registry instance in
their own module; plugins add to the same objects. Registries are the only globals.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from pdlite.errors import PdliteError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Registry(Generic[K, V]):
    """A named mapping that refuses silent re-registration."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[K, V] = {}

    def add(self, key: K, value: V, *, override: bool = False) -> V:
        if key in self._items and not override:
            raise PdliteError(f"{self.kind} {key!r} is already registered (pass override=True to replace it)")
        self._items[key] = value
        return value

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def __getitem__(self, key: K) -> V:
        try:
            return self._items[key]
        except KeyError:
            raise PdliteError(f"no {self.kind} registered as {key!r}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self):
        return self._items.items()

    def values(self):
        return self._items.values()

    def remove(self, key: K) -> None:
        self._items.pop(key, None)
