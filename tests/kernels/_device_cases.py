"""The kernel cases every device target is tested with (one case list, parametrised per target).

Each target's suite (tests/kernels/test_cuda_kernels.py, tests/opencl/test_opencl_kernels.py) runs
these through its own kernels and compares with the host kernel of the same op; a target runs the
cases whose op it has a kernel for.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.program import OpDesc, Program, VarDesc
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, TargetType
from pdlite.kernels.registry import KERNELS, KernelContext, KernelKey

RNG = np.random.default_rng(0)


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# --- the cases: (op type, inputs, attrs, parameter slots, output slot) ---
X4 = rand(2, 4, 9, 9)
W_CONV = rand(6, 4, 3, 3)
B6 = rand(6)
CASES: list[tuple[str, dict, dict, tuple[str, ...], str]] = [
    ("conv2d", {"Input": X4, "Filter": W_CONV}, {"strides": [2, 2], "paddings": [1, 1]}, ("Filter",), "Output"),
    ("conv2d", {"Input": X4, "Filter": W_CONV, "Bias": B6}, {"paddings": [0, 1, 1, 2], "dilations": [2, 1]},
     ("Filter", "Bias"), "Output"),
    ("conv2d", {"Input": X4, "Filter": rand(6, 2, 3, 3)}, {"groups": 2, "padding_algorithm": "SAME", "strides": [2, 2]},
     ("Filter",), "Output"),
    ("conv2d", {"Input": X4.transpose(0, 2, 3, 1).copy(), "Filter": W_CONV}, {"data_format": "NHWC", "paddings": [1, 1]},
     ("Filter",), "Output"),
    ("depthwise_conv2d", {"Input": X4, "Filter": rand(4, 1, 3, 3)}, {"groups": 4, "paddings": [1, 1]}, ("Filter",), "Output"),
    ("depthwise_conv2d", {"Input": X4, "Filter": rand(8, 1, 5, 5)}, {"groups": 4, "paddings": [2, 2], "strides": [2, 2]},
     ("Filter",), "Output"),
    ("conv2d_transpose", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 3, 3, 3)}, {"strides": [2, 2], "paddings": [1, 1]},
     ("Filter",), "Output"),
    ("conv2d_transpose", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 3, 2, 2), "Bias": rand(3)},
     {"strides": [2, 2], "output_padding": [1, 1]}, ("Filter", "Bias"), "Output"),
    ("conv2d_transpose", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 2, 3, 3)},
     {"strides": [2, 2], "paddings": [0, 1, 1, 0], "groups": 2}, ("Filter",), "Output"),
    ("conv2d_transpose", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 3, 3, 3)},
     {"strides": [2, 2], "paddings": [1, 1], "output_size": [10, 10]}, ("Filter",), "Output"),
    ("depthwise_conv2d_transpose", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 1, 4, 4)},
     {"strides": [2, 2], "paddings": [1, 1], "groups": 4}, ("Filter",), "Output"),
    ("pool2d", {"X": X4}, {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
                           "exclusive": False, "ceil_mode": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "ceil_mode": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "ceil_mode": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "avg", "ksize": [2, 3], "adaptive": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "avg", "ksize": [1, 1], "adaptive": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "max", "ksize": [4, 4], "adaptive": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "max", "ksize": [1, 1], "global_pooling": True}, (), "Out"),
    ("pool2d", {"X": X4}, {"pooling_type": "avg", "ksize": [3, 3], "padding_algorithm": "SAME", "strides": [2, 2]},
     (), "Out"),
    ("batch_norm", {"X": X4, "Scale": rand(4), "Bias": rand(4), "Mean": rand(4), "Variance": rand(4, lo=0.1)},
     {"is_test": True, "epsilon": 1e-3}, ("Scale", "Bias", "Mean", "Variance"), "Y"),
    ("batch_norm", {"X": X4, "Scale": rand(4), "Bias": rand(4), "Mean": rand(4), "Variance": rand(4, lo=0.1)},
     {"is_test": False}, ("Scale", "Bias", "Mean", "Variance"), "Y"),
    ("layer_norm", {"X": rand(2, 3, 8), "Scale": rand(8), "Bias": rand(8)}, {"begin_norm_axis": 2},
     ("Scale", "Bias"), "Y"),
    ("layer_norm", {"X": rand(2, 3, 8), "Scale": rand(24), "Bias": rand(24)}, {"begin_norm_axis": 1, "epsilon": 1e-3},
     ("Scale", "Bias"), "Y"),
    ("matmul_v2", {"X": rand(2, 3, 4), "Y": rand(4, 5)}, {}, ("Y",), "Out"),
    ("matmul_v2", {"X": rand(2, 4, 3), "Y": rand(2, 5, 4)}, {"trans_x": True, "trans_y": True}, (), "Out"),
    ("matmul_v2", {"X": rand(2, 3, 4), "Y": rand(5, 4)}, {"trans_y": True}, ("Y",), "Out"),
    ("matmul_v2", {"X": rand(4), "Y": rand(3, 4, 2)}, {}, (), "Out"),
    ("fc", {"Input": rand(2, 3, 4), "W": rand(4, 5), "Bias": rand(5)},
     {"in_num_col_dims": 2, "activation_type": "relu"}, ("W", "Bias"), "Out"),
    ("fc", {"Input": rand(2, 3, 4), "W": rand(12, 5)}, {"in_num_col_dims": 1}, ("W",), "Out"),
    ("lookup_table_v2", {"Ids": RNG.integers(0, 10, (2, 5)).astype(np.int64), "W": rand(10, 4)},
     {"padding_idx": 3}, ("W",), "Out"),
    ("lookup_table_v2", {"Ids": RNG.integers(0, 10, (7,)).astype(np.int64), "W": rand(10, 4)}, {}, ("W",), "Out"),
    ("softmax", {"X": rand(2, 3, 7)}, {"axis": -1}, (), "Out"),
    ("softmax", {"X": rand(2, 3, 7)}, {"axis": 1}, (), "Out"),
    ("scale", {"X": rand(3, 4)}, {"scale": 0.5, "bias": 1.5}, (), "Out"),
    ("scale", {"X": rand(3, 4)}, {"scale": 3.0, "bias": -1.0, "bias_after_scale": False}, (), "Out"),
    ("dropout", {"X": rand(3, 4)}, {"dropout_prob": 0.25, "is_test": True}, (), "Out"),
    ("dropout", {"X": rand(3, 4)}, {"dropout_prob": 0.25, "is_test": True,
                                    "dropout_implementation": "upscale_in_train"}, (), "Out"),
    ("reshape2", {"X": rand(2, 3, 4)}, {"shape": [0, -1]}, (), "Out"),
    ("reshape2", {"X": rand(2, 3, 4), "ShapeTensor": [np.array([4], np.int32), np.array([-1], np.int32)]}, {}, (), "Out"),
    ("reshape", {"X": rand(2, 3, 4), "Shape": np.array([3, 8], np.int32)}, {}, (), "Out"),
    ("flatten_contiguous_range", {"X": rand(2, 3, 4, 5)}, {"start_axis": 1, "stop_axis": 2}, (), "Out"),
    ("flatten2", {"X": rand(2, 3, 4)}, {"axis": 2}, (), "Out"),
    ("flatten", {"X": rand(2, 3, 4)}, {"axis": 1}, (), "Out"),
    ("transpose2", {"X": rand(2, 3, 4, 5)}, {"axis": [0, 2, 1, 3]}, (), "Out"),
    ("transpose", {"X": rand(2, 3, 4)}, {"axis": [2, 0, 1]}, (), "Out"),
    ("squeeze2", {"X": rand(2, 1, 4, 1)}, {"axes": [1]}, (), "Out"),
    ("squeeze", {"X": rand(2, 1, 4, 1)}, {"axes": []}, (), "Out"),
    ("unsqueeze2", {"X": rand(2, 4)}, {"axes": [0, -1]}, (), "Out"),
    ("unsqueeze", {"X": rand(2, 4), "AxesTensor": np.array([1], np.int32)}, {}, (), "Out"),
    ("concat", {"X": [rand(2, 3, 4), rand(2, 5, 4)]}, {"axis": 1}, (), "Out"),
    ("concat", {"X": [rand(2, 3, 4), rand(2, 3, 2)], "AxisTensor": np.array([-1], np.int32)}, {}, (), "Out"),
    ("slice", {"Input": rand(4, 5, 6)}, {"axes": [0, 2], "starts": [1, -4], "ends": [2, 10], "decrease_axis": [0]},
     (), "Out"),
    ("slice", {"Input": rand(4, 5, 6), "StartsTensor": np.array([2], np.int64)}, {"axes": [1], "starts": [0], "ends": [4]},
     (), "Out"),
    ("shape", {"Input": rand(2, 3, 4)}, {}, (), "Out"),
    ("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": int(VarType.FP32)}, (), "Out"),
    ("fill_constant", {"ShapeTensor": np.array([3], np.int64)}, {"value": 200.0, "dtype": int(VarType.INT32),
                                                                 "str_value": "200"}, (), "Out"),
    ("nearest_interp_v2", {"X": rand(1, 3, 5, 6)}, {"scale": [2.0, 2.0], "align_corners": False}, (), "Out"),
    ("nearest_interp_v2", {"X": rand(1, 3, 5, 6)}, {"out_h": 7, "out_w": 9, "align_corners": True}, (), "Out"),
    ("nearest_interp", {"X": rand(1, 3, 5, 6), "OutSize": np.array([4, 3], np.int32)}, {"align_corners": False},
     (), "Out"),
    ("bilinear_interp_v2", {"X": rand(1, 3, 5, 6)}, {"out_h": 8, "out_w": 9, "align_corners": False, "align_mode": 0},
     (), "Out"),
    ("bilinear_interp", {"X": rand(1, 3, 5, 6)}, {"out_h": 3, "out_w": 9, "align_corners": True}, (), "Out"),
    ("fused_conv2d", {"Input": X4, "Filter": W_CONV, "Bias": B6},
     {"conv_type": "conv2d", "paddings": [1, 1], "act_type": "hard_swish", "act_threshold": 6.0, "act_scale": 6.0,
      "act_offset": 3.0}, ("Filter", "Bias"), "Output"),
    ("fused_conv2d", {"Input": rand(1, 4, 5, 5), "Filter": rand(4, 3, 3, 3)},
     {"conv_type": "conv2d_transpose", "strides": [2, 2], "act_type": "relu"}, ("Filter",), "Output"),
    ("fusion_scale_activation", {"X": rand(3, 4)}, {"scale": 2.0, "bias": 0.5, "act_type": "relu6", "act_threshold": 6.0},
     (), "Out"),
]
ACTIVATION_CASES = [
    ("relu", {}), ("relu6", {"threshold": 4.0}), ("sigmoid", {}), ("tanh", {}),
    ("hard_sigmoid", {"slope": 0.25, "offset": 0.4}), ("hard_swish", {}), ("swish", {"beta": 1.5}), ("silu", {}),
    ("leaky_relu", {"alpha": 0.1}), ("gelu", {}), ("gelu", {"approximate": True}), ("elu", {"alpha": 0.7}),
    ("mish", {}), ("softplus", {"beta": 2.0, "threshold": 5.0}),
]
ELEMENTWISE = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max",
               "elementwise_min", "elementwise_pow", "elementwise_floordiv", "elementwise_mod"]
# (X shape, Y shape), axis: Paddle's broadcasting forms the elementwise suites run
ELEMENTWISE_SHAPES = [(((2, 3, 4, 5), (2, 3, 4, 5)), -1), (((2, 3, 4, 5), (3,)), 1), (((2, 3, 4, 5), (4, 5)), -1),
                      (((2, 3, 4, 5), (3, 4)), 1)]
FUSED_ELEMENTWISE = [f"fusion_elementwise_{k}_activation" for k in ("add", "sub", "mul", "div", "max", "min")]

# More cases, for the ops and forms a target has beyond the list above (a target runs those it has kernels for):
# the GEMM kernels (matmul, mul, fc), a conv's 1x1 GEMM form, ResidualData, depthwise with a channel multiplier.
MORE_CASES: list[tuple[str, dict, dict, tuple[str, ...], str]] = [
    ("conv2d", {"Input": X4, "Filter": rand(5, 4, 1, 1), "Bias": rand(5)}, {}, ("Filter", "Bias"), "Output"),
    ("fused_conv2d", {"Input": X4, "Filter": rand(6, 4, 1, 1), "Bias": B6, "ResidualData": rand(2, 6, 9, 9)},
     {"conv_type": "conv2d", "act_type": "relu"}, ("Filter", "Bias"), "Output"),
    ("fused_conv2d", {"Input": X4, "Filter": rand(8, 1, 3, 3), "Bias": rand(8)},
     {"conv_type": "depthwise_conv2d", "groups": 4, "paddings": [1, 1], "act_type": "relu6", "act_threshold": 6.0},
     ("Filter", "Bias"), "Output"),
    ("matmul", {"X": rand(2, 3, 4), "Y": rand(2, 5, 4)}, {"transpose_Y": True, "alpha": 0.5}, (), "Out"),
    ("matmul", {"X": rand(4, 3), "Y": rand(4, 6)}, {"transpose_X": True}, ("Y",), "Out"),
    ("matmul_v2", {"X": rand(2, 1, 3, 4), "Y": rand(1, 3, 4, 5)}, {}, (), "Out"),
    ("matmul_v2", {"X": rand(20, 33), "Y": rand(33, 17)}, {}, ("Y",), "Out"),
    ("mul", {"X": rand(2, 3, 4), "Y": rand(12, 5)}, {"x_num_col_dims": 1}, ("Y",), "Out"),
    ("fc", {"Input": rand(3, 40), "W": rand(40, 18), "Bias": rand(18)},
     {"in_num_col_dims": 1, "activation_type": "hard_swish"}, ("W", "Bias"), "Out"),
    ("transpose2", {"X": rand(2, 3, 4, 5, 2)}, {"axis": [4, 0, 2, 1, 3]}, (), "Out"),
    ("slice", {"Input": rand(4, 5, 6)}, {"axes": [1], "starts": [-3], "ends": [100]}, (), "Out"),
]


def host_in_the_middle_program() -> Program:
    """feed x -> relu -> exp -> relu -> fetch: `exp` has no device kernel (CUDA, OpenCL), so it runs on the host
    between two device kernels."""
    prog = Program()
    b = prog.main
    for n in ("x", "a", "b", "c"):
        b.vars[n] = VarDesc(n, dtype=VarType.FP32, shape=[-1, 4])
    b.vars["feed"] = VarDesc("feed", type=VarType.FEED_MINIBATCH, dtype=None)
    b.vars["fetch"] = VarDesc("fetch", type=VarType.FETCH_LIST, dtype=None)
    b.ops = [OpDesc("feed", {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0}),
             OpDesc("relu", {"X": ["x"]}, {"Out": ["a"]}),
             OpDesc("exp", {"X": ["a"]}, {"Out": ["b"]}),
             OpDesc("relu", {"X": ["b"]}, {"Out": ["c"]}),
             OpDesc("fetch", {"X": ["c"]}, {"Out": ["fetch"]}, {"col": 0})]
    return prog


def check_int_shape_arithmetic(target: TargetType, context: KernelContext) -> None:
    """int32/int64 slice, concat, elementwise, scale on a device target: its host-side kernels, host kernel results."""
    from tests.kernels._util import make_op, run_op

    x = np.array([4, 7, 9], np.int32)
    for op_type, ins, attrs in [
        ("slice", {"Input": x}, {"axes": [0], "starts": [1], "ends": [3]}),
        ("concat", {"X": [x, x]}, {"axis": 0}),
        ("elementwise_floordiv", {"X": x, "Y": np.array([-2], np.int32)}, {}),
        ("scale", {"X": x.astype(np.int64)}, {"scale": 2.0, "bias": 1.0}),
    ]:
        op = make_op(op_type, ins, attrs)
        alias = "host_int64" if op_type == "scale" else "host_int32"
        kd = KERNELS.get(KernelKey(op_type, target, ANY_PRECISION, ANY_LAYOUT, alias))
        assert kd is not None and kd.output_type("Out").target == TargetType.Host
        kernel = kd.create(op, context)
        kernel.prepare({})
        got = kernel.run({k: (v if isinstance(v, list) else [v]) for k, v in ins.items()})["Out"][0]
        ref = run_op(op_type, ins, attrs)["Out"][0]
        assert isinstance(got, np.ndarray) and got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
