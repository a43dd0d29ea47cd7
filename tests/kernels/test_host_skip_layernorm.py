"""skip_layernorm's host kernel: native (the sum inside the layer_norm call) against the two ops and float64."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.program import OpDesc
from pdlite.kernels.host import native
from pdlite.kernels.host.norm import LayerNorm, SkipLayerNorm

RNG = np.random.default_rng(13)


def _ln64(s: np.ndarray, g: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    s2 = s.astype(np.float64).reshape(int(np.prod(s.shape[:axis])), -1)
    d = s2 - s2.mean(1, keepdims=True)
    y = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * g + b
    return y.reshape(s.shape)


@pytest.mark.parametrize("shape,axis", [((1, 32, 128), 2), ((2, 3, 5, 7), 2), ((4, 17), 1)])
@pytest.mark.parametrize("use_native", [True, False])
def test_skip_layernorm_equals_add_then_layer_norm(shape, axis, use_native, monkeypatch):
    """The same bits as elementwise_add's sum through the layer_norm kernel, on either path; within 1e-5 of float64."""
    if use_native and not native.available():
        pytest.skip("the native kernels are off in this run")
    monkeypatch.setattr(native, "use_native", lambda ctx: use_native)
    x, y = (RNG.standard_normal(shape).astype(np.float32) * 2 for _ in range(2))
    n = int(np.prod(shape[axis:]))
    g, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    attrs = {"begin_norm_axis": axis, "epsilon": 1e-5}
    sk = SkipLayerNorm(OpDesc("skip_layernorm", {"X": ["x"], "Y": ["y"], "Scale": ["g"], "Bias": ["b"]},
                              {"Out": ["o"]}, attrs))
    ln = LayerNorm(OpDesc("layer_norm", {"X": ["s"], "Scale": ["g"], "Bias": ["b"]}, {"Y": ["o"]}, attrs))
    ins = {"X": [x], "Y": [y], "Scale": [g], "Bias": [b]}
    got = sk.run(ins)["Out"][0]
    ref = ln.run({"X": [x + y], "Scale": [g], "Bias": [b]})["Y"][0]
    np.testing.assert_array_equal(got, ref)
    r64 = _ln64(x + y, g, b, axis)
    assert float(np.abs(got - r64).max()) <= 1e-5 * float(np.abs(r64).max())
    bd = sk.bind(ins, frozenset({"Scale", "Bias"}))
    if use_native:
        assert bd is not None
        np.testing.assert_array_equal(bd.fn(x, y), ref)
    else:
        assert bd is None
