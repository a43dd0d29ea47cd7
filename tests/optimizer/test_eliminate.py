"""Eliminations: dropout (both modes), identity scale, assign/identity chains, dead code."""
from __future__ import annotations

import numpy as np
import pytest

from tests.optimizer.util import Builder, check_same, op_types, rewrites, with_passes

RNG = np.random.default_rng(3)
ELIM = ["identity_dropout_eliminate_pass", "identity_scale_eliminate_pass", "identity_assign_eliminate_pass"]


@pytest.mark.parametrize("mode,p,left", [("upscale_in_train", 0.3, []), ("downgrade_in_infer", 0.3, ["scale"]),
                                         ("downgrade_in_infer", 0.0, [])])
def test_dropout(mode, p, left):
    b = Builder()
    x = b.feed("x", [2, 6])
    b.op("relu", {"X": x}, {"Out": "r"})
    b.op("dropout", {"X": "r"}, {"Out": "d", "Mask": "mask"}, dropout_prob=p, dropout_implementation=mode,
         is_test=True)
    b.op("sigmoid", {"X": "d"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((2, 6)).astype(np.float32)}, with_passes(*ELIM))
    assert op_types(res) == ["relu", *left, "sigmoid"]
    assert rewrites(res, "identity_dropout_eliminate_pass") == 1
    if left:
        scale = next(n for n in res.graph.op_nodes() if n.op.type == "scale")
        assert scale.op.attrs["scale"] == pytest.approx(1 - p)


def test_fetched_dropout_output_keeps_its_name():
    b = Builder()
    x = b.feed("x", [2, 6])
    b.op("relu", {"X": x}, {"Out": "r"})
    b.op("dropout", {"X": "r"}, {"Out": "d", "Mask": "mask"}, dropout_prob=0.5,
         dropout_implementation="upscale_in_train")
    b.fetch("d")
    res = check_same(b, {"x": RNG.standard_normal((2, 6)).astype(np.float32)}, with_passes(*ELIM))
    (relu,) = res.graph.op_nodes()
    assert relu.op.outputs["Out"] == ["d"] and res.fetch_names == ["d"]


@pytest.mark.parametrize("scale,bias,removed", [(1.0, 0.0, True), (1.0, 0.5, False), (2.0, 0.0, False)])
def test_identity_scale(scale, bias, removed):
    b = Builder()
    x = b.feed("x", [4])
    b.op("relu", {"X": x}, {"Out": "r"})
    b.op("scale", {"X": "r"}, {"Out": "s"}, scale=scale, bias=bias, bias_after_scale=True)
    b.op("sigmoid", {"X": "s"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal(4).astype(np.float32)}, with_passes(*ELIM))
    assert op_types(res) == (["relu", "sigmoid"] if removed else ["relu", "scale", "sigmoid"])


def test_assign_chain_and_same_dtype_cast():
    b = Builder()
    x = b.feed("x", [3, 2])
    b.op("relu", {"X": x}, {"Out": "a"})
    b.op("assign", {"X": "a"}, {"Out": "b"})
    b.op("assign", {"X": "b"}, {"Out": "c"})
    b.op("cast", {"X": "c"}, {"Out": "d"}, in_dtype=5, out_dtype=5)
    b.op("cast", {"X": "d"}, {"Out": "e"}, in_dtype=5, out_dtype=6)  # a real cast stays
    b.op("assign", {"X": "e"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal((3, 2)).astype(np.float32)}, with_passes(*ELIM))
    assert op_types(res) == ["relu", "cast"]
    assert rewrites(res, "identity_assign_eliminate_pass") == 4
    assert res.fetch_names == ["out"]


def test_assign_of_a_param_feeds_its_readers():
    b = Builder()
    x = b.feed("x", [3])
    w = b.param("w", np.array([1.0, -2.0, 3.0], np.float32))
    b.op("assign", {"X": w}, {"Out": "wc"})
    b.op("elementwise_mul", {"X": x, "Y": "wc"}, {"Out": "out"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal(3).astype(np.float32)}, with_passes(*ELIM))
    (mul,) = res.graph.op_nodes()
    assert mul.op.inputs["Y"] == ["w"]


def test_dead_code_elimination():
    b = Builder()
    x = b.feed("x", [3])
    w = b.param("w", np.ones(3, np.float32))
    unused = b.param("unused", np.ones(3, np.float32))
    b.op("relu", {"X": x}, {"Out": "out"})
    b.op("sigmoid", {"X": x}, {"Out": "dead1"})
    b.op("elementwise_mul", {"X": "dead1", "Y": w}, {"Out": "dead2"})
    b.op("elementwise_add", {"X": x, "Y": unused}, {"Out": "dead3"})
    b.fetch("out")
    res = check_same(b, {"x": RNG.standard_normal(3).astype(np.float32)}, with_passes("dead_code_elimination_pass"))
    assert op_types(res) == ["relu"]
    assert rewrites(res, "dead_code_elimination_pass") == 3
    assert "w" not in res.ctx.params and "unused" not in res.ctx.params, "params nobody reads are dropped"
