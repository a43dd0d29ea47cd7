"""Shapes of a subgraph that serves every input shape the program allows (one model, symbolic dims).

The subgraph kernel converts its block once for all input shapes instead of once per shape. What the
converters may bake into the graph as a constant (a dim of a tensor, a folded `shape` -> `slice` ->
`reshape2` value) must then be the same for every input shape. Which dims and values those are is found
by running the op definitions' shape inference and constant folding (`convert.infer_op`, the host's own
code) on three *probes*: the inputs' real shapes, and the same shapes with every dynamic input dim doubled
and tripled (a multiple keeps the divisibility a model may need, e.g. a detector's 32). The converters then
see the merged facts:

- a dim equal in the three probes is a constant, a dim that differs is unknown (-1);
- a folded value equal in the three probes is a constant; one that differs is not (its op is converted to
  ONNX nodes, e.g. `shape` -> Shape, so the graph computes it from the input it is given).

A converter that needs a dim or value the merged facts leave unknown refuses (ConversionError) as it does
for `export-onnx`'s dynamic batch, and the kernel falls back to one model per input shape for that
subgraph. Which input dims are dynamic: those the program declares -1, and any whose fed size differs
from the declared one.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pdlite.core.program import OpDesc, VarDesc
from pdlite.nnadapter.convert import TensorInfo, infer_op

Shape = tuple[int, ...]
FACTORS = (2, 3)  # the probes beside the real shapes: every dynamic input dim times these


def dynamic_dims(declared: Sequence[int] | None, fed: Shape) -> tuple[bool, ...]:
    """Per dim of a fed input, whether the model keeps it symbolic: declared -1, or not the declared size
    (no declared shape, or another rank: every dim)."""
    if declared is None or len(declared) != len(fed):
        return (True,) * len(fed)
    return tuple(int(d) < 0 or int(d) != int(f) for d, f in zip(declared, fed))


def pattern(fed: Shape, dyn: Sequence[bool]) -> Shape:
    """The shape the model declares for an input: -1 where it is dynamic."""
    return tuple(-1 if k else int(d) for d, k in zip(fed, dyn))


def matches(pat: Shape, shape: Shape) -> bool:
    """Whether an input of `shape` fits a model input declared `pat`."""
    return len(pat) == len(shape) and all(p < 0 or p == s for p, s in zip(pat, shape))


class Probes:
    """Shape inference and folding over the three probes; `infer(op, info)` merges their facts into `info`
    (the converters' TensorInfo), in place of `convert.infer_op`."""

    def __init__(self, info: TensorInfo, vars_: dict[str, VarDesc], inputs: Sequence[tuple[str, Shape, Shape]]):
        """`inputs`: (name, fed shape, declared pattern with -1 at dynamic dims) of each data input."""
        self.vars = vars_
        self.probes = [info.copy() for _ in range(1 + len(FACTORS))]
        for name, fed, pat in inputs:
            for k, probe in enumerate(self.probes):
                f = 1 if k == 0 else FACTORS[k - 1]
                probe.shapes[name] = tuple(int(d) * f if p < 0 else int(d) for d, p in zip(fed, pat))
                probe.values.pop(name, None)

    def infer(self, op: OpDesc, info: TensorInfo) -> None:
        for probe in self.probes:
            infer_op(op, probe, self.vars)
        for name in op.output_names():
            shapes = [p.shapes.get(name) for p in self.probes]
            info.shapes[name] = _merge_shapes(shapes)
            dt = self.probes[0].dtypes.get(name)
            if dt is not None:
                info.dtypes[name] = dt
            vals = [p.values.get(name) for p in self.probes]
            if all(v is not None for v in vals) and all(_same(vals[0], v) for v in vals[1:]):
                info.values[name] = vals[0]
            else:
                info.values.pop(name, None)


def _merge_shapes(shapes: Sequence[Shape | None]) -> Shape | None:
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:  # type: ignore[arg-type]
        return None
    return tuple(int(d[0]) if len(set(d)) == 1 else -1 for d in zip(*shapes))  # type: ignore[misc]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def shape_notes(feeds: Sequence[tuple[str, Sequence[int] | None]], cache_size: int | None = None) -> list[str]:
    """What `pdlite inspect` says about input shapes on the devices: the feeds' open dims, and per installed
    device whether one model serves every shape or one model is built per input shape."""
    from pdlite.nnadapter.options import DEFAULT_SHAPE_CACHE_SIZE
    from pdlite.nnadapter.registry import DRIVERS
    from pdlite.registries import load_registries

    load_registries()
    size = cache_size or DEFAULT_SHAPE_CACHE_SIZE
    open_dims = [f"{n} {list(s)}" for n, s in feeds if s is None or any(int(d) < 0 for d in s)]
    lines = ["input shapes on the NNAdapter devices (open dims: " + ("; ".join(open_dims) or "none") + "):"]
    for name, drv in sorted(DRIVERS.items()):
        how = ("one model for every shape (open dims symbolic)" if getattr(drv, "dynamic_shapes", True)
               else f"static shapes only: one model per shape (last {size} kept: nnadapter_shape_cache_size)")
        lines.append(f"  {name:<16} {how}")
    lines.append("  (a subgraph whose conversion needs a concrete dim gets one model per shape; debug log "
                 "'pdlite.nnadapter' says which)")
    return lines
