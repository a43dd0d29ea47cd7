"""fc_fuse_pass: mul / matmul / matmul_v2 + bias (+ activation) -> fc; refusals."""
from __future__ import annotations

import numpy as np
import pytest

from tests.optimizer.util import Builder, check_same, op_types, refusals, rewrites, with_passes

RNG = np.random.default_rng(1)


def _mm(b: Builder, kind: str, x: str, w: str, out: str, **attrs) -> None:
    if kind == "mul":
        attrs.setdefault("x_num_col_dims", 1)
        attrs.setdefault("y_num_col_dims", 1)
    b.op(kind, {"X": x, "Y": w}, {"Out": out}, **attrs)


@pytest.mark.parametrize("kind,xshape,attrs,k", [
    ("matmul_v2", [2, 8], {"trans_x": False, "trans_y": False}, 1),
    ("matmul_v2", [2, 3, 8], {"trans_x": False, "trans_y": False}, 2),
    ("matmul", [2, 8], {"transpose_X": False, "transpose_Y": False, "alpha": 1.0}, 1),
    ("mul", [2, 2, 2, 2], {"x_num_col_dims": 1}, 1),
    ("mul", [2, 3, 8], {"x_num_col_dims": 2}, 2),
])
@pytest.mark.parametrize("act", ["", "relu", "gelu"])
def test_fc(kind, xshape, attrs, k, act):
    b = Builder()
    x = b.feed("x", xshape)
    w = b.param("w", RNG.standard_normal((8, 5)).astype(np.float32))
    bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
    _mm(b, kind, x, w, "y", **attrs)
    b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "z" if act else "out"}, axis=-1)
    if act:
        b.op(act, {"X": "z"}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal(xshape).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    assert op_types(res) == ["fc"] and rewrites(res, "fc_fuse_pass") == 1
    (node,) = res.graph.op_nodes()
    assert node.op.attrs["in_num_col_dims"] == k and node.op.attrs["activation_type"] == act
    assert node.op.inputs == {"Input": ["x"], "W": ["w"], "Bias": ["bias"]}


def test_fc_bias_2d_is_stored_as_a_vector():
    b = Builder()
    x = b.feed("x", [3, 8])
    w = b.param("w", RNG.standard_normal((8, 5)).astype(np.float32))
    bias = b.param("bias", RNG.standard_normal((1, 5)).astype(np.float32))
    b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"})
    b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"}, axis=-1)
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((3, 8)).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert res.ctx.params[node.op.input("Bias")].shape == (5,)


@pytest.mark.parametrize("case", ["trans_y", "bias_on_rows", "weight_3d", "no_bias_param", "alpha"])
def test_fc_refusals(case):
    b = Builder()
    x = b.feed("x", [5, 8])
    wshape = (2, 8, 5) if case == "weight_3d" else ((5, 8) if case == "trans_y" else (8, 5))
    w = b.param("w", RNG.standard_normal(wshape).astype(np.float32))
    if case == "trans_y":
        b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"}, trans_y=True)
    elif case == "alpha":
        b.op("matmul", {"X": x, "Y": w}, {"Out": "y"}, alpha=2.0)
    else:
        b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"})
    if case == "bias_on_rows":
        bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
        b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"}, axis=0)
    elif case == "no_bias_param":
        other = b.feed("other", [5])
        b.op("elementwise_add", {"X": "y", "Y": other}, {"Out": "out"})
    else:
        bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
        b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((5, 8)).astype(np.float32)}
    if case == "no_bias_param":
        feeds["other"] = RNG.standard_normal(5).astype(np.float32)
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    assert "fc" not in op_types(res)
    if case != "no_bias_param":
        assert sum(refusals(res, "fc_fuse_pass").values()) >= 1
