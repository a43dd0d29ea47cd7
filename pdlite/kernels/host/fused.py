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
from pdlite.kernels.registry import Kernel, kernels_for, register_kernel
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

    def prepare(self, params: Mapping[str, Any]) -> None:
        self.base.context = self.context
        self.base.prepare(params)

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self.base.context is not self.context:
            self.base.context = self.context
        outs = self.base.run(ins)
        if self.act is not None:
            outs[self.out_slot] = self.act.run({"X": outs[self.out_slot]})["Out"]
        return outs


@register_kernel("fused_conv2d")
class FusedConv2d(BasePlusActivation):
    """Output = act(conv(Input, Filter) + Bias) via the host conv kernel of `conv_type`."""

    out_slot = "Output"

    def base_type(self) -> str:
        conv = str(self.attrs.get("conv_type", "conv2d"))
        if conv not in CONV_TYPES:
            raise PdliteError(f"fused_conv2d ({self.op.output('Output')!r}): conv_type must be one of "
                              f"{list(CONV_TYPES)}, got {conv!r}")
        return conv


class FusionElementwiseActivation(BasePlusActivation):
    """Out = act(X <op> Y) via the host elementwise kernel."""

    def base_type(self) -> str:
        return FUSED_ELEMENTWISE[self.op.type]


for _t in FUSED_ELEMENTWISE:
    register_kernel(_t)(FusionElementwiseActivation)


@register_kernel("fusion_scale_activation")
class FusionScaleActivation(BasePlusActivation):
    """Out = act(scale(X)) via the host scale kernel."""

    def base_type(self) -> str:
        return "scale"


@register_kernel("fc")
class FC(Kernel):
    """Out = act(Input.reshape(M, K) @ W + Bias).reshape(Input.shape[:k] + [N])."""

    def __init__(self, op: OpDesc) -> None:
        super().__init__(op)
        self.act = activation_kernel(op.attrs, "activation_type")

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w = ins["Input"][0], ins["W"][0]
        k = int(self.attrs["in_num_col_dims"])
        lead = x.shape[:k]
        out = np.matmul(x.reshape(int(np.prod(lead)), -1), w)
        bias = ins.get("Bias")
        if bias:
            out += np.asarray(bias[0], dtype=out.dtype).reshape(-1)
        out = out.reshape(*lead, w.shape[1])
        if self.act is not None:
            out = self.act.run({"X": [out]})["Out"][0]
        return {"Out": [out]}
