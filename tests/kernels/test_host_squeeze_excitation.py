"""squeeze_excitation's host kernel (native_src/se.c and the NumPy form) against a float64 NumPy reference of the
maths (pdlite/operators/squeeze_excitation.py), tolerance 1e-5 of max|ref|; the native pool's bits equal the pool2d
op's; the steady path's bound call equals run."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.program import OpDesc
from pdlite.kernels.host import native
from pdlite.kernels.host.squeeze_excitation import SqueezeExcitation
from pdlite.kernels.registry import KernelContext
from pdlite.operators.registry import OPS

RNG = np.random.default_rng(7)
ACTS = {
    "": lambda v: v,
    "relu": lambda v: np.maximum(v, 0.0),
    "hard_sigmoid": lambda v: np.clip(v * 0.1666667 + 0.5, 0.0, 1.0),
    "hard_swish": lambda v: v * np.clip(v + 3.0, 0.0, 6.0) / 6.0,
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
}
ATTRS = {"hard_sigmoid": {"slope": 0.1666667, "offset": 0.5}}
SLOT_NAMES = {"W1": "w1", "W2": "w2", "B1": "b1", "B2": "b2"}
NATIVE = pytest.mark.skipif(not native.available(), reason="needs the native extension: python setup.py build_ext")


def _kernel(act1: str, act2: str, bias: bool, native_on: bool = True) -> tuple[SqueezeExcitation, dict]:
    c, c1 = 40, 12
    w1 = (RNG.standard_normal((c1, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    w2 = (RNG.standard_normal((c, c1, 1, 1)) / np.sqrt(c1)).astype(np.float32)
    params = {"w1": w1, "w2": w2}
    ins = {"X": ["x"], "W1": ["w1"], "W2": ["w2"]}
    if bias:
        params |= {"b1": RNG.standard_normal(c1).astype(np.float32), "b2": RNG.standard_normal(c).astype(np.float32)}
        ins |= {"B1": ["b1"], "B2": ["b2"]}
    attrs = {"act1_type": act1, "act2_type": act2}
    for key, act in (("act1", act1), ("act2", act2)):
        attrs |= {f"{key}_{k}": v for k, v in ATTRS.get(act, {}).items()}
    op = OPS["squeeze_excitation"].attach(OpDesc("squeeze_excitation", ins, {"Out": ["y"]}, attrs))
    k = SqueezeExcitation(op)
    k.context = KernelContext({"host_native": native_on})
    k.prepare(params)
    return k, params


def _reference(x: np.ndarray, p: dict, act1: str, act2: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    w1, w2 = (p[k].astype(np.float64)[:, :, 0, 0] for k in ("w1", "w2"))
    h = ACTS[act1](x64.mean(axis=(2, 3)) @ w1.T + p.get("b1", 0.0))
    s = ACTS[act2](h @ w2.T + p.get("b2", 0.0))
    return x64 * s[:, :, None, None]


@pytest.mark.parametrize("native_on", [pytest.param(True, marks=NATIVE), False])
@pytest.mark.parametrize(("act1", "act2", "bias"), [("relu", "hard_sigmoid", True), ("", "", False),
                                                     ("hard_swish", "sigmoid", True)])
@pytest.mark.parametrize("shape", [(1, 40, 7, 7), (2, 40, 13, 3), (1, 40, 56, 56)])
def test_squeeze_excitation_matches_reference(native_on, act1, act2, bias, shape):
    k, params = _kernel(act1, act2, bias, native_on)
    x = RNG.standard_normal(shape).astype(np.float32)
    got = k.run({"X": [x], **{s: [params[n]] for s, n in SLOT_NAMES.items() if n in params}})["Out"][0]
    ref = _reference(x, params, act1, act2)
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


@NATIVE
def test_squeeze_excitation_native_pool_is_pool2d_and_bind_is_run():
    """With one input channel per gate and identity products the gate is the pool2d op's mean: the same bits; the
    bound call (steady path) gives run's bits."""
    from pdlite.kernels.host.pool import Pool2d

    c = 24
    eye = np.eye(c, dtype=np.float32)[:, :, None, None]
    op = OPS["squeeze_excitation"].attach(OpDesc("squeeze_excitation", {"X": ["x"], "W1": ["w1"], "W2": ["w2"]},
                                                 {"Out": ["y"]}, {}))
    k = SqueezeExcitation(op)
    k.prepare({"w1": eye, "w2": eye})
    x = RNG.standard_normal((1, c, 14, 14)).astype(np.float32)
    got = k.run({"X": [x], "W1": [eye], "W2": [eye]})["Out"][0]
    pool = Pool2d(OPS["pool2d"].attach(OpDesc("pool2d", {"X": ["x"]}, {"Out": ["p"]},
                                              {"pooling_type": "avg", "adaptive": True, "ksize": [1, 1]})))
    mean = pool.run({"X": [x]})["Out"][0]
    np.testing.assert_array_equal(got, x * mean)
    b = k.bind({"X": [x], "W1": [eye], "W2": [eye]}, frozenset({"W1", "W2"}))
    if native.use_native(None):  # the NumPy kernels (--host-numpy) have no bound form: run's path is the step
        assert b is not None
    if b is not None:
        np.testing.assert_array_equal(b.fn(x), got)
    # a replaced weight (another object) is prepared again: the gate doubles
    got2 = k.run({"X": [x], "W1": [eye], "W2": [eye * np.float32(2)]})["Out"][0]
    np.testing.assert_array_equal(got2, x * (mean * np.float32(2)))


def test_squeeze_excitation_shape_errors():
    from pdlite.errors import PdliteError
    from pdlite.operators.registry import ShapeContext

    op = OPS["squeeze_excitation"].attach(OpDesc("squeeze_excitation", {"X": ["x"], "W1": ["w1"], "W2": ["w2"]},
                                                 {"Out": ["y"]}, {}))
    vals = {"X": [np.zeros((1, 8, 3, 3), np.float32)], "W1": [np.zeros((4, 8, 1, 1), np.float32)],
            "W2": [np.zeros((8, 5, 1, 1), np.float32)]}
    with pytest.raises(PdliteError, match="W2 must be"):
        OPS["squeeze_excitation"].infer_shape(ShapeContext(op, vals))
