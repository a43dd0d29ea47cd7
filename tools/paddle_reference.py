"""Paddle Inference's outputs for a saved model: the reference the fixture generators store in `case.npz`.

Unoptimised (`switch_ir_optim(False)` unless asked), oneDNN off, one thread: the plain fp32 semantics pdlite
is checked against. Test-only (needs paddlepaddle); the generators in tools/ import it from beside them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def paddle_reference(model_file: str | Path, params_file: str | Path | None, feeds: dict[str, np.ndarray],
                     ir_optim: bool = False) -> dict[str, np.ndarray]:
    """{output name: array} of one Paddle Inference run on `feeds` (params_file None: a model without params)."""
    from paddle import inference

    params = Path(params_file) if params_file is not None else None
    config = inference.Config(str(model_file), str(params) if params is not None and params.is_file() else "")
    config.switch_ir_optim(ir_optim)
    config.disable_mkldnn()
    config.set_cpu_math_library_num_threads(1)
    config.disable_glog_info()
    pred = inference.create_predictor(config)
    for n in pred.get_input_names():
        pred.get_input_handle(n).copy_from_cpu(feeds[n])
    pred.run()
    return {n: pred.get_output_handle(n).copy_to_cpu() for n in pred.get_output_names()}
