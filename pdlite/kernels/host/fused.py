"""Host kernels of the fused ops (see pdlite/operators/fused.py for the design).

A fused kernel runs the base op's registered host kernel (the conv, elementwise and scale
code lives once, in their own modules), then the activation op's host kernel; `fc` is a
single matmul + bias add.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.core.program import OpDesc
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, DataLayoutType, PrecisionType, TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.host import native, native_plans
from pdlite.kernels.host.conv import Conv2d, Conv2dTranspose, epilogue
from pdlite.kernels.registry import Bound, Kernel, bound, kernels_for, register_kernel
from pdlite.operators.fused import CONV_TYPES, FUSED_ELEMENTWISE, base_desc, split_activation
from pdlite.operators.registry import OPS


def host_kernel(desc: OpDesc) -> Kernel:
    """An instance of the host FP32 (else Any-precision) kernel of `desc.type` for `desc`."""
    best = None
    for kd in kernels_for(desc.type):
        if kd.key.target != TargetType.Host:
            continue
        rank = (kd.key.precision != PrecisionType.FP32, kd.key.precision != ANY_PRECISION,
                kd.key.layout not in (DataLayoutType.NCHW, ANY_LAYOUT), kd.key.alias != "def")
        if best is None or rank < best[0]:
            best = (rank, kd)
    if best is None:
        raise PdliteError(f"fused kernel: no host kernel for op {desc.type!r}")
    return best[1].create(desc)


def activation_kernel(attrs: Mapping[str, Any], type_key: str = "act_type") -> Kernel | None:
    """The host kernel of a fused op's activation (None when there is none)."""
    act, act_attrs = split_activation(dict(attrs), type_key)
    if not act:
        return None
    return host_kernel(OPS[act].attach(OpDesc(act, {"X": ["x"]}, {"Out": ["out"]}, act_attrs)))


class BasePlusActivation(Kernel):
    """Run the base op's host kernel, then the activation on its single output slot."""

    out_slot = "Out"
    type_key = "act_type"

    def base_type(self) -> str:
        raise NotImplementedError

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        self.base = host_kernel(base_desc(op, self.base_type()))
        self.act = activation_kernel(op.attrs, self.type_key)
        act, act_attrs = split_activation(dict(op.attrs), self.type_key)
        self.inplace_act = native.activation(act, act_attrs) if act else None

    def prepare(self, params: Mapping[str, Any]) -> None:
        self.base.context = self.context
        self.base.prepare(params)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self.base.context is not self.context:
            self.base.context = self.context
        outs = self.base.run(ins)
        if self.act is not None:
            out = outs[self.out_slot][0]
            if self.inplace_act is not None and _fresh_f32(out, ins):
                # relu, hard_swish, ...: in place on the base kernel's new array (no second array)
                epilogue(out.reshape(1, 1, -1), None, self.inplace_act, native.use_native(self.context))
            else:
                outs[self.out_slot] = self.act.run({"X": outs[self.out_slot]})["Out"]
        return outs


def _fresh_f32(out: Any, ins: dict[str, list[Any]]) -> bool:
    """Whether `out` is a float32 array the kernel just made: it owns its data and is none of the inputs."""
    return (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.base is None and out.flags.c_contiguous
            and out.flags.writeable and not any(out is v for vals in ins.values() for v in vals))


@register_kernel("fused_conv2d")
class FusedConv2d(BasePlusActivation):
    """Output = act(conv(Input, Filter) + Bias) via the host conv kernel of `conv_type`.

    relu, relu6, leaky_relu and hard_swish are applied by the conv kernel itself, in place on its
    fresh output (natively fused when the extension is built); other activations run after it.
    """

    out_slot = "Output"

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        act, act_attrs = split_activation(dict(op.attrs), self.type_key)
        fusable = isinstance(self.base, (Conv2d, Conv2dTranspose))
        self.fused_act = native.activation(act, act_attrs) if fusable else None

    def base_type(self) -> str:
        conv = str(self.attrs["conv_type"])
        if conv not in CONV_TYPES:
            raise PdliteError(f"fused_conv2d ({self.op.output('Output')!r}): conv_type must be one of "
                              f"{list(CONV_TYPES)}, got {conv!r}")
        return conv

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        if self.fused_act is None or not isinstance(self.base, Conv2d):
            return None
        return self.base.bind_act(ins, fixed, self.fused_act)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self.fused_act is None:
            return super().run(ins)
        base = self.base
        if base.context is not self.context:
            base.context = self.context
        out, done = base.compute(ins, self.fused_act)  # type: ignore[attr-defined]
        if not done and self.act is not None:
            out = self.act.run({"X": [out]})["Out"][0]
        return {"Output": [out]}


class FusionElementwiseActivation(BasePlusActivation):
    """Out = act(X <op> Y) via the host elementwise kernel; an add of two float32 arrays of one shape with a native
    activation (ResNet's residual add + relu) in one pass on the native pool (native.add_act)."""

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        self.native_add = self.base_type() == "elementwise_add" and (self.act is None or self.inplace_act is not None)

    def base_type(self) -> str:
        return FUSED_ELEMENTWISE[self.op.type]

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        x, y = ins["X"][0], ins["Y"][0]
        if self.native_add and native.add_act_applies(x, y) and native.use_native(self.context):
            return bound(native_plans.add_act_plan(x.shape, self.inplace_act or native.NO_ACT), ("X", "Y"))
        return None

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self.native_add:
            out = native.add_act_or_none(ins["X"][0], ins["Y"][0], self.context, self.inplace_act or native.NO_ACT)
            if out is not None:
                return {"Out": [out]}
        return super().run(ins)


for _t in FUSED_ELEMENTWISE:
    register_kernel(_t)(FusionElementwiseActivation)


@register_kernel("fusion_scale_activation")
class FusionScaleActivation(BasePlusActivation):
    """Out = act(scale(X)) via the host scale kernel."""

    def base_type(self) -> str:
        return "scale"


FC_NATIVE_MIN = 1 << 16  # multiply-adds from which fc runs its product on the native thread pool
# multiply-adds (and more rows than native.GEMV_MAX_ROWS) from which it runs on the packed register tiles (AVX-512,
# AVX2): from 2^20 down to 2^18 for the transformer's (32 x 128) @ (128 x 128), one Zen 4 core, loaded: BLAS 13.3 us,
# packed 7.3 (AVX2: 13.0 / 12.2); (32 x 64) @ (64 x 64), 2^17, AVX2 4.0 / 5.3 stays on the BLAS
FC_PACKED_MIN = 1 << 18
FC_GEMV_MIN = 1 << 12  # weights from which a few rows (native.GEMV_MAX_ROWS) run as native matrix-vector products


@register_kernel("fc")
class FC(Kernel):
    """Out = act(Input.reshape(M, K) @ W + Bias).reshape(Input.shape[:k] + [N]).

    Natively (float32, large enough), one call: the product in blocks on the native pool with the bias and
    a native activation applied to each block while it is in cache."""

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        self.act = activation_kernel(op.attrs, "activation_type")
        act, act_attrs = split_activation(dict(op.attrs), "activation_type")
        self.fused_act = native.activation(act, act_attrs)
        self.k = int(self.attrs["in_num_col_dims"])
        self._native: bool | None = None
        self._bias: tuple[Any, np.ndarray] | None = None  # (Bias input, as a contiguous float32 vector)
        self._packed: tuple[Any, np.ndarray] | None = None  # (W input, packed by native.pack_fc_weights)

    def _bias_f32(self, b: Any) -> np.ndarray:
        c = self._bias
        if c is None or c[0] is not b:
            c = self._bias = (b, np.asarray(np.asarray(b, dtype=np.float32).reshape(-1), order="C"))
        return c[1]

    def _packed_w(self, w: Any) -> np.ndarray:
        """W packed by native.pack_fc_weights (once per W input)."""
        c = self._packed
        if c is None or c[0] is not w:
            c = self._packed = (w, native.pack_fc_weights(w))
        return c[1]

    def _form(self, x2: np.ndarray, w: Any) -> str | None:
        """Which native product runs x2 @ w: "gemv", "packed", "gemm", or None (NumPy's matmul)."""
        if self._native is None:
            self._native = native.use_native(self.context)
        m, k = x2.shape
        gemv = 0 < m <= native.GEMV_MAX_ROWS and k * w.shape[1] >= FC_GEMV_MIN
        if not (self._native and x2.dtype == np.float32 and w.dtype == np.float32 and w.ndim == 2
                and (gemv or m * k * w.shape[1] >= FC_NATIVE_MIN and native.gemm_available())
                and x2.flags.c_contiguous and w.flags.c_contiguous and (self.fused_act is not None or self.act is None)):
            return None
        if gemv:  # matrix-vector products over W packed once (MobileNetV3's batch-1 576 -> 1024: 104 -> ~30 us)
            return "gemv"
        # the packed conv's register tiles: the transformer's (128 x 128) @ (128 x 512) 0.82x the BLAS's time,
        # (32 x 128) @ (128 x 512) 0.66x (one Xeon core, alone); smaller products stay on the BLAS
        return "packed" if m * k * w.shape[1] >= FC_PACKED_MIN and native.packed_gemm_fast() else "gemm"

    @staticmethod
    def _rows(x: np.ndarray, w: Any, lead: tuple[int, ...]) -> np.ndarray:
        return x.reshape(-1, w.shape[0]) if x.size else x.reshape(int(np.prod(lead)), -1)

    def bind(self, ins: dict[str, list[Any]], fixed: frozenset[str]) -> Bound | None:
        """The native product run() makes for these shapes, W (packed) and Bias held (Kernel.bind)."""
        x, w, bias = ins["Input"][0], ins["W"][0], ins.get("Bias")
        if "W" not in fixed or (bias and "Bias" not in fixed):
            return None
        lead = x.shape[:self.k]
        x2 = self._rows(x, w, lead)
        form = self._form(x2, w)
        if form is None:
            return None
        (m, k), n = x2.shape, w.shape[1]
        plan = native_plans.fc_plan(form, m, k, n, w if form == "gemm" else self._packed_w(w),
                                    self._bias_f32(bias[0]) if bias else None, self.fused_act or native.NO_ACT)
        out_shape = (*lead, n)

        def run(x: np.ndarray) -> np.ndarray:
            return plan(x.reshape(m, k)).reshape(out_shape)

        return bound(run, ("Input",))

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w = ins["Input"][0], ins["W"][0]
        lead = x.shape[:self.k]
        x2 = self._rows(x, w, lead)
        bias = ins.get("Bias")
        form = self._form(x2, w)
        if form is not None:
            # on the native pool (blocks of W's columns or of the rows), bias and activation in each block
            b = self._bias_f32(bias[0]) if bias else None
            if form == "gemv":
                out = native.packed_gemv(x2, self._packed_w(w), w.shape[1], b, self.fused_act or native.NO_ACT)
            elif form == "packed":
                out = native.packed_fc(x2, self._packed_w(w), w.shape[1], b, self.fused_act or native.NO_ACT)
            else:
                out = native.fc_gemm(x2, w, b, self.fused_act or native.NO_ACT)
            return {"Out": [out.reshape(*lead, w.shape[1])]}
        out = np.matmul(x2, w)
        if bias:
            out += np.asarray(bias[0], dtype=out.dtype).reshape(-1)
        if self.act is not None:
            if self.fused_act is not None and out.dtype == np.float32:  # in place on the fresh product
                epilogue(out.reshape(1, 1, -1), None, self.fused_act, native.use_native(self.context))
            else:
                out = self.act.run({"X": [out]})["Out"][0]
        return {"Out": [out.reshape(*lead, w.shape[1])]}
