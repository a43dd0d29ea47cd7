"""Generate the conformance zoo under tests/fixtures/conformance/<name>/ (dev tool; needs paddlepaddle 3.x).

Each model is a small legacy (ProgramDesc) static program built with `paddle.static` under
`FLAGS_enable_pir_api=0`, so it holds the legacy ops older PaddleClas / PaddleOCR / PaddleDetection
exports hold. Ops that Paddle 3.3.1 cannot trace in legacy-static mode (matmul_v2, gelu, softplus,
arg_max, ...) and old op versions (matmul, mul, bilinear_interp, elementwise with `axis`, ...) are
appended raw with `LayerHelper.append_op` (`_op` below). Weights come from Paddle's initializers
under a fixed program seed; 1-D parameters (biases, norm scales/shifts, running stats) are then
overwritten with seeded random values, so no bias is zero and no batch_norm is an identity.

Saved with `paddle.static.save_inference_model` (clip_extra: no op_callstack attributes):
inference.pdmodel + inference.pdiparams (no params file for weight-free models) and case.npz with
`in:<feed>` / `out:<fetch>` from Paddle Inference on the saved files (`switch_ir_optim(False)`,
MKLDNN off, 1 thread), the same conventions as ../shared/models.

Usage: python tools/make_conformance_models.py [--out tests/fixtures/conformance] [--list] [names...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# name -> (builder(feeds) -> fetch vars, feeds [(name, shape, dtype, (lo, hi) or None)], run batch)
MODELS: dict[str, tuple[Callable[..., list[Any]], list[tuple[str, list[int], str, Any]], int]] = {}
F32 = "float32"


def model(name: str, *feeds: tuple[str, list[int], str, Any], batch: int = 1) -> Callable:
    def deco(fn: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        MODELS[name] = (fn, list(feeds), batch)
        return fn
    return deco


def img(name: str = "x", c: int = 4, h: int = 8, w: int = 8) -> tuple[str, list[int], str, Any]:
    return (name, [-1, c, h, w], F32, None)


def _op(type_: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None,
        outs: dict[str, str] | None = None) -> Any:
    """Append a raw legacy op; `outs` maps output slot -> dtype (default {"Out": dtype of the first input})."""
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(type_)
    ins = {k: (v if isinstance(v, list) else [v]) for k, v in inputs.items()}
    first = next(v for vs in ins.values() for v in vs)
    outs = outs or {"Out": first.dtype}
    outputs = {k: [helper.create_variable_for_type_inference(dt)] for k, dt in outs.items()}
    helper.append_op(type=type_, inputs=ins, outputs=outputs, attrs=attrs or {})
    res = [outputs[k][0] for k in outs]
    return res[0] if len(res) == 1 else res


def u(type_: str, x: Any, **attrs: Any) -> Any:
    """A raw unary op X -> Out."""
    return _op(type_, {"X": x}, attrs)


def ew(type_: str, x: Any, y: Any, axis: int = -1, out: str | None = None) -> Any:
    """A raw binary op (elementwise_*, compare and logical ops) X, Y -> Out."""
    return _op(type_, {"X": x, "Y": y}, {"axis": axis} if type_.startswith("elementwise") else {},
               {"Out": out} if out else None)


def red(type_: str, x: Any, dim: list[int] | None = None, keep: bool = False, out: str | None = None) -> Any:
    """A raw reduce_* op (dim None: reduce_all)."""
    return _op(type_, {"X": x}, {"dim": dim or [0], "keep_dim": keep, "reduce_all": dim is None},
               {"Out": out} if out else None)


# ---------------------------------------------------------------------------------------------------- models
def _define() -> None:  # noqa: C901 (one builder per model)
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    @model("conv_variants", img(c=4, h=9, w=9))
    def _(x):
        a = nn.Conv2D(4, 6, 3, padding="SAME", groups=2, dilation=2)(x)
        b = nn.Conv2D(4, 6, 3, stride=2, padding="VALID")(x)
        c = nn.Conv2D(4, 4, (3, 2), stride=(2, 1), padding=[1, 2, 0, 1], bias_attr=False)(x)
        d = nn.Conv2D(4, 8, 1)(x)
        return [a, b, c, d]

    @model("conv_same_stride2", img(c=3, h=10, w=7))
    def _(x):
        y = nn.Conv2D(3, 4, 3, stride=2, padding="SAME")(x)
        y = nn.Conv2D(4, 4, 5, stride=2, padding=2, dilation=1, groups=4)(F.relu(y))
        return [y]

    @model("conv_depthwise", img(c=4, h=8, w=8))
    def _(x):
        a = nn.Conv2D(4, 4, 3, stride=2, padding=1, groups=4)(x)
        b = nn.Conv2D(4, 8, 3, padding=1, groups=4, bias_attr=False)(x)
        c = nn.Conv2D(4, 4, 5, padding=4, dilation=2, groups=4)(x)
        return [a, b, c]

    @model("conv_transpose", img(c=4, h=5, w=6))
    def _(x):
        a = nn.Conv2DTranspose(4, 3, 3, stride=2, padding=1, output_padding=1)(x)
        b = nn.Conv2DTranspose(4, 6, 4, stride=2, padding=1, groups=2, bias_attr=False)(x)
        c = nn.Conv2DTranspose(4, 2, (3, 2), stride=(1, 2), padding=[1, 0], dilation=2)(x)
        d = nn.Conv2DTranspose(4, 4, 2, stride=2, groups=4)(x)
        return [a, b, c, d]

    @model("conv_transpose_same", img(c=3, h=4, w=4))
    def _(x):
        a = nn.Conv2DTranspose(3, 2, 3, stride=2, padding="SAME")(x)
        b = F.conv2d_transpose(x, paddle.create_parameter([3, 2, 3, 3], F32), stride=2, output_size=[10, 9])
        return [a, b]

    @model("conv_nhwc", ("x", [-1, 6, 6, 3], F32, None))
    def _(x):
        y = nn.Conv2D(3, 4, 3, padding=1, data_format="NHWC")(x)
        y = nn.BatchNorm2D(4, data_format="NHWC")(y)
        y = F.max_pool2d(F.relu(y), 2, 2, data_format="NHWC")
        return [y]

    @model("pool_max", img(c=3, h=7, w=9))
    def _(x):
        a = F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True)
        b = F.max_pool2d(x, 2, 2, ceil_mode=False)
        c = F.max_pool2d(x, (3, 2), (2, 3), padding="SAME")
        d = F.max_pool2d(x, 3, 1, padding=[0, 1, 1, 0])
        return [a, b, c, d]

    @model("pool_avg", img(c=3, h=7, w=9))
    def _(x):
        a = F.avg_pool2d(x, 3, 2, padding=1, exclusive=False)
        b = F.avg_pool2d(x, 3, 2, padding=1, exclusive=True, ceil_mode=True)
        c = F.avg_pool2d(x, 2, 2, padding="VALID")
        d = F.avg_pool2d(x, (2, 3), 1, padding=[1, 0, 0, 1], exclusive=False, ceil_mode=True)
        return [a, b, c, d]

    @model("pool_adaptive_global", img(c=3, h=7, w=10))
    def _(x):
        a = F.adaptive_avg_pool2d(x, [3, 4])
        b = F.adaptive_max_pool2d(x, [3, 4])
        c = F.adaptive_avg_pool2d(x, 1)
        e = _op("pool2d", {"X": x}, {"pooling_type": "max", "ksize": [1, 1], "global_pooling": True})
        f = F.adaptive_avg_pool2d(x, [5, 3])
        return [a, b, c, e, f]

    @model("norms", img(c=4, h=5, w=6))
    def _(x):
        a = nn.BatchNorm2D(4)(x)
        b = nn.LayerNorm([4, 5, 6])(x)
        c = nn.InstanceNorm2D(4)(x)
        d = nn.GroupNorm(2, 4)(x)
        e = nn.LayerNorm(6, epsilon=1e-3)(x)
        return [a, b, c, d, e]

    @model("batch_norm_legacy", img(c=3, h=4, w=4), batch=2)
    def _(x):
        y = paddle.static.nn.batch_norm(x, is_test=True, act="relu", epsilon=1e-3)
        return [paddle.static.nn.batch_norm(y, is_test=True, momentum=0.8)]

    @model("act_basic", ("x", [-1, 4, 6], F32, None))
    def _(x):
        return [F.relu(x), F.relu6(x * 4.0), F.leaky_relu(x, 0.13), F.elu(x, 0.7), u("sigmoid", x), u("tanh", x),
                nn.PReLU(1)(x), u("relu6", x * 4.0, threshold=3.0), u("leaky_relu", x, alpha=-0.2)]

    @model("act_prelu_channel", img(c=4, h=3, w=3))
    def _(x):
        a = nn.PReLU(4, 0.2)(x)
        b = _op("prelu", {"X": x, "Alpha": paddle.create_parameter([1, 4, 3, 3], F32)}, {"mode": "element"})
        return [a, b]

    @model("act_smooth", ("x", [-1, 4, 6], F32, None))
    def _(x):
        x3 = x * 3.0
        return [_op("gelu", {"X": x}, {"approximate": False}), _op("gelu", {"X": x}, {"approximate": True}),
                F.silu(x), F.swish(x), F.hardswish(x3), F.hardsigmoid(x3),
                _op("hard_sigmoid", {"X": x3}, {"slope": 0.2, "offset": 0.5}),
                _op("softplus", {"X": x}, {"beta": 2.0, "threshold": 3.0}), F.mish(x3)]

    @model("act_misc_math", ("x", [-1, 3, 5], F32, None))
    def _(x):
        p = u("abs", x) + 0.5
        names = ["exp", "square", "abs", "erf", "softsign", "logsigmoid", "sin", "cos", "tanh_shrink", "sign"]
        pos = ["log", "sqrt", "rsqrt", "reciprocal", "log2", "log10", "log1p"]
        return ([u(n, x) for n in names] + [u(n, p) for n in pos]
                + [u("floor", x * 3.0), u("ceil", x * 3.0), u("round", x * 3.0), u("brelu", x, t_min=-0.5, t_max=1.5),
                   u("thresholded_relu", x, threshold=0.3), u("selu", x), u("celu", x, alpha=0.8),
                   u("hard_shrink", x, threshold=0.4), u("softshrink", x, **{"lambda": 0.3}),
                   _op("pow", {"X": p}, {"factor": 0.7})])

    @model("softmax_axes", ("x", [-1, 3, 4, 5], F32, None))
    def _(x):
        return [F.softmax(x, axis=1), F.softmax(x, axis=-1), F.log_softmax(x, axis=0), F.softmax(x * 30.0, axis=2),
                F.log_softmax(x, axis=-1)]

    @model("elementwise_broadcast", ("x", [-1, 3, 4, 5], F32, None), ("y", [3, 1, 1], F32, None),
           ("z", [5], F32, (0.5, 2.0)), batch=2)
    def _(x, y, z):
        return [x + y, x - z, x * y, x / z, ew("elementwise_max", x, y), ew("elementwise_min", z, x),
                ew("elementwise_pow", u("abs", x) + 0.1, z), paddle.pow(x, 3.0), y - x,
                ew("elementwise_floordiv", x, z), ew("elementwise_mod", x, z)]

    @model("elementwise_axis_legacy", ("x", [-1, 3, 4, 5], F32, None), ("y", [3, 4], F32, None),
           ("b", [4], F32, (0.5, 2.0)))
    def _(x, y, b):
        return [_op("elementwise_add", {"X": x, "Y": y}, {"axis": 1}),
                _op("elementwise_mul", {"X": x, "Y": b}, {"axis": 2}),
                _op("elementwise_div", {"X": x, "Y": b}, {"axis": 2}),
                _op("elementwise_sub", {"X": x, "Y": y}, {"axis": 1}),
                _op("elementwise_max", {"X": x, "Y": y}, {"axis": 1})]

    @model("matmul_v2", ("a", [-1, 3, 4, 5], F32, None), ("b", [5, 6], F32, None), ("c", [1, 6, 5], F32, None),
           ("v", [5], F32, None))
    def _(a, b, c, v):
        return [_op("matmul_v2", {"X": v, "Y": b}), _op("matmul_v2", {"X": a, "Y": v}),
                _op("matmul_v2", {"X": v, "Y": c}, {"trans_y": True}),
                _op("matmul_v2", {"X": a, "Y": b}),
                _op("matmul_v2", {"X": a, "Y": c}, {"trans_y": True}),
                _op("matmul_v2", {"X": a, "Y": a}, {"trans_x": True}),
                _op("matmul_v2", {"X": c, "Y": a}, {"trans_y": True}),
                _op("matmul_v2", {"X": b, "Y": a}, {"trans_x": True, "trans_y": True}),
                _op("matmul_v2", {"X": b, "Y": b}, {"trans_x": True})]

    # set_value with unit steps (PaddleClas ReXNet's `out[:, 0:c] += x`): a ValueTensor of the slice's shape, one
    # broadcast over two sliced axes with a negative start and an end past the dim, one into a decrease axis
    @model("set_value_slices", ("x", [-1, 6, 5, 4], F32, None), ("v", [-1, 2, 5, 4], F32, None),
           ("w", [3, 1], F32, None), ("u", [6, 4], F32, None), batch=2)
    def _(x, v, w, u):
        def sv(val, axes, starts, ends, decrease=()):
            return _op("set_value", {"Input": x, "ValueTensor": val},
                       {"axes": axes, "starts": starts, "ends": ends, "steps": [1] * len(axes),
                        "decrease_axes": list(decrease), "none_axes": [], "shape": [], "dtype": 5}, {"Out": F32})
        return [sv(v, [1], [0], [2]), sv(w, [1, 2], [1, -3], [3, 100]), sv(u, [2], [3], [4], [2])]

    # bmm (PaddleSeg OCRNet's spatial gather): [B, M, K] @ [B, K, N], batch dim fed at run time
    @model("bmm", ("a", [-1, 4, 5], F32, None), ("b", [-1, 5, 3], F32, None), ("c", [-1, 3, 4], F32, None), batch=2)
    def _(a, b, c):
        return [_op("bmm", {"X": a, "Y": b}), _op("bmm", {"X": c, "Y": a})]

    @model("matmul_legacy_mul", ("a", [-1, 4, 6], F32, None), ("b", [6, 5], F32, None))
    def _(a, b):
        w = paddle.create_parameter([6, 3], F32)
        w2 = paddle.create_parameter([24, 7], F32)
        return [_op("matmul", {"X": a, "Y": b}, {"alpha": 0.5}),
                _op("matmul", {"X": a, "Y": a}, {"transpose_Y": True, "alpha": 1.0}),
                _op("matmul", {"X": b, "Y": a}, {"transpose_X": True, "transpose_Y": True}),
                _op("mul", {"X": a, "Y": w}, {"x_num_col_dims": 2, "y_num_col_dims": 1}),
                _op("mul", {"X": a, "Y": w2}, {"x_num_col_dims": 1, "y_num_col_dims": 1})]

    @model("fc_linear", ("x", [-1, 5, 8], F32, None), batch=3)
    def _(x):
        a = paddle.static.nn.fc(x, 6, num_flatten_dims=2, activation="relu")
        b = paddle.static.nn.fc(x, 4, num_flatten_dims=1)
        c = nn.Linear(8, 3)(x)
        d = nn.Linear(8, 1)(u("tanh", x))
        return [a, b, c, d]

    @model("reshape_transpose", ("x", [-1, 4, 6, 2], F32, None), batch=2)
    def _(x):
        a = paddle.reshape(x, [0, -1, 3])
        b = paddle.transpose(x, [0, 3, 1, 2])
        c = paddle.flatten(x, 1, 2)
        d = paddle.unsqueeze(paddle.squeeze(paddle.unsqueeze(x, [1, 4]), [1]), [-1])
        e = paddle.squeeze(x[:, :1], axis=1)
        f = _op("reshape", {"X": x}, {"shape": [0, 12, 4]})
        g = _op("transpose", {"X": x}, {"axis": [2, 0, 1, 3]})
        h = _op("flatten2", {"X": x}, {"axis": 2}, {"Out": F32, "XShape": F32})[0]
        i = _op("squeeze2", {"X": paddle.unsqueeze(x, [2])}, {"axes": [2]}, {"Out": F32, "XShape": F32})[0]
        return [a, b, c, d, e, f, g, h, i]

    @model("concat_split_stack", ("x", [-1, 6, 4], F32, None), ("y", [-1, 2, 4], F32, None), batch=2)
    def _(x, y):
        a = paddle.concat([x, y, x], axis=1)
        s = paddle.split(x, [1, -1, 2], axis=1)
        t = paddle.split(x, 2, axis=-1)
        u = paddle.stack([x, x * 2.0], axis=2)
        v = paddle.unstack(y, axis=1)
        w = paddle.concat([x, x], axis=-1)
        return [a, *s, *t, u, *v, w]

    @model("slice_strided", ("x", [-1, 6, 7, 5], F32, None))
    def _(x):
        return [x[:, 1:4, -3:, ::2], x[:, 2], x[..., -1], x[:, ::-1, 1:6:2],
                paddle.strided_slice(x, [1, 2], [5, 6], [0, 0], [-2, -3]),
                paddle.slice(x, [1, 3], [1, -10], [100, -1]), x[:, -1:, :, 1:2]]

    @model("gather_expand_tile", ("x", [-1, 5, 4], F32, None), ("idx", [3], "int64", (0, 5)))
    def _(x, idx):
        a = paddle.gather(x, idx, axis=1)
        b = paddle.gather(x[0], idx)
        c = paddle.expand(x[:, :1], [-1, 3, 4])
        d = paddle.tile(x, [1, 2, 3])
        e = _op("expand_as_v2", {"X": x[:, :1, :1], "Y": x}, {"target_shape": [-1, 5, 4]})
        f = paddle.tile(x[0], [2, 1])
        g = paddle.index_select(x, idx, axis=1)
        return [a, b, c, d, e, f, g]

    @model("reductions", ("x", [-1, 3, 4, 5], F32, None), batch=2)
    def _(x):
        pos = ew("greater_than", x, paddle.full([1], 0.0, F32), out="bool")
        return [red("reduce_mean", x, [2, 3], True), red("reduce_sum", x, [1]), red("reduce_max", x, [-1], True),
                red("reduce_min", x, [1, 3]), red("reduce_prod", x * 0.5 + 1.0, [2]), red("reduce_mean", x),
                red("reduce_sum", x, keep=True), red("reduce_max", x), _op("mean", {"X": x}),
                paddle.cast(red("reduce_all", pos, [1], out="bool"), F32),
                paddle.cast(red("reduce_any", pos, [1, 2], out="bool"), F32), red("reduce_sum", x, [0, -1], True)]

    @model("scale_clip_cast", ("x", [-1, 4, 5], F32, None))
    def _(x):
        a = paddle.scale(x, 2.0, 0.5, bias_after_scale=True)
        b = paddle.scale(x, 3.0, -1.0, bias_after_scale=False)
        c = paddle.clip(x, -0.4, 0.7)
        d = paddle.cast(x * 10.0, "int32")
        e = paddle.cast(paddle.cast(x * 10.0, "int64"), F32)
        f = paddle.clip(x, min=0.0)
        g = paddle.cast(x > 0, F32)
        return [a, b, c, d, e, f, g]

    @model("arg_max_min", ("x", [-1, 4, 6], F32, None), batch=2)
    def _(x):
        return [_op("arg_max", {"X": x}, {"axis": 1, "keepdims": False, "dtype": 3}, {"Out": "int64"}),
                _op("arg_max", {"X": x}, {"axis": -1, "keepdims": True, "dtype": 2}, {"Out": "int32"}),
                _op("arg_min", {"X": x}, {"axis": 2, "keepdims": False, "dtype": 3}, {"Out": "int64"}),
                _op("arg_max", {"X": x}, {"axis": 0, "flatten": True, "dtype": 3}, {"Out": "int64"})]

    @model("interp_nearest", img(c=2, h=5, w=6))
    def _(x):
        return [F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=[7, 4], mode="nearest"),
                F.interpolate(x, scale_factor=[1.5, 0.5], mode="nearest"),
                _op("nearest_interp_v2", {"X": x}, {"out_h": 9, "out_w": 11, "interp_method": "nearest",
                                                     "align_corners": True}),
                _op("nearest_interp", {"X": x}, {"out_h": 10, "out_w": 12, "interp_method": "nearest",
                                                  "align_corners": False})]

    # linear_interp_v2 (NCW): to a constant width, and to a width read from another tensor's shape at run time
    # (PP-MobileSeg's axial position embeddings), each alignment; y's last dim is fed as 7
    @model("interp_linear_1d", ("x", [-1, 3, 4], F32, None), ("y", [-1, 2, -1], F32, None), batch=2)
    def _(x, y):
        w = paddle.shape(y)[2:3]
        base = {"out_d": -1, "out_h": -1, "out_w": -1, "scale": [], "data_layout": "NCHW", "interp_method": "linear"}
        aligns = [{"align_corners": False, "align_mode": 0}, {"align_corners": False, "align_mode": 1},
                  {"align_corners": True, "align_mode": 0}]
        return ([_op("linear_interp_v2", {"X": x}, {**base, **a, "out_w": 9}) for a in aligns]
                + [_op("linear_interp_v2", {"X": x, "SizeTensor": [w]}, {**base, **a}) for a in aligns])

    @model("interp_bilinear", img(c=2, h=5, w=6))
    def _(x):
        return [F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x, size=[8, 9], mode="bilinear", align_corners=True),
                F.interpolate(x, size=[3, 4], mode="bilinear", align_corners=False, align_mode=1),
                F.interpolate(x, scale_factor=[1.7, 0.6], mode="bilinear"),
                _op("bilinear_interp", {"X": x}, {"out_h": 7, "out_w": 13, "interp_method": "bilinear",
                                                   "align_corners": False, "align_mode": 1}),
                _op("bilinear_interp", {"X": x}, {"out_h": 9, "out_w": 5, "interp_method": "bilinear",
                                                   "align_corners": True, "align_mode": 1})]

    @model("interp_size_tensor", img(c=2, h=4, w=4), ("ref", [-1, 1, 6, 10], F32, None))
    def _(x, ref):
        hw = paddle.shape(ref)[2:]
        return [F.interpolate(x, size=hw, mode="nearest"), F.upsample(x, size=[6, 10], mode="bilinear"),
                F.interpolate(x, size=[paddle.shape(ref)[2], 5], mode="bilinear", align_corners=True)]

    @model("pad_ops", img(c=2, h=4, w=5))
    def _(x):
        return [F.pad(x, [1, 2, 0, 1], value=0.5), F.pad(x, [1, 2, 2, 1], mode="reflect"),
                F.pad(x, [2, 0, 1, 3], mode="replicate"), F.pad(x, [1, 1, 2, 2], mode="circular"),
                _op("pad", {"X": x}, {"paddings": [0, 0, 1, 0, 2, 1, 0, 3], "pad_value": -1.0}),
                F.pad(x, [1, 0, 2, 1], mode="constant", data_format="NHWC")]

    @model("embedding", ("ids", [-1, 7], "int64", (0, 20)), batch=2)
    def _(ids):
        e = nn.Embedding(20, 8, padding_idx=3)(ids)
        e2 = _op("lookup_table", {"W": paddle.create_parameter([20, 5], F32), "Ids": paddle.unsqueeze(ids, -1)},
                 {"padding_idx": -1})
        return [paddle.mean(e, axis=1), e, e2]

    @model("shape_dynamic", ("x", [-1, 3, -1, -1], F32, None), batch=2)
    def _(x):
        s = paddle.shape(x)
        a = paddle.reshape(x, [s[0], -1])
        b = paddle.reshape(x, [s[0], s[1], s[2] * s[3]])
        c = paddle.transpose(paddle.flatten(x, 2), [0, 2, 1])
        d = paddle.zeros_like(x) + paddle.full([1], 2.0, F32)
        e = paddle.cast(s, F32)
        f = paddle.reshape(x, paddle.concat([s[:1], paddle.full([1], -1, "int32")]))
        return [a, b, c, d, e, f]

    @model("creation_fill", ("x", [-1, 4], F32, None), batch=3)
    def _(x):
        a = paddle.full_like(x, 3.5) * x
        b = paddle.ones([2, 3], "int64")
        c = paddle.arange(0, 10, 2, "int64")
        d = paddle.full([2, 2], 1.5) + paddle.to_tensor(np.array([[1.0, 2.0]], np.float32))
        f = paddle.linspace(0.0, 1.0, 5)
        g = _op("fill_constant_batch_size_like", {"Input": x}, {"shape": [-1, 3], "value": 2.5, "dtype": 5,
                                                               "input_dim_idx": 0, "output_dim_idx": 0})
        h = _op("fill_constant_batch_size_like", {"Input": x}, {"shape": [2, -1], "value": 7.0, "dtype": 3,
                                                               "input_dim_idx": 0, "output_dim_idx": 1}, {"Out": "int64"})
        return [a, b, c, d, f, g * 1.0, h]

    @model("compare_where", ("x", [-1, 4, 5], F32, None), ("y", [-1, 4, 5], F32, None))
    def _(x, y):
        m = x > y
        nz = ew("not_equal", x, paddle.full([1], 0.0, F32), out="bool")
        lt = ew("less_than", x, y, out="bool")
        return [paddle.where(m, x, y), paddle.cast(x >= 0.5, "int32"), paddle.cast(paddle.equal(x, x), F32),
                paddle.cast(ew("logical_and", lt, nz, out="bool"), F32),
                paddle.cast(_op("logical_not", {"X": m}, None, {"Out": "bool"}), F32),
                paddle.where(x <= y, x * 2.0, paddle.zeros_like(x)),
                paddle.cast(ew("logical_or", m, lt, out="bool"), F32),
                paddle.cast(ew("logical_xor", m, nz, out="bool"), F32), paddle.cast(ew("less_equal", x, y, out="bool"), F32)]

    @model("misc_index_ops", ("x", [-1, 4, 6], F32, None), batch=2)
    def _(x):
        v, i = paddle.topk(x, 3, axis=-1)
        v2, i2 = paddle.topk(x, 2, axis=1, largest=False)
        return [v, i, v2, i2, u("cumsum", x, axis=1), u("cumsum", x, axis=2, reverse=True, exclusive=True),
                u("flip", x, axis=[1, 2]), u("roll", x, shifts=[2], axis=[2]), u("roll", x, shifts=[-1, 3], axis=[1, 2]),
                _op("argsort", {"X": x}, {"axis": 1, "descending": True}, {"Out": F32, "Indices": "int64"})[1]]

    @model("misc_nn_ops", img(c=8, h=4, w=4))
    def _(x):
        return [F.pixel_shuffle(x, 2), u("p_norm", x, axis=1, porder=2.0, keepdim=True, epsilon=1e-12),
                _op("norm", {"X": x}, {"axis": 1, "epsilon": 1e-10}, {"Out": F32, "Norm": F32})[0],
                _op("one_hot_v2", {"X": paddle.cast(u("abs", x[:, 0, 0]) * 3.0, "int64")}, {"depth": 5, "dtype": 5}),
                F.dropout(x, 0.3, training=False), F.dropout(x, 0.4, training=False, mode="downscale_in_infer"),
                _op("sum", {"X": [x, x * 2.0, u("sigmoid", x)]}), u("assign", x * 0.5)]

    @model("resnet_block", img(c=4, h=8, w=8), batch=2)
    def _(x):
        def cbr(t, cin, cout, k, s, act=True):
            t = nn.BatchNorm2D(cout)(nn.Conv2D(cin, cout, k, stride=s, padding=k // 2, bias_attr=False)(t))
            return F.relu(t) if act else t
        y = cbr(x, 4, 8, 3, 2)
        y = cbr(y, 8, 8, 3, 1, act=False)
        short = cbr(x, 4, 8, 1, 2, act=False)
        y = F.relu(y + short)
        z = cbr(y, 8, 8, 3, 1)
        y = F.relu(cbr(z, 8, 8, 3, 1, act=False) + y)
        y = paddle.flatten(F.adaptive_avg_pool2d(y, 1), 1)
        return [F.softmax(nn.Linear(8, 5)(y))]

    @model("se_block", img(c=8, h=6, w=6))
    def _(x):
        y = F.hardswish(nn.BatchNorm2D(8)(nn.Conv2D(8, 8, 3, padding=1, groups=8, bias_attr=False)(x)))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.relu(nn.Conv2D(8, 2, 1)(s))
        s = F.hardsigmoid(nn.Conv2D(2, 8, 1)(s))
        y = y * s
        y = nn.BatchNorm2D(8)(nn.Conv2D(8, 8, 1, bias_attr=False)(y))
        return [y + x]

    @model("attention_block", ("x", [-1, 6, 16], F32, None), batch=2)
    def _(x):
        h = nn.LayerNorm(16)(x)
        qkv = paddle.reshape(nn.Linear(16, 48)(h), [0, 0, 3, 2, 8])
        qkv = paddle.transpose(qkv, [2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = F.softmax(_op("matmul_v2", {"X": q * 0.35, "Y": k}, {"trans_y": True}), axis=-1)
        o = paddle.reshape(paddle.transpose(_op("matmul_v2", {"X": att, "Y": v}), [0, 2, 1, 3]), [0, 0, 16])
        x = x + nn.Linear(16, 16)(o)
        m = _op("gelu", {"X": nn.Linear(16, 32)(nn.LayerNorm(16)(x))}, {"approximate": False})
        return [x + nn.Linear(32, 16)(m)]

    @model("multi_io", img("image", c=3, h=6, w=6), ("vec", [-1, 5], F32, None), ("scale", [1], F32, (0.5, 1.5)))
    def _(image, vec, scale):
        f = paddle.flatten(F.adaptive_avg_pool2d(nn.Conv2D(3, 4, 3)(image), 1), 1)
        h = paddle.concat([f, vec], axis=1)
        logits = nn.Linear(9, 3)(h) * scale
        return [logits, u("sigmoid", vec), F.relu(nn.Conv2D(3, 2, 1)(image))]

    # integer floor division by constant divisors of both signs (Swin's H // window), negative dividends
    @model("floordiv_const_divisor", ("a", [-1, 9], "int32", (-20, 21)), batch=2)
    def _(a):
        import numpy as np

        v = paddle.assign(np.asarray([5, -2, 7, 1, -1, 3, 2, -4, 6], np.int32))
        a64 = paddle.cast(a, "int64")
        return [ew("elementwise_floordiv", a, paddle.full([1], 4, "int32")),
                ew("elementwise_floordiv", a, paddle.full([1], -3, "int32")), ew("elementwise_floordiv", a, v),
                ew("elementwise_floordiv", a64, paddle.full([1], 7, "int64"))]

    @model("int_inputs", ("a", [-1, 5], "int32", (-5, 6)), ("b", [-1, 5], "int64", (1, 6)),
           ("x", [-1, 5], F32, None), batch=2)
    def _(a, b, x):
        c = paddle.cast(a, "int64") + b
        d = paddle.cast(a, F32) * x
        e = c * 2 - b
        g = paddle.gather(x, paddle.cast(ew("elementwise_mod", u("abs", a[0]), paddle.full([1], 5, "int32")), "int32"),
                          axis=1)
        return [c, d, e, red("reduce_sum", c, [1]), g, red("reduce_max", a, [-1]), ew("elementwise_floordiv", c, b),
                ew("elementwise_max", a, paddle.full([1], 0, "int32"))]

    @model("dynamic_batch_mlp", ("x", [-1, 12], F32, None), batch=5)
    def _(x):
        h = F.relu(nn.Linear(12, 16)(x))
        h = F.dropout(h, 0.5, training=False)
        return [F.log_softmax(nn.Linear(16, 4)(h), axis=-1)]

    @model("ocr_head", img(c=4, h=8, w=16))
    def _(x):
        y = F.hardswish(nn.BatchNorm2D(8)(nn.Conv2D(4, 8, 3, padding=1)(x)))
        y = F.avg_pool2d(y, [2, 2], [2, 2])
        y = paddle.squeeze(F.adaptive_avg_pool2d(y, [1, 8]), axis=2)
        y = paddle.transpose(y, [0, 2, 1])
        up = nn.Conv2DTranspose(4, 2, 2, stride=2)(x)
        up = u("sigmoid", nn.BatchNorm2D(2)(up))
        return [F.softmax(nn.Linear(8, 6)(y), axis=2), up]

    @model("fpn_neck", img(c=4, h=16, w=16))
    def _(x):
        c3 = F.relu(nn.Conv2D(4, 6, 3, stride=2, padding=1)(x))
        c4 = F.relu(nn.Conv2D(6, 6, 3, stride=2, padding=1)(c3))
        p4 = nn.Conv2D(6, 4, 1)(c4)
        p3 = nn.Conv2D(6, 4, 1)(c3) + F.interpolate(p4, scale_factor=2, mode="nearest")
        f = paddle.concat([F.interpolate(p4, scale_factor=4, mode="nearest"),
                           F.interpolate(p3, scale_factor=2, mode="nearest")], axis=1)
        return [nn.Conv2D(8, 3, 3, padding=1)(f)]

    @model("shuffle_block", img(c=8, h=6, w=6))
    def _(x):
        a, b = paddle.split(x, 2, axis=1)
        b = nn.BatchNorm2D(4)(nn.Conv2D(4, 4, 3, padding=1, groups=4, bias_attr=False)(b))
        y = paddle.concat([a, F.relu(b)], axis=1)
        y = paddle.reshape(y, [-1, 2, 4, 6, 6])
        y = paddle.transpose(y, [0, 2, 1, 3, 4])
        return [paddle.reshape(y, [-1, 8, 6, 6])]

    @model("shape_tensor_ops", ("x", [-1, 8], F32, None), batch=3)
    def _(x):
        s = paddle.shape(x)
        return [paddle.tile(x, [s[0], 1]), paddle.expand(x[:1], s), paddle.full(s, 2.0) * x,
                paddle.slice(x, [1], [paddle.full([1], 1, "int32")], [s[1] - 2]),
                paddle.split(x, [paddle.full([1], 2, "int32"), 6], axis=1)[1],
                paddle.clip(x, paddle.full([1], -0.3), paddle.full([1], 0.6)),
                paddle.reshape(x, [-1, paddle.full([1], 4, "int32"), 2])]

    @model("lstm_crnn", img(c=3, h=4, w=12))
    def _(x):
        y = F.relu(nn.BatchNorm2D(8)(nn.Conv2D(3, 8, 3, padding=1)(x)))
        y = F.max_pool2d(y, (4, 1), (4, 1))
        y = paddle.transpose(paddle.squeeze(y, axis=2), [0, 2, 1])
        y = nn.LSTM(8, 6, num_layers=2, direction="bidirect")(y)[0]
        return [F.softmax(nn.Linear(12, 5)(y), axis=2)]

    @model("gru_seq", ("x", [-1, 5, 6], F32, None), batch=2)
    def _(x):
        y, h = nn.GRU(6, 4)(x)
        z, _ = nn.SimpleRNN(6, 3, direction="bidirect")(x)
        return [y, h, z]

    @model("rnn_seq_len", ("x", [-1, 5, 4], F32, None), ("lens", [-1], "int64", (1, 6)), batch=3)
    def _(x, lens):
        y, (h, c) = nn.LSTM(4, 3, direction="bidirect")(x, sequence_length=lens)
        z, hz = nn.GRU(4, 2, num_layers=2)(x, sequence_length=lens)
        return [y, h, c, z, hz]

    @model("det_ops", ("feat", [1, 14, 3, 3], F32, None), ("im_size", [1, 2], "int32", (40, 60)),
           ("prior", [6, 4], F32, (0.0, 1.0)), ("deltas", [1, 6, 4], F32, None))
    def _(feat, im_size, prior, deltas):
        boxes, scores = paddle.vision.ops.yolo_box(feat, im_size, [10, 13, 16, 30], 2, 0.01, 8, scale_x_y=1.05)
        pb, var = paddle.vision.ops.prior_box(feat, paddle.zeros([1, 3, 24, 24]), min_sizes=[4.0], max_sizes=[9.0],
                                              aspect_ratios=[2.0], flip=True, clip=True, offset=0.5)
        dec = paddle.vision.ops.box_coder(prior, [0.1, 0.1, 0.2, 0.2], deltas, code_type="decode_center_size")
        return [boxes, scores, pb, var, dec]

    @model("det_ops_variants", ("feat", [-1, 8, 2, 3], F32, None), ("im_size", [-1, 2], "int32", (30, 50)),
           ("prior", [5, 4], F32, (0.0, 1.0)), ("gt", [3, 4], F32, (0.0, 1.0)), ("deltas", [5, 2, 4], F32, None),
           batch=2)
    def _(feat, im_size, prior, gt, deltas):
        boxes, scores = paddle.vision.ops.yolo_box(feat, im_size, [10, 13], 2, 0.3, 16, clip_bbox=False,
                                                   iou_aware=True, iou_aware_factor=0.4)
        pb, var = paddle.vision.ops.prior_box(feat, paddle.zeros([1, 3, 20, 30]), min_sizes=[3.0, 6.0],
                                              max_sizes=[5.0, 9.0], aspect_ratios=[2.0, 3.0], steps=[8.0, 9.0],
                                              min_max_aspect_ratios_order=True)
        pvar = u("abs", prior) * 0.5 + 0.1
        prior_px = prior * 20.0 + paddle.to_tensor(np.array([0, 0, 20, 20], np.float32))
        enc = paddle.vision.ops.box_coder(prior_px, pvar, gt * 20.0 + 21.0, code_type="encode_center_size",
                                          box_normalized=False)
        dec = paddle.vision.ops.box_coder(gt, [0.1, 0.2, 0.3, 0.4], deltas[:3], code_type="decode_center_size",
                                          axis=1)
        return [boxes, scores, pb, var, enc, dec]

    @model("misc_layers", img(c=4, h=4, w=6))
    def _(x):
        a = F.unfold(x, [2, 3], strides=[1, 2], paddings=1)
        b = F.channel_shuffle(x, 2)
        c = F.maxout(x, 2)
        d = paddle.unbind(x, axis=1)
        e = paddle.meshgrid(x[0, 0, 0], x[0, 0, :, 0])
        f = paddle.cast(paddle.numel(x), F32) * x[:, :1]
        return [a, b, c, *d, *e, f]

    # -- traps for the fusion passes: patterns that look fusable but are not (or only with care) --
    @model("trap_fc_fuse", ("x", [-1, 6], F32, None), ("r", [-1, 4], F32, None), ("t", [-1, 3, 6], F32, None),
           batch=2)
    def _(x, r, t):
        w = paddle.create_parameter([6, 4], F32)
        wt = paddle.create_parameter([4, 6], F32)
        b = paddle.create_parameter([4], F32)
        b2 = paddle.create_parameter([3, 4], F32)
        return [_op("matmul_v2", {"X": x, "Y": w}) + r,  # the add is not a bias
                _op("matmul_v2", {"X": x, "Y": wt}, {"trans_y": True}) + b,  # transposed weight
                _op("elementwise_add", {"X": _op("mul", {"X": t, "Y": w}, {"x_num_col_dims": 2}), "Y": b}, {"axis": 2}),
                _op("matmul_v2", {"X": t, "Y": w}) + b2,  # a 2-D "bias"
                F.relu(_op("matmul_v2", {"X": x, "Y": w}) + b)]

    @model("trap_scale_fuse", ("x", [-1, 4], F32, (0.5, 2.0)), batch=3)
    def _(x):
        p = paddle.create_parameter([1], F32)
        pc = paddle.create_parameter([4], F32)
        p3 = paddle.create_parameter([1, 1, 4], F32)
        return [ew("elementwise_sub", p, x), ew("elementwise_div", p, x), x / p, x * pc, x + p3,
                paddle.scale(paddle.scale(x, 2.0, 1.0), 0.5, -3.0, bias_after_scale=False), x * p - p]

    @model("trap_conv_bn", img(c=4, h=5, w=5))
    def _(x):
        ct = nn.Conv2DTranspose(4, 6, 3, stride=2, padding=1, groups=2)(x)
        a = F.relu(nn.BatchNorm2D(6)(ct))
        c = nn.Conv2D(4, 4, 3, padding=1)(x)
        b = nn.BatchNorm2D(4)(c)  # c is also fetched: the conv must stay
        d = nn.BatchNorm2D(4)(nn.Conv2D(4, 4, 3, padding=1, groups=4)(x))
        e = nn.BatchNorm2D(4, epsilon=1e-3)(nn.Conv2D(4, 4, 1, bias_attr=False)(x))
        return [a, c, b, d, e]

    @model("trap_conv_act", img(c=3, h=6, w=6))
    def _(x):
        def conv(cout=4):
            return nn.Conv2D(3, cout, 3, padding=1)(x)
        return [F.leaky_relu(conv(), 0.13), F.relu6(conv()), F.hardswish(conv()), u("sigmoid", conv()),
                F.swish(conv()), nn.PReLU(4, 0.3)(conv()), F.elu(conv(), 0.5), u("tanh", conv()),
                F.hardsigmoid(conv()), u("relu6", conv(), threshold=2.0)]

    @model("trap_shared_intermediate", ("x", [-1, 4, 5], F32, None), ("y", [-1, 4, 5], F32, None))
    def _(x, y):
        s = x + y
        r = F.relu(s)
        m = paddle.scale(x, 2.0, 1.0)
        return [s, r, F.relu(m) + m, F.relu6(s * y)]

    @model("bert_mask_attention", ("ids", [-1, 6], "int64", (0, 12)), batch=2)
    def _(ids):
        emb = nn.Embedding(12, 8, padding_idx=0)(ids)
        pos = paddle.unsqueeze(paddle.arange(0, 6, 1, "int64"), 0)
        h = nn.LayerNorm(8)(emb + nn.Embedding(6, 8)(pos))
        mask = paddle.cast(ew("not_equal", ids, paddle.full([1], 0, "int64"), out="bool"), F32)
        bias = paddle.unsqueeze(paddle.scale(mask, 1e4, -1.0, bias_after_scale=False), [1, 2])
        q = paddle.transpose(paddle.reshape(nn.Linear(8, 8)(h), [0, 0, 2, 4]), [0, 2, 1, 3])
        k = paddle.transpose(paddle.reshape(nn.Linear(8, 8)(h), [0, 0, 2, 4]), [0, 2, 1, 3])
        att = F.softmax(_op("matmul", {"X": q, "Y": k}, {"transpose_Y": True, "alpha": 0.5}) + bias)
        o = paddle.reshape(paddle.transpose(_op("matmul_v2", {"X": att, "Y": q}), [0, 2, 1, 3]), [0, 0, 8])
        pooled = u("tanh", nn.Linear(8, 8)(o[:, 0]))
        return [att, pooled]

    @model("conv1d_seq", ("x", [-1, 3, 10], F32, None), batch=2)
    def _(x):
        y = F.relu(nn.BatchNorm1D(4)(nn.Conv1D(3, 4, 3, padding=1, stride=2)(x)))
        a = F.avg_pool1d(y, 2)
        b = F.adaptive_avg_pool1d(y, 3)
        c = F.max_pool1d(nn.Conv1D(4, 4, 2, dilation=2, groups=2)(y), 2, ceil_mode=True)
        return [a, b, c, nn.BatchNorm1D(3)(x)]

    @model("const_edge", ("x", [-1, 3], F32, None))
    def _(x):
        big = paddle.full([2], 2 ** 40 + 3, "int64")
        i64 = paddle.to_tensor(np.array([2 ** 40, -3], np.int64))
        flags = paddle.to_tensor(np.array([True, False, True]))
        fl = paddle.to_tensor(np.array([[0.25, -1.5, 1e-8]], np.float32))
        xb = paddle.cast(paddle.cast(x, "bool"), F32)
        return [big + i64, paddle.cast(flags, F32) * x, fl * x, xb, paddle.cast(paddle.cast(x * 4.0, "int64"), "bool"),
                paddle.cast(paddle.cast(x * 4.0, "float64") / 3.0, F32)]

    @model("gather_scatter", ("x", [4, 5], F32, None), ("idx", [3, 2], "int64", (0, 4)))
    def _(x, idx):
        a = paddle.gather_nd(x, idx)
        b = paddle.scatter(x, paddle.to_tensor(np.array([2, 0], np.int64)), x[:2] * 10.0)
        c = paddle.take_along_axis(x[:3], idx, axis=1)
        d = paddle.repeat_interleave(x, 2, axis=1)
        e = paddle.scatter(x, paddle.to_tensor(np.array([1, 1], np.int64)), x[2:], overwrite=False)
        return [a, b, c, d, e]

    @model("interp_more", img(c=2, h=4, w=5))
    def _(x):
        return [F.interpolate(x, scale_factor=2, mode="bicubic"), F.interpolate(x, size=[7, 3], mode="bicubic",
                                                                                  align_corners=True),
                F.interpolate(x[:, 0], size=[9], mode="linear", data_format="NCW"),
                F.interpolate(paddle.unsqueeze(x, 2), size=[2, 6, 7], mode="trilinear", data_format="NCDHW"),
                F.pixel_unshuffle(x[:, :, :, :4], 2)]

    @model("conv3d_pool3d", ("x", [-1, 2, 4, 5, 5], F32, None))
    def _(x):
        y = nn.Conv3D(2, 3, 3, padding=1, stride=(1, 2, 2))(x)
        return [F.max_pool3d(y, 2, 2, ceil_mode=True), F.avg_pool3d(x, [2, 3, 3], 1, padding=1), y]

    @model("det_nms", ("boxes", [1, 8, 4], F32, (0.0, 1.0)), ("scores", [1, 3, 8], F32, (0.0, 1.0)))
    def _(boxes, scores):
        b = paddle.concat([boxes[:, :, :2] * 10.0, boxes[:, :, :2] * 10.0 + boxes[:, :, 2:] * 5.0 + 1.0], axis=2)
        out, num, index = _op("multiclass_nms3", {"BBoxes": b, "Scores": scores},
                              {"background_label": 0, "score_threshold": 0.3, "nms_top_k": 6, "nms_threshold": 0.4,
                               "nms_eta": 1.0, "keep_top_k": 5, "normalized": False},
                              {"Out": F32, "NmsRoisNum": "int32", "Index": "int32"})
        outs = [out, num, index]
        for attrs in ({"background_label": -1, "score_threshold": 0.2, "nms_top_k": -1, "nms_threshold": 0.8,
                       "nms_eta": 0.9, "keep_top_k": -1, "normalized": True},
                      {"background_label": -1, "score_threshold": 2.0, "nms_top_k": 4, "nms_threshold": 0.5,
                       "nms_eta": 1.0, "keep_top_k": 3, "normalized": False}):  # nothing kept
            outs += _op("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, attrs,
                        {"Out": F32, "NmsRoisNum": "int32", "Index": "int32"})
        return outs

    @model("det_roi_deform", img(c=3, h=6, w=6), ("rois", [2, 4], F32, (0.0, 4.0)), ("offset", [1, 18, 6, 6], F32, None),
           ("offset2", [1, 24, 5, 5], F32, None))
    def _(x, rois, offset, offset2):
        r = paddle.concat([rois[:, :2], rois[:, :2] + rois[:, 2:] + 0.5], axis=1)
        a = paddle.vision.ops.roi_align(x, r, paddle.full([1], 2, "int32"), 2, spatial_scale=0.8, sampling_ratio=2,
                                        aligned=True)
        d = paddle.vision.ops.deform_conv2d(x, offset * 0.5, paddle.create_parameter([4, 3, 3, 3], F32), padding=1,
                                            mask=u("sigmoid", offset[:, :9]))
        d1 = paddle.vision.ops.deform_conv2d(x, offset2 * 0.7, paddle.create_parameter([6, 1, 2, 2], F32), groups=3,
                                             deformable_groups=3)
        return [a, d, d1]

    # -- attribute corners of ops the other models use plainly --
    @model("stress_pool_conv", ("x", [-1, 7, 7, 4], F32, None))
    def _(x):
        n = paddle.transpose(x, [0, 3, 1, 2])
        a = _op("pool2d", {"X": n}, {"pooling_type": "max", "ksize": [3, 2], "adaptive": True})
        b = F.avg_pool2d(x, 3, 2, padding="SAME", exclusive=True, data_format="NHWC")
        c = F.adaptive_avg_pool2d(x, 1, data_format="NHWC")
        d = _op("pool2d", {"X": n}, {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2],
                                      "padding_algorithm": "SAME", "exclusive": False})
        e = nn.Conv2DTranspose(4, 3, 3, stride=2, padding="VALID", dilation=2, data_format="NHWC")(x)
        f = nn.Conv2DTranspose(4, 4, 3, stride=2, padding=1, groups=4)(n, output_size=[14, 13])
        g = nn.Conv2D(4, 2, 3, padding="SAME", stride=2, dilation=2, data_format="NHWC")(x)
        return [a, b, c, d, e, f, g]

    @model("stress_norm_act", img(c=4, h=3, w=5))
    def _(x):
        a = nn.LayerNorm([5], weight_attr=False, bias_attr=False)(x)
        b = nn.GroupNorm(2, 4, weight_attr=False, bias_attr=False)(x)
        c = nn.InstanceNorm2D(4, weight_attr=False, bias_attr=False)(x)
        d = nn.BatchNorm2D(4, use_global_stats=True)(x)
        e = _op("prelu", {"X": x, "Alpha": paddle.create_parameter([1], F32)}, {"mode": "all"})
        f = _op("prelu", {"X": paddle.transpose(x, [0, 2, 3, 1]), "Alpha": paddle.create_parameter([4], F32)},
                {"mode": "channel", "data_format": "NHWC"})
        g = F.softmax(x[0, 0, 0], axis=0)
        h = _op("matmul_v2", {"X": x[0, 0, 0], "Y": x[0, 1, 0]})
        return [a, b, c, d, e, f, g, h]

    @model("stress_shape_inputs", ("x", [-1, 6, 8], F32, None), ("n", [1], "int32", (2, 3)), batch=2)
    def _(x, n):
        s = paddle.shape(x)
        a = paddle.split(x, 3, axis=-2)[2]
        b = paddle.slice(x, [1, 2], paddle.concat([n - 1, n]), [s[1], s[2] - 1])
        c = paddle.concat([x, x * 2.0], axis=paddle.full([1], 1, "int32"))
        d = paddle.expand(x[:, :1, :1], [s[0], n * 3, 8])
        e = paddle.tile(x[:, :1], [1, n, 1])
        f = paddle.unsqueeze(x, paddle.full([1], 1, "int32"))
        g = paddle.full([2, 2], paddle.cast(n, F32))
        h = paddle.gather(x, paddle.full([2], 1, "int64"), axis=paddle.full([1], 2, "int64"))
        i = paddle.scale(x, paddle.cast(n, F32), 1.0)
        j = x[:, 0, 0]
        k = paddle.arange(paddle.cast(n, "int64"), paddle.cast(n * 4, "int64"), 2)
        m = paddle.squeeze(x[:, :1, :1])
        return [a, b, c, d, e, f, g, h, i, j, k, m]

    @model("stress_int_ops", ("a", [-1, 6], "int32", (-7, 8)), ("b", [6], "int32", (1, 5)), ("ids", [-1, 3], "int32",
                                                                                              (0, 6)), batch=2)
    def _(a, b, ids):
        return [ew("elementwise_div", a, b), ew("elementwise_mod", a, b), ew("elementwise_floordiv", a, b),
                ew("elementwise_pow", b, paddle.full([1], 2, "int32")), red("reduce_sum", a, [1]),
                red("reduce_max", a, [0], True), red("reduce_min", a), red("reduce_prod", b),
                _op("arg_max", {"X": a}, {"axis": 1, "dtype": 3}, {"Out": "int64"}),
                nn.Embedding(6, 3)(ids), paddle.cast(a, F32) * 0.5, paddle.cast(a, "int64") * 3,
                u("abs", a), u("square", a), paddle.cast(paddle.cast(paddle.cast(a, F32) / 3.0, "float16"), F32)]

    @model("stress_interp", img(c=2, h=5, w=7), ("hw", [2], "int32", (3, 12)), ("sc", [1], F32, (1.2, 2.2)))
    def _(x, hw, sc):
        nhwc = paddle.transpose(x, [0, 2, 3, 1])
        return [F.interpolate(x, size=hw, mode="bilinear"), F.interpolate(x, size=[hw[0], 9], mode="nearest"),
                F.interpolate(nhwc, scale_factor=[2.0, 1.5], mode="bilinear", data_format="NHWC"),
                F.interpolate(nhwc, size=[3, 4], mode="nearest", data_format="NHWC"),
                F.interpolate(x, scale_factor=sc, mode="bilinear", align_corners=True),
                _op("nearest_interp", {"X": x}, {"scale": 2.0, "interp_method": "nearest", "align_corners": False}),
                _op("bilinear_interp", {"X": x, "OutSize": hw}, {"out_h": 3, "out_w": 3, "interp_method": "bilinear",
                                                                 "align_corners": False, "align_mode": 0}),
                _op("bilinear_interp", {"X": x}, {"scale": 0.6, "interp_method": "bilinear",
                                                   "align_corners": False, "align_mode": 1})]

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conformance_control_flow_cases import define as define_control_flow_cases
    from conformance_detection_cases import define as define_detection_cases
    from conformance_forms_cases import define as define_forms_cases

    define_detection_cases(sys.modules[__name__])
    define_forms_cases(sys.modules[__name__])
    define_control_flow_cases(sys.modules[__name__])


# ---------------------------------------------------------------------------------------------------- build
def _randomize_params(scope: Any, program: Any, place: Any, rng: np.random.Generator) -> None:
    """1-D params -> seeded random values; variances and norm scales positive."""
    positive: set[str] = set()
    for op in program.global_block().ops:
        for slot in ("Variance", "Scale"):
            if slot in op.input_names:
                positive.update(op.input(slot))
    for var in program.list_vars():
        if not var.persistable or var.name in ("feed", "fetch"):
            continue
        t = scope.find_var(var.name)
        if t is None:
            continue
        t = t.get_tensor()
        arr = np.array(t)
        if arr.dtype != np.float32:
            continue
        if var.name in positive:
            arr = rng.uniform(0.5, 1.5, arr.shape)
        elif arr.ndim == 1 or "prelu" in var.name or var.name.startswith("create_parameter"):
            arr = rng.normal(0.0, 0.3, arr.shape)
        t.set(arr.astype(np.float32), place)


def _feed_value(shape: list[int], dtype: str, rng_range: Any, batch: int, rng: np.random.Generator) -> np.ndarray:
    shape = [batch if (i == 0 and d == -1) else (d if d > 0 else 5 + i) for i, d in enumerate(shape)]
    if dtype.startswith("int"):
        lo, hi = rng_range
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if rng_range is not None:
        return rng.uniform(*rng_range, size=shape).astype(dtype)
    return rng.normal(0.0, 1.0, size=shape).astype(dtype)


def _strip_callstacks(path: Path) -> None:
    """Drop the `op_callstack` attributes save_inference_model leaves on feed/fetch ops (smaller files)."""
    import paddle

    prog = paddle.static.deserialize_program(path.read_bytes())
    for block in prog.blocks:
        for op in block.ops:
            if op.desc.has_attr("op_callstack"):
                op.desc.remove_attr("op_callstack")
    path.write_bytes(prog.desc.serialize_to_string())


def paddle_reference(d: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of Paddle Inference on the saved model (the zoo's reference convention)."""
    from paddle_reference import paddle_reference as run_paddle

    return run_paddle(d / "inference.pdmodel", d / "inference.pdiparams", feeds)


def build(name: str, out_root: Path, seed: int) -> Counter:
    import paddle

    fn, feed_specs, batch = MODELS[name]
    paddle.enable_static()
    main, start = paddle.static.Program(), paddle.static.Program()
    main.random_seed = start.random_seed = seed
    with paddle.static.program_guard(main, start), paddle.utils.unique_name.guard():
        feed_vars = [paddle.static.data(n, s, dt) for n, s, dt, _ in feed_specs]
        fetch_vars = fn(*feed_vars)
    place = paddle.CPUPlace()
    exe = paddle.static.Executor(place)
    scope = paddle.static.Scope()
    rng = np.random.default_rng(seed)
    with paddle.static.scope_guard(scope):
        exe.run(start)
        _randomize_params(scope, main, place, rng)
        d = out_root / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as tmp:
            paddle.static.save_inference_model(str(Path(tmp) / "inference"), feed_vars, fetch_vars, exe,
                                               program=main)
            for f in Path(tmp).iterdir():
                shutil.move(str(f), d / f.name)
    _strip_callstacks(d / "inference.pdmodel")
    feeds = {n: _feed_value(s, dt, r, batch, rng) for n, s, dt, r in feed_specs}
    outs = paddle_reference(d, feeds)
    np.savez(d / "case.npz", **{f"in:{k}": v for k, v in feeds.items()}, **{f"out:{k}": v for k, v in outs.items()})
    prog = paddle.static.load_inference_model(str(d / "inference"), exe)[0]
    return Counter(op.type for op in prog.global_block().ops if op.type not in ("feed", "fetch"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "conformance"))
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    _define()
    if args.list:
        print("\n".join(MODELS))
        return 0
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    failed = []
    for name in args.names or list(MODELS):
        try:
            ops = build(name, Path(args.out), args.seed + list(MODELS).index(name))
        except Exception as e:  # report and go on: one bad model must not hide the others
            failed.append(name)
            print(f"{name}: FAILED {type(e).__name__}: {str(e).strip().splitlines()[0][:300]}", file=sys.stderr)
            continue
        size = sum(f.stat().st_size for f in (Path(args.out) / name).iterdir())
        print(f"{name}: {size / 1024:.1f} KiB  ops {dict(sorted(ops.items()))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
