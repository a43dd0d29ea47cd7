"""The fused ops' host kernels and shape inference against plain NumPy references."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import PdliteError
from tests.optimizer.util import BASE, Builder, run

RNG = np.random.default_rng(7)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    scale = float(np.max(np.abs(ref)))
    assert got.shape == ref.shape and float(np.max(np.abs(got - ref))) <= 1e-5 * scale


@pytest.mark.parametrize("k,act", [(1, ""), (2, "relu"), (3, "hard_swish")])
def test_fc_against_numpy(k, act):
    b = Builder()
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    kdim = int(np.prod(x.shape[k:]))
    w = RNG.standard_normal((kdim, 6)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    b.feed("x", list(x.shape))
    attrs = {"in_num_col_dims": k, "activation_type": act}
    if act == "hard_swish":
        attrs.update(act_threshold=6.0, act_scale=6.0, act_offset=3.0)
    b.op("fc", {"Input": "x", "W": b.param("w", w), "Bias": b.param("b", bias)}, {"Out": "out"}, **attrs)
    b.fetch("out")
    (got,), _ = run(b, {"x": x}, BASE)
    ref = x.reshape(int(np.prod(x.shape[:k])), kdim).astype(np.float64) @ w + bias
    ref = {"": ref, "relu": np.maximum(ref, 0), "hard_swish": _hard_swish(ref)}[act]
    _close(got, ref.reshape(*x.shape[:k], 6))


def test_fused_conv2d_1x1_against_numpy():
    b = Builder()
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((5, 3, 1, 1)).astype(np.float32)
    bias = RNG.standard_normal(5).astype(np.float32)
    b.feed("x", list(x.shape))
    b.op("fused_conv2d", {"Input": "x", "Filter": b.param("w", w), "Bias": b.param("b", bias)}, {"Output": "out"},
         conv_type="conv2d", strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1,
         act_type="leaky_relu", act_alpha=0.1)
    b.fetch("out")
    (got,), _ = run(b, {"x": x}, BASE)
    ref = np.einsum("nchw,oc->nohw", x.astype(np.float64), w[:, :, 0, 0]) + bias.reshape(1, -1, 1, 1)
    _close(got, np.where(ref > 0, ref, 0.1 * ref))


def test_fused_elementwise_and_scale_against_numpy():
    b = Builder()
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    y = RNG.standard_normal(3).astype(np.float32)
    b.feed("x", list(x.shape))
    b.feed("y", [3])
    b.op("fusion_elementwise_mul_activation", {"X": "x", "Y": "y"}, {"Out": "t"}, axis=1, act_type="sigmoid")
    b.op("fusion_scale_activation", {"X": "t"}, {"Out": "out"}, scale=2.0, bias=-1.0, bias_after_scale=False,
         act_type="relu6", act_threshold=1.5)
    b.fetch("out", "t")
    (out, t), _ = run(b, {"x": x, "y": y}, BASE)
    ref_t = 1.0 / (1.0 + np.exp(-(x.astype(np.float64) * y.reshape(1, 3, 1))))
    _close(t, ref_t)
    _close(out, np.clip(2.0 * (ref_t - 1.0), 0.0, 1.5))


def test_fc_shape_errors_name_the_op():
    b = Builder()
    b.feed("x", [2, 7])
    b.op("fc", {"Input": "x", "W": b.param("w", np.zeros((8, 3), np.float32))}, {"Out": "out"}, in_num_col_dims=1)
    b.fetch("out")
    with pytest.raises(PdliteError, match="fc.*does not match W"):
        run(b, {"x": np.zeros((2, 7), np.float32)}, BASE)


def test_fused_conv2d_rejects_an_unknown_conv_type():
    b = Builder()
    b.feed("x", [1, 3, 4, 4])
    b.op("fused_conv2d", {"Input": "x", "Filter": b.param("w", np.zeros((5, 3, 1, 1), np.float32))},
         {"Output": "out"}, conv_type="conv3d", act_type="relu")
    b.fetch("out")
    with pytest.raises(PdliteError, match="conv_type"):
        run(b, {"x": np.zeros((1, 3, 4, 4), np.float32)}, BASE)
