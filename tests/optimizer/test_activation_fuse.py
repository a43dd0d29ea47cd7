"""elementwise + activation, scale + activation, elementwise with a scalar -> scale, scale chains."""
from __future__ import annotations

import numpy as np
import pytest

from tests.optimizer.util import Builder, check_same, op_types, rewrites, with_passes

RNG = np.random.default_rng(2)


@pytest.mark.parametrize("ew", ["add", "sub", "mul", "div", "max", "min"])
@pytest.mark.parametrize("act,attrs", [("relu", {}), ("leaky_relu", {"alpha": 0.2}), ("sigmoid", {})])
def test_elementwise_activation(ew, act, attrs):
    b = Builder()
    x = b.feed("x", [2, 3, 4])
    y = b.feed("y", [3, 1])
    b.op(f"elementwise_{ew}", {"X": x, "Y": y}, {"Out": "t"}, axis=1)
    b.op(act, {"X": "t"}, {"Out": "out"}, **attrs)
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32),
             "y": RNG.uniform(0.5, 2, (3, 1)).astype(np.float32)}
    res = check_same(b, feeds, with_passes("elementwise_activation_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert node.op.type == f"fusion_elementwise_{ew}_activation"
    assert node.op.attrs["axis"] == 1 and node.op.attrs["act_type"] == act
    assert all(node.op.attrs[f"act_{k}"] == v for k, v in attrs.items())


def test_elementwise_with_two_readers_is_not_fused():
    b = Builder()
    x = b.feed("x", [2, 3])
    b.op("elementwise_add", {"X": x, "Y": x}, {"Out": "t"})
    b.op("relu", {"X": "t"}, {"Out": "out"})
    b.op("sigmoid", {"X": "t"}, {"Out": "out2"})
    b.fetch("out", "out2")
    res = check_same(b, {"x": RNG.standard_normal((2, 3)).astype(np.float32)},
                     with_passes("elementwise_activation_fuse_pass"))
    assert sorted(op_types(res)) == ["elementwise_add", "relu", "sigmoid"]


@pytest.mark.parametrize("after", [True, False])
def test_scale_activation(after):
    b = Builder()
    x = b.feed("x", [2, 5])
    b.op("scale", {"X": x}, {"Out": "t"}, scale=1.5, bias=-0.5, bias_after_scale=after)
    b.op("leaky_relu", {"X": "t"}, {"Out": "out"}, alpha=0.3)
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((2, 5)).astype(np.float32)},
                     with_passes("scale_activation_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert node.op.type == "fusion_scale_activation"
    assert node.op.attrs["scale"] == 1.5 and node.op.attrs["bias_after_scale"] == after
    assert node.op.attrs["act_type"] == "leaky_relu" and node.op.attrs["act_alpha"] == 0.3


@pytest.mark.parametrize("ew,c_first", [("add", False), ("add", True), ("sub", False), ("sub", True),
                                        ("mul", False), ("mul", True), ("div", False)])
def test_elementwise_to_scale_and_scales_fuse(ew, c_first):
    b = Builder()
    x = b.feed("x", [2, 3, 4, 4])
    c = b.param("c", np.array([1.7], np.float32))
    ins = {"X": c, "Y": x} if c_first else {"X": x, "Y": c}
    b.op(f"elementwise_{ew}", ins, {"Out": "t"})
    d = b.param("d", np.array([-0.25], np.float32))
    b.op("elementwise_mul", {"X": "t", "Y": d}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("elementwise_to_scale_pass", "scales_fuse_pass"))
    assert op_types(res) == ["scale"]
    assert rewrites(res, "elementwise_to_scale_pass") == 2 and rewrites(res, "scales_fuse_pass") == 1


def test_elementwise_to_scale_refuses_non_scalars_and_rank_growth():
    b = Builder()
    x = b.feed("x", [3])
    c = b.param("c", np.array([[2.0]], np.float32))  # [1, 1] + [3] broadcasts to [1, 3]
    v = b.param("v", np.array([1.0, 2.0, 3.0], np.float32))
    b.op("elementwise_add", {"X": x, "Y": c}, {"Out": "t"})
    b.op("elementwise_mul", {"X": "t", "Y": v}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal(3).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("elementwise_to_scale_pass"))
    assert op_types(res) == ["elementwise_add", "elementwise_mul"]


@pytest.mark.parametrize("ew", ["add", "sub", "mul"])
def test_elementwise_to_scale_with_a_zero_constant(ew):
    """x + 0.0 (DETR-style heads export it) becomes a scale; only a division by zero is refused."""
    b = Builder()
    x = b.feed("x", [2, 5])
    c = b.param("c", np.array([0.0], np.float32))
    b.op(f"elementwise_{ew}", {"X": x, "Y": c}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((2, 5)).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("elementwise_to_scale_pass"))
    assert op_types(res) == ["scale"] and rewrites(res, "elementwise_to_scale_pass") == 1
