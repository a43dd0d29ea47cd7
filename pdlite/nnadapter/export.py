"""A whole Paddle program as one ONNX model (what `pdlite export-onnx` writes).

The program's own ops (block 0, feed/fetch removed) go through the same converters as the
subgraphs, with the shapes the program declares: dims it leaves open (-1, e.g. the batch)
stay symbolic, so the file accepts any batch where the converters allow it. Every op is
checked before conversion so that a failure lists all unconvertible ops at once.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import Program
from pdlite.errors import PdliteError
from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops, infer_op, refusal, require_onnx


class UnconvertibleOpsError(PdliteError):
    """Some ops of a program have no ONNX conversion."""


def export_program(program: Program, params: Mapping[str, Any], *, shapes: Mapping[str, Sequence[int]] | None = None,
                   check: bool = True, name: str = "pdlite") -> Any:
    """The ONNX ModelProto of `program` (params become initializers); `shapes` fixes feed shapes."""
    onnx = require_onnx()
    from pdlite.registries import load_registries

    load_registries()
    block = program.main
    feeds, fetches = program.feed_names(), program.fetch_names()
    if not feeds or not fetches:
        raise PdliteError("export-onnx: the program has no feed or no fetch ops (is it an inference model?)")
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    arrays = {k: np.asarray(getattr(v, "array", v)) for k, v in params.items()}
    info = TensorInfo.from_vars(block.vars, arrays)
    inputs = []
    for n in feeds:
        v = block.vars.get(n)
        if v is None or v.dtype is None:
            raise PdliteError(f"export-onnx: feed {n!r} has no declared dtype")
        shape = tuple(int(d) for d in (shapes or {}).get(n, v.shape))
        inputs.append(GraphInput(n, shape, numpy_dtype(v.dtype, f"feed {n!r}")))
        info.shapes[n] = shape
    bad: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    probe = info.copy()
    for op in ops:
        why = refusal(op, probe)
        if why is not None:
            bad[op.type] += 1
            reasons.setdefault(op.type, why)
        infer_op(op, probe, block.vars)
    if bad:
        lines = "\n".join(f"  {t} x{n}: {reasons[t]}" for t, n in sorted(bad.items()))
        raise UnconvertibleOpsError(f"{sum(bad.values())} op(s) of {len(bad)} type(s) cannot be converted to ONNX:\n"
                                    f"{lines}")
    model = convert_ops(ops, inputs, fetches, info, block.vars, graph_name=name, dynamic_dim_names=("batch",))
    model.doc_string = "exported by pdlite export-onnx"
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model
