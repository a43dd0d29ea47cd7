"""static_kernel_pick_pass: choose one kernel per op from the valid places, in priority order.

A kernel matches a place when its target is the place's target (host kernels also serve
the CPU targets X86 and ARM, and the Host target is always the last resort), and its
precision and layout equal the place's or are Any. Among matches the earliest place wins;
ties prefer an exact target over the host fallback and declared input precisions that
agree with the variables' dtypes. Every op without a kernel is reported at once.
"""
from __future__ import annotations

from collections import Counter

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.core.types import (
    ANY_LAYOUT,
    ANY_PRECISION,
    DataLayoutType,
    Place,
    PrecisionType,
    TargetType,
    precision_of_dtype,
)
from pdlite.errors import UnsupportedOpError
from pdlite.kernels.registry import KernelDef, kernels_for, targets_for
from pdlite.operators.registry import OPS
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass

CPU_TARGETS = (TargetType.Host, TargetType.X86, TargetType.ARM)


def _target_ok(kernel_target: TargetType, place_target: TargetType) -> int | None:
    """0 for an exact target, 1 for a host kernel serving a CPU place, None for no match."""
    if kernel_target == place_target or kernel_target == TargetType.Any:
        return 0
    if kernel_target == TargetType.Host and place_target in CPU_TARGETS:
        return 1
    return None


def _var_precision(node: Node) -> PrecisionType:
    if node.var is None or node.var.dtype is None:
        return PrecisionType.Unk
    try:
        return precision_of_dtype(numpy_dtype(node.var.dtype))
    except Exception:
        return PrecisionType.Unk


def score_kernel(kd: KernelDef, node: Node, places: list[Place], attached: OpDesc | None = None) -> tuple | None:
    """Sort key of a kernel for an op node (smaller is better), or None if no place admits it."""
    best = None
    assert node.op is not None
    if not kd.cls.supports(attached if attached is not None else node.op):
        return None
    for rank, place in enumerate(places):
        t = _target_ok(kd.key.target, place.target)
        if t is None:
            continue
        if kd.key.precision not in (place.precision, ANY_PRECISION) and place.precision != ANY_PRECISION:
            continue
        if kd.key.layout not in (place.layout, ANY_LAYOUT) and place.layout not in (ANY_LAYOUT,):
            continue
        mismatches = 0
        assert node.op is not None
        for slot, names in node.op.inputs.items():
            want = kd.input_type(slot).precision
            if want == ANY_PRECISION:
                continue
            for v in node.inputs:
                if v.name in names and _var_precision(v) not in (PrecisionType.Unk, want):
                    mismatches += 1
        key = (rank, t, mismatches, kd.key.precision == ANY_PRECISION, kd.key.alias != "def")
        if best is None or key < best:
            best = key
    return best


def pick_kernel(node: Node, places: list[Place]) -> KernelDef | None:
    assert node.op is not None
    opdef = OPS.get(node.op.type)
    attached = opdef.attach(node.op) if opdef is not None else node.op
    scored = [(s, i, kd) for i, kd in enumerate(kernels_for(node.op.type))
              if (s := score_kernel(kd, node, places, attached)) is not None]
    if not scored:
        return None
    return min(scored, key=lambda x: (x[0], x[1]))[2]


@register_pass("static_kernel_pick_pass")
class StaticKernelPickPass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        places = list(ctx.valid_places)
        places.append(Place(TargetType.Host, PrecisionType.Any, DataLayoutType.Any))
        missing: Counter[str] = Counter()
        for node in graph.op_nodes():
            op = node.op
            assert op is not None
            if "kernel" in node.info:  # already decided (e.g. by a subgraph pass)
                continue
            opdef = OPS.get(op.type)
            kd = pick_kernel(node, places) if opdef is not None else None
            if kd is None:
                missing[op.type] += 1
                continue
            node.info["kernel"] = kd
        if missing:
            lines = []
            for t, n in sorted(missing.items()):
                have = targets_for(t)
                where = ", ".join(x.name for x in have) if have else "no target (op unknown to pdlite)"
                if OPS.get(t) is None and have:
                    where += " (but no op definition)"
                lines.append(f"  {t} x{n}: kernels on {where}")
            wanted = ", ".join(repr(p) for p in ctx.valid_places)
            raise UnsupportedOpError(
                f"{sum(missing.values())} op(s) of {len(missing)} type(s) have no kernel for the valid places "
                f"[{wanted}]:\n" + "\n".join(lines))
        return True
