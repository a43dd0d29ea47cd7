"""Host kernel of the rnn op: multi-layer, (bi)directional LSTM / GRU / simple RNN (NumPy).

Gate order and formulas follow Paddle's CPU rnn kernel (cuDNN layout): LSTM gates i, f, g(cell), o;
GRU gates r, z, c with the reset gate applied to the hidden projection (h @ W_hc + b_hc).
"""
from __future__ import annotations

import numpy as np

from pdlite.kernels.host.extra import ANY, Ins, Outs, present, sigmoid
from pdlite.kernels.registry import Kernel, register_kernel


def _cell(mode: str, gx: np.ndarray, h: np.ndarray, c: np.ndarray | None, w_hh: np.ndarray, b_hh: np.ndarray):
    """One step: gx = x @ W_ih^T + b_ih precomputed; returns (h, c)."""
    gh = h @ w_hh.T + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    if mode == "GRU":
        xr, xz, xc = np.split(gx, 3, axis=-1)
        hr, hz, hc = np.split(gh, 3, axis=-1)
        r, z = sigmoid(xr + hr), sigmoid(xz + hz)
        cand = np.tanh(xc + r * hc)
        return (h - cand) * z + cand, c
    pre = gx + gh
    return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), c


@register_kernel("rnn", inputs={"SequenceLength": ANY})
class Rnn(Kernel):
    """Multi-layer (bi)directional LSTM / GRU / simple RNN over time-major Input [T, B, I].

    WeightList: every (layer, direction)'s W_ih, W_hh, then every one's b_ih, b_hh (Paddle's cuDNN
    order). Steps past a sample's SequenceLength give zeros and keep its state.
    """

    def run(self, ins: Ins) -> Outs:
        x = ins["Input"][0]
        mode = self.attrs["mode"]
        dirs = 2 if self.attrs["is_bidirec"] else 1
        layers, hidden = int(self.attrs["num_layers"]), int(self.attrs["hidden_size"])
        ws = ins["WeightList"]
        nb = 2 * layers * dirs
        t_len, batch = x.shape[:2]
        pre = ins.get("PreState") or []
        h0 = pre[0] if pre else np.zeros((layers * dirs, batch, hidden), x.dtype)
        c0 = pre[1] if mode == "LSTM" and len(pre) > 1 else np.zeros_like(h0)
        lens = ins["SequenceLength"][0].reshape(-1) if ins.get("SequenceLength") else np.full(batch, t_len)
        hs, cs = np.empty_like(h0), np.empty_like(c0)
        inp = x.astype(np.float32)
        for layer in range(layers):
            outs = []
            for dr in range(dirs):
                k = layer * dirs + dr
                w_ih, w_hh, b_ih, b_hh = ws[2 * k], ws[2 * k + 1], ws[nb + 2 * k], ws[nb + 2 * k + 1]
                gx = inp @ w_ih.T + b_ih
                h, c = h0[k], c0[k]
                out = np.zeros((t_len, batch, hidden), x.dtype)
                for step in range(t_len):
                    # the reverse direction reads each sample from its own last valid step
                    t = (lens - 1 - step) if dr else np.full(batch, step)
                    valid = (t >= 0) & (step < lens)
                    tt = np.clip(t, 0, t_len - 1)
                    nh, nc = _cell(mode, gx[tt, np.arange(batch)], h, c, w_hh, b_hh)
                    h = np.where(valid[:, None], nh, h)
                    c = np.where(valid[:, None], nc, c)
                    out[tt[valid], np.arange(batch)[valid]] = nh[valid]
                outs.append(out)
                hs[k], cs[k] = h, c
            inp = np.concatenate(outs, axis=-1) if dirs == 2 else outs[0]
        state = [hs, cs] if mode == "LSTM" else [hs]
        n_state = len(self.op.outputs.get("State") or [])
        return present(self.op, {"Out": [inp.astype(x.dtype, copy=False)], "State": state[:n_state]})
