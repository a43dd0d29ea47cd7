"""Host kernels of the integer ops the optimizer's int8 passes make (pdlite/optimizer/passes/quant_int8.py).

- `quantized_conv2d`: act(sum_k q(x) * W8 * (in_scale / qmax) * WeightScale[m] + Bias (+ ResidualData)), one group
  or depthwise (groups = channels, one filter each: native_src/qdepthwise.c), NCHW. q(x) is Paddle's quantize_linear
  of the float input (round_type 0 or 1); the sums are exact int32 (native_src/qgemm.c: AVX512-VNNI, AVX2 or plain
  C, the same integers on each), then one float32 multiply-add. int8 codes between ops
  (optimizer/passes/quant_codes.py): `in_codes` - Input is already q(x), as bytes q + 128 (uint8; in_scale says
  their scale); `code_scale` > 0 - Output is written as such codes, the float output quantized with code_scale and
  `code_round_type` (the reader's quantize_linear, done by the writer).
- `quantized_fc`: the same for Input flattened at in_num_col_dims times W (K, N).
- `quantize_dequantize_linear`: quantize_linear then dequantize_linear in one pass, the same float32 bits as the two
  ops (the fp32 simulation of a quantizer whose reader stays float, e.g. a depthwise conv or a residual add).
- `pointwise_chain`: a run of per-element ops (QDQ, scale, per-channel add, activations) in one pass, optionally after
  the add of a second tensor Y (each side through its own chain first: `x_ops`, `y_ops`); the same chain after a
  `quantized_conv2d` runs in its epilogue (attribute `post_ops`).

Without the native extension (or `host_native` False) the same integers come from NumPy in int64
(quant_native.qconv_numpy), much slower: the int8 passes do not run then.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, PrecisionType
from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.kernels.host.conv import numpy_act_inplace
from pdlite.kernels.host.quant import dequantize, quantize
from pdlite.kernels.registry import Bound, Kernel, TensorType, bound, register_kernel
from pdlite.operators.fused import split_activation
from pdlite.operators.nn import ConvGeometry, conv2d_geometry

F32 = np.float32
ANY_IN = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)


def _act(attrs: Mapping[str, Any]) -> native.Act:
    act, act_attrs = split_activation(dict(attrs))
    code = native.activation(act, act_attrs)
    if code is None:
        raise ValueError(f"int8 kernels: activation {act!r} is not one they fuse")
    return code


class _Int8Kernel(Kernel):
    """Shared: the quantization of the input, the per-channel multipliers, bias, activation, the packed weights."""

    w_slot = "Filter"

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self.qp = qn.QParam.of(float(self.attrs["in_scale"]), int(self.attrs["round_type"]), int(self.attrs["qmax"]))
        self.act = _act(self.attrs)
        out_s = float(self.attrs["out_scale"])
        self.out_q = qn.out_qdq(out_s, int(self.attrs["out_round_type"])) if out_s > 0 else None
        post = self.attrs.get("post_ops") or []
        self.chain = np.asarray(post, F32) if len(post) else None
        self._src: Any = None
        self._packed: qn.QWeights | None = None
        self._w8: np.ndarray | None = None
        self._mul: np.ndarray | None = None
        self._bias: np.ndarray | None = None

    def _native(self) -> bool:
        return qn.available() and native.use_native(self.context)

    def _weights(self, ins: dict[str, list[Any]]) -> None:
        w = ins[self.w_slot][0]
        if w is self._src:
            return
        w8 = self.matrix(np.asarray(w))
        scale = np.asarray(ins["WeightScale"][0], np.float64).reshape(-1)
        self._mul = (float(self.attrs["in_scale"]) / int(self.attrs["qmax"]) * scale).astype(F32)
        b = ins.get("Bias")
        self._bias = np.asarray(np.asarray(b[0], F32).reshape(-1), order="C") if b else None
        self._w8 = w8
        self._packed = self.pack(w8, np.asarray(w).shape) if self._native() else None
        self._src = w

    def prepare(self, params: Mapping[str, Any]) -> None:
        ins = {s: [params[n]] for s in (self.w_slot, "WeightScale", "Bias") for n in self.op.inputs.get(s, [])[:1]
               if n in params}
        if self.w_slot in ins and "WeightScale" in ins and (not self.op.inputs.get("Bias") or "Bias" in ins):
            self._weights(ins)

    def matrix(self, w: np.ndarray) -> np.ndarray:
        """The int8 weights as (outputs M, reduction K)."""
        raise NotImplementedError

    def direct_shape(self, w_shape: tuple[int, ...]) -> tuple[int, int, int] | None:
        """(C, KH, KW) where the native kernel runs this op in qconv's direct form (quant_native.direct_form)."""
        return None

    def pack(self, w8: np.ndarray, w_shape: tuple[int, ...]) -> Any:
        """The weights as the native kernel reads them."""
        return qn.pack_weights(w8, self.direct_shape(w_shape))

    def _epilogue(self, out: np.ndarray, res: np.ndarray | None) -> np.ndarray:
        if res is not None:
            out += res
        if self.act[0]:
            numpy_act_inplace(out, self.act)
        if self.out_q is not None:
            s = F32(self.out_q[0][1])
            out = dequantize(quantize(out, s, qn.QMAX, self.out_q[0][2]), s, qn.QMAX)
        if self.chain is not None:
            out = qn.chain_numpy(out, self.chain)
        return out


@register_kernel("quantized_conv2d", precision=PrecisionType.FP32, inputs={"Filter": ANY_IN})
class QuantizedConv2d(_Int8Kernel):
    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self.depthwise = int(self.attrs.get("groups") or 1) > 1
        self.in_codes = bool(self.attrs["in_codes"])
        cs = float(self.attrs["code_scale"])
        self.codes = qn.QParam.of(cs, int(self.attrs["code_round_type"])) if cs > 0 else None
        self._geo: dict[tuple[int, ...], ConvGeometry] = {}
        self._plans: dict[tuple[int, ...], Any] = {}  # input shape -> quant_native.qconv_plan (for self._packed)
        self._plans_of: Any = None
        self._stem = False  # (pack: the weights packed for qstemconv)

    def matrix(self, w: np.ndarray) -> np.ndarray:
        return np.asarray(w.reshape(w.shape[0], -1), dtype=np.int8, order="C")

    def direct_shape(self, w_shape: tuple[int, ...]) -> tuple[int, int, int] | None:
        strides = tuple(int(v) for v in self.attrs["strides"])
        return tuple(w_shape[1:]) if qn.direct_form(tuple(w_shape[2:]), strides, w_shape[1]) else None

    def stem_form(self, w_shape: tuple[int, ...]) -> bool:
        """Whether the native kernel runs this conv in qstemconv's form (few input channels: quant_native.stem_form)."""
        strides = tuple(int(v) for v in self.attrs["strides"])
        dilations = tuple(int(v) for v in self.attrs.get("dilations") or (1, 1))
        return not self.depthwise and qn.stem_form(w_shape[1], tuple(w_shape[2:]), strides, dilations)

    def pack(self, w8: np.ndarray, w_shape: tuple[int, ...]) -> Any:
        self._stem = self.stem_form(w_shape)
        return qn.dw_weights(w8) if self.depthwise or self._stem else super().pack(w8, w_shape)

    def _plan(self, x: np.ndarray, w_shape: tuple[int, ...]) -> Any:
        """The bound native call for inputs of x's shape (None for an empty batch)."""
        if self._plans_of is not self._packed:
            self._plans, self._plans_of = {}, self._packed
        plan = self._plans.get(x.shape)
        if plan is None:
            g = conv2d_geometry(self.attrs, x.shape, w_shape)
            if g.n == 0:
                return None
            geo = ((g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), (g.pads[0], g.pads[2]), self.qp, self.act, self.out_q,
                   self.chain, self.in_codes, self.codes)
            if self.depthwise:
                plan = qn.qdwconv_plan(x.shape, *self._packed, self._mul, self._bias, g.oh, g.ow, *geo)
            elif self._stem:
                plan = qn.qstemconv_plan(x.shape, *self._packed, self._mul, self._bias, g.oc, g.oh, g.ow, *geo)
            else:
                plan = qn.qconv_plan(x.shape, self._packed, self._mul, self._bias, g.oc, g.oh, g.ow, *geo)
            self._plans[x.shape] = plan
        return plan

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """The native plan run() just used for these inputs (Kernel.bind), reading Input (and ResidualData); None
        where it used none or the weights are not the program's parameters."""
        if any(ins.get(s) and s not in fixed for s in ("Filter", "WeightScale", "Bias")):
            return None
        x, r = ins["Input"][0], ins.get("ResidualData")
        plan = self._plans.get(x.shape) if self._plans_of is self._packed is not None else None
        if (plan is None or self._src is not ins["Filter"][0] or type(x) is not np.ndarray or not x.flags.c_contiguous
                or x.dtype != (np.uint8 if self.in_codes else F32)):
            return None
        if not r:
            return bound(plan, ("Input",), ("Output",))
        ok = type(r[0]) is np.ndarray and r[0].dtype == F32 and r[0].flags.c_contiguous
        return bound(plan, ("Input", "ResidualData"), ("Output",)) if ok else None

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["Input"][0]
        self._weights(ins)
        dtype = np.uint8 if self.in_codes else F32
        if isinstance(x, np.ndarray) and (x.dtype == np.uint8) != self.in_codes:
            raise ValueError(f"quantized_conv2d: Input {x.dtype} {list(x.shape)}: expected "
                             f"{'int8 codes (uint8)' if self.in_codes else 'float32'} (attribute in_codes "
                             f"{self.in_codes})")
        x = np.asarray(x, dtype=dtype, order="C")
        r = ins.get("ResidualData")
        res = np.asarray(r[0], dtype=F32, order="C") if r else None
        if self._packed is not None:
            plan = self._plan(x, ins["Filter"][0].shape)
            if plan is not None:
                return {"Output": [plan(x, res)]}
        g = self._geo.get(x.shape)
        if g is None:
            g = self._geo[x.shape] = conv2d_geometry(self.attrs, x.shape, ins["Filter"][0].shape)
        pads = (g.pads[0], g.pads[2])
        args = ((g.kh, g.kw), (g.sh, g.sw), (g.dh, g.dw), pads)
        w8 = self._w8.reshape(self._w8.shape[0], -1) if self.depthwise else self._w8
        out = self._epilogue(qn.qconv_numpy(x, w8, self._mul, self._bias, g.oh, g.ow, *args, self.qp, self.depthwise),
                             res)
        return {"Output": [out if self.codes is None else qn.codes_of(out, self.codes)]}


@register_kernel("quantized_fc", precision=PrecisionType.FP32, inputs={"W": ANY_IN})
class QuantizedFc(_Int8Kernel):
    w_slot = "W"

    def matrix(self, w: np.ndarray) -> np.ndarray:
        return np.asarray(w.T, dtype=np.int8, order="C")  # (N, K)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = np.asarray(ins["Input"][0], dtype=F32)
        self._weights(ins)
        k = int(self.attrs["in_num_col_dims"])
        lead = x.shape[:k]
        x2 = np.asarray(x.reshape(math.prod(lead), -1), order="C")
        n = self._w8.shape[0]
        if self._packed is not None and x2.shape[0] > 0:
            out = qn.qfc(x2, self._packed, self._mul, self._bias, self.qp, self.act, self.out_q)
        else:
            sums = np.matmul(qn.quantize_int(x2, self.qp).astype(np.int64), self._w8.T.astype(np.int64))
            out = sums.astype(np.int32).astype(F32) * self._mul
            if self._bias is not None:
                out += self._bias
            out = self._epilogue(out, None)
        return {"Out": [out.reshape(*lead, n)]}


@register_kernel("quantize_dequantize_linear", precision=PrecisionType.FP32)
class QuantizeDequantizeLinear(Kernel):
    """Y = dequantize_linear(quantize_linear(X, Scale), Scale), per tensor: the same float32 values as the two ops."""

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        s = F32(np.asarray(ins["Scale"][0], F32).reshape(-1)[0])
        qmax, rt = int(self.attrs["qmax"]), int(self.attrs["round_type"])
        qp = qn.QParam.of(float(s), rt, qmax)
        if (qmax == qn.QMAX and qn.available() and native.use_native(self.context) and isinstance(x, np.ndarray) and x.dtype == F32
                and x.flags.c_contiguous):
            return {"Y": [qn.qdq(x, qp, qmax)]}
        return {"Y": [dequantize(quantize(np.asarray(x, F32), s, qmax, rt), s, qmax)]}


@register_kernel("pointwise_chain", precision=PrecisionType.FP32)
class PointwiseChain(Kernel):
    """Out = the per-element ops of `post_ops` on X, or on x_ops(X) + y_ops(Y), in one pass (quant_native.qchain;
    NumPy one op at a time without the native kernels, or where Y broadcasts): the values of the ops run one by one."""

    def __init__(self, op: Any) -> None:
        super().__init__(op)
        self.program = np.asarray(self.attrs["post_ops"], F32)
        self.x_program = np.asarray(self.attrs["x_ops"], F32)
        self.y_program = np.asarray(self.attrs["y_ops"], F32)

    def _native_for(self, x: Any, y: Any) -> bool:
        ok = [isinstance(v, np.ndarray) and v.dtype == F32 and v.ndim >= 2 for v in (x, y) if v is not None]
        return qn.available() and native.use_native(self.context) and all(ok) and (y is None or y.shape == x.shape)

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """qchain for these inputs (Kernel.bind); None where run() takes NumPy's path."""
        x, y = ins["X"][0], ins["Y"][0] if ins.get("Y") else None
        if not self._native_for(x, y):
            return None
        p, xp, yp, chain = self.program, self.x_program, self.y_program, qn.qchain
        if y is None:
            return bound(lambda x: chain(x, p), ("X",), ("Out",))
        return bound(lambda x, y: chain(x, p, y, xp, yp), ("X", "Y"), ("Out",))

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x = ins["X"][0]
        y = ins["Y"][0] if ins.get("Y") else None
        if self._native_for(x, y):
            return {"Out": [qn.qchain(x, self.program, y, self.x_program, self.y_program)]}
        y = None if y is None else np.asarray(y, F32)
        return {"Out": [qn.chain_numpy(np.asarray(x, F32), self.program, y, self.x_program, self.y_program)]}
