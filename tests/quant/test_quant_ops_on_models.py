"""Every quantizer of the real quantized models, run by pdlite's host kernel on Paddle's own activations,
gives exactly Paddle's output (needs paddle: the activations come from Paddle's static executor on the
fixture's program and case input). This separates pdlite's quantization semantics from float noise in
the ops between quantizers (see test_ptq_models.FLIP_PRONE)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.quant._util import ROOT, case

QUANT_OPS = {"quantize_linear", "dequantize_linear", "fake_quantize_range_abs_max",
             "fake_channel_wise_dequantize_max_abs", "fake_quantize_moving_average_abs_max"}


@pytest.mark.parametrize("name", ["ptq_ppocr_det_qdq", "ptq_ppocr_cls_qdq", "ptq_cnn_fake", "ptq_det_qdq"])
def test_quantizers_on_paddle_activations(name: str) -> None:
    paddle = pytest.importorskip("paddle")
    import pdlite.kernels.host  # noqa: F401
    from pdlite.core.program import OpDesc
    from pdlite.kernels.registry import kernels_for
    from pdlite.operators.registry import OPS

    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    ins, _, _ = case(ROOT / name)
    paddle.enable_static()
    try:
        with paddle.pir_utils.OldIrGuard():
            exe = paddle.static.Executor(paddle.CPUPlace())
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                prog, _, _ = paddle.static.load_inference_model(str(ROOT / name / "inference"), exe)
                ops = [op for op in prog.global_block().ops if op.type in QUANT_OPS]
                names = sorted({n for op in ops for s in op.input_names + op.output_names
                                for n in (op.input(s) if s in op.input_names else op.output(s))})
                values = dict(zip(names, exe.run(prog, feed=ins, fetch_list=names)))
    finally:
        paddle.disable_static()
    assert len(ops) >= 10
    writers: dict[str, int] = {}
    for op in prog.global_block().ops:
        for n in op.output_arg_names:
            writers[n] = writers.get(n, 0) + 1
    checked = 0
    for op in ops:
        if any(writers[n] > 1 for n in op.output_arg_names if n not in op.input_arg_names):
            continue  # a name written twice: the fetched value is the last writer's
        desc = OpDesc(op.type, {s: op.input(s) for s in op.input_names}, {s: op.output(s) for s in op.output_names},
                      {a: op.attr(a) for a in op.attr_names})
        attached = OPS.get(op.type).attach(desc)
        kernel = next(k for k in kernels_for(op.type)).cls(attached)
        outs = kernel.run({s: [np.asarray(values[n]) for n in ns] for s, ns in attached.inputs.items() if ns})
        for slot, vals in outs.items():
            for n, v in zip(attached.outputs.get(slot) or [], vals):
                if n in desc.input_names():
                    continue  # in-place state
                np.testing.assert_array_equal(v, values[n], err_msg=f"{name}: {op.type} -> {n}")
                checked += 1
    assert checked >= 10
