"""Host kernels of the quantization ops, with Paddle's exact fp32 simulation (phi fake_quantize_functor).

All arithmetic is float32 in Paddle's operation order:
- inverse(s) = 1 / (s + 1e-6) when s <= 1e-30, else 1 / s;
- the QDQ pair uses the `qmax` attribute as bin_cnt (Paddle 3 does not read its bit_length), the fake_*
  ops 2^(bit_length-1) - 1;
- quantize, round_type 0: q = clip(round_half_even((bin_cnt * inverse(s)) * x), -bin_cnt - 1, bin_cnt);
- quantize, round_type 1: q = round_half_away_from_zero((bin_cnt * inverse(s)) * clip(x, -s, s));
- dequantize: (q * s) / bin_cnt (not q * (s / bin_cnt)).
Per-channel scales run along quant_axis 0 or 1 (Paddle supports no other). Every op runs in inference
mode (is_test, fixed by the op definitions as Paddle Inference does), so the training-only state outputs
(OutState, OutAccum, moving-average OutScale) are not written.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, PrecisionType
from pdlite.errors import KernelError
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.operators.quant import bin_count

Ins = dict[str, list[np.ndarray]]
Outs = dict[str, list[np.ndarray]]
F32 = np.float32
ANY_IN = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
F32_OUT = TensorType(HOST, PrecisionType.FP32, ANY_LAYOUT)


def _kernel(op_type: str, *any_inputs: str):
    """Register a float32 host kernel; `any_inputs` slots accept any dtype (int8 weights, int64 Iter)."""
    return register_kernel(op_type, precision=PrecisionType.FP32, layout=ANY_LAYOUT,
                           inputs={s: ANY_IN for s in any_inputs}, outputs={"Out": F32_OUT, "Y": F32_OUT})


def inverse(s: np.ndarray) -> np.ndarray:
    """Paddle's guarded reciprocal of a scale (float32)."""
    s = np.asarray(s, F32)
    with np.errstate(divide="ignore"):
        return np.where(s <= F32(1e-30), F32(1) / (s + F32(1e-6)), F32(1) / s).astype(F32)


def round_half_away(y: np.ndarray) -> np.ndarray:
    """std::round on float32 values (ties away from zero), exact: the +0.5 is done in float64."""
    a = np.floor(np.abs(y).astype(np.float64) + 0.5)
    return np.copysign(a, y).astype(F32)


def channel_view(v: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A 1-D per-channel vector shaped to broadcast along `axis` of a rank-`rank` tensor (-1: a scalar)."""
    v = np.asarray(v, F32).reshape(-1)
    if axis < 0:
        return v[:1].reshape(())
    shape = [1] * rank
    shape[axis] = v.size
    return v.reshape(shape)


def quantize(x: np.ndarray, s: np.ndarray, bin_cnt: int, round_type: int) -> np.ndarray:
    """The integer grid values (as float32) of `x` for scale `s` (a scalar or a broadcastable per-channel array)."""
    x = np.asarray(x, F32)
    k = F32(bin_cnt) * inverse(s)
    if int(round_type) == 0:
        q = np.rint(k * x)
        return np.clip(q, F32(-bin_cnt - 1), F32(bin_cnt)).astype(F32)
    return round_half_away(k * np.clip(x, -s, s))


def dequantize(q: np.ndarray, s: np.ndarray, bin_cnt: float) -> np.ndarray:
    """(q * s) / bin_cnt in float32."""
    return ((np.asarray(q, F32) * s) / F32(bin_cnt)).astype(F32)


def abs_max(x: np.ndarray) -> np.ndarray:
    return np.array([np.abs(x).max() if x.size else 0.0], F32)


def channel_abs_max(x: np.ndarray, axis: int) -> np.ndarray:
    """max|x| per channel of axis 0 or 1 (Paddle's FindChannelAbsMaxFunctor)."""
    other = tuple(i for i in range(x.ndim) if i != axis)
    return np.abs(x).max(axis=other).astype(F32) if x.size else np.zeros(x.shape[axis], F32)


class _QuantKernel(Kernel):
    def _x(self, ins: Ins) -> np.ndarray:
        x = ins["X"][0]
        if x.dtype.kind != "f":
            x = x.astype(F32)
        return x

    def _bits(self) -> int:
        return bin_count(self.attrs["bit_length"])

    def _fail(self, ins: Ins, msg: str) -> KernelError:
        desc = ", ".join(f"{k} {list(v[0].shape)} {v[0].dtype}" for k, v in ins.items() if v)
        return KernelError(f"{self.op.type} ({desc}): {msg}")

    def _with_state(self, outs: Outs, **state: np.ndarray) -> Outs:
        for slot, v in state.items():
            if self.op.outputs.get(slot):
                outs[slot] = [v]
        return outs


@_kernel("quantize_linear", "ZeroPoint", "InAccum", "InState")
class QuantizeLinear(_QuantKernel):
    """Y = the quantized X (integers as float32), per tensor or per channel; only_observer: Y = X."""

    def run(self, ins: Ins) -> Outs:
        x = self._x(ins)
        if self.attrs["only_observer"]:
            return {"Y": [x.copy()]}
        s = channel_view(ins["Scale"][0], int(self.attrs["quant_axis"]), x.ndim)
        return {"Y": [quantize(x, s, int(self.attrs["qmax"]), self.attrs["round_type"])]}


@_kernel("dequantize_linear", "X", "ZeroPoint", "InAccum", "InState")
class DequantizeLinear(_QuantKernel):
    """Y = (X * Scale) / qmax, per tensor or per channel; X may hold int8 weights. Weights (X and Scale
    parameters) are dequantized once, when the program is prepared."""

    _weight: np.ndarray | None = None

    def prepare(self, params) -> None:
        names = (self.op.input("X"), self.op.input("Scale"))
        if all(n in params for n in names):
            self._weight = self.run({"X": [np.asarray(params[names[0]])], "Scale": [np.asarray(params[names[1]])]},
                                    )["Y"][0]

    def run(self, ins: Ins) -> Outs:
        if self._weight is not None:
            return {"Y": [self._weight]}
        x = self._x(ins)
        if self.attrs["only_observer"]:
            return {"Y": [x.astype(F32, copy=True)]}
        axis = int(self.attrs["quant_axis"])
        s = channel_view(ins["Scale"][0], axis, x.ndim)
        return {"Y": [dequantize(x, s, int(self.attrs["qmax"]))]}


def _fake_outs(kernel: _QuantKernel, x: np.ndarray, scale: np.ndarray, dequant: bool, axis: int = -1) -> Outs:
    bits, rt = kernel._bits(), kernel.attrs["round_type"]
    s = channel_view(scale, axis, x.ndim)
    q = quantize(x, s, bits, rt)
    return {"Out": [dequantize(q, s, bits) if dequant else q]}


@_kernel("fake_quantize_abs_max")
class FakeQuantizeAbsMax(_QuantKernel):
    """Scale = max|X|; Out = the quantized (fake_quantize_dequantize: and dequantized) X."""

    dequant = False

    def run(self, ins: Ins) -> Outs:
        x = self._x(ins)
        sc = abs_max(x)
        return self._with_state(_fake_outs(self, x, sc[0], self.dequant), OutScale=sc)


@_kernel("fake_quantize_dequantize_abs_max")
class FakeQuantizeDequantizeAbsMax(FakeQuantizeAbsMax):
    dequant = True


@_kernel("fake_quantize_range_abs_max", "Iter")
@_kernel("fake_quantize_moving_average_abs_max", "InAccum", "InState")
class FakeQuantizeInScale(_QuantKernel):
    """Out = the quantized (fake_quantize_dequantize_*: and dequantized) X with scale InScale."""

    dequant = False

    def run(self, ins: Ins) -> Outs:
        x = self._x(ins)
        outs = _fake_outs(self, x, np.asarray(ins["InScale"][0], F32).reshape(-1)[0], self.dequant)
        # the state outputs are Paddle's in-place aliases of the state inputs (PIR programs read them)
        state = {out: ins[src][0] for out, src in (("OutScale", "InScale"), ("OutAccum", "InAccum"),
                                                    ("OutState", "InState")) if ins.get(src)}
        return self._with_state(outs, **state)


@_kernel("fake_quantize_dequantize_moving_average_abs_max", "InAccum", "InState")
class FakeQuantizeDequantizeMovingAverageAbsMax(FakeQuantizeInScale):
    dequant = True


# fake_channel_wise_quantize_abs_max has no kernel: in inference Paddle quantizes with the values stored in
# its OutScale *output* variable, which an op cannot read; frozen (exported) programs never hold it.
@_kernel("fake_channel_wise_quantize_dequantize_abs_max")
class FakeChannelWiseQuantizeDequantizeAbsMax(_QuantKernel):
    """Scale[c] = max|X| over channel c of quant_axis; Out = the quantized and dequantized X."""

    def run(self, ins: Ins) -> Outs:
        x = self._x(ins)
        axis = int(self.attrs["quant_axis"])
        sc = channel_abs_max(x, axis)
        return self._with_state(_fake_outs(self, x, sc, True, axis), OutScale=sc)


@_kernel("fake_dequantize_max_abs", "X")
class FakeDequantizeMaxAbs(_QuantKernel):
    """Out = (X * Scale) / max_range."""

    def run(self, ins: Ins) -> Outs:
        s = np.asarray(ins["Scale"][0], F32).reshape(-1)[0]
        return {"Out": [dequantize(self._x(ins), s, F32(self.attrs["max_range"]))]}


@_kernel("fake_channel_wise_dequantize_max_abs", "X")
class FakeChannelWiseDequantizeMaxAbs(_QuantKernel):
    """One scale: (X * s[c]) / r0 along quant_axis; two: ((X * s0[c]) * s1) / (r0 * r1) along x_num_col_dims,
    r_i = 2^(quant_bits[i]-1) - 1."""

    def run(self, ins: Ins) -> Outs:
        x = self._x(ins)
        scales = ins["Scales"]
        bits = [bin_count(b) for b in self.attrs["quant_bits"]]
        if len(scales) == 1:
            s = channel_view(scales[0], int(self.attrs["quant_axis"]), x.ndim)
            return {"Out": [dequantize(x, s, F32(bits[0]))]}
        s0 = channel_view(scales[0], int(self.attrs["x_num_col_dims"]), x.ndim)
        s1 = np.asarray(scales[1], F32).reshape(-1)[0]
        r = F32(F32(bits[0]) * F32(bits[1]))
        return {"Out": [(((x * s0) * s1) / r).astype(F32)]}


@_kernel("moving_average_abs_max_scale", "InAccum", "InState")
class MovingAverageAbsMaxScale(_QuantKernel):
    """Out = X (the scale statistics are training-only)."""

    def run(self, ins: Ins) -> Outs:
        return {"Out": [self._x(ins).copy()]} if self.op.outputs.get("Out") else {}


@_kernel("dequantize_abs_max", "X")
class DequantizeAbsMax(_QuantKernel):
    """Out = (Scale * X) / max_range, X int8."""

    def run(self, ins: Ins) -> Outs:
        s = np.asarray(ins["Scale"][0], F32).reshape(-1)[0]
        return {"Out": [((s * self._x(ins)) / F32(self.attrs["max_range"])).astype(F32)]}


@_kernel("dequantize_log", "X")
class DequantizeLog(_QuantKernel):
    """Out = Dict[X] for X >= 0, -Dict[X + 128] for X < 0."""

    def run(self, ins: Ins) -> Outs:
        x = np.asarray(ins["X"][0]).astype(np.int64)
        table = np.asarray(ins["Dict"][0], F32).reshape(-1)
        if table.size < 128:
            raise self._fail(ins, f"Dict must hold 128 values, got {table.size}")
        return {"Out": [np.where(x < 0, -table[np.clip(x + 128, 0, 127)], table[np.clip(x, 0, 127)]).astype(F32)]}
