"""constant_folding_pass: params-only subgraphs, static shapes, what is never folded."""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import VarType
from tests.optimizer.util import Builder, check_same, op_types, rewrites, with_passes

RNG = np.random.default_rng(4)


def test_reshape_of_a_param_and_fill_constant():
    b = Builder()
    x = b.feed("x", [2, 4, 3, 3])
    bias = b.param("bias", RNG.standard_normal(4).astype(np.float32))
    b.op("reshape2", {"X": bias}, {"Out": "rb", "XShape": "rb_xshape"}, shape=[1, 4, 1, 1])
    b.op("fill_constant", {}, {"Out": "two"}, shape=[1], dtype=int(VarType.FP32), value=2.0)
    b.op("elementwise_add", {"X": x, "Y": "rb"}, {"Out": "t"})
    b.op("elementwise_mul", {"X": "t", "Y": "two"}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)}
    res = check_same(b, feeds, with_passes("constant_folding_pass"))
    assert op_types(res) == ["elementwise_add", "elementwise_mul"]
    assert rewrites(res, "constant_folding_pass") == 2
    assert res.ctx.params["rb"].shape == (1, 4, 1, 1) and res.graph.vars["rb"].persistable
    assert "rb_xshape" not in res.ctx.params


def test_static_shape_chain_folds_but_dynamic_does_not():
    b = Builder()
    x = b.feed("x", [2, 3, 4])
    y = b.feed("y", [12])
    b.op("shape", {"Input": x}, {"Out": "s"})
    b.op("slice", {"Input": "s"}, {"Out": "s0"}, axes=[0], starts=[1], ends=[3], decrease_axis=[])
    b.op("reshape2", {"X": y, "Shape": "s0"}, {"Out": "out", "XShape": "xs"}, shape=[])
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32), "y": RNG.standard_normal(12).astype(np.float32)}
    res = check_same(b, feeds, with_passes("constant_folding_pass"))
    assert op_types(res) == ["reshape2"] and rewrites(res, "constant_folding_pass") == 2
    assert res.ctx.params["s0"].tolist() == [3, 4]
    # the same with a dynamic batch dim: nothing folds
    b.block.vars["x"].shape = [-1, 3, 4]
    res = check_same(b, feeds, with_passes("constant_folding_pass"))
    assert op_types(res) == ["shape", "slice", "reshape2"]


def test_feed_readers_and_non_deterministic_ops_are_not_folded():
    b = Builder()
    x = b.feed("x", [3])
    w = b.param("w", np.array([1.0, -2.0, 3.0], np.float32))
    b.op("dropout", {"X": w}, {"Out": "wd", "Mask": "mask"}, dropout_prob=0.5,
         dropout_implementation="upscale_in_train")
    b.op("relu", {"X": x}, {"Out": "r"})
    b.op("elementwise_add", {"X": "r", "Y": "wd"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal(3).astype(np.float32)}, with_passes("constant_folding_pass"))
    assert op_types(res) == ["dropout", "relu", "elementwise_add"]
    assert rewrites(res, "constant_folding_pass") == 0


def test_a_fetched_constant_stays_a_param_through_dead_code_elimination():
    b = Builder()
    x = b.feed("x", [2])
    b.op("fill_constant", {}, {"Out": "c"}, shape=[3], dtype=int(VarType.FP32), value=1.5)
    b.op("relu", {"X": x}, {"Out": "out"})
    b.fetch("out", "c")
    res = check_same(b, {"x": RNG.standard_normal(2).astype(np.float32)},
                     with_passes("constant_folding_pass", "dead_code_elimination_pass"))
    assert op_types(res) == ["relu"] and res.ctx.params["c"].tolist() == [1.5, 1.5, 1.5]
