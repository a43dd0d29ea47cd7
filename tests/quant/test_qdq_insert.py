"""pdlite/optimizer/quantization/qdq.py: where `insert_qdq` puts the quantizers (what `pdlite quantize` writes).

Checked on small programs: the inputs of hard_swish / swish, of average pools and of products of two activations
(a squeeze-excitation gate) are quantized, a max pool's are not; a conv's value (after its batch norm
or bias add) that one quantized op reads is quantized right after it and every other reader but fetch reads the
dequantized value (so ONNX Runtime can run the conv as QLinearConv); a value written twice is left to its
readers; and the program still runs on the host, equal to a NumPy evaluation of the same fake quantization.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.types import Place
from pdlite.kernels.host.quant import dequantize, quantize
from pdlite.optimizer.analysis import analyse
from pdlite.optimizer.pipeline import ESSENTIAL_PASSES
from pdlite.optimizer.quantization import DEFAULT_OPS, insert_qdq, quant_targets
from tests.optimizer.util import Builder, run_result

RNG = np.random.default_rng(0)


def _se_program() -> Builder:
    """x -> conv (+ bias) = c -> [pool -> sigmoid = a] ; c * a = m ; c + m = s -> hard_swish -> conv -> y;
    c and s fetched too: a residual squeeze-excitation block as in PP-OCR's det neck."""
    b = Builder()
    x = b.feed("x", [1, 3, 6, 6])
    b.op("conv2d", {"Input": x, "Filter": b.param("w", RNG.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32))},
         {"Output": "cv"}, strides=[1, 1], paddings=[1, 1], dilations=[1, 1], groups=1)
    b.op("elementwise_add", {"X": "cv", "Y": b.param("bias", RNG.normal(0, 0.1, 4).astype(np.float32))},
         {"Out": "c"}, axis=1)
    b.op("pool2d", {"X": "c"}, {"Out": "p"}, pooling_type="avg", global_pooling=True, ksize=[1, 1])
    b.op("sigmoid", {"X": "p"}, {"Out": "a"})
    b.op("elementwise_mul", {"X": "c", "Y": "a"}, {"Out": "m"}, axis=-1)
    b.op("elementwise_add", {"X": "c", "Y": "m"}, {"Out": "s"}, axis=-1)
    b.op("hard_swish", {"X": "s"}, {"Out": "h"})
    b.op("conv2d", {"Input": "h", "Filter": b.param("w2", RNG.normal(0, 0.3, (2, 4, 1, 1)).astype(np.float32))},
         {"Output": "y"}, strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1)
    b.fetch("y", "c")
    return b


def _quantized(b: Builder, ops: tuple[str, ...] = DEFAULT_OPS) -> tuple[list, dict]:
    program, params = b.program(), dict(b.params)
    targets = quant_targets(program, params, ops=ops)
    names = {n for t in targets for n in t.activations}
    prog, new_params = insert_qdq(program, params, {n: 0.05 for n in names}, targets)
    return prog.main.ops, new_params


def test_conv_value_quantized_once_after_the_conv_for_every_reader_but_fetch() -> None:
    ops, _ = _quantized(_se_program())
    types = [op.type for op in ops]
    at = types.index("elementwise_add")  # the conv's bias add writing c
    assert ops[at].output("Out") == "c" and types[at + 1:at + 3] == ["quantize_linear", "dequantize_linear"]
    assert ops[at + 1].input("X") == "c"
    dq = "c.quantized.dequantized"
    readers = {op.type: op for op in ops[at + 3:] if dq in op.input_names()}
    assert set(readers) == {"pool2d", "elementwise_mul", "elementwise_add"}
    assert readers["elementwise_mul"].input("X") == dq and readers["elementwise_add"].input("X") == dq
    fetch = [op.input("X") for op in ops if op.type == "fetch"]
    assert fetch == ["y", "c"]  # the fetched value stays the float one
    assert sum(op.type == "quantize_linear" and op.input("X") == "c" for op in ops) == 1


def test_hard_swish_input_quantized() -> None:
    ops, _ = _quantized(_se_program())
    (hs,) = [op for op in ops if op.type == "hard_swish"]
    assert hs.input("X") == "s.quantized.dequantized"
    q = [op for op in ops if op.type == "quantize_linear" and op.input("X") == "s"]
    assert len(q) == 1  # one quantizer for the add's output, read by hard_swish only


def test_squeeze_excitation_gate_and_average_pool_inputs_quantized_max_pool_not() -> None:
    """The product c * a of two activations reads both dequantized (the gate a through its own quantizer); an
    average pool of a value that is no conv's reads it dequantized; a max pool reads the float value (a quantizer
    moves through a max, so one before it would only add a rounding)."""
    ops, _ = _quantized(_se_program())
    (mul,) = [op for op in ops if op.type == "elementwise_mul"]
    assert (mul.input("X"), mul.input("Y")) == ("c.quantized.dequantized", "a.quantized.dequantized")
    assert sum(op.type == "quantize_linear" and op.input("X") == "a" for op in ops) == 1
    b = _se_program()
    b.op("pool2d", {"X": "h"}, {"Out": "pa"}, pooling_type="avg", global_pooling=True, ksize=[1, 1])
    b.op("pool2d", {"X": "h"}, {"Out": "pm"}, pooling_type="max", global_pooling=True, ksize=[1, 1])
    b.fetch("pa", "pm")
    ops, _ = _quantized(b)
    pools = {op.output("Out"): op.input("X") for op in ops if op.type == "pool2d"}
    assert (pools["pa"], pools["pm"]) == ("h.quantized.dequantized", "h"), pools


def test_value_written_twice_keeps_its_readers() -> None:
    b = _se_program()
    b.block.ops.insert(3, b.block.ops[1].copy())  # c written a second time, before the pool reads it
    ops, _ = _quantized(b, tuple(o for o in DEFAULT_OPS if o not in ("pool2d", "elementwise_mul")))  # float readers
    assert next(op for op in ops if op.type == "pool2d").input("X") == "c"
    (q,) = [i for i, op in enumerate(ops) if op.type == "quantize_linear" and op.input("X") == "c"]
    after = next(op for op in ops[q:] if op.type not in ("quantize_linear", "dequantize_linear"))
    assert after.type == "elementwise_add" and after.input("X") == "c.quantized.dequantized"  # the quantized add


def _fq(v: np.ndarray, s: float = 0.05) -> np.ndarray:
    """quantize_linear -> dequantize_linear at scale s (bit_length 8, round_type 0), with the host kernels'
    float steps (they are checked against Paddle in test_quant_ops.py)."""
    s32 = np.float32(s)
    return dequantize(quantize(v, s32, 127, 0), s32, 127)


def test_quantized_program_runs_and_matches_numpy() -> None:
    b = _se_program()
    ops, params = _quantized(b)
    b.block.ops[:] = ops
    b.params.clear()
    b.params.update(params)
    for n, v in params.items():
        b._var(n, list(np.shape(v)), np.asarray(v).dtype, persistable=True)
    for op in ops:
        for n in op.output_names():
            b._var(n)
    x = RNG.normal(0, 1, (1, 3, 6, 6)).astype(np.float32)
    res = analyse(b.program(), dict(b.params), [Place()], ESSENTIAL_PASSES)
    got_y, got_c = run_result(res, {"x": x})

    def conv(v: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
        vp = np.pad(v, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        k = w.shape[-1]
        out = np.zeros((1, w.shape[0], 6, 6), np.float64)
        for i in range(k):
            for j in range(k):
                out += np.einsum("nchw,oc->nohw", vp[:, :, i:i + 6, j:j + 6], w[:, :, i, j])
        return out.astype(np.float32)

    def wq(name: str) -> np.ndarray:
        return params[name].astype(np.float32) * params[f"{name}@scale"].reshape(-1, 1, 1, 1) / 127

    c = conv(_fq(x), wq("w"), 1) + params["bias"].reshape(1, -1, 1, 1)
    cq = _fq(c)
    a = 1 / (1 + np.exp(-cq.mean((2, 3), keepdims=True)))
    s = _fq(cq) + _fq(cq * _fq(a))  # the gate quantized as the product's second input
    h = _fq(s) * np.clip(_fq(s) + 3, 0, 6) / 6
    y = conv(_fq(h), wq("w2"), 0)
    tol = 1e-4
    assert np.abs(got_c - c).max() <= tol * np.abs(c).max()
    assert np.abs(got_y - y).max() <= tol * np.abs(y).max(), np.abs(got_y - y).max()


def _conv_reshaped_bias() -> Builder:
    """x -> conv2d = cv; c = cv + reshape2(bias) (paddle.vision MobileNetV3's bias add)."""
    b = Builder()
    x = b.feed("x", [1, 3, 6, 6])
    b.op("conv2d", {"Input": x, "Filter": b.param("w", RNG.normal(0, 0.3, (4, 3, 1, 1)).astype(np.float32))},
         {"Output": "cv"}, strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1)
    b.op("reshape2", {"X": b.param("bias", np.zeros(4, np.float32))}, {"Out": "rb", "XShape": "rb_shape"},
         shape=[1, 4, 1, 1])
    b.op("elementwise_add", {"X": "cv", "Y": "rb"}, {"Out": "c"}, axis=-1)
    return b


def test_values_computed_from_parameters_are_not_activations() -> None:
    """paddle.vision's MobileNetV3 adds a conv bias reshaped by reshape2 (a value of parameters only): the add
    is no residual add of two activations and is left float (it has nothing to calibrate; `pdlite quantize`
    used to stop with "has no calibration scale")."""
    b = _conv_reshaped_bias()
    b.fetch("c")
    targets = quant_targets(b.program(), b.params)
    assert [t.op_type for t in targets] == ["conv2d"]


def test_conv_value_after_a_reshaped_bias_is_shared_too() -> None:
    """A conv + add of a reshaped (constant) bias, read by a quantized conv and by a pool: quantized once right
    after the add, and the pool reads the dequantized value."""
    b = _conv_reshaped_bias()
    b.op("pool2d", {"X": "c"}, {"Out": "p"}, pooling_type="avg", global_pooling=True, ksize=[1, 1])
    b.op("conv2d", {"Input": "c", "Filter": b.param("w2", RNG.normal(0, 0.3, (2, 4, 1, 1)).astype(np.float32))},
         {"Output": "y"}, strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1)
    b.fetch("y", "p")
    ops, _ = _quantized(b)
    at = next(i for i, op in enumerate(ops) if op.type == "elementwise_add")
    assert ops[at + 1].type == "quantize_linear" and ops[at + 1].input("X") == "c"
    assert next(op for op in ops if op.type == "pool2d").input("X") == "c.quantized.dequantized"
