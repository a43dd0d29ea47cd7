"""skip_layernorm_fuse_pass: a residual add + the layer_norm of its sum -> skip_layernorm, the same bits; refusals."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.types import Place, TargetType
from tests.optimizer.util import Builder, op_types, optimize, refusals, rewrites, run, with_passes

RNG = np.random.default_rng(11)
PASSES = with_passes("skip_layernorm_fuse_pass")


def _residual_norm(shape=(2, 5, 12), y_shape=None, axis=2, affine=True, fetch_mean=False) -> tuple[Builder, dict]:
    b = Builder()
    b.feed("a", list(shape))
    b.feed("r", list(y_shape or shape))
    b.op("relu", {"X": "a"}, {"Out": "x"})  # (the add's X made by an op, as an fc's output is)
    b.op("elementwise_add", {"X": "r", "Y": "x"}, {"Out": "s"}, axis=-1)
    ins = {"X": "s"}
    if affine:
        n = int(np.prod(shape[axis:]))
        ins.update(Scale=b.param("g", RNG.standard_normal(n).astype(np.float32)),
                   Bias=b.param("be", RNG.standard_normal(n).astype(np.float32)))
    b.op("layer_norm", ins, {"Y": "y", "Mean": "m", "Variance": "v"}, begin_norm_axis=axis, epsilon=1e-5)
    b.op("scale", {"X": "y"}, {"Out": "out"}, scale=2.0, bias=0.0, bias_after_scale=True)
    b.fetch("out", *(["m"] if fetch_mean else []))
    feeds = {"a": RNG.standard_normal(shape).astype(np.float32) * 3,
             "r": RNG.standard_normal(y_shape or shape).astype(np.float32)}
    b.set_shapes(feeds)
    return b, feeds


@pytest.mark.parametrize("shape,axis,affine", [((2, 5, 12), 2, True), ((1, 32, 128), 2, True), ((3, 4, 6), 1, False),
                                               ((2, 7, 40), 2, True)])
def test_add_and_layer_norm_become_skip_layernorm_with_the_same_bits(shape, axis, affine):
    b, feeds = _residual_norm(shape, axis=axis, affine=affine)
    ref, _ = run(b, feeds, with_passes())
    got, res = run(b, feeds, PASSES)
    assert rewrites(res, "skip_layernorm_fuse_pass") == 1
    assert op_types(res) == ["relu", "skip_layernorm", "scale"]
    np.testing.assert_array_equal(got[0], ref[0])
    res.graph.lint()


@pytest.mark.parametrize("case,reason", [({"fetch_mean": True}, "Mean"), ({"y_shape": (12,)}, "one shape")])
def test_skip_layernorm_refusals(case, reason):
    b, feeds = _residual_norm(**case)
    ref, _ = run(b, feeds, with_passes())
    got, res = run(b, feeds, PASSES)
    assert rewrites(res, "skip_layernorm_fuse_pass") == 0 and "skip_layernorm" not in op_types(res)
    assert any(reason in r for r in refusals(res, "skip_layernorm_fuse_pass")), refusals(res, "skip_layernorm_fuse_pass")
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_skip_layernorm_is_left_to_devices():
    b, _ = _residual_norm()
    res = optimize(b, PASSES, [Place(TargetType.NNAdapter)])
    assert "skip_layernorm" not in op_types(res)
