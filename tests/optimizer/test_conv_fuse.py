"""Conv fusions: bias add, batch_norm and scale folded into the weights; conv + activation.

Each test builds a small program, checks what was rewritten (rewrite counts, op types, the
fused op's attributes) and that outputs equal the unfused run within 1e-5 relative.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.operators.fused import FUSABLE_ACTIVATIONS
from tests.optimizer.util import Builder, check_same, op_types, refusals, rewrites, with_passes

RNG = np.random.default_rng(0)
CONV_PASSES = ["conv_elementwise_add_fuse_pass", "conv_bn_fuse_pass", "conv_scale_fuse_pass",
               "conv_activation_fuse_pass"]


def _conv(b: Builder, kind: str, x: str, cin: int, cout: int, groups: int = 1, out: str = "y") -> str:
    if kind == "conv2d_transpose":
        w = b.param(f"{out}.w", RNG.standard_normal((cin, cout // groups, 3, 3)).astype(np.float32))
        b.op(kind, {"Input": x, "Filter": w}, {"Output": out}, strides=[2, 2], paddings=[1, 1], groups=groups,
             dilations=[1, 1])
    else:
        w = b.param(f"{out}.w", RNG.standard_normal((cout, cin // groups, 3, 3)).astype(np.float32))
        b.op(kind, {"Input": x, "Filter": w}, {"Output": out}, strides=[1, 1], paddings=[1, 1], groups=groups,
             dilations=[1, 1])
    return out


def _bn(b: Builder, x: str, c: int, out: str = "bn_out", prefix: str = "bn") -> str:
    names = {}
    for slot, val in (("Scale", RNG.uniform(0.5, 2, c)), ("Bias", RNG.standard_normal(c)),
                      ("Mean", RNG.standard_normal(c)), ("Variance", RNG.uniform(0.1, 3, c))):
        names[slot] = b.param(f"{prefix}.{slot}", val.astype(np.float32))
    b.op("batch_norm", {"X": x, **names},
         {"Y": out, "MeanOut": names["Mean"], "VarianceOut": names["Variance"],
          "SavedMean": f"{prefix}.saved_mean", "SavedVariance": f"{prefix}.saved_var"},
         epsilon=1e-5, is_test=True, data_layout="NCHW")
    return out


CASES = [("conv2d", 4, 6, 1), ("depthwise_conv2d", 6, 6, 6), ("conv2d", 4, 6, 2), ("conv2d_transpose", 4, 6, 1),
         ("conv2d_transpose", 4, 6, 2)]


@pytest.mark.parametrize("kind,cin,cout,groups", CASES)
def test_conv_bn_relu(kind, cin, cout, groups):
    b = Builder()
    x = b.feed("x", [1, cin, 7, 7])
    y = _conv(b, kind, x, cin, cout, groups)
    z = _bn(b, y, cout)
    b.op("relu", {"X": z}, {"Out": "out"})
    b.fetch("out")
    w_before = b.params["y.w"].copy()
    feeds = {"x": RNG.standard_normal((1, cin, 7, 7)).astype(np.float32)}
    res = check_same(b, feeds, with_passes(*CONV_PASSES))
    assert op_types(res) == ["fused_conv2d"]
    assert rewrites(res, "conv_bn_fuse_pass") == 1 and rewrites(res, "conv_activation_fuse_pass") == 1
    (node,) = res.graph.op_nodes()
    attrs = node.op.attrs
    assert attrs["conv_type"] == kind and attrs["act_type"] == "relu" and attrs["groups"] == groups
    assert node.op.input("Bias") in res.ctx.params and node.op.input("Filter") != "y.w"
    assert np.array_equal(b.params["y.w"], w_before), "the original filter array is not mutated"


@pytest.mark.parametrize("kind,cin,cout,groups", CASES)
def test_conv_bias_then_bn(kind, cin, cout, groups):
    """conv + elementwise_add(bias, axis=1) + batch_norm: both fold (the bias goes through the BN)."""
    b = Builder()
    x = b.feed("x", [1, cin, 5, 5])
    y = _conv(b, kind, x, cin, cout, groups)
    bias = b.param("bias", RNG.standard_normal(cout).astype(np.float32))
    b.op("elementwise_add", {"X": y, "Y": bias}, {"Out": "yb"}, axis=1)
    _bn(b, "yb", cout, out="out")
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((1, cin, 5, 5)).astype(np.float32)}
    res = check_same(b, feeds, with_passes(*CONV_PASSES))
    assert op_types(res) == [kind]
    assert rewrites(res, "conv_elementwise_add_fuse_pass") == 1 and rewrites(res, "conv_bn_fuse_pass") == 1
    assert not any(n in res.ctx.meta.get("fetch_names", []) for n in ("yb",))


@pytest.mark.parametrize("shape,axis", [((6,), 1), ((1, 6, 1, 1), -1), ((6, 1, 1), 1), ((1,), -1)])
def test_conv_bias_shapes(shape, axis):
    b = Builder()
    x = b.feed("x", [2, 3, 5, 5])
    y = _conv(b, "conv2d", x, 3, 6)
    bias = b.param("bias", RNG.standard_normal(shape).astype(np.float32))
    b.op("elementwise_add", {"X": y, "Y": bias}, {"Out": "out"}, axis=axis)
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)},
                     with_passes("conv_elementwise_add_fuse_pass"))
    assert op_types(res) == ["conv2d"]
    (node,) = res.graph.op_nodes()
    assert res.ctx.params[node.op.input("Bias")].shape == (6,)


@pytest.mark.parametrize("shape,axis", [((5,), -1), ((1, 6, 5, 5), -1)])
def test_conv_bias_not_per_channel_is_refused(shape, axis):
    b = Builder()
    x = b.feed("x", [1, 3, 5, 5])
    y = _conv(b, "conv2d", x, 3, 6)
    bias = b.param("bias", RNG.standard_normal(shape).astype(np.float32))
    b.op("elementwise_add", {"X": y, "Y": bias}, {"Out": "out"}, axis=axis)
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)},
                     with_passes("conv_elementwise_add_fuse_pass"))
    assert op_types(res) == ["conv2d", "elementwise_add"]
    assert refusals(res, "conv_elementwise_add_fuse_pass") == {"Y is not one value per output channel": 1}


def test_shared_filter_is_not_mutated_and_both_convs_fold():
    b = Builder()
    x = b.feed("x", [1, 3, 5, 5])
    w = b.param("w", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
    w0 = b.params["w"].copy()
    for i in range(2):
        b.op("conv2d", {"Input": x, "Filter": w}, {"Output": f"c{i}"}, paddings=[1, 1])
        _bn(b, f"c{i}", 4, out=f"o{i}", prefix=f"bn{i}")
    b.fetch("o0", "o1")
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)},
                     with_passes("conv_bn_fuse_pass"))
    assert op_types(res) == ["conv2d", "conv2d"]
    filters = {n.op.input("Filter") for n in res.graph.op_nodes()}
    assert len(filters) == 2 and "w" not in filters
    assert np.array_equal(b.params["w"], w0)


def test_bn_stats_output_used_is_refused_and_conv_with_two_readers_is_not_fused():
    b = Builder()
    x = b.feed("x", [1, 3, 5, 5])
    y = _conv(b, "conv2d", x, 3, 4)
    _bn(b, y, 4, out="out")
    b.op("relu", {"X": y}, {"Out": "r"})  # y has a second reader
    b.fetch("out", "r")
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)},
                     with_passes(*CONV_PASSES))
    assert "batch_norm" in op_types(res)
    assert rewrites(res, "conv_bn_fuse_pass") == 0


@pytest.mark.parametrize("after", [True, False])
def test_conv_scale(after):
    b = Builder()
    x = b.feed("x", [1, 3, 6, 6])
    y = _conv(b, "depthwise_conv2d", x, 3, 3, groups=3)
    b.op("scale", {"X": y}, {"Out": "out"}, scale=0.7, bias=-0.3, bias_after_scale=after)
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)},
                     with_passes("conv_scale_fuse_pass"))
    assert op_types(res) == ["depthwise_conv2d"] and rewrites(res, "conv_scale_fuse_pass") == 1


ACT_ATTRS = {"leaky_relu": {"alpha": 0.1}, "relu6": {"threshold": 6.0}, "hard_sigmoid": {"slope": 0.25, "offset": 0.4},
             "swish": {"beta": 1.0}, "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0}}
# (relu6's threshold, swish's beta and hard_swish's constants are fixed as Paddle 3.x fixes them)


@pytest.mark.parametrize("act", FUSABLE_ACTIVATIONS)
def test_conv_activation(act):
    b = Builder()
    x = b.feed("x", [1, 3, 6, 6])
    y = _conv(b, "conv2d", x, 3, 5)
    b.op(act, {"X": y}, {"Out": "out"}, **ACT_ATTRS.get(act, {}))
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32) * 2},
                     with_passes("conv_activation_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert node.op.type == "fused_conv2d" and node.op.attrs["act_type"] == act
    for k, v in ACT_ATTRS.get(act, {}).items():
        assert node.op.attrs[f"act_{k}"] == v


def test_fetched_conv_output_is_not_fused():
    b = Builder()
    x = b.feed("x", [1, 3, 6, 6])
    y = _conv(b, "conv2d", x, 3, 5)
    b.op("relu", {"X": y}, {"Out": "out"})
    b.fetch("out", y)
    res = check_same(b, {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)},
                     with_passes(*CONV_PASSES))
    assert op_types(res) == ["conv2d", "relu"]


@pytest.mark.parametrize("conv_slot", ["X", "Y"])
@pytest.mark.parametrize("act", ["relu", None])
def test_conv_residual_add(conv_slot, act):
    """act(conv(x) + r), r the block input (a residual connection) -> fused_conv2d with ResidualData r, the conv
    at either side of the add; with a projection conv on the other side, the conv at X takes the residual."""
    b = Builder()
    x = b.feed("x", [-1, 6, 7, 7])
    y = _conv(b, "conv2d", x, 6, 6)
    b.block.vars[y].shape = [-1, 6, 7, 7]  # (the pass reads the shapes a saved program carries)
    ins = {"X": y, "Y": x} if conv_slot == "X" else {"X": x, "Y": y}
    b.op("elementwise_add", ins, {"Out": "s" if act else "out"}, axis=-1)
    if act:
        b.op(act, {"X": "s"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((2, 6, 7, 7)).astype(np.float32)},
                     with_passes("conv_residual_add_fuse_pass", "conv_activation_fuse_pass",
                                 "elementwise_activation_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert node.op.type == "fused_conv2d" and node.op.input("ResidualData") == "x"
    assert node.op.attrs["act_type"] == (act or "") and node.op.attrs["conv_type"] == "conv2d"


def test_conv_residual_add_with_a_projection_conv():
    b = Builder()
    x = b.feed("x", [1, 4, 7, 7])
    y = _conv(b, "conv2d", x, 4, 6, out="main")
    p = _conv(b, "conv2d", x, 4, 6, out="proj")
    b.block.vars[y].shape = b.block.vars[p].shape = [1, 6, 7, 7]
    b.op("elementwise_add", {"X": y, "Y": p}, {"Out": "s"}, axis=-1)
    b.op("relu", {"X": "s"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((1, 4, 7, 7)).astype(np.float32)},
                     with_passes("conv_residual_add_fuse_pass"))
    fused = [n.op for n in res.graph.op_nodes() if n.op.type == "fused_conv2d"]
    assert len(fused) == 1 and fused[0].input("Input") == "x" and fused[0].input("ResidualData") == "proj"
    assert op_types(res) == ["conv2d", "fused_conv2d"]


def test_conv_residual_add_refusals():
    """A broadcast add (a per-channel tensor) stays as it is."""
    b = Builder()
    x = b.feed("x", [1, 6, 7, 7])
    r = b.feed("r", [1, 6, 1, 1])
    y = _conv(b, "conv2d", x, 6, 6)
    b.block.vars[y].shape = [1, 6, 7, 7]
    b.op("elementwise_add", {"X": y, "Y": r}, {"Out": "out"}, axis=-1)
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((1, 6, 7, 7)).astype(np.float32),
                         "r": RNG.standard_normal((1, 6, 1, 1)).astype(np.float32)},
                     with_passes("conv_residual_add_fuse_pass"))
    assert op_types(res) == ["conv2d", "elementwise_add"]
    assert refusals(res, "conv_residual_add_fuse_pass") == {"the residual's shape is not known to be the conv output's": 1}
