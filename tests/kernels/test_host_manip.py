"""Host kernels of unique, tril_triu, reverse, set_value, partial_sum, partial_concat, bmm, atan2, eye,
max_pool3d_with_index and gather_nd with an empty index, against Paddle's legacy executor on drawn
inputs (and NumPy written differently where that is clearer). The conformance zoo (unique_forms,
set_value_forms, tril_reverse_partial, math_misc_ops, max_pool3d_index) checks the saved-model path.
Tolerance: floats max|got - ref| <= 1e-5 * max(1, max|ref|); integers exact.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from pdlite.core.program import OpDesc
from pdlite.errors import InputError
from pdlite.nnadapter.convert import TensorInfo, refusal
from tests.kernels._checks import check, infer
from tests.kernels._util import paddle_legacy, run_op

F32 = np.float32


def _same(got: dict, ref: dict) -> None:
    for slot, refs in ref.items():
        for g, r in zip(got[slot], refs):
            r = np.asarray(r)
            assert g.shape == r.shape and g.dtype == r.dtype, f"{slot}: {g.dtype}{g.shape} != {r.dtype}{r.shape}"
            if r.dtype.kind in "biu":
                assert np.array_equal(g, r), f"{slot}: {g.ravel().tolist()} != {r.ravel().tolist()}"
            else:
                check(g, r, slot)


UNIQUE_BASE = {"dtype": 3, "return_index": False, "return_inverse": False, "return_counts": False, "axis": [],
               "is_sorted": False}


@pytest.mark.parametrize("dtype", ["int64", "float32", "int32"])
def test_unique_flat_forms_against_paddle(dtype: str) -> None:
    rng = np.random.default_rng(1)
    x = (rng.integers(0, 7, (3, 5)) * (0.5 if dtype == "float32" else 1)).astype(dtype)
    flat = x.ravel()
    got = run_op("unique", {"X": flat}, UNIQUE_BASE, {"Out": 1, "Index": 1}, check_shapes=False)
    _same(got, paddle_legacy("unique", {"X": flat}, UNIQUE_BASE, {"Out": 1, "Index": 1}))
    assert got["Out"][0].tolist() == list(dict.fromkeys(flat.tolist()))  # first-appearance order
    with pytest.raises(InputError, match="unique.*1-D"):
        infer("unique", {"X": x}, UNIQUE_BASE, {"Out": 1, "Index": 1})
    attrs = {**UNIQUE_BASE, "is_sorted": True, "return_index": True, "return_inverse": True, "return_counts": True,
             "dtype": 2}
    outs = {"Out": 1, "Indices": 1, "Index": 1, "Counts": 1}
    got = run_op("unique", {"X": x}, attrs, outs, check_shapes=False)
    _same(got, paddle_legacy("unique", {"X": x}, attrs, outs))
    ref = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, r in zip((got[k][0] for k in ("Out", "Indices", "Index", "Counts")), ref):
        assert np.array_equal(g, r.reshape(-1))


@pytest.mark.parametrize("shape,axis", [((6, 3), 0), ((6, 3), 1), ((3, 4, 5), 1), ((3, 4, 5), -1), ((4, 2, 3), 0)])
def test_unique_axis_against_paddle(shape: tuple[int, ...], axis: int) -> None:
    rng = np.random.default_rng(len(shape) + axis)
    x = rng.integers(0, 2, shape).astype(np.int32)
    attrs = {**UNIQUE_BASE, "is_sorted": True, "axis": [axis], "return_index": True, "return_inverse": True,
             "return_counts": True}
    outs = {"Out": 1, "Indices": 1, "Index": 1, "Counts": 1}
    _same(run_op("unique", {"X": x}, attrs, outs, check_shapes=False), paddle_legacy("unique", {"X": x}, attrs, outs))


@pytest.mark.parametrize("diagonal,lower", list(itertools.product((-2, 0, 1, 3), (True, False))))
def test_tril_triu(diagonal: int, lower: bool) -> None:
    x = np.arange(2 * 4 * 5, dtype=F32).reshape(2, 4, 5) + 1
    got = run_op("tril_triu", {"X": x}, {"diagonal": diagonal, "lower": lower})["Out"][0]
    i, j = np.indices((4, 5))
    keep = (j - i <= diagonal) if lower else (j - i >= diagonal)
    check(got, np.where(keep, x, 0), "tril_triu")
    check(got, paddle_legacy("tril_triu", {"X": x}, {"diagonal": diagonal, "lower": lower})["Out"][0])


def test_reverse_partial_bmm_atan2_eye_against_paddle() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (3, 4, 5)).astype(F32)
    for axis in ([0], [1, 2], [-1]):
        _same(run_op("reverse", {"X": x}, {"axis": axis}), paddle_legacy("reverse", {"X": x}, {"axis": axis}))
    xs = [rng.normal(0, 1, (4, 6)).astype(F32) for _ in range(3)]
    for start, length in ((0, -1), (1, 3), (5, 1)):
        a = {"start_index": start, "length": length}
        _same(run_op("partial_sum", {"X": xs}, a), paddle_legacy("partial_sum", {"X": xs}, a))
        _same(run_op("partial_concat", {"X": xs}, a), paddle_legacy("partial_concat", {"X": xs}, a))
    a = {"start_index": -3, "length": 2}
    _same(run_op("partial_concat", {"X": xs}, a), paddle_legacy("partial_concat", {"X": xs}, a))
    with pytest.raises(InputError, match="partial_sum.*start_index"):
        infer("partial_sum", {"X": xs}, a)
    y = rng.normal(0, 1, (3, 5, 2)).astype(F32)
    _same(run_op("bmm", {"X": x, "Y": y}), paddle_legacy("bmm", {"X": x, "Y": y}))
    _same(run_op("atan2", {"X1": x, "X2": x[::-1].copy()}), paddle_legacy("atan2", {"X1": x, "X2": x[::-1].copy()}))
    i = rng.integers(-3, 4, (7,)).astype(np.int64)
    got = run_op("atan2", {"X1": i, "X2": i[::-1].copy()})["Out"][0]
    assert got.dtype == np.float64
    check(got, np.arctan2(i.astype(np.float64), i[::-1].astype(np.float64)))
    check(run_op("eye", {}, {"num_rows": 3, "num_columns": 5, "dtype": 5})["Out"][0], np.eye(3, 5, dtype=F32))
    check(run_op("eye", {}, {"num_rows": 4, "num_columns": -1, "dtype": 3})["Out"][0], np.eye(4, dtype=np.int64))


SET_VALUE_BASE = {"axes": [], "starts": [], "ends": [], "steps": [], "decrease_axes": [], "none_axes": [], "shape": [],
                  "dtype": 5}


@pytest.mark.parametrize("case", range(6))
def test_set_value_against_numpy_and_paddle(case: int) -> None:
    rng = np.random.default_rng(case)
    x = rng.normal(0, 1, (4, 5, 6)).astype(F32)
    attrs, ins, index, value = [
        ({"axes": [0], "starts": [1], "ends": [2], "steps": [1], "decrease_axes": [0]},
         {"ValueTensor": rng.normal(0, 1, (5, 6)).astype(F32)}, np.s_[1], None),
        ({"axes": [0, 2], "starts": [0, 5], "ends": [4, -10], "steps": [2, -2]},
         {"ValueTensor": rng.normal(0, 1, (2, 1, 3)).astype(F32)}, np.s_[0:4:2, :, 5::-2], None),
        ({"axes": [1, 2], "starts": [-1, 0], "ends": [-6, 6], "steps": [-3, 2]},
         {"ValueTensor": rng.normal(0, 1, (1, 3)).astype(F32)}, np.s_[:, -1:-6:-3, 0:6:2], None),
        ({"axes": [1], "starts": [1], "ends": [4], "steps": [1], "values": [2.5], "shape": [1]}, {}, np.s_[:, 1:4],
         np.array([2.5], F32)),
        ({"axes": [2], "starts": [0], "ends": [2], "steps": [1], "values": [1.0, -1.0], "shape": [2]}, {},
         np.s_[:, :, 0:2], np.array([1.0, -1.0], F32)),
        ({"axes": [1], "starts": [0], "ends": [0], "steps": [1]},
         {"ValueTensor": rng.normal(0, 1, (2, 6)).astype(F32), "StartsTensorList": [np.array([2], np.int64)],
          "EndsTensorList": [np.array([4], np.int64)]}, np.s_[:, 2:4], None),
    ][case]
    full = {**SET_VALUE_BASE, **attrs}
    got = run_op("set_value", {"Input": x, **ins}, full)["Out"][0]
    ref = x.copy()
    ref[index] = ins["ValueTensor"] if value is None else value
    check(got, ref, "set_value vs NumPy")
    if "values" in full:  # the legacy one-op helper cannot write a SCALARS attribute
        return
    check(got, paddle_legacy("set_value", {"Input": x, **ins}, full)["Out"][0], "set_value vs Paddle")


def test_set_value_none_axes_and_bad_value() -> None:
    x = np.zeros((4, 5, 6), F32)
    v = np.arange(6, dtype=F32).reshape(1, 6)
    attrs = {**SET_VALUE_BASE, "axes": [0], "starts": [2], "ends": [3], "steps": [1], "decrease_axes": [0],
             "none_axes": [0, 2]}
    got = run_op("set_value", {"Input": x, "ValueTensor": v}, attrs)["Out"][0]
    ref = x.copy()
    ref[2] = v
    check(got, ref, "none_axes")
    with pytest.raises(Exception, match="set_value.*broadcast"):
        run_op("set_value", {"Input": x, "ValueTensor": np.zeros((3,), F32)}, attrs)


@pytest.mark.parametrize("attrs", [
    {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0], "ceil_mode": False},
    {"ksize": [3, 2, 3], "strides": [2, 1, 2], "paddings": [1, 0, 1], "ceil_mode": True},
    {"ksize": [2, 3, 4], "strides": [1, 1, 1], "paddings": [0, 0, 0], "adaptive": True},
    {"ksize": [1, 1, 1], "strides": [1, 1, 1], "paddings": [0, 0, 0], "global_pooling": True},
])
def test_max_pool3d_with_index_literal_loop(attrs: dict) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (2, 2, 5, 6, 7)).astype(F32)
    got = run_op("max_pool3d_with_index", {"X": x}, attrs, {"Out": 1, "Mask": 1})
    _same({"Out": got["Out"]}, paddle_legacy("max_pool3d_with_index", {"X": x}, attrs, {"Out": 1, "Mask": 1}))
    out, mask = got["Out"][0], got["Mask"][0]
    dims = x.shape[2:]
    for n, c in itertools.product(range(2), range(2)):
        for pos in itertools.product(*(range(o) for o in out.shape[2:])):
            if attrs.get("adaptive"):
                b = [(p * s // o, -(-(p + 1) * s // o)) for p, s, o in zip(pos, dims, out.shape[2:])]
            elif attrs.get("global_pooling"):
                b = [(0, s) for s in dims]
            else:
                b = [(max(p * st - pd, 0), min(p * st - pd + k, s))
                     for p, st, pd, k, s in zip(pos, attrs["strides"], attrs["paddings"], attrs["ksize"], dims)]
            win = x[n, c, b[0][0]:b[0][1], b[1][0]:b[1][1], b[2][0]:b[2][1]]
            d, h, w = np.unravel_index(np.argmax(win), win.shape)
            assert out[(n, c, *pos)] == win.max()
            assert mask[(n, c, *pos)] == ((b[0][0] + d) * dims[1] + b[1][0] + h) * dims[2] + b[2][0] + w


def test_gather_nd_empty_index_on_host_and_refused_by_devices() -> None:
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    for idx_shape in ((2, 0), (0,), (3, 1, 0)):
        idx = np.zeros(idx_shape, np.int64)
        got = run_op("gather_nd", {"X": x, "Index": idx})["Out"][0]
        check(got, np.broadcast_to(x, idx_shape[:-1] + x.shape), f"gather_nd {idx_shape}")
        check(got, paddle_legacy("gather_nd", {"X": x, "Index": idx})["Out"][0], "gather_nd vs Paddle")
    op = OpDesc("gather_nd", {"X": ["x"], "Index": ["i"]}, {"Out": ["y"]}, {})
    assert "non-empty" in (refusal(op, TensorInfo({"x": (2, 3, 4), "i": (2, 0)})) or "")
    assert refusal(op, TensorInfo({"x": (2, 3, 4), "i": (2, 1)})) is None


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_pad2d_matches_pad3d_semantics(mode: str, fmt: str) -> None:
    """pad2d is gone from Paddle 3: checked against NumPy's pad and pdlite's pad3d (checked against Paddle)."""
    x = np.random.default_rng(0).normal(0, 1, (2, 3, 4, 5)).astype(F32)
    if fmt == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    p = [1, 2, 3, 0]
    got = run_op("pad2d", {"X": x}, {"paddings": p, "mode": mode, "pad_value": 0.5, "data_format": fmt})["Out"][0]
    x5 = x[:, :, None] if fmt == "NCHW" else x[:, None]
    mode3 = {"edge": "replicate"}.get(mode, mode)
    ref = run_op("pad3d", {"X": x5}, {"paddings": [p[2], p[3], p[0], p[1], 0, 0], "mode": mode3, "value": 0.5,
                                      "data_format": "NCDHW" if fmt == "NCHW" else "NDHWC"})["Out"][0]
    check(got, ref[:, :, 0] if fmt == "NCHW" else ref[:, 0], "pad2d")


def test_one_hot_v1_and_expand_as_v1() -> None:
    ids = np.array([[[0], [3]], [[2], [5]]], np.int64)
    got = run_op("one_hot", {"X": ids}, {"depth": 4, "dtype": 5, "allow_out_of_range": True})["Out"][0]
    ref = np.zeros((2, 2, 4), F32)
    for (i, j), v in np.ndenumerate(ids[..., 0]):
        if v < 4:
            ref[i, j, v] = 1
    check(got, ref, "one_hot")
    with pytest.raises(Exception, match="one_hot.*allow_out_of_range"):
        run_op("one_hot", {"X": ids}, {"depth": 4, "dtype": 5})
    x = np.arange(6, dtype=F32).reshape(2, 3)
    check(run_op("expand_as", {"X": x, "target_tensor": np.zeros((4, 6), F32)})["Out"][0], np.tile(x, (2, 2)))
    with pytest.raises(InputError, match="expand_as"):
        infer("expand_as", {"X": x, "target_tensor": np.zeros((3, 6), F32)}, {})
