"""Host rnn kernel (LSTM / GRU / RNN_TANH; layers, directions, SequenceLength) against a per-sample,
per-step float64 loop of Paddle's cell formulas. Tolerance: max|got - ref| <= 1e-5 * max(1, max|ref|).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels._checks import check, f32, rand, sig
from tests.kernels._util import run_op


def _ref_cell(mode: str, x: np.ndarray, h: np.ndarray, c: np.ndarray, w: list[np.ndarray]):
    """One step for one sample, gate by gate in float64."""
    w_ih, w_hh, b_ih, b_hh = (a.astype(np.float64) for a in w)
    gx, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
    hid = len(h)
    if mode == "LSTM":
        g = gx + gh
        i = np.array([sig(v) for v in g[:hid]])
        f = np.array([sig(v) for v in g[hid:2 * hid]])
        cc = np.tanh(g[2 * hid:3 * hid])
        o = np.array([sig(v) for v in g[3 * hid:]])
        c = f * c + i * cc
        return o * np.tanh(c), c
    if mode == "GRU":
        r = np.array([sig(v) for v in gx[:hid] + gh[:hid]])
        z = np.array([sig(v) for v in gx[hid:2 * hid] + gh[hid:2 * hid]])
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
