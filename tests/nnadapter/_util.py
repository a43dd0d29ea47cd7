"""Helpers of the NNAdapter tests: run ops on the host runtime and through the ONNX converters.

`host_run` builds a block of the ops, picks host kernels with the real passes and runs the
runtime program (the same path a predictor takes). `onnx_run` converts the same block with
`pdlite.nnadapter.convert.convert_ops` and runs it with ONNX Runtime; in "dynamic" mode the
feeds' first dim is declared unknown (-1), as `export-onnx` does, so converters that would bake
the batch into constants fail the comparison.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pdlite.kernels.host  # noqa: F401
import pdlite.operators  # noqa: F401
from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.core.types import Place
from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops
from pdlite.optimizer.optimizer import Optimizer
from pdlite.optimizer.pass_registry import PassContext
from pdlite.registries import load_registries
from pdlite.runtime.build import runtime_from_graph

BATCH = 3  # an unusual batch, so "dynamic" mode can tell batch dims from others


def op(op_type: str, ins: dict[str, Any], outs: dict[str, Any], **attrs: Any) -> OpDesc:
    """An OpDesc; slot values are a var name or a list of names."""
    as_list = {k: ([v] if isinstance(v, str) else list(v)) for k, v in ins.items()}
    out_list = {k: ([v] if isinstance(v, str) else list(v)) for k, v in outs.items()}
    return OpDesc(op_type, as_list, out_list, dict(attrs))


@dataclass
class Case:
    id: str
    ops: list[OpDesc]
    feeds: dict[str, np.ndarray]
    params: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    dynamic: bool = True  # also check with a dynamic first dim of the feeds

    def __post_init__(self) -> None:
        if not self.outputs:
            self.outputs = [self.ops[-1].output_names()[0]]


def _block(ops: Sequence[OpDesc], values: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> BlockDesc:
    names = {n for o in ops for n in o.input_names() + o.output_names()}
    vars_ = {}
    for n in sorted(names):
        v = values.get(n)
        if v is None:
            vars_[n] = VarDesc(n)
        else:
            vars_[n] = VarDesc(n, dtype=var_type_of(v.dtype), shape=list(v.shape), persistable=n in params)
    return BlockDesc(0, -1, vars_, [o.copy() for o in ops])


def host_run(case: Case) -> dict[str, np.ndarray]:
    """Every var's value after running the ops with host kernels."""
    load_registries()
    values = {**case.params, **case.feeds}
    block = _block(case.ops, values, case.params)
    graph = Graph(block)
    ctx = PassContext([Place()], dict(case.params), {},
                      {"feed_names": list(case.feeds), "fetch_names": list(case.outputs),
                       "program": Program([block])})
    Optimizer(["static_kernel_pick_pass", "type_target_cast_pass"]).run(graph, ctx)
    rt = runtime_from_graph(graph)
    rt.prepare(case.params)
    scope = dict(values)
    rt.run(scope)
    return scope


def onnx_model(case: Case, scope: dict[str, np.ndarray], dynamic: bool = False) -> Any:
    """The ONNX model of the case's ops, with the var shapes a model file would declare."""
    block = _block(case.ops, scope, case.params)
    if dynamic:
        for n, v in block.vars.items():
            if n not in case.params and v.shape and v.shape[0] == BATCH:
                v.shape = [-1, *v.shape[1:]]
    info = TensorInfo.from_vars(block.vars, case.params)
    inputs = []
    for n, a in case.feeds.items():
        shape = tuple(a.shape)
        if dynamic and shape and shape[0] == BATCH:
            shape = (-1, *shape[1:])
        inputs.append(GraphInput(n, shape, a.dtype))
    return convert_ops(block.ops, inputs, case.outputs, info, block.vars, dynamic_dim_names=("N",))


def onnx_model_all_shapes(case: Case, scope: dict[str, np.ndarray]) -> Any:
    """The ONNX model the subgraph kernel builds to serve every input shape: every dim of the feeds open (and of
    every computed var, as a program saved with open dims declares them), shapes and folded values merged over
    the probes (pdlite.nnadapter.dynamic)."""
    from pdlite.nnadapter.dynamic import Probes

    block = _block(case.ops, scope, case.params)
    for n, v in block.vars.items():
        if n not in case.params and v.shape:
            v.shape = [-1] * len(v.shape)
    info = TensorInfo.from_vars(block.vars, case.params)
    specs = [(n, tuple(a.shape), (-1,) * a.ndim) for n, a in case.feeds.items()]
    inputs = [GraphInput(n, pat, a.dtype, tuple(f"{n}_d{i}" for i in range(a.ndim)))
              for (n, _, pat), a in zip(specs, case.feeds.values())]
    probes = Probes(info, block.vars, specs)
    return convert_ops(block.ops, inputs, case.outputs, info, block.vars, infer=probes.infer)


def ort_run(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}})


def assert_match(got: np.ndarray, ref: np.ndarray, rel: float, what: str) -> None:
    """Floats: max|got - ref| <= rel * max(1, max|ref|); integers and bools: equal."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != host {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != host {ref.dtype}"
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    finite = np.isfinite(ref)
    assert np.array_equal(finite, np.isfinite(got)), f"{what}: non-finite values differ"
    err = float(np.max(np.abs(got[finite].astype(np.float64) - ref[finite]))) if finite.any() else 0.0
    assert err <= rel * scale, f"{what}: max|onnx - host| = {err:.3g} > {rel} * {scale:.3g}"
