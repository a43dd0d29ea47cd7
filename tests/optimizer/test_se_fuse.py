"""squeeze_excitation_fuse_pass: pool2d + two 1x1 convs (+ activations) + the gate multiply -> squeeze_excitation;
rewrite counts, op lists and outputs against the unfused program (1e-5 of max|ref|: the products' sums run in
another order than the conv kernels')."""
from __future__ import annotations

import numpy as np
import pytest

from tests.optimizer.util import Builder, check_same, op_types, refusals, rewrites, with_passes

RNG = np.random.default_rng(3)
FUSIONS = ["conv_elementwise_add_fuse_pass", "conv_activation_fuse_pass", "squeeze_excitation_fuse_pass"]


def _se_block(b: Builder, x: str, c: int, c1: int, gate_slot: str = "X", act1: str | None = "relu",
              act2: str | None = "hard_sigmoid", pool: dict | None = None, bias: bool = True) -> str:
    """MobileNetV3's block on x (N, c, H, W): pool -> conv (+ bias) -> act1 -> conv (+ bias) -> act2 -> mul."""
    pool_attrs = pool or {"pooling_type": "avg", "adaptive": True, "ksize": [1, 1]}
    b.op("pool2d", {"X": x}, {"Out": "p"}, **pool_attrs)
    cur = "p"
    for i, (cin, cout, act) in enumerate(((c, c1, act1), (c1, c, act2))):
        w = b.param(f"w{i}", (RNG.standard_normal((cout, cin, 1, 1)) / np.sqrt(cin)).astype(np.float32))
        b.op("conv2d", {"Input": cur, "Filter": w}, {"Output": f"c{i}"}, strides=[1, 1], paddings=[0, 0], groups=1)
        cur = f"c{i}"
        if bias:
            bv = b.param(f"b{i}", RNG.standard_normal(cout).astype(np.float32))
            b.op("elementwise_add", {"X": cur, "Y": bv}, {"Out": f"cb{i}"}, axis=1)
            cur = f"cb{i}"
        if act:
            b.op(act, {"X": cur}, {"Out": f"a{i}"})
            cur = f"a{i}"
    ins = {"X": cur, "Y": x} if gate_slot == "X" else {"X": x, "Y": cur}
    b.op("elementwise_mul", ins, {"Out": "out"}, axis=-1)
    return "out"


def _feeds(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("gate_slot", ["X", "Y"])
@pytest.mark.parametrize("acts", [("relu", "hard_sigmoid"), ("relu6", "sigmoid"), (None, None)])
@pytest.mark.parametrize("bias", [True, False])
def test_se_block_fuses(gate_slot, acts, bias):
    b = Builder()
    x = b.feed("x", [-1, 24, 9, 7])
    b.fetch(_se_block(b, x, 24, 8, gate_slot, *acts, bias=bias))
    res = check_same(b, _feeds((2, 24, 9, 7)), with_passes(*FUSIONS))
    assert rewrites(res, "squeeze_excitation_fuse_pass") == 1
    assert op_types(res) == ["squeeze_excitation"]
    (node,) = res.graph.op_nodes()
    assert node.op.attrs["act1_type"] == (acts[0] or "") and node.op.attrs["act2_type"] == (acts[1] or "")
    assert bool(node.op.inputs.get("B1")) == bias


def test_se_global_pooling_and_two_blocks():
    """global_pooling instead of adaptive 1 x 1; two blocks in a row fuse separately."""
    b = Builder()
    x = b.feed("x", [1, 16, 5, 5])
    out = _se_block(b, x, 16, 4, pool={"pooling_type": "avg", "global_pooling": True, "ksize": [5, 5]})
    b.op("relu", {"X": out}, {"Out": "r"})
    b2 = b.op("pool2d", {"X": "r"}, {"Out": "q"}, pooling_type="avg", adaptive=True, ksize=[1, 1])
    assert b2 is not None
    w = b.param("w2", RNG.standard_normal((4, 16, 1, 1)).astype(np.float32))
    b.op("conv2d", {"Input": "q", "Filter": w}, {"Output": "h"}, strides=[1, 1], paddings=[0, 0], groups=1)
    w3 = b.param("w3", RNG.standard_normal((16, 4, 1, 1)).astype(np.float32))
    b.op("conv2d", {"Input": "h", "Filter": w3}, {"Output": "g"}, strides=[1, 1], paddings=[0, 0], groups=1)
    b.op("hard_swish", {"X": "g"}, {"Out": "gs"})
    b.op("elementwise_mul", {"X": "r", "Y": "gs"}, {"Out": "y"}, axis=-1)
    b.fetch("y")
    res = check_same(b, _feeds((1, 16, 5, 5)), with_passes(*FUSIONS))
    assert rewrites(res, "squeeze_excitation_fuse_pass") == 2
    assert op_types(res) == ["squeeze_excitation", "relu", "squeeze_excitation"]


def test_se_refusals():
    """A max pool is not a squeeze; a pooled value read elsewhere (fetched) keeps the block unfused."""
    b = Builder()
    x = b.feed("x", [1, 8, 4, 4])
    b.fetch(_se_block(b, x, 8, 4, pool={"pooling_type": "max", "adaptive": True, "ksize": [1, 1]}))
    res = check_same(b, _feeds((1, 8, 4, 4)), with_passes(*FUSIONS))
    assert "squeeze_excitation" not in op_types(res)
    assert refusals(res, "squeeze_excitation_fuse_pass") == {"the pool is not an average": 1}
    b = Builder()
    x = b.feed("x", [1, 8, 4, 4])
    b.fetch(_se_block(b, x, 8, 4), "p")
    res = check_same(b, _feeds((1, 8, 4, 4)), with_passes(*FUSIONS))
    assert "squeeze_excitation" not in op_types(res)
