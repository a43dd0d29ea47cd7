"""Rewrite a float Paddle program into Paddle's QDQ format (what PostTrainingQuantization writes with
onnx_format=True), so that Paddle Inference, OpenVINO and pdlite all run it:

    act  -> quantize_linear(act, act@scale) -> dequantize_linear(.., act@scale) -> op
    W    (int8 param, same name) -> dequantize_linear(W, W@scale, quant_axis) -> op

Ops with a weight (QUANTIZABLE) get both; elementwise_add of two activations (ACTIVATION_OPS) gets its two
inputs quantized, as Paddle's PostTrainingQuantization does when `quantizable_op_type` names it: a residual
add between int8 convolutions then stays int8 on the devices (a conv whose result feeds the add can requantize
right after itself, and the add runs as an integer add). hard_swish and swish get their input quantized (they
are not monotone: a quantizer after them cannot move up to the conv before them). Average pooling and
elementwise_mul of two activations get their inputs quantized too: a squeeze-excitation block (global average
pool -> 1x1 convs -> hard sigmoid -> x * gate, MobileNetV3 / PP-LCNet) then runs on int8 codes end to end
(ONNX Runtime: QLinearGlobalAveragePool, QLinearMul) instead of dequantizing x for its pool and its gate. Max
pooling is left alone: a quantizer moves through it (Q(max(v)) = max(Q(v))), so quantizing its input would only
add a second rounding between two convs. Every activation is quantized once, however many quantized ops read it;
a convolution's output quantized for one reader is quantized right after the convolution and read dequantized by
all its readers (but fetch), so the convolution can write int8.

Activation scales come from calibration (pdlite.optimizer.quantization.calibration); weights use
per-channel abs-max along the output-channel axis (conv: 0, conv2d_transpose: 1, mul/matmul [K, N]
weights: 1), W8 = clip(round_half_even(W * 127 / s[c]), -128, 127). Scales and zero points (int32 zeros,
which Paddle ignores) are new persistable variables; every attribute not written takes its Paddle default
(round_type 0, is_test true, qmax 127).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.program import OpDesc, Program, VarDesc
from pdlite.errors import ConfigError
from pdlite.kernels.host.quant import channel_abs_max, channel_view, quantize
from pdlite.optimizer.passes.constant_folding import NON_DETERMINISTIC

# op type -> (activation slot, weight slot, weight output-channel axis)
QUANTIZABLE = {"conv2d": ("Input", "Filter", 0), "depthwise_conv2d": ("Input", "Filter", 0),
               "conv2d_transpose": ("Input", "Filter", 1), "mul": ("X", "Y", 1), "matmul": ("X", "Y", 1),
               "matmul_v2": ("X", "Y", 1)}
# op type -> activation slots (ops without weights, quantized on their activation inputs only). hard_swish and
# swish are not monotone, so a quantizer after them cannot move up to the conv before them: quantizing their
# input gives that conv a requantized int8 output (QLinearConv on ONNX Runtime). pool2d: average pools only
ACTIVATION_OPS = {"elementwise_add": ("X", "Y"), "hard_swish": ("X",), "swish": ("X",), "pool2d": ("X",),
                  "elementwise_mul": ("X", "Y")}
CONV_OPS = ("conv2d", "depthwise_conv2d")
# what `pdlite quantize` quantizes unless told otherwise (`--ops`)
DEFAULT_OPS = (*QUANTIZABLE, *ACTIVATION_OPS)


@dataclass(frozen=True)
class QuantTarget:
    """One quantizable op of block 0: its index, activation inputs and float weight (None: activations only)."""

    index: int
    op_type: str
    activations: tuple[str, ...]
    weight: str | None = None
    axis: int = 0


def quant_targets(program: Program, params: Mapping[str, np.ndarray], skip: set[str] = frozenset(),
                  ops: Iterable[str] = DEFAULT_OPS) -> list[QuantTarget]:
    """The ops `insert_qdq` would quantize: a type in `ops`; with a float32 parameter weight of rank 2 or 4 and a
    non-parameter activation (QUANTIZABLE), or float32 non-parameter activations only (ACTIVATION_OPS); ops
    whose output name is in `skip` are left float."""
    wanted = set(ops)
    unknown = wanted - set(QUANTIZABLE) - set(ACTIVATION_OPS)
    if unknown:
        raise ConfigError(f"cannot quantize op type(s) {sorted(unknown)}; quantizable: "
                          f"{sorted((*QUANTIZABLE, *ACTIVATION_OPS))}")
    block = program.main
    const = _constants(block.ops, params)
    out = []
    for i, op in enumerate(block.ops):
        if op.type not in wanted or any(n in skip for n in op.output_names()):
            continue
        if op.type == "pool2d" and op.attrs.get("pooling_type", "max") != "avg":
            continue  # max pooling: see the module doc
        if op.type in ACTIVATION_OPS:
            names = tuple(op.input(slot) for slot in ACTIVATION_OPS[op.type])
            if all(n is not None and n not in const and n in block.vars and block.vars[n].dtype == VarType.FP32
                   for n in names):
                out.append(QuantTarget(i, op.type, names))  # type: ignore[arg-type]
            continue
        spec = QUANTIZABLE[op.type]
        a, w = op.input(spec[0]), op.input(spec[1])
        if a is None or w is None or a in const or w not in params:
            continue
        warr = np.asarray(params[w])
        if warr.dtype != np.float32 or warr.ndim not in (2, 4):
            continue
        axis = spec[2]
        if op.type in ("matmul", "matmul_v2") and (op.attrs.get("trans_y") or op.attrs.get("transpose_Y")):
            axis = 0
        out.append(QuantTarget(i, op.type, (a,), w, axis))
    return out


def _constants(ops: list[OpDesc], params: Mapping[str, np.ndarray]) -> set[str]:
    """The parameters and the values computed from parameters only (e.g. a conv bias reshaped for its add):
    constants, not activations, so there is nothing to calibrate or quantize."""
    const = set(params)
    for op in ops:
        ins = op.input_names()
        if ins and op.type not in NON_DETERMINISTIC and op.type not in ("feed", "fetch") and all(
                n in const for n in ins):
            const.update(op.output_names())
    return const


def _conv_outputs(ops: list[OpDesc], const: set[str]) -> dict[str, int]:
    """Values computed by a conv and then only per-channel affine ops (batch norm, add or multiply by a
    constant, `_constants`), each written once: name -> index of the op writing it."""
    writes: dict[str, int] = {}
    for n in (n for op in ops for n in op.output_names()):
        writes[n] = writes.get(n, 0) + 1
    out: dict[str, int] = {}
    for i, op in enumerate(ops):
        if op.type in CONV_OPS:
            value = op.output("Output")
        elif op.type == "batch_norm" and op.input("X") in out:
            value = op.output("Y")
        elif op.type in ("elementwise_add", "elementwise_mul") and op.input("X") in out and op.input("Y") in const:
            value = op.output("Out")
        else:
            continue
        if value is not None and writes.get(value) == 1:
            out[value] = i
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

    # a conv output (after its batch norm or bias add, if any) quantized for one reader is quantized right after
    # it and read dequantized by every reader but fetch: the conv then writes int8 on integer backends (ONNX
    # Runtime's QLinearConv needs its output quantized and read by nothing else; e.g. PP-OCR's residual
    # squeeze-excitation convs, read by the add, the pool and the scale). Only for values written once.
    conv_at = _conv_outputs(block.ops, _constants(block.ops, params))
    for t in targets:
        for act in t.activations:
            if act in renamed:
                continue
            before = inserted.setdefault(conv_at[act] + 1 if act in conv_at else t.index, [])
            s = float(act_scales.get(act, 0.0))
            if not np.isfinite(s) or s <= 0:
                raise ConfigError(f"activation {act!r} ({t.op_type}) has no calibration scale; "
                                  "was it computed by the calibration batches?")
            sname, zname = f"{act}@scale", f"{act}@zero_point"
            q, dq = f"{act}.quantized", f"{act}.quantized.dequantized"
            new_params[sname], new_params[zname] = np.array([s], np.float32), np.zeros(1, np.int32)
            var(sname, VarType.FP32, [1], True)
            var(zname, VarType.INT32, [1], True)
            shape = list(block.vars[act].shape) if act in block.vars else []
            var(q, VarType.FP32, shape)
            var(dq, VarType.FP32, shape)
            attrs = {"quant_axis": -1, "bit_length": 8, "round_type": 0, "is_test": True, "only_observer": False}
            before.append(OpDesc("quantize_linear", {"X": [act], "Scale": [sname], "ZeroPoint": [zname]},
                                 {"Y": [q]}, dict(attrs)))
            before.append(OpDesc("dequantize_linear", {"X": [q], "Scale": [sname], "ZeroPoint": [zname]},
                                 {"Y": [dq]}, dict(attrs)))
            renamed[act] = dq
        if t.weight is None:
            continue
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
            attrs = {"quant_axis": t.axis, "bit_length": 8, "round_type": 0, "is_test": True, "only_observer": False}
            inserted.setdefault(t.index, []).append(OpDesc(
                "dequantize_linear", {"X": [t.weight], "Scale": [sname], "ZeroPoint": [zname]}, {"Y": [dq]}, attrs))
            renamed[t.weight] = dq
    shared = {n for n in renamed if n in conv_at}
    ops: list[OpDesc] = []
    targets_at = {t.index: t for t in targets}
    for i, op in enumerate(block.ops):
        ops.extend(inserted.get(i, []))
        t = targets_at.get(i)
        mine = set(t.activations) | {t.weight} if t is not None else set()
        reads_shared = op.type != "fetch" and any(n in shared for n in op.input_names())
        if mine or reads_shared:
            op = op.copy()
            for names in op.inputs.values():
                for k, n in enumerate(names):
                    if n in mine or (reads_shared and n in shared):
                        names[k] = renamed[n]
        ops.append(op)
    block.ops = ops
    out = replace(program, blocks=[block, *program.blocks[1:]])
    return out, new_params
