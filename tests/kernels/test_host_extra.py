"""Host kernels of pdlite.operators.extra against independent references written here.

References are literal loops (or plain NumPy written differently from the kernel) of Paddle's
CPU semantics; the conformance zoo (tests/conformance) checks the same ops against Paddle
Inference's outputs. A few cases also run Paddle's legacy executor when paddle is installed.
Tolerance: float max|got - ref| <= 1e-5 * max(1, max|ref|); integer/bool outputs exact.
rnn: tests/kernels/test_host_rnn.py; detection ops: tests/kernels/test_host_detection.py.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdlite.errors import InputError, KernelError
from tests.kernels._checks import check, f32, infer, rand
from tests.kernels._util import paddle_legacy, run1, run_op

# --- compare / logical -------------------------------------------------------------------------
CMP = {"equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b, "less_than": lambda a, b: a < b,
       "less_equal": lambda a, b: a <= b, "greater_than": lambda a, b: a > b,
       "greater_equal": lambda a, b: a >= b}


@pytest.mark.parametrize("op", sorted(CMP))
def test_compare_legacy_axis(op: str) -> None:
    x = np.round(rand(2, 3, 4), 1)
    y = np.round(rand(3, seed=1), 1)
    y[1] = x[0, 1, 0]  # a tie
    got = run1(op, {"X": x, "Y": y}, {"axis": 1})
    ref = np.empty(x.shape, bool)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        ref[i, j, k] = CMP[op](x[i, j, k], y[j])
    check(got, ref, op)


def test_compare_numpy_broadcast_ints() -> None:
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    y = np.array([[2], [4]], np.int64)
    check(run1("less_than", {"X": x, "Y": y}), np.array([[1, 1, 0], [1, 0, 0]], bool))


@pytest.mark.parametrize("op,fn", [("logical_and", lambda a, b: a and b), ("logical_or", lambda a, b: a or b),
                                   ("logical_xor", lambda a, b: a != b)])
def test_logical(op: str, fn) -> None:
    x = np.array([[True, False, True, False]])
    y = np.array([[True], [False]])
    ref = np.array([[fn(bool(x[0, j]), bool(y[i, 0])) for j in range(4)] for i in range(2)])
    check(run1(op, {"X": x, "Y": y}), ref, op)
    check(run1("logical_not", {"X": np.array([0.0, 2.0], f32)}), np.array([True, False]))


# --- creation and index ------------------------------------------------------------------------
def test_linspace_matches_paddle_halves() -> None:
    got = run1("linspace", {"Start": np.array([-1.0], f32), "Stop": np.array([2.0], f32),
                            "Num": np.array([7], np.int32)}, {"dtype": 5})
    assert got.dtype == f32 and got[0] == -1.0 and got[-1] == 2.0
    check(got, np.array([-1.0 + 0.5 * i for i in range(7)]), "linspace")
    one = run1("linspace", {"Start": np.array([3.0], f32), "Stop": np.array([5.0], f32), "Num": np.array([1])})
    check(one, np.array([3.0], f32))


def test_expand_as_v2() -> None:
    x = rand(1, 1, 4)
    y = np.zeros((2, 3, 4), f32)
    check(run1("expand_as_v2", {"X": x, "Y": y}, {"target_shape": [-1, 3, 4]}), np.tile(x, (2, 3, 1)))
    check(run1("expand_as_v2", {"X": x}, {"target_shape": [5, 2, 3, -1]}), np.tile(x, (5, 2, 3, 1)))


def test_index_select_and_bounds() -> None:
    x = rand(3, 5)
    idx = np.array([4, 0, 4], np.int64)
    ref = np.array([[x[i, j] for j in idx] for i in range(3)], f32)
    check(run1("index_select", {"X": x, "Index": idx}, {"dim": 1}), ref)
    with pytest.raises(KernelError, match="index_select"):
        run1("index_select", {"X": x, "Index": np.array([5])}, {"dim": 1})


@pytest.mark.parametrize("descending", [False, True])
def test_argsort(descending: bool) -> None:
    x = rand(3, 6)
    out = run_op("argsort", {"X": x}, {"axis": 0, "descending": descending}, outs={"Out": 1, "Indices": 1})
    for j in range(6):
        order = sorted(range(3), key=lambda i: x[i, j], reverse=descending)
        check(out["Indices"][0][:, j], np.array(order, np.int64))
        check(out["Out"][0][:, j], x[order, j])


@pytest.mark.parametrize("largest", [True, False])
def test_top_k_v2(largest: bool) -> None:
    x = rand(2, 7, 3)
    out = run_op("top_k_v2", {"X": x}, {"k": 3, "axis": 1, "largest": largest}, outs={"Out": 1, "Indices": 1})
    for i, j in itertools.product(range(2), range(3)):
        order = sorted(range(7), key=lambda t: x[i, t, j], reverse=largest)[:3]
        check(out["Indices"][0][i, :, j], np.array(order, np.int64))
        check(out["Out"][0][i, :, j], x[i, order, j])
    k_tensor = run_op("top_k_v2", {"X": x, "K": np.array([2], np.int32)}, {"k": 5}, outs={"Out": 1, "Indices": 1})
    assert k_tensor["Out"][0].shape == (2, 7, 2)
    with pytest.raises(InputError, match="k = 9"):
        infer("top_k_v2", {"X": x}, {"k": 9, "axis": 1}, {"Out": 1, "Indices": 1})


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum(exclusive: bool, reverse: bool) -> None:
    x = rand(3, 5)
    got = run1("cumsum", {"X": x}, {"axis": 1, "exclusive": exclusive, "reverse": reverse})
    ref = np.zeros((3, 5))
    for i in range(3):
        for j in range(5):
            js = range(j, 5) if reverse else range(j + 1)
            ref[i, j] = sum(float(x[i, t]) for t in js if not (exclusive and t == j))
    check(got, ref, "cumsum")
    check(run1("cumsum", {"X": x}, {"flatten": True}), np.cumsum(x.reshape(-1).astype(np.float64)))


def test_flip_and_roll() -> None:
    x = rand(2, 3, 4)
    ref = np.empty_like(x)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        ref[i, j, k] = x[i, 2 - j, 3 - k]
    check(run1("flip", {"X": x}, {"axis": [1, -1]}), ref)
    ref = np.empty_like(x)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        ref[i, (j - 1) % 3, (k + 2) % 4] = x[i, j, k]
    check(run1("roll", {"X": x}, {"shifts": [-1, 2], "axis": [1, 2]}), ref)
    flat = x.reshape(-1)
    check(run1("roll", {"X": x}, {"shifts": [5], "axis": []}),
          np.array([flat[(t - 5) % 24] for t in range(24)], f32).reshape(x.shape))


def test_one_hot_v2() -> None:
    ids = np.array([[0, 3], [2, 1]], np.int64)
    got = run1("one_hot_v2", {"X": ids}, {"depth": 4, "dtype": 5})
    ref = np.zeros((2, 2, 4), f32)
    for i, j in itertools.product(range(2), range(2)):
        ref[i, j, ids[i, j]] = 1.0
    check(got, ref)
    with pytest.raises(KernelError, match="one_hot_v2"):
        run1("one_hot_v2", {"X": np.array([4])}, {"depth": 4})
    check(run1("one_hot_v2", {"X": np.array([4, 1])}, {"depth": 3, "allow_out_of_range": True}),
          np.array([[0, 0, 0], [0, 1, 0]], f32))


def test_size_meshgrid_unbind() -> None:
    x = rand(2, 3)
    got = run1("size", {"Input": x})
    assert got.shape == () and got.dtype == np.int64 and int(got) == 6
    a, b = np.arange(3, dtype=f32), np.arange(2, dtype=f32) + 10
    outs = run_op("meshgrid", {"X": [a, b]}, outs={"Out": 2})["Out"]
    check(outs[0], np.array([[0, 0], [1, 1], [2, 2]], f32))
    check(outs[1], np.array([[10, 11]] * 3, f32))
    parts = run_op("unbind", {"X": x}, {"axis": 1}, outs={"Out": 3})["Out"]
    for j in range(3):
        check(parts[j], x[:, j])


# --- norms -------------------------------------------------------------------------------------
def test_norm_and_p_norm() -> None:
    x = rand(2, 3, 4)
    out = run_op("norm", {"X": x}, {"axis": 1, "epsilon": 1e-10}, outs={"Out": 1, "Norm": 1})
    ref_n = np.empty((2, 1, 4))
    for i, k in itertools.product(range(2), range(4)):
        ref_n[i, 0, k] = math.sqrt(sum(float(x[i, j, k]) ** 2 for j in range(3)) + 1e-10)
    check(out["Norm"][0], ref_n)
    check(out["Out"][0], x / ref_n)
    for p in (1.0, 2.0, 3.0, np.inf, 0.0):
        got = run1("p_norm", {"X": x}, {"porder": p, "axis": -1, "keepdim": False})
        ref = np.array([[(max(abs(float(v)) for v in x[i, j]) if np.isinf(p) else
                          sum(1 for v in x[i, j] if v != 0) if p == 0 else
                          sum(abs(float(v)) ** p for v in x[i, j]) ** (1 / p)) for j in range(3)] for i in range(2)],
                       dtype=np.float64)
        check(got, ref, f"p_norm p={p}")
    vec = run1("p_norm", {"X": x}, {"porder": 2.0, "asvector": True, "keepdim": False})
    assert vec.shape == ()
    check(vec, np.sqrt(np.sum(x.astype(np.float64) ** 2)))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_group_norm(layout: str) -> None:
    x = rand(2, 6, 3, 2)
    scale, bias = rand(6, seed=1), rand(6, seed=2)
    xin = x.transpose(0, 2, 3, 1).copy() if layout == "NHWC" else x
    out = run_op("group_norm", {"X": xin, "Scale": scale, "Bias": bias},
                 {"groups": 3, "epsilon": 1e-5, "data_layout": layout}, outs={"Y": 1, "Mean": 1, "Variance": 1})
    ref = np.empty(x.shape)
    for n, g in itertools.product(range(2), range(3)):
        vals = [float(v) for v in x[n, 2 * g:2 * g + 2].reshape(-1)]
        m = sum(vals) / len(vals)
        var = sum((v - m) ** 2 for v in vals) / len(vals)
        for c in (2 * g, 2 * g + 1):
            ref[n, c] = (x[n, c] - m) / math.sqrt(var + 1e-5) * scale[c] + bias[c]
        check(out["Mean"][0][n, g:g + 1], np.array([m]))
    y = out["Y"][0].transpose(0, 3, 1, 2) if layout == "NHWC" else out["Y"][0]
    check(y, ref, f"group_norm {layout}")


def test_instance_norm() -> None:
    x = rand(2, 3, 4, 5)
    scale, bias = rand(3, seed=1), rand(3, seed=2)
    out = run_op("instance_norm", {"X": x, "Scale": scale, "Bias": bias}, {"epsilon": 1e-5},
                 outs={"Y": 1, "SavedMean": 1, "SavedVariance": 1})
    ref = np.empty(x.shape)
    for n, c in itertools.product(range(2), range(3)):
        v = x[n, c].astype(np.float64)
        m, var = v.sum() / v.size, ((v - v.sum() / v.size) ** 2).sum() / v.size
        ref[n, c] = (v - m) / math.sqrt(var + 1e-5) * scale[c] + bias[c]
        check(out["SavedVariance"][0][n * 3 + c:n * 3 + c + 1], np.array([1 / math.sqrt(var + 1e-5)]))
    check(out["Y"][0], ref)
    no_affine = run_op("instance_norm", {"X": x}, outs={"Y": 1})["Y"][0]
    check(no_affine, (ref - bias[None, :, None, None]) / scale[None, :, None, None], "instance_norm no affine")


# --- padding and rearrangements -----------------------------------------------------------------
def _src_index(i: int, n: int, before: int, mode: str) -> int | None:
    """The input index an output index reads along one padded dim (None: the constant)."""
    j = i - before
    if 0 <= j < n:
        return j
    if mode == "constant":
        return None
    if mode == "replicate":
        return min(max(j, 0), n - 1)
    if mode == "circular":
        return j % n
    return -j if j < 0 else 2 * (n - 1) - j  # reflect


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pad3d(mode: str, layout: str) -> None:
    x = rand(1, 2, 3, 4, 3) if layout == "NCDHW" else rand(1, 3, 4, 3, 2)
    p = [1, 2, 2, 0, 0, 1]  # left, right, top, bottom, front, back
    got = run1("pad3d", {"X": x}, {"paddings": p, "mode": mode, "value": 0.5, "data_format": layout})
    sp = (2, 3, 4) if layout == "NCDHW" else (1, 2, 3)
    befores = {sp[0]: p[4], sp[1]: p[2], sp[2]: p[0]}
    ref = np.empty(got.shape, f32)
    for idx in itertools.product(*[range(d) for d in got.shape]):
        src = [_src_index(i, x.shape[a], befores[a], mode) if a in befores else i for a, i in enumerate(idx)]
        ref[idx] = 0.5 if None in src else x[tuple(src)]
    check(got, ref, f"pad3d {mode} {layout}")
    tensor_pads = run1("pad3d", {"X": x, "Paddings": np.array(p, np.int32)},
                       {"mode": mode, "value": 0.5, "data_format": layout})
    check(tensor_pads, ref, "pad3d Paddings tensor")


def test_pad() -> None:
    x = rand(2, 3)
    got = run1("pad", {"X": x}, {"paddings": [1, 0, 0, 2], "pad_value": -1.0})
    ref = np.full((3, 5), -1.0, f32)
    ref[1:, :3] = x
    check(got, ref)
    with pytest.raises(InputError, match="paddings"):
        infer("pad", {"X": x}, {"paddings": [1, 1]})


def test_pixel_and_channel_shuffle() -> None:
    x = rand(1, 8, 2, 3)
    got = run1("pixel_shuffle", {"X": x}, {"upscale_factor": 2})
    ref = np.empty((1, 2, 4, 6), f32)
    for c, h, w, i, j in itertools.product(range(2), range(2), range(3), range(2), range(2)):
        ref[0, c, h * 2 + i, w * 2 + j] = x[0, c * 4 + i * 2 + j, h, w]
    check(got, ref, "pixel_shuffle")
    nhwc = run1("pixel_shuffle", {"X": x.transpose(0, 2, 3, 1).copy()}, {"upscale_factor": 2, "data_format": "NHWC"})
    check(nhwc, ref.transpose(0, 2, 3, 1), "pixel_shuffle NHWC")
    got = run1("channel_shuffle", {"X": x}, {"groups": 2})
    check(got, np.stack([x[0, (k % 2) * 4 + k // 2] for k in range(8)])[None], "channel_shuffle")


def test_maxout_and_unfold() -> None:
    x = rand(2, 6, 3, 4)
    got = run1("maxout", {"X": x}, {"groups": 3, "axis": 1})
    ref = np.stack([np.maximum(np.maximum(x[:, 3 * c], x[:, 3 * c + 1]), x[:, 3 * c + 2]) for c in range(2)], 1)
    check(got, ref, "maxout")
    attrs = {"kernel_sizes": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 1], "dilations": [2, 1]}
    y = run_op("unfold", {"X": x}, attrs, outs={"Y": 1})["Y"][0]
    oh = (3 + 1 + 0 - (2 * 1 + 1)) // 1 + 1
    ow = (4 + 0 + 1 - 3) // 2 + 1
    ref = np.zeros((2, 6 * 6, oh * ow), f32)
    for n, c, ki, kj, oi, oj in itertools.product(range(2), range(6), range(2), range(3), range(oh), range(ow)):
        h, w = oi - 1 + ki * 2, oj * 2 + kj
        if 0 <= h < 3 and 0 <= w < 4:
            ref[n, (c * 2 + ki) * 3 + kj, oi * ow + oj] = x[n, c, h, w]
    check(y, ref, "unfold")


# --- against Paddle's executor when paddle is installed ------------------------------------------
@pytest.mark.parametrize("op,ins,attrs,outs", [
    ("group_norm", {"X": rand(2, 4, 3, 3), "Scale": rand(4, seed=1), "Bias": rand(4, seed=2)},
     {"groups": 2, "epsilon": 1e-5}, {"Y": 1, "Mean": 1, "Variance": 1}),
    ("pad3d", {"X": rand(1, 2, 2, 3, 4)}, {"paddings": [2, 1, 0, 1, 1, 1], "mode": "reflect"}, {"Out": 1}),
    ("cumsum", {"X": rand(3, 4)}, {"axis": 0, "exclusive": True, "reverse": True}, {"Out": 1}),
    ("unfold", {"X": rand(1, 2, 5, 4)}, {"kernel_sizes": [3, 2], "strides": [2, 1], "paddings": [1, 0, 1, 1],
                                         "dilations": [1, 2]}, {"Y": 1}),
])
def test_against_paddle(op: str, ins: dict, attrs: dict, outs: dict) -> None:
    ref = paddle_legacy(op, ins, attrs, outs)
    got = run_op(op, ins, attrs, outs=outs)
    for slot in ref:
        check(got[slot][0], ref[slot][0], f"{op}.{slot} vs paddle")


# --- gather / scatter / NMS ----------------------------------------------------------------------
def test_gather_nd_take_along_repeat() -> None:
    x = rand(3, 4, 2)
    idx = np.array([[2, 1], [0, 3], [2, 1]], np.int64)
    check(run1("gather_nd", {"X": x, "Index": idx}), np.stack([x[2, 1], x[0, 3], x[2, 1]]))
    with pytest.raises(KernelError, match="gather_nd"):
        run1("gather_nd", {"X": x, "Index": np.array([[3, 0]])})
    ti = np.array([[[1, 0]], [[0, 0]], [[1, 1]]], np.int64)  # [3, 1, 2]
    got = run_op("take_along_axis", {"Input": x, "Index": ti}, {"Axis": 1}, outs={"Result": 1})["Result"][0]
    ref = np.array([[[x[i, ti[i, 0, k], k] for k in range(2)]] for i in range(3)], f32)
    check(got, ref)
    rep = run1("repeat_interleave", {"X": x}, {"Repeats": 2, "dim": 1})
    check(rep, np.stack([x[:, j // 2] for j in range(8)], axis=1))
    rep_t = run1("repeat_interleave", {"X": x, "RepeatsTensor": np.array([1, 0, 2, 1])}, {"dim": 1})
    check(rep_t, x[:, [0, 2, 2, 3]])


@pytest.mark.parametrize("overwrite", [True, False])
def test_scatter(overwrite: bool) -> None:
    x = rand(4, 3)
    ids = np.array([2, 0, 2], np.int64)
    up = rand(3, 3, seed=5)
    got = run1("scatter", {"X": x, "Ids": ids, "Updates": up}, {"overwrite": overwrite})
    ref = x.astype(np.float64).copy()
    if overwrite:
        ref[0], ref[2] = up[1], up[2]
    else:
        ref[0], ref[2] = up[1], up[0].astype(np.float64) + up[2]
    check(got, ref)


def test_pixel_unshuffle_inverts_pixel_shuffle() -> None:
    x = rand(2, 3, 4, 6)
    down = run1("pixel_unshuffle", {"X": x}, {"downscale_factor": 2})
    ref = np.empty((2, 12, 2, 3), f32)
    for c, h, w, i, j in itertools.product(range(3), range(2), range(3), range(2), range(2)):
        ref[:, c * 4 + i * 2 + j, h, w] = x[:, c, h * 2 + i, w * 2 + j]
    check(down, ref)
    check(run1("pixel_shuffle", {"X": down}, {"upscale_factor": 2}), x)
