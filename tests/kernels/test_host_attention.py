"""fused_attention's host kernel: the native form against float64 and against the unfused ops' NumPy computation."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import PdliteError
from pdlite.kernels.host import native
from pdlite.kernels.host.attention import attention_numpy
from tests.kernels._util import native_threads

RNG = np.random.default_rng(5)
needs_native = pytest.mark.skipif(not native.available(), reason="the native kernels are off in this run")


def _ref64(x: np.ndarray, heads: int, alpha: float) -> np.ndarray:
    b, s, c = x.shape
    d = c // (3 * heads)
    q, k, v = (x[:, :, i * heads * d:(i + 1) * heads * d].astype(np.float64).reshape(b, s, heads, d)
               .transpose(0, 2, 1, 3) for i in range(3))
    e = alpha * q @ k.transpose(0, 1, 3, 2)
    e = np.exp(e - e.max(-1, keepdims=True))
    e /= e.sum(-1, keepdims=True)
    return (e @ v).transpose(0, 2, 1, 3).reshape(b, s, heads * d)


SHAPES = [(1, 32, 4, 32, 1.0), (2, 7, 3, 5, 0.3), (1, 1, 1, 1, 1.0), (2, 40, 2, 24, 0.125), (1, 16, 8, 16, 2.0)]


@pytest.mark.parametrize("b,s,h,d,alpha", SHAPES)
def test_numpy_form_against_float64(b, s, h, d, alpha):
    x = RNG.standard_normal((b, s, 3 * h * d)).astype(np.float32)
    ref = _ref64(x, h, alpha)
    got = attention_numpy(x, h, alpha)
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert float(np.abs(got - ref).max()) <= 1e-5 * float(np.abs(ref).max())


@needs_native
@pytest.mark.parametrize("b,s,h,d,alpha", SHAPES)
def test_native_against_float64_and_threads(b, s, h, d, alpha):
    """Within 1e-5 * max|ref| of float64; the same bits at 1 and 2 threads (each head one item's sums)."""
    x = RNG.standard_normal((b, s, 3 * h * d)).astype(np.float32) * 2
    ref = _ref64(x, h, alpha)
    outs = []
    for t in (1, 2):
        with native_threads(t):
            outs.append(native.attention(x, h, alpha))
    assert float(np.abs(outs[0] - ref).max()) <= 1e-5 * float(np.abs(ref).max())
    np.testing.assert_array_equal(outs[0], outs[1])


@needs_native
def test_native_propagates_nan_per_head():
    """A NaN in one token's k makes that head's rows NaN, the other heads' rows stay finite."""
    x = RNG.standard_normal((1, 6, 3 * 2 * 4)).astype(np.float32)
    x[0, 2, 2 * 4 + 1] = np.nan  # k of head 0, token 2
    out = native.attention(x, 2, 1.0)
    assert np.isnan(out[0, :, :4]).all() and np.isfinite(out[0, :, 4:]).all()


@needs_native
def test_native_bad_buffers_are_errors():
    x = RNG.standard_normal((1, 4, 12)).astype(np.float32)
    with pytest.raises((ValueError, PdliteError)):
        native._ext.attention(x, np.empty((1, 4, 3), np.float32), (1, 4, 1, 5), 1.0)
    with pytest.raises(ValueError, match="bad shape"):
        native._ext.attention(x, np.empty((1, 4, 4), np.float32), (1, 0, 1, 4), 1.0)
