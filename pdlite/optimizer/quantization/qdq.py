"""Rewrite a float Paddle program into Paddle's QDQ format (what PostTrainingQuantization writes with
onnx_format=True), so that Paddle Inference, OpenVINO and pdlite all run it:

    act  -> quantize_linear(act, act@scale) -> dequantize_linear(.., act@scale) -> op
    W    (int8 param, same name) -> dequantize_linear(W, W@scale, quant_axis) -> op

Activation scales come from calibration (pdlite.optimizer.quantization.calibration); weights use
per-channel abs-max along the output-channel axis (conv: 0, conv2d_transpose: 1, mul/matmul [K, N]
weights: 1), W8 = clip(round_half_even(W * 127 / s[c]), -128, 127). Scales and zero points (int32 zeros,
which Paddle ignores) are new persistable variables; every attribute not written takes its Paddle default
(round_type 0, is_test true, qmax 127).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.program import OpDesc, Program, VarDesc
from pdlite.errors import ConfigError
from pdlite.kernels.host.quant import channel_abs_max, channel_view, quantize

# op type -> (activation slot, weight slot, weight output-channel axis)
QUANTIZABLE = {"conv2d": ("Input", "Filter", 0), "depthwise_conv2d": ("Input", "Filter", 0),
               "conv2d_transpose": ("Input", "Filter", 1), "mul": ("X", "Y", 1), "matmul": ("X", "Y", 1),
               "matmul_v2": ("X", "Y", 1)}


@dataclass(frozen=True)
class QuantTarget:
    """One quantizable op of block 0: its index, activation input and float weight."""

    index: int
    op_type: str
    activation: str
    weight: str
    axis: int


def quant_targets(program: Program, params: Mapping[str, np.ndarray], skip: set[str] = frozenset()
                  ) -> list[QuantTarget]:
    """The ops `insert_qdq` would quantize: a quantizable type, a float32 parameter weight of rank 2 or 4,
    a non-parameter activation; ops whose output name is in `skip` are left float."""
    out = []
    for i, op in enumerate(program.main.ops):
        spec = QUANTIZABLE.get(op.type)
        if spec is None or any(n in skip for n in op.output_names()):
            continue
        a, w = op.input(spec[0]), op.input(spec[1])
        if a is None or w is None or a in params or w not in params:
            continue
        warr = np.asarray(params[w])
        if warr.dtype != np.float32 or warr.ndim not in (2, 4):
            continue
        axis = spec[2]
        if op.type in ("matmul", "matmul_v2") and (op.attrs.get("trans_y") or op.attrs.get("transpose_Y")):
            axis = 0
        out.append(QuantTarget(i, op.type, a, w, axis))
    return out


def insert_qdq(program: Program, params: Mapping[str, np.ndarray], act_scales: Mapping[str, float],
               targets: list[QuantTarget]) -> tuple[Program, dict[str, np.ndarray]]:
    """A new program and params with QDQ pairs on the targets' activations and int8 weights."""
    block = replace(program.main, vars=dict(program.main.vars), ops=list(program.main.ops))
    new_params = dict(params)
    inserted: dict[int, list[OpDesc]] = {}
    renamed: dict[str, str] = {}  # activation or weight -> its dequantized name

    def var(name: str, dtype: VarType, shape: list[int], persistable: bool = False) -> None:
        block.vars[name] = VarDesc(name, dtype=dtype, shape=shape, persistable=persistable)

    for t in targets:
        before = inserted.setdefault(t.index, [])
        if t.activation not in renamed:
            s = float(act_scales.get(t.activation, 0.0))
            if not np.isfinite(s) or s <= 0:
                raise ConfigError(f"activation {t.activation!r} ({t.op_type}) has no calibration scale; "
                                  "was it computed by the calibration batches?")
            sname, zname = f"{t.activation}@scale", f"{t.activation}@zero_point"
            q, dq = f"{t.activation}.quantized", f"{t.activation}.quantized.dequantized"
            new_params[sname], new_params[zname] = np.array([s], np.float32), np.zeros(1, np.int32)
            var(sname, VarType.FP32, [1], True)
            var(zname, VarType.INT32, [1], True)
            shape = list(block.vars[t.activation].shape) if t.activation in block.vars else []
            var(q, VarType.FP32, shape)
            var(dq, VarType.FP32, shape)
            attrs = {"quant_axis": -1, "bit_length": 8, "round_type": 0, "is_test": True, "only_observer": False}
            before.append(OpDesc("quantize_linear", {"X": [t.activation], "Scale": [sname], "ZeroPoint": [zname]},
                                 {"Y": [q]}, dict(attrs)))
            before.append(OpDesc("dequantize_linear", {"X": [q], "Scale": [sname], "ZeroPoint": [zname]},
                                 {"Y": [dq]}, dict(attrs)))
            renamed[t.activation] = dq
        if t.weight not in renamed:
            w = np.asarray(params[t.weight])
            s = channel_abs_max(w, t.axis)
            w8 = quantize(w, channel_view(s, t.axis, w.ndim), 127, 0).astype(np.int8)
            sname, zname, dq = f"{t.weight}@scale", f"{t.weight}@zero_point", f"{t.weight}.quantized.dequantized"
            new_params[t.weight], new_params[sname] = w8, s.astype(np.float32)
            new_params[zname] = np.zeros(s.shape, np.int32)
            block.vars[t.weight] = replace(block.vars[t.weight], dtype=VarType.INT8)
            var(sname, VarType.FP32, [int(s.size)], True)
            var(zname, VarType.INT32, [int(s.size)], True)
            var(dq, VarType.FP32, list(w.shape))
            before.append(OpDesc("dequantize_linear", {"X": [t.weight], "Scale": [sname], "ZeroPoint": [zname]},
                                 {"Y": [dq]}, {"quant_axis": t.axis, "bit_length": 8, "round_type": 0,
                                              "is_test": True, "only_observer": False}))
            renamed[t.weight] = dq
    ops: list[OpDesc] = []
    targets_at = {t.index: t for t in targets}
    for i, op in enumerate(block.ops):
        ops.extend(inserted.get(i, []))
        t = targets_at.get(i)
        if t is not None:
            op = op.copy()
            for names in op.inputs.values():
                for k, n in enumerate(names):
                    if n in (t.activation, t.weight):
                        names[k] = renamed[n]
        ops.append(op)
    block.ops = ops
    out = replace(program, blocks=[block, *program.blocks[1:]])
    return out, new_params
