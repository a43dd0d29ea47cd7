"""Host kernels of pdlite.operators.extra against independent references written here.

References are literal loops (or plain NumPy written differently from the kernel) of Paddle's
CPU semantics; the conformance zoo (tests/conformance) checks the same ops against Paddle
Inference's outputs. A few cases also run Paddle's legacy executor when paddle is installed.
Tolerance: float max|got - ref| <= 1e-5 * max(1, max|ref|); integer/bool outputs exact.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdlite.errors import InputError, KernelError
from pdlite.operators.registry import OPS, ShapeContext
from tests.kernels._util import make_op, paddle_legacy, run1, run_op

f32 = np.float32


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(f32)


def infer(op_type: str, ins: dict, attrs: dict, outs: dict | None = None) -> dict:
    """The op's shape inference alone (where a bad attribute is refused before any kernel runs)."""
    values = {k: (v if isinstance(v, list) else [v]) for k, v in ins.items()}
    return OPS[op_type].infer_shape(ShapeContext(make_op(op_type, ins, attrs, outs), values))


def check(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = 1e-5) -> None:
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    if ref.dtype.kind in "biu":
        assert got.dtype == ref.dtype and np.array_equal(got, ref), f"{what}: {got} != {ref}"
        return
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    bound = tol * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    assert err <= bound, f"{what}: max|got-ref| = {err:.3g} > {bound:.3g}"


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


# --- rnn ---------------------------------------------------------------------------------------
def _sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def _ref_cell(mode: str, x: np.ndarray, h: np.ndarray, c: np.ndarray, w: list[np.ndarray]):
    """One step for one sample, gate by gate in float64."""
    w_ih, w_hh, b_ih, b_hh = (a.astype(np.float64) for a in w)
    gx, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
    hid = len(h)
    if mode == "LSTM":
        g = gx + gh
        i = np.array([_sig(v) for v in g[:hid]])
        f = np.array([_sig(v) for v in g[hid:2 * hid]])
        cc = np.tanh(g[2 * hid:3 * hid])
        o = np.array([_sig(v) for v in g[3 * hid:]])
        c = f * c + i * cc
        return o * np.tanh(c), c
    if mode == "GRU":
        r = np.array([_sig(v) for v in gx[:hid] + gh[:hid]])
        z = np.array([_sig(v) for v in gx[hid:2 * hid] + gh[hid:2 * hid]])
        n = np.tanh(gx[2 * hid:] + r * gh[2 * hid:])
        return (1 - z) * n + z * h, c
    return np.tanh(gx + gh), c


def _ref_rnn(mode: str, x: np.ndarray, weights: list[np.ndarray], layers: int, dirs: int, hidden: int,
             lens: list[int]) -> np.ndarray:
    t_len, batch = x.shape[:2]
    nb = 2 * layers * dirs
    inp = x.astype(np.float64)
    for layer in range(layers):
        out = np.zeros((t_len, batch, dirs * hidden))
        for d in range(dirs):
            k = layer * dirs + d
            w = [weights[2 * k], weights[2 * k + 1], weights[nb + 2 * k], weights[nb + 2 * k + 1]]
            for b in range(batch):
                h, c = np.zeros(hidden), np.zeros(hidden)
                steps = range(lens[b] - 1, -1, -1) if d else range(lens[b])
                for t in steps:
                    h, c = _ref_cell(mode, inp[t, b], h, c, w)
                    out[t, b, d * hidden:(d + 1) * hidden] = h
        inp = out
    return inp


@pytest.mark.parametrize("mode,layers,dirs", [("LSTM", 2, 2), ("GRU", 1, 2), ("RNN_TANH", 2, 1), ("LSTM", 1, 1)])
@pytest.mark.parametrize("with_lens", [False, True])
def test_rnn(mode: str, layers: int, dirs: int, with_lens: bool) -> None:
    gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1}[mode]
    t_len, batch, isz, hid = 4, 3, 5, 3
    rng = np.random.default_rng(7)
    ws, bs = [], []
    for layer in range(layers):
        for _ in range(dirs):
            in_sz = isz if layer == 0 else dirs * hid
            ws += [rng.normal(0, 0.5, (gates * hid, in_sz)).astype(f32), rng.normal(0, 0.5, (gates * hid, hid)).astype(f32)]
            bs += [rng.normal(0, 0.5, gates * hid).astype(f32), rng.normal(0, 0.5, gates * hid).astype(f32)]
    x = rand(t_len, batch, isz, seed=3)
    lens = [4, 2, 3] if with_lens else [t_len] * batch
    ins = {"Input": x, "WeightList": ws + bs}
    if with_lens:
        ins["SequenceLength"] = np.array(lens, np.int32)
    n_state = 2 if mode == "LSTM" else 1
    out = run_op("rnn", ins, {"mode": mode, "num_layers": layers, "is_bidirec": dirs == 2, "hidden_size": hid,
                              "input_size": isz}, outs={"Out": 1, "State": n_state})
    check(out["Out"][0], _ref_rnn(mode, x, ws + bs, layers, dirs, hid, lens), f"rnn {mode}")
    assert [s.shape for s in out["State"]] == [(layers * dirs, batch, hid)] * n_state
    last = out["Out"][0][np.array(lens) - 1, np.arange(batch)]
    check(out["State"][0][(layers - 1) * dirs], last[:, :hid], "rnn final state (forward, last layer)")


# --- detection ---------------------------------------------------------------------------------
def test_prior_box_literal_loop() -> None:
    feat, image = np.zeros((1, 2, 2, 3), f32), np.zeros((1, 3, 20, 30), f32)
    attrs = {"min_sizes": [4.0, 8.0], "max_sizes": [6.0, 12.0], "aspect_ratios": [2.0], "flip": True,
             "clip": True, "offset": 0.5, "variances": [0.1, 0.1, 0.2, 0.2]}
    for order in (False, True):
        out = run_op("prior_box", {"Input": feat, "Image": image}, {**attrs, "min_max_aspect_ratios_order": order},
                     outs={"Boxes": 1, "Variances": 1})
        ars = [1.0, 2.0, 0.5]
        ref = []
        for h, w in itertools.product(range(2), range(3)):
            cx, cy = (w + 0.5) * 10.0, (h + 0.5) * 10.0
            cell = []
            for s, ms in enumerate(attrs["min_sizes"]):
                rs = [(ms * math.sqrt(r) / 2, ms / math.sqrt(r) / 2) for r in ars]
                big = [(math.sqrt(ms * attrs["max_sizes"][s]) / 2,) * 2]
                cell += [rs[0], *big, *rs[1:]] if order else [*rs, *big]
            ref += [[min(max(v, 0.0), 1.0) for v in ((cx - bw) / 30, (cy - bh) / 20, (cx + bw) / 30, (cy + bh) / 20)]
                    for bw, bh in cell]
        check(out["Boxes"][0], np.array(ref).reshape(2, 3, 8, 4), f"prior_box order={order}")
        check(out["Variances"][0], np.broadcast_to(np.array([0.1, 0.1, 0.2, 0.2]), (2, 3, 8, 4)))


def test_box_coder_decode_and_encode() -> None:
    rng = np.random.default_rng(1)
    prior = np.sort(rng.uniform(0, 1, (3, 2, 2)), axis=1).transpose(0, 2, 1).reshape(3, 4)[:, [0, 2, 1, 3]]
    prior = prior.astype(f32)
    var = [0.1, 0.1, 0.2, 0.2]
    deltas = rand(2, 3, 4)
    got = run_op("box_coder", {"PriorBox": prior, "TargetBox": deltas},
                 {"code_type": "decode_center_size", "variance": var}, outs={"OutputBox": 1})["OutputBox"][0]
    ref = np.empty((2, 3, 4))
    for i, j in itertools.product(range(2), range(3)):
        x0, y0, x1, y1 = (float(v) for v in prior[j])
        pw, ph = x1 - x0, y1 - y0
        cx = var[0] * deltas[i, j, 0] * pw + x0 + pw / 2
        cy = var[1] * deltas[i, j, 1] * ph + y0 + ph / 2
        w, h = math.exp(var[2] * deltas[i, j, 2]) * pw, math.exp(var[3] * deltas[i, j, 3]) * ph
        ref[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    check(got, ref, "box_coder decode")
    gt = np.array([[0.1, 0.2, 0.6, 0.9], [0.3, 0.1, 0.5, 0.4]], f32)
    pvar = np.abs(rand(3, 4)) + 0.1
    enc = run_op("box_coder", {"PriorBox": prior, "TargetBox": gt, "PriorBoxVar": pvar},
                 {"code_type": "encode_center_size", "box_normalized": False}, outs={"OutputBox": 1})["OutputBox"][0]
    ref = np.empty((2, 3, 4))
    for i, j in itertools.product(range(2), range(3)):
        pw, ph = prior[j, 2] - prior[j, 0] + 1, prior[j, 3] - prior[j, 1] + 1
        pcx, pcy = prior[j, 0] + pw / 2, prior[j, 1] + ph / 2
        tw, th = gt[i, 2] - gt[i, 0] + 1, gt[i, 3] - gt[i, 1] + 1
        tcx, tcy = (gt[i, 0] + gt[i, 2]) / 2, (gt[i, 1] + gt[i, 3]) / 2
        ref[i, j] = np.array([(tcx - pcx) / pw, (tcy - pcy) / ph, math.log(tw / pw), math.log(th / ph)]) / pvar[j]
    check(enc, ref, "box_coder encode")


@pytest.mark.parametrize("iou_aware", [False, True])
def test_yolo_box_literal_loop(iou_aware: bool) -> None:
    anchors, cls, ds, thresh = [10, 13, 16, 30], 2, 8, 0.4
    na, gh, gw = 2, 2, 3
    x = rand(1, na * (5 + cls) + (na if iou_aware else 0), gh, gw)
    img = np.array([[40, 50]], np.int32)
    attrs = {"anchors": anchors, "class_num": cls, "conf_thresh": thresh, "downsample_ratio": ds,
             "clip_bbox": True, "scale_x_y": 1.2, "iou_aware": iou_aware, "iou_aware_factor": 0.3}
    out = run_op("yolo_box", {"X": x, "ImgSize": img}, attrs, outs={"Boxes": 1, "Scores": 1})
    boxes, scores = np.zeros((1, na * gh * gw, 4)), np.zeros((1, na * gh * gw, cls))
    off = na if iou_aware else 0
    bias = -0.5 * (1.2 - 1)
    for a, k, j in itertools.product(range(na), range(gh), range(gw)):
        ch = off + a * (5 + cls)
        conf = _sig(x[0, ch + 4, k, j])
        if iou_aware:
            conf = conf ** 0.7 * _sig(x[0, a, k, j]) ** 0.3
        if conf < thresh:
            continue
        cx = (j + _sig(x[0, ch, k, j]) * 1.2 + bias) * 50 / gw
        cy = (k + _sig(x[0, ch + 1, k, j]) * 1.2 + bias) * 40 / gh
        w = math.exp(x[0, ch + 2, k, j]) * anchors[2 * a] * 50 / (ds * gw)
        h = math.exp(x[0, ch + 3, k, j]) * anchors[2 * a + 1] * 40 / (ds * gh)
        i = (a * gh + k) * gw + j
        boxes[0, i] = [max(cx - w / 2, 0), max(cy - h / 2, 0), min(cx + w / 2, 49), min(cy + h / 2, 39)]
        scores[0, i] = [conf * _sig(x[0, ch + 5 + c, k, j]) for c in range(cls)]
    assert (scores == 0).any() and (scores != 0).any(), "the case should keep some boxes and drop others"
    check(out["Boxes"][0], boxes, "yolo_box boxes")
    check(out["Scores"][0], scores, "yolo_box scores")


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


def test_multiclass_nms3_hand_case() -> None:
    # class 1: boxes 0 and 1 overlap (IoU 0.81 > 0.5) -> 1 is suppressed; box 2 is apart.
    # class 2: box 3 alone over the threshold. keep_top_k = 3 keeps the three best overall.
    boxes = np.array([[[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 5, 5]]], f32)
    scores = np.array([[[0.9, 0.8, 0.1, 0.2],    # background (label 0): ignored
                        [0.9, 0.85, 0.3, 0.01],
                        [0.02, 0.1, 0.05, 0.7]]], f32)
    attrs = {"background_label": 0, "score_threshold": 0.05, "nms_threshold": 0.5, "keep_top_k": 3,
             "nms_top_k": -1, "normalized": False}
    out = run_op("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, attrs,
                 outs={"Out": 1, "Index": 1, "NmsRoisNum": 1}, check_shapes=False)
    ref = np.array([[1, 0.9, 0, 0, 10, 10], [1, 0.3, 20, 20, 30, 30], [2, 0.7, 0, 0, 5, 5]], f32)
    check(out["Out"][0], ref)
    check(out["Index"][0], np.array([[0], [2], [3]], np.int32))
    check(out["NmsRoisNum"][0], np.array([3], np.int32))
    # a looser threshold keeps box 1 in class 1 too; no keep_top_k: every kept box, grouped by label
    out = run_op("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, {**attrs, "nms_threshold": 0.9,
                                                                          "keep_top_k": -1},
                 outs={"Out": 1, "Index": 1, "NmsRoisNum": 1}, check_shapes=False)
    assert out["Out"][0][:, 0].tolist() == [1, 1, 1, 2, 2]
    check(out["Index"][0].reshape(-1), np.array([0, 1, 2, 3, 1], np.int32))


# --- roi_align / deformable_conv (literal loops of Paddle's CPU kernels) ---------------------------
def _roi_bilinear(img: np.ndarray, y: float, x: float) -> float:
    h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    yh, xh = (yl, xl)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    return ((1 - ly) * (1 - lx) * img[yl, xl] + (1 - ly) * lx * img[yl, xh] + ly * (1 - lx) * img[yh, xl]
            + ly * lx * img[yh, xh])


@pytest.mark.parametrize("aligned,ratio", [(False, -1), (True, 2)])
def test_roi_align(aligned: bool, ratio: int) -> None:
    x = rand(2, 2, 5, 6)
    rois = np.array([[0.5, 1.0, 4.0, 3.5], [1.0, 0.0, 9.0, 7.5], [2.0, 2.0, 2.5, 2.2]], f32)
    attrs = {"spatial_scale": 0.7, "pooled_height": 2, "pooled_width": 3, "sampling_ratio": ratio, "aligned": aligned}
    got = run1("roi_align", {"X": x, "ROIs": rois, "RoisNum": np.array([1, 2], np.int32)}, attrs)
    ref = np.zeros((3, 2, 2, 3))
    off = 0.5 if aligned else 0.0
    for r, b in enumerate([0, 1, 1]):
        x0, y0, x1, y1 = (float(v) * 0.7 - off for v in rois[r])
        rw, rh = (x1 - x0, y1 - y0) if aligned else (max(x1 - x0, 1.0), max(y1 - y0, 1.0))
        gh = ratio if ratio > 0 else math.ceil(rh / 2)
        gw = ratio if ratio > 0 else math.ceil(rw / 3)
        for c, i, j in itertools.product(range(2), range(2), range(3)):
            acc = sum(_roi_bilinear(x[b, c], y0 + i * rh / 2 + (iy + 0.5) * rh / 2 / gh,
                                    x0 + j * rw / 3 + (ix + 0.5) * rw / 3 / gw)
                      for iy in range(gh) for ix in range(gw))
            ref[r, c, i, j] = acc / max(gh * gw, 1)
    check(got, ref, "roi_align")


def _dcn_sample(img: np.ndarray, h: float, w: float) -> float:
    hh, ww = img.shape
    if not (h > -1 and w > -1 and h < hh and w < ww):
        return 0.0
    hl, wl = math.floor(h), math.floor(w)
    lh, lw = h - hl, w - wl
    val = 0.0
    for yy, xx, wt in ((hl, wl, (1 - lh) * (1 - lw)), (hl, wl + 1, (1 - lh) * lw), (hl + 1, wl, lh * (1 - lw)),
                       (hl + 1, wl + 1, lh * lw)):
        if 0 <= yy < hh and 0 <= xx < ww:
            val += wt * img[yy, xx]
    return val


@pytest.mark.parametrize("with_mask,groups,dgroups", [(True, 1, 1), (False, 2, 2)])
def test_deformable_conv(with_mask: bool, groups: int, dgroups: int) -> None:
    x = rand(1, 4, 4, 5)
    wt = rand(2 * groups, 4 // groups, 2, 2, seed=1)
    ho, wo = (4 + 2 - 3) // 2 + 1, (5 + 2 - 3) // 2 + 1  # stride 2, pad 1, dilation 2
    off = rand(1, 2 * dgroups * 4, ho, wo, seed=2)
    ins = {"Input": x, "Offset": off, "Filter": wt}
    mask = np.abs(rand(1, dgroups * 4, ho, wo, seed=3))
    if with_mask:
        ins["Mask"] = mask
    attrs = {"strides": [2, 2], "paddings": [1, 1], "dilations": [2, 2], "groups": groups,
             "deformable_groups": dgroups}
    got = run_op("deformable_conv" if with_mask else "deformable_conv_v1", ins, attrs, outs={"Output": 1})["Output"][0]
    ref = np.zeros((1, 2 * groups, ho, wo))
    cg, og, dcg = 4 // groups, 2, 4 // dgroups
    for m, oy, ox, ci, i, j in itertools.product(range(2 * groups), range(ho), range(wo), range(cg), range(2),
                                                  range(2)):
        c = (m // og) * cg + ci
        d, k = c // dcg, i * 2 + j
        h = oy * 2 - 1 + i * 2 + off[0, d * 8 + 2 * k, oy, ox]
        w = ox * 2 - 1 + j * 2 + off[0, d * 8 + 2 * k + 1, oy, ox]
        v = _dcn_sample(x[0, c], float(h), float(w)) * (mask[0, d * 4 + k, oy, ox] if with_mask else 1.0)
        ref[0, m, oy, ox] += wt[m, ci, i, j] * v
    check(got, ref, "deformable_conv")
