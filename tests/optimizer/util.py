"""Small program builder and runners for the optimizer tests."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.core.types import Place
from pdlite.optimizer.analysis import AnalysisResult, analyse
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES

BASE = ESSENTIAL_PASSES


def run_model_case(model: Path, deleted_passes: tuple[str, ...] = ()) -> tuple[list[str], dict[str, np.ndarray]]:
    """A model folder's case.npz inputs through pdlite.inference with `deleted_passes` off: the runtime program's op
    types and the outputs by name."""
    import pdlite.inference as pi

    case = np.load(model / "case.npz")
    cfg = pi.Config(str(model / "inference.pdmodel"), str(model / "inference.pdiparams"))
    for name in deleted_passes:
        cfg.delete_pass(name)
    pred = pi.create_predictor(cfg)
    types = [i.op.type for i in pred._lite._runtime.instructions]
    for k in case.files:
        if k.startswith("in:"):
            pred.get_input_handle(k[3:]).copy_from_cpu(case[k])
    pred.run()
    return types, {k: pred.get_output_handle(k[4:]).copy_to_cpu() for k in case.files if k.startswith("out:")}


def with_passes(*names: str) -> list[str]:
    """The essential passes up to feed_fetch_strip_pass, `names`, then kernel pick and cast insertion."""
    i = BASE.index("feed_fetch_strip_pass") + 1
    return [*BASE[:i], *names, *BASE[i:]]


class Builder:
    """Builds a one-block program: feeds, params, ops and fetches."""

    def __init__(self) -> None:
        self.block = BlockDesc()
        self.params: dict[str, np.ndarray] = {}
        self.feeds: list[str] = []
        self.fetches: list[str] = []
        self.block.vars["feed"] = VarDesc("feed", persistable=True)
        self.block.vars["fetch"] = VarDesc("fetch", persistable=True)

    def _var(self, name: str, shape: list[int] | None = None, dtype: Any = np.float32,
             persistable: bool = False) -> None:
        if name not in self.block.vars:
            self.block.vars[name] = VarDesc(name, dtype=var_type_of(np.dtype(dtype)), shape=list(shape or []),
                                            persistable=persistable)

    def feed(self, name: str, shape: list[int], dtype: Any = np.float32) -> str:
        self._var(name, shape, dtype)
        self.block.ops.append(OpDesc("feed", {"X": ["feed"]}, {"Out": [name]}, {"col": len(self.feeds)}))
        self.feeds.append(name)
        return name

    def param(self, name: str, value: Any) -> str:
        value = np.asarray(value)
        self._var(name, list(value.shape), value.dtype, persistable=True)
        self.params[name] = value
        return name

    def op(self, type_: str, inputs: dict[str, Any], outputs: dict[str, Any], **attrs: Any) -> OpDesc:
        ins = {k: [v] if isinstance(v, str) else list(v) for k, v in inputs.items()}
        outs = {k: [v] if isinstance(v, str) else list(v) for k, v in outputs.items()}
        for names in outs.values():
            for n in names:
                self._var(n)
        op = OpDesc(type_, ins, outs, dict(attrs))
        self.block.ops.append(op)
        return op

    def fetch(self, *names: str) -> None:
        for n in names:
            self.block.ops.append(OpDesc("fetch", {"X": [n]}, {"Out": ["fetch"]}, {"col": len(self.fetches)}))
            self.fetches.append(n)

    def program(self) -> Program:
        return Program([self.block])

    def set_shapes(self, feeds: dict[str, np.ndarray]) -> None:
        """Give every var desc the shape and dtype it has when run on `feeds` (as Paddle's descs have)."""
        res = analyse(copy.deepcopy(self.program()), dict(self.params), [Place()], BASE)
        scope = run_result(res, feeds, keep_scope=True)
        for n, v in scope.items():
            if n in self.block.vars and isinstance(v, np.ndarray) and not self.block.vars[n].persistable:
                self.block.vars[n].shape = list(v.shape)
                self.block.vars[n].dtype = var_type_of(v.dtype)


def run_result(res: AnalysisResult, feeds: dict[str, np.ndarray], keep_scope: bool = False) -> Any:
    res.runtime.prepare(res.ctx.params)
    scope: dict[str, Any] = dict(res.ctx.params)
    scope.update(feeds)
    res.runtime.run(scope)
    if keep_scope:
        return scope
    return [scope[n] for n in res.fetch_names]


def optimize(b: Builder, passes: list[str], places: list[Place] | None = None) -> AnalysisResult:
    """Analyse a copy of the builder's program (the params dict copied), linting after every pass."""
    return analyse(copy.deepcopy(b.program()), dict(b.params), places or [Place()], passes, {"graph_debug": True})


def run(b: Builder, feeds: dict[str, np.ndarray], passes: list[str]) -> tuple[list[np.ndarray], AnalysisResult]:
    res = optimize(b, passes)
    return run_result(res, feeds), res


def op_types(res: AnalysisResult) -> list[str]:
    return [n.op.type for n in res.graph.topological_order()]


def rewrites(res: AnalysisResult, name: str) -> int:
    return int(res.ctx.meta.get("pass_stats", {}).get(name, {}).get("rewrites", 0))


def refusals(res: AnalysisResult, name: str) -> dict[str, int]:
    return dict(res.ctx.meta.get("pass_stats", {}).get(name, {}).get("refused", {}))


def check_same(b: Builder, feeds: dict[str, np.ndarray], passes: list[str], rel: float = 1e-5
               ) -> AnalysisResult:
    """Run unoptimized and with `passes`; assert max|opt - ref| <= rel * max|ref| per output."""
    ref, _ = run(b, feeds, BASE)
    got, res = run(b, feeds, passes)
    assert len(got) == len(ref)
    for g, r, n in zip(got, ref, b.fetches):
        assert g.shape == r.shape, f"{n}: {g.shape} != {r.shape}"
        scale = max(float(np.max(np.abs(r))), 1e-30)
        err = float(np.max(np.abs(g.astype(np.float64) - r)))
        assert err <= rel * scale, f"{n}: max err {err:.3g} > {rel} * {scale:.3g}"
    return res
