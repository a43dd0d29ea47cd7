"""Profilers, as Paddle-Lite's: per-op timing and per-op output statistics (precision profile).

Both are hooks on the runtime program (`predictor.set_hook`), enabled from the config
(`enable_profiler()`, `enable_precision_profiler()`) or by `pdlite bench --profile/--precision-profile`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _kernel_name(inst: Any) -> str:
    kd = getattr(inst, "kernel_def", None)
    if kd is None:
        return type(getattr(inst, "kernel", inst)).__name__
    return f"{kd.key.target.name}/{kd.key.precision.name}/{kd.key.layout.name}"


@dataclass
class OpTiming:
    op_type: str
    kernel: str
    times: list[float] = field(default_factory=list)


class Profiler:
    """Collects the time of every instruction; `table()` aggregates by (op type, kernel)."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], OpTiming] = {}
        self.runs = 0

    def __call__(self, inst: Any, seconds: float, scope: dict[str, Any]) -> None:
        key = (inst.op.type, _kernel_name(inst))
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = OpTiming(*key)
        rec.times.append(seconds)

    def rows(self) -> list[dict[str, Any]]:
        total = sum(sum(r.times) for r in self.records.values()) or 1e-12
        rows = []
        for r in self.records.values():
            t = np.asarray(r.times) * 1e3
            rows.append(dict(op_type=r.op_type, kernel=r.kernel, calls=len(t), total_ms=float(t.sum()),
                             avg_ms=float(t.mean()), min_ms=float(t.min()), max_ms=float(t.max()),
                             share=float(t.sum() / 1e3 / total)))
        rows.sort(key=lambda r: -r["total_ms"])
        return rows

    def table(self) -> str:
        lines = [f"{'op type':<26} {'kernel (target/precision/layout)':<34} {'calls':>6} {'avg ms':>9} "
                 f"{'min ms':>9} {'max ms':>9} {'share':>7}"]
        for r in self.rows():
            lines.append(f"{r['op_type']:<26} {r['kernel']:<34} {r['calls']:>6} {r['avg_ms']:>9.3f} "
                         f"{r['min_ms']:>9.3f} {r['max_ms']:>9.3f} {100 * r['share']:>6.1f}%")
        return "\n".join(lines)


@dataclass
class TensorStats:
    op: str
    op_type: str
    name: str
    shape: tuple
    dtype: str
    mean: float
    std: float
    min: float
    max: float
    nan: int
    inf: int


class PrecisionProfiler:
    """After each instruction, statistics of each output: mean, std, min, max, NaN and Inf counts."""

    def __init__(self) -> None:
        self.stats: list[TensorStats] = []

    def __call__(self, inst: Any, seconds: float, scope: dict[str, Any]) -> None:
        for name in inst.op.output_names():
            v = scope.get(name)
            if v is None:
                continue
            if not isinstance(v, np.ndarray):
                v = v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
            a = v.astype(np.float64, copy=False) if v.dtype != np.float64 else v
            finite = a[np.isfinite(a)] if a.size else a
            st = (float(finite.mean()), float(finite.std()), float(finite.min()), float(finite.max())) \
                if finite.size else (float("nan"),) * 4
            self.stats.append(TensorStats(inst.label, inst.op.type, name, tuple(v.shape), str(v.dtype), *st,
                                          int(np.isnan(a).sum()), int(np.isinf(a).sum())))

    def first_bad(self) -> TensorStats | None:
        """The first output holding a NaN or an Inf (where numbers start going wrong)."""
        return next((s for s in self.stats if s.nan or s.inf), None)

    def table(self) -> str:
        lines = [f"{'op':<40} {'output':<34} {'shape':<20} {'mean':>11} {'std':>11} {'min':>11} {'max':>11} "
                 f"{'nan':>5} {'inf':>5}"]
        for s in self.stats:
            lines.append(f"{s.op[:40]:<40} {s.name[:34]:<34} {str(list(s.shape)):<20} {s.mean:>11.4g} "
                         f"{s.std:>11.4g} {s.min:>11.4g} {s.max:>11.4g} {s.nan:>5} {s.inf:>5}")
        return "\n".join(lines)


class HookChain:
    """Several hooks as one."""

    def __init__(self, *hooks: Any) -> None:
        self.hooks = [h for h in hooks if h is not None]

    def __call__(self, inst: Any, seconds: float, scope: dict[str, Any]) -> None:
        for h in self.hooks:
            h(inst, seconds, scope)
