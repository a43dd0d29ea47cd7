"""Host kernels' `bind` (the runtime's steady path, pdlite/runtime/steady.py): the bound call gives run()'s outputs
bit for bit, dtypes and shapes included, on the inputs it was bound with and on new values of the same shapes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pdlite.kernels.host  # noqa: F401  (registers the host kernels)
import pdlite.operators  # noqa: F401  (registers the ops)
from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.kernels.host import native
from pdlite.kernels.registry import KernelContext, kernels_for
from pdlite.operators.registry import OPS

R = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


# (id, op type, inputs {slot: [array]}, outputs {slot: count}, attrs, parameter slots, binds only natively)
CASES: list[tuple[str, str, dict[str, list[Any]], dict[str, int], dict[str, Any], tuple[str, ...], bool]] = [
    ("conv3x3", "conv2d", {"Input": [f32(1, 16, 14, 14)], "Filter": [f32(32, 16, 3, 3)]}, {"Output": 1},
     {"paddings": [1, 1], "strides": [1, 1]}, ("Filter",), True),
    ("conv3x3_s2_b2", "conv2d", {"Input": [f32(2, 8, 9, 9)], "Filter": [f32(16, 8, 3, 3)]}, {"Output": 1},
     {"strides": [2, 2], "paddings": [1, 1]}, ("Filter",), True),
    ("conv1x1_on_1x1", "conv2d", {"Input": [f32(1, 96, 1, 1)], "Filter": [f32(24, 96, 1, 1)]}, {"Output": 1},
     {}, ("Filter",), True),
    ("depthwise", "depthwise_conv2d", {"Input": [f32(1, 24, 20, 20)], "Filter": [f32(24, 1, 5, 5)]}, {"Output": 1},
     {"paddings": [2, 2], "strides": [2, 2], "groups": 24}, ("Filter",), True),
    ("fused_conv_hswish", "fused_conv2d", {"Input": [f32(1, 8, 12, 12)], "Filter": [f32(16, 8, 3, 3)],
                                           "Bias": [f32(16)]}, {"Output": 1},
     {"paddings": [1, 1], "act_type": "hard_swish"}, ("Filter", "Bias"), True),
    ("fused_conv_residual", "fused_conv2d", {"Input": [f32(1, 64, 7, 7)], "Filter": [f32(64, 64, 3, 3)],
                                             "Bias": [f32(64)], "ResidualData": [f32(1, 64, 7, 7)]}, {"Output": 1},
     {"paddings": [1, 1], "act_type": "relu"}, ("Filter", "Bias"), True),
    ("pool_max", "pool2d", {"X": [f32(1, 16, 15, 15)]}, {"Out": 1},
     {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, (), True),
    ("pool_global_avg", "pool2d", {"X": [f32(2, 32, 7, 7)]}, {"Out": 1},
     {"pooling_type": "avg", "global_pooling": True, "ksize": [1, 1]}, (), True),
    ("fc_gemv", "fc", {"Input": [f32(1, 576)], "W": [f32(576, 100)], "Bias": [f32(100)]}, {"Out": 1},
     {"in_num_col_dims": 1}, ("W", "Bias"), True),
    ("fc_packed", "fc", {"Input": [f32(1, 32, 128)], "W": [f32(128, 128)], "Bias": [f32(128)]}, {"Out": 1},
     {"in_num_col_dims": 2, "activation_type": "relu"}, ("W", "Bias"), True),
    ("fc_gemm", "fc", {"Input": [f32(16, 64)], "W": [f32(64, 64)]}, {"Out": 1}, {"in_num_col_dims": 1}, ("W",), True),
    ("add_native", "elementwise_add", {"X": [f32(1, 32, 28, 28)], "Y": [f32(1, 32, 28, 28)]}, {"Out": 1}, {}, (),
     False),
    ("add_axis", "elementwise_add", {"X": [f32(2, 3, 4, 5)], "Y": [f32(3, 4)]}, {"Out": 1}, {"axis": 1}, (), False),
    ("mul_gates", "elementwise_mul", {"X": [f32(1, 96, 14, 14)], "Y": [f32(1, 96, 1, 1)]}, {"Out": 1}, {}, (),
     False),
    ("mul_gates_swapped", "elementwise_mul", {"X": [f32(1, 96, 1, 1)], "Y": [f32(1, 96, 14, 14)]}, {"Out": 1}, {},
     (), False),
    ("div_float", "elementwise_div", {"X": [f32(4, 6)], "Y": [f32(6)]}, {"Out": 1}, {}, (), False),
    ("fused_add_relu", "fusion_elementwise_add_activation", {"X": [f32(1, 64, 16, 16)], "Y": [f32(1, 64, 16, 16)]},
     {"Out": 1}, {"act_type": "relu"}, (), True),
    ("softmax", "softmax", {"X": [f32(2, 4, 32, 32)]}, {"Out": 1}, {"axis": -1}, (), True),
    ("scale_after", "scale", {"X": [f32(3, 7)]}, {"Out": 1}, {"scale": 0.5, "bias": 1.25}, (), False),
    ("scale_before", "scale", {"X": [f32(3, 7)]}, {"Out": 1}, {"scale": 3.0, "bias": -2.0, "bias_after_scale": False},
     (), False),
    ("scale_int", "scale", {"X": [np.arange(12, dtype=np.int64).reshape(3, 4)]}, {"Out": 1}, {"scale": 2.0}, (),
     False),
    ("matmul_v2_trans_y", "matmul_v2", {"X": [f32(2, 4, 32, 16)], "Y": [f32(2, 4, 32, 16)]}, {"Out": 1},
     {"trans_y": True}, (), False),
    ("layer_norm_stats", "layer_norm", {"X": [f32(1, 32, 128)], "Scale": [f32(128)], "Bias": [f32(128)]},
     {"Y": 1, "Mean": 1, "Variance": 1}, {"begin_norm_axis": 2, "epsilon": 1e-5}, ("Scale", "Bias"), True),
    ("layer_norm_y", "layer_norm", {"X": [f32(4, 64)], "Scale": [f32(64)]}, {"Y": 1},
     {"begin_norm_axis": 1}, ("Scale",), True),
    ("reshape2_xshape", "reshape2", {"X": [f32(1, 32, 128)]}, {"Out": 1, "XShape": 1}, {"shape": [0, 0, 4, 32]},
     (), False),
    ("flatten", "flatten_contiguous_range", {"X": [f32(2, 8, 1, 1)]}, {"Out": 1},
     {"start_axis": 1, "stop_axis": -1}, (), False),
    ("transpose2", "transpose2", {"X": [f32(1, 32, 4, 32)]}, {"Out": 1, "XShape": 1}, {"axis": [0, 2, 1, 3]}, (),
     False),
    ("split3", "split", {"X": [f32(1, 32, 384)]}, {"Out": 3}, {"num": 3, "axis": 2}, (), False),
    ("slice_decrease", "slice", {"Input": [f32(3, 1, 4, 8, 16)]}, {"Out": 1},
     {"axes": [0], "starts": [1], "ends": [2], "decrease_axis": [0]}, (), False),
    ("concat3", "concat", {"X": [f32(1, 8, 5, 5), f32(1, 3, 5, 5), f32(1, 1, 5, 5)]}, {"Out": 1}, {"axis": 1}, (),
     False),
    ("squeeze2", "squeeze2", {"X": [f32(1, 64, 1, 40)]}, {"Out": 1, "XShape": 1}, {"axes": [2]}, (), False),
    ("unsqueeze2", "unsqueeze2", {"X": [f32(64, 40)]}, {"Out": 1}, {"axes": [0, 2]}, (), False),
    ("nearest_up2", "nearest_interp_v2", {"X": [f32(1, 9, 5, 7)]}, {"Out": 1},
     {"scale": [2.0, 2.0], "interp_method": "nearest"}, (), False),
    ("nearest_up8_nhwc", "nearest_interp_v2", {"X": [f32(1, 3, 2, 5)]}, {"Out": 1},
     {"scale": [8.0, 8.0], "interp_method": "nearest", "data_layout": "NHWC"}, (), False),
    ("nearest_out_size_fixed", "nearest_interp_v2", {"X": [f32(2, 3, 5, 4)], "OutSize": [np.array([7, 9], np.int32)]},
     {"Out": 1}, {"interp_method": "nearest"}, ("OutSize",), False),
    ("bilinear", "bilinear_interp_v2", {"X": [f32(1, 4, 6, 5)]}, {"Out": 1},
     {"out_h": 11, "out_w": 8, "interp_method": "bilinear", "align_mode": 0}, (), False),
    ("trilinear_align", "trilinear_interp_v2", {"X": [f32(1, 2, 3, 4, 5)]}, {"Out": 1},
     {"out_d": 5, "out_h": 7, "out_w": 3, "interp_method": "trilinear", "align_corners": True}, (), False),
    ("bicubic", "bicubic_interp_v2", {"X": [f32(1, 2, 5, 6)]}, {"Out": 1},
     {"scale": [1.5, 2.5], "interp_method": "bicubic"}, (), False),
]

# cases whose bind may decline with the native kernels in use, and why
MAY_DECLINE = {"fused_conv_residual": "a residual is bound only where the conv's epilogue adds it (the packed and "
                                      "Winograd forms: not on the x86 baseline)"}


def _kernel(op_type: str, ins: dict[str, list[Any]], outs: dict[str, int], attrs: dict[str, Any]):
    desc = OpDesc(op_type, {s: [f"{s}{i}" for i in range(len(v))] for s, v in ins.items()},
                  {s: [f"{s}{i}" for i in range(n)] for s, n in outs.items()}, dict(attrs))
    op = OPS[op_type].attach(desc)
    kd = next(d for d in kernels_for(op_type) if d.key.target == TargetType.Host)
    k = kd.create(op, KernelContext({}))
    params = {n: v for s, vals in ins.items() for n, v in zip(op.inputs[s], vals)}
    k.prepare(params)
    return k


def _call(b, ins: dict[str, list[Any]]) -> dict[tuple[str, int], Any]:
    got = b.fn(*[ins[s][i] for s, i in b.reads])
    vals = (got,) if len(b.writes) == 1 else tuple(got)
    assert len(vals) == len(b.writes)
    return dict(zip(b.writes, vals))


def _same(got: dict[tuple[str, int], Any], ref: dict[str, list[Any]], what: str) -> None:
    want = {(s, i): v for s, vals in ref.items() for i, v in enumerate(vals)}
    assert set(got) == set(want), f"{what}: writes {sorted(got)} but run() gives {sorted(want)}"
    for k, v in want.items():
        g = got[k]
        assert g.dtype == v.dtype and g.shape == v.shape, f"{what} {k}: {g.dtype}{g.shape} vs {v.dtype}{v.shape}"
        assert np.array_equal(g, v), f"{what} {k}: values differ"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bound_call_equals_run(case) -> None:
    name, op_type, ins, outs, attrs, params, native_only = case
    k = _kernel(op_type, ins, outs, attrs)
    ref = k.run(ins)
    b = k.bind(ins, frozenset(params))
    if b is None:
        assert native_only and (not native.use_native(k.context) or name in MAY_DECLINE), \
            f"{name}: {op_type} did not bind"
        return
    _same(_call(b, ins), ref, f"{name} (bound inputs)")
    # new values of the same shapes (the parameters stay: the steady path checks them by identity)
    ins2 = {s: [v if s in params else (R.standard_normal(v.shape) * 3).astype(v.dtype) for v in vals]
            for s, vals in ins.items()}
    _same(_call(b, ins2), k.run(ins2), f"{name} (new values)")
    # the bound call reads no parameter it holds, and reads nothing of the slots it was not told are fixed
    assert not {s for s, _ in b.reads} & set(params) or op_type == "matmul_v2"


def test_parameters_not_fixed_are_not_held() -> None:
    """A conv or fc whose weights are not the program's parameters (computed by an earlier op) does not bind them."""
    for op_type, ins, outs, attrs in [
        ("conv2d", {"Input": [f32(1, 16, 14, 14)], "Filter": [f32(32, 16, 3, 3)]}, {"Output": 1}, {"paddings": [1, 1]}),
        ("fc", {"Input": [f32(1, 576)], "W": [f32(576, 100)]}, {"Out": 1}, {"in_num_col_dims": 1}),
        ("layer_norm", {"X": [f32(4, 64)], "Scale": [f32(64)]}, {"Y": 1}, {"begin_norm_axis": 1}),
    ]:
        k = _kernel(op_type, ins, outs, attrs)
        k.run(ins)
        assert k.bind(ins, frozenset()) is None, op_type
