"""Nearest upsampling by whole factors (pdlite/kernels/host/interp.py: upsample) against the general nearest path
(take_resize over Paddle's indices) and a NumPy reference, bit for bit, on odd shapes, several dtypes and NaN
payloads; and the kernel's choice of it only where Paddle's indices are whole repeats."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pdlite.kernels.host  # noqa: F401  (registers the host kernels)
import pdlite.operators  # noqa: F401  (registers the ops)
from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.kernels.host import interp
from pdlite.kernels.host.interp import nearest_index, source_ratio, take_resize, upsample
from pdlite.kernels.registry import KernelContext, kernels_for
from pdlite.operators.registry import OPS

R = np.random.default_rng(11)
SHAPES = [(1, 1, 1, 1), (1, 3, 5, 7), (2, 5, 3, 1), (1, 96, 10, 10), (3, 2, 1, 9)]
FACTORS = [(2, 2), (4, 4), (8, 8), (1, 2), (2, 1), (3, 2), (2, 3)]


def _values(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":  # random bits: NaNs with payloads, infinities and denormals among them
        raw = R.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
        return raw.view(dt).reshape(shape)
    if dt.kind == "b":
        return R.integers(0, 2, size=shape).astype(bool)
    return R.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=shape, dtype=dt)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype.kind == "b" else a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.uint8, bool, np.float64, np.int64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_upsample_bits(shape: tuple[int, ...], dtype: Any) -> None:
    x = _values(shape, dtype)
    for rh, rw in FACTORS:
        got = upsample(x, rh, rw)
        want = np.repeat(np.repeat(x, rh, axis=2), rw, axis=3)  # the NumPy reference
        idx = [np.arange(s * r) // r for s, r in zip(shape[2:], (rh, rw))]
        general = take_resize(x, idx)  # the general nearest path over the same indices
        assert got.dtype == x.dtype and got.shape == want.shape and got.flags.c_contiguous
        assert np.array_equal(_bits(got), _bits(want)), (rh, rw)
        assert np.array_equal(_bits(got), _bits(general)), (rh, rw)


def test_upsample_non_contiguous_input() -> None:
    x = _values((2, 4, 6, 10), np.float32)[:, ::2, :, ::3]
    got = upsample(x, 2, 2)
    assert np.array_equal(_bits(got), _bits(np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)))


def _kernel(attrs: dict[str, Any], op_type: str = "nearest_interp_v2"):
    desc = OpDesc(op_type, {"X": ["x"]}, {"Out": ["out"]}, {"interp_method": "nearest", "data_layout": "NCHW",
                                                             "align_corners": False, "align_mode": 1, **attrs})
    op = OPS[op_type].attach(desc)
    kd = next(d for d in kernels_for(op_type) if d.key.target == TargetType.Host)
    return kd.create(op, KernelContext({}))


def _general(x: np.ndarray, out: tuple[int, int], scales: tuple[float, float], align: bool) -> np.ndarray:
    rs = [source_ratio(i, o, s, align) for i, o, s in zip(x.shape[2:], out, scales)]
    return take_resize(x, [nearest_index(r, o, i, align) for r, o, i in zip(rs, out, x.shape[2:])])


# (attrs, input shape, takes the whole-repeat form; None: either, as Paddle's indices fall)
KERNEL_CASES = [
    ({"scale": [2.0, 2.0]}, (1, 7, 5, 3), True),
    ({"scale": [8.0, 4.0]}, (1, 3, 3, 5), True),
    ({"out_h": 10, "out_w": 6}, (2, 3, 5, 3), True),
    ({"scale": [2.0, 2.0], "align_corners": True}, (1, 4, 5, 3), None),  # (4/9 k + 0.5: whole repeats here)
    ({"scale": [3.0, 2.0], "align_corners": True}, (1, 4, 4, 3), False),
    ({"out_h": 9, "out_w": 7}, (1, 4, 5, 3), False),
    ({"scale": [1.5, 2.0]}, (1, 4, 6, 3), False),
    ({"scale": [2.0, 2.0], "align_mode": 0}, (1, 2, 3, 3), True),
]


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[str(c[0]) for c in KERNEL_CASES])
def test_kernel_whole_repeat_only_where_indices_say(case, monkeypatch) -> None:
    attrs, shape, whole = case
    x = _values(shape, np.float32)
    k = _kernel(attrs)
    calls: list[tuple[int, int]] = []
    real = interp.upsample
    monkeypatch.setattr(interp, "upsample", lambda a, rh, rw: calls.append((rh, rw)) or real(a, rh, rw))
    got = k.run({"X": [x]})["Out"][0]
    assert whole is None or bool(calls) == whole
    oh, ow = got.shape[2:]
    scale = attrs.get("scale", [-1.0, -1.0])
    want = _general(x, (oh, ow), (scale[0], scale[1]), bool(attrs.get("align_corners")))
    assert np.array_equal(_bits(got), _bits(want))


def test_kernel_channel_last() -> None:
    x = _values((1, 5, 3, 4), np.float32)  # N H W C
    k = _kernel({"scale": [2.0, 2.0], "data_layout": "NHWC"})
    got = k.run({"X": [x]})["Out"][0]
    want = np.repeat(np.repeat(x, 2, axis=1), 2, axis=2)
    assert got.shape == (1, 10, 6, 4) and np.array_equal(_bits(got), _bits(want))


def test_bind_declines_a_size_input_that_may_change() -> None:
    desc = OpDesc("nearest_interp_v2", {"X": ["x"], "OutSize": ["s"]}, {"Out": ["out"]},
                  {"interp_method": "nearest", "data_layout": "NCHW", "align_corners": False, "align_mode": 1})
    op = OPS["nearest_interp_v2"].attach(desc)
    k = next(d for d in kernels_for(op.type) if d.key.target == TargetType.Host).create(op, KernelContext({}))
    ins = {"X": [_values((1, 2, 3, 3), np.float32)], "OutSize": [np.array([6, 6], np.int32)]}
    assert k.run(ins)["Out"][0].shape == (1, 2, 6, 6)
    assert k.bind(ins, frozenset()) is None
    assert k.bind(ins, frozenset({"OutSize"})) is not None
