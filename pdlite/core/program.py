"""The program as pdlite holds it: blocks of variable descriptions and op descriptions.

This is the in-memory form of Paddle's ProgramDesc, independent of protobuf (the
model_parser converts both ways). Op attributes are plain Python values; their Paddle
attribute types are kept in `attr_types` so that a program can be written back exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdlite.core.dtypes import VarType


@dataclass
class VarDesc:
    """A variable: name, kind (LOD_TENSOR, FEED_MINIBATCH, ...), dtype and shape for tensors."""

    name: str
    type: VarType = VarType.LOD_TENSOR
    dtype: VarType | None = VarType.FP32
    shape: list[int] = field(default_factory=list)
    lod_level: int = 0
    persistable: bool = False
    need_check_feed: bool = False
    stop_gradient: bool = False
    is_parameter: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # fields kept only for writing back

    @property
    def is_tensor(self) -> bool:
        return self.type == VarType.LOD_TENSOR


@dataclass
class OpDesc:
    """An op: type, named input/output slots (each a list of variable names), attributes."""

    type: str
    inputs: dict[str, list[str]] = field(default_factory=dict)
    outputs: dict[str, list[str]] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    attr_types: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def input(self, slot: str, i: int = 0) -> str | None:
        names = self.inputs.get(slot) or []
        return names[i] if i < len(names) else None

    def output(self, slot: str, i: int = 0) -> str | None:
        names = self.outputs.get(slot) or []
        return names[i] if i < len(names) else None

    def input_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names]

    def output_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names]

    def copy(self) -> OpDesc:
        return OpDesc(
            self.type,
            {k: list(v) for k, v in self.inputs.items()},
            {k: list(v) for k, v in self.outputs.items()},
            dict(self.attrs),
            dict(self.attr_types),
            dict(self.extra),
        )


@dataclass
class BlockDesc:
    idx: int = 0
    parent_idx: int = -1
    vars: dict[str, VarDesc] = field(default_factory=dict)
    ops: list[OpDesc] = field(default_factory=list)
    forward_block_idx: int = -1


@dataclass
class Program:
    """A whole program; block 0 is the main graph, other blocks are sub-blocks (subgraphs, control flow)."""

    blocks: list[BlockDesc] = field(default_factory=lambda: [BlockDesc()])
    version: int | None = None
    op_version_map: list[tuple[str, int]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def main(self) -> BlockDesc:
        return self.blocks[0]

    def feed_names(self) -> list[str]:
        """Feed targets ordered by the feed ops' `col` attribute."""
        feeds = [(op.attrs.get("col", 0), op.output("Out")) for op in self.main.ops if op.type == "feed"]
        return [n for _, n in sorted(feeds)]

    def fetch_names(self) -> list[str]:
        """Fetch targets ordered by the fetch ops' `col` attribute."""
        fetches = [(op.attrs.get("col", 0), op.input("X")) for op in self.main.ops if op.type == "fetch"]
        return [n for _, n in sorted(fetches)]

    def persistable_names(self) -> list[str]:
        """Names of persistable tensors (params) of all blocks, sorted as Paddle's combined file has them."""
        names = set()
        for b in self.blocks:
            for v in b.vars.values():
                if v.persistable and v.type == VarType.LOD_TENSOR and v.name not in ("feed", "fetch"):
                    names.add(v.name)
        return sorted(names)
