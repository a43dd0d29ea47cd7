"""Host kernels of the ops in pdlite.operators.extra (plain NumPy, Paddle's CPU semantics).

Compare/logical ops return bool; index ops return int64 indices; the float kernels compute
in the input dtype except where Paddle accumulates in double (noted on the kernel).
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST
from pdlite.errors import KernelError
from pdlite.kernels.host.elementwise import broadcast_operands
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.operators.extra import (
    COMPARE_OPS,
    LOGICAL_BINARY_OPS,
    expand_aspect_ratios,
    unfold_geometry,
)
from pdlite.operators.tensor import ints

ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
Ins = dict[str, list[np.ndarray]]
Outs = dict[str, list[np.ndarray]]


def generic(op_type: str, **inputs: TensorType):
    """A host kernel for any dtype and layout; `inputs` declares the non-main slots' types."""
    return register_kernel(op_type, precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs=inputs or None)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _present(op: Any, outs: Outs) -> Outs:
    """The output slots the op has (the optional statistics outputs may be absent)."""
    return {k: v for k, v in outs.items() if op.outputs.get(k)}


# --- compare and logical ----------------------------------------------------------------------
_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less_than": np.less, "less_equal": np.less_equal,
            "greater_than": np.greater, "greater_equal": np.greater_equal,
            "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}


class Compare(Kernel):
    """Out (bool) = X <op> Y with Paddle's `axis` broadcasting."""

    def run(self, ins: Ins) -> Outs:
        x, y = broadcast_operands(ins["X"][0], ins["Y"][0], int(self.attrs.get("axis", -1)))
        return {"Out": [np.asarray(_COMPARE[self.op.type](x, y))]}


for _t in (*COMPARE_OPS, *LOGICAL_BINARY_OPS):
    generic(_t, Y=ANY)(Compare)


@generic("logical_not")
class LogicalNot(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.logical_not(ins["X"][0])]}


# --- creation and index ops -------------------------------------------------------------------
@generic("linspace", Start=ANY, Stop=ANY, Num=ANY)
class Linspace(Kernel):
    """Paddle's linspace: the first half counts up from Start, the second half down from Stop."""

    def run(self, ins: Ins) -> Outs:
        start, stop = float(ins["Start"][0].reshape(-1)[0]), float(ins["Stop"][0].reshape(-1)[0])
        n = ints(ins["Num"][0])[0]
        dt = numpy_dtype(int(self.attrs["dtype"]), "linspace dtype")
        if n == 1:
            return {"Out": [np.array([start], dt)]}
        step = (stop - start) / (n - 1)
        i = np.arange(n, dtype=np.float64)
        out = np.where(i < n // 2, start + step * i, stop - step * (n - 1 - i))
        return {"Out": [out.astype(dt)]}


@generic("expand_as_v2", Y=ANY)
class ExpandAs(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        target = [int(v) for v in self.attrs.get("target_shape") or []]
        if ins.get("Y") and (not target or -1 in target):
            target = list(ins["Y"][0].shape)
        lead = len(target) - x.ndim
        shape = [d if d > 0 or i < lead else x.shape[i - lead] for i, d in enumerate(target)]
        return {"Out": [np.ascontiguousarray(np.broadcast_to(x, shape))]}


@generic("index_select", Index=ANY)
class IndexSelect(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, idx = ins["X"][0], ins["Index"][0].reshape(-1)
        dim = _axis(int(self.attrs["dim"]), x.ndim)
        if idx.size and (idx.min() < -x.shape[dim] or idx.max() >= x.shape[dim]):
            raise KernelError(f"index_select: Index values must be in [0, {x.shape[dim]}), got "
                              f"[{idx.min()}, {idx.max()}] for X {list(x.shape)}")
        return {"Out": [np.take(x, idx, axis=dim)]}


@register_kernel("argsort", precision=ANY_PRECISION, layout=ANY_LAYOUT,
                 outputs={"Out": ANY, "Indices": ANY})
class Argsort(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axis = _axis(int(self.attrs["axis"]), x.ndim)
        key = -x if self.attrs["descending"] and x.dtype.kind != "b" else x
        idx = np.argsort(key, axis=axis, kind="stable")
        if self.attrs["descending"] and x.dtype.kind == "b":
            idx = np.flip(idx, axis)
        return {"Out": [np.take_along_axis(x, idx, axis)], "Indices": [idx.astype(np.int64)]}


@register_kernel("top_k_v2", precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs={"K": ANY},
                 outputs={"Out": ANY, "Indices": ANY})
class TopK(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        k = ints(ins["K"][0])[0] if ins.get("K") else int(self.attrs["k"])
        if x.ndim == 0:
            return {"Out": [x.copy()], "Indices": [np.zeros((), np.int64)]}
        axis = _axis(int(self.attrs["axis"]), x.ndim)
        key = -x if self.attrs["largest"] else x
        idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
        return {"Out": [np.take_along_axis(x, idx, axis)], "Indices": [idx.astype(np.int64)]}


@generic("cumsum")
class Cumsum(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        if self.attrs.get("flatten") or x.ndim == 0:
            x, axis = x.reshape(-1), 0
        else:
            axis = _axis(int(self.attrs["axis"]), x.ndim)
        if self.attrs.get("reverse"):
            x = np.flip(x, axis)
        out = np.cumsum(x, axis=axis, dtype=x.dtype)
        if self.attrs.get("exclusive"):
            out = np.concatenate([np.zeros_like(np.take(out, [0], axis)), np.take(out, np.arange(out.shape[axis] - 1),
                                                                                  axis)], axis)
        if self.attrs.get("reverse"):
            out = np.flip(out, axis)
        return {"Out": [np.ascontiguousarray(out)]}


@generic("flip")
class Flip(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axes = [_axis(int(a), x.ndim) for a in self.attrs["axis"]]
        return {"Out": [np.ascontiguousarray(np.flip(x, axes))]}


@generic("roll", ShiftsTensor=ANY)
class Roll(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        shifts = ints(ins["ShiftsTensor"][0]) if ins.get("ShiftsTensor") else [int(s) for s in self.attrs["shifts"]]
        axes = [int(a) for a in self.attrs["axis"]]
        if not axes:
            return {"Out": [np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)]}
        return {"Out": [np.roll(x, shifts, [_axis(a, x.ndim) for a in axes])]}


@register_kernel("one_hot_v2", precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs={"X": ANY, "depth_tensor": ANY},
                 outputs={"Out": ANY})
class OneHot(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        depth = ints(ins["depth_tensor"][0])[0] if ins.get("depth_tensor") else int(self.attrs["depth"])
        bad = (x < 0) | (x >= depth)
        if bad.any() and not self.attrs.get("allow_out_of_range"):
            raise KernelError(f"one_hot_v2: X values must be in [0, {depth}), got [{x.min()}, {x.max()}]")
        dt = numpy_dtype(int(self.attrs["dtype"]), "one_hot_v2 dtype")
        out = (x[..., None] == np.arange(depth)).astype(dt)
        return {"Out": [out]}


@register_kernel("size", precision=ANY_PRECISION, layout=ANY_LAYOUT, inputs={"Input": ANY}, outputs={"Out": ANY})
class Size(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.array(ins["Input"][0].size, np.int64)]}


@generic("meshgrid")
class Meshgrid(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.ascontiguousarray(g) for g in np.meshgrid(*[v.reshape(-1) for v in ins["X"]],
                                                                     indexing="ij")]}


@generic("unbind")
class Unbind(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = _axis(int(self.attrs["axis"]), x.ndim)
        return {"Out": [np.ascontiguousarray(np.take(x, i, axis=a)) for i in range(x.shape[a])]}


# --- norms ------------------------------------------------------------------------------------
@register_kernel("norm")
class Norm(Kernel):
    """Out = X / sqrt(sum(X^2, axis) + epsilon), Norm = that denominator."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axis = _axis(int(self.attrs["axis"]), x.ndim)
        norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True) + np.float32(self.attrs["epsilon"]))
        return _present(self.op, {"Out": [(x / norm).astype(x.dtype, copy=False)],
                                  "Norm": [norm.astype(x.dtype, copy=False)]})


@register_kernel("p_norm")
class PNorm(Kernel):
    """(sum |X|^p)^(1/p) over an axis (or all of X with asvector); p = 0 counts non-zeros, +-inf max/min."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        p, keep = float(self.attrs["porder"]), bool(self.attrs["keepdim"])
        axis: Any = None if self.attrs.get("asvector") else _axis(int(self.attrs["axis"]), x.ndim)
        a = np.abs(x)
        if p == 0:
            out = np.sum(a != 0, axis=axis, keepdims=keep).astype(x.dtype)
        elif np.isinf(p):
            out = (np.max if p > 0 else np.min)(a, axis=axis, keepdims=keep)
        elif p == 2:
            out = np.sqrt(np.sum(a * a, axis=axis, keepdims=keep))
        else:
            out = np.power(np.sum(np.power(a, p), axis=axis, keepdims=keep), 1.0 / p)
        return {"Out": [np.asarray(out, dtype=x.dtype)]}


@register_kernel("group_norm", layout=ANY_LAYOUT)
class GroupNorm(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        g, eps = int(self.attrs["groups"]), float(self.attrs["epsilon"])
        nhwc = self.attrs.get("data_layout") == "NHWC"
        xc = np.moveaxis(x, -1, 1) if nhwc else x
        n, c = xc.shape[:2]
        xg = xc.reshape(n, g, -1).astype(np.float64)
        mean, var = xg.mean(axis=2), xg.var(axis=2)
        y = ((xg - mean[..., None]) / np.sqrt(var[..., None] + eps)).reshape(xc.shape)
        bshape = (1, c) + (1,) * (xc.ndim - 2)
        if ins.get("Scale"):
            y = y * ins["Scale"][0].reshape(bshape)
        if ins.get("Bias"):
            y = y + ins["Bias"][0].reshape(bshape)
        y = np.moveaxis(y, 1, -1) if nhwc else y
        return _present(self.op, {"Y": [np.ascontiguousarray(y, dtype=x.dtype)], "Mean": [mean.astype(x.dtype)],
                                  "Variance": [var.astype(x.dtype)]})


@register_kernel("instance_norm")
class InstanceNorm(Kernel):
    """Per (sample, channel) normalisation; SavedVariance holds 1/sqrt(var + epsilon) as Paddle's does."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        n, c = x.shape[:2]
        xs = x.reshape(n, c, -1).astype(np.float64)
        mean, var = xs.mean(axis=2), xs.var(axis=2)
        inv = 1.0 / np.sqrt(var + float(self.attrs["epsilon"]))
        y = (xs - mean[..., None]) * inv[..., None]
        if ins.get("Scale"):
            y = y * ins["Scale"][0].reshape(1, c, 1)
        if ins.get("Bias"):
            y = y + ins["Bias"][0].reshape(1, c, 1)
        return _present(self.op, {"Y": [y.reshape(x.shape).astype(x.dtype)],
                                  "SavedMean": [mean.reshape(-1).astype(x.dtype)],
                                  "SavedVariance": [inv.reshape(-1).astype(x.dtype)]})


# --- padding and channel rearrangements -------------------------------------------------------
@generic("pad")
class Pad(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        p = [int(v) for v in self.attrs["paddings"]]
        pw = [(p[2 * i], p[2 * i + 1]) for i in range(x.ndim)]
        return {"Out": [np.pad(x, pw, constant_values=np.asarray(self.attrs["pad_value"]).astype(x.dtype))]}


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@generic("pad3d", Paddings=ANY)
class Pad3d(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        p = ints(ins["Paddings"][0]) if ins.get("Paddings") else [int(v) for v in self.attrs["paddings"]]
        mode = self.attrs["mode"]
        if mode not in _PAD_MODES:
            raise KernelError(f"pad3d: mode {mode!r} is not one of {sorted(_PAD_MODES)}")
        spatial = [(p[4], p[5]), (p[2], p[3]), (p[0], p[1])]
        pw = [(0, 0), (0, 0), *spatial] if self.attrs["data_format"] == "NCDHW" else [(0, 0), *spatial, (0, 0)]
        kw = {"constant_values": np.asarray(self.attrs["value"]).astype(x.dtype)} if mode == "constant" else {}
        return {"Out": [np.pad(x, pw, mode=_PAD_MODES[mode], **kw)]}


def _to_nchw(x: np.ndarray, attrs: dict) -> tuple[np.ndarray, bool]:
    nhwc = attrs.get("data_format") == "NHWC"
    return (x.transpose(0, 3, 1, 2) if nhwc else x), nhwc


def _from_nchw(y: np.ndarray, nhwc: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1) if nhwc else y)


@generic("pixel_shuffle")
class PixelShuffle(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, nhwc = _to_nchw(ins["X"][0], self.attrs)
        r = int(self.attrs["upscale_factor"])
        n, c, h, w = x.shape
        y = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (r * r), h * r, w * r)
        return {"Out": [_from_nchw(y, nhwc)]}


@generic("channel_shuffle")
class ChannelShuffle(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, nhwc = _to_nchw(ins["X"][0], self.attrs)
        g = int(self.attrs["groups"])
        n, c, h, w = x.shape
        y = x.reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
        return {"Out": [_from_nchw(y, nhwc)]}


@generic("maxout")
class Maxout(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axis, g = _axis(int(self.attrs["axis"]), x.ndim), int(self.attrs["groups"])
        shape = (*x.shape[:axis], x.shape[axis] // g, g, *x.shape[axis + 1:])
        return {"Out": [x.reshape(shape).max(axis=axis + 1)]}


@generic("unfold")
class Unfold(Kernel):
    """im2col: Y[n, (c, ki, kj), (oi, oj)] = X_padded[n, c, oi*s0 + ki*d0, oj*s1 + kj*d1]."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        n, c, h, w = x.shape
        k, s, p, d, oh, ow = unfold_geometry(self.attrs, h, w)
        xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])])
        cols = np.empty((n, c, k[0], k[1], oh, ow), x.dtype)
        for i in range(k[0]):
            for j in range(k[1]):
                hi, wj = i * d[0], j * d[1]
                cols[:, :, i, j] = xp[:, :, hi:hi + s[0] * (oh - 1) + 1:s[0], wj:wj + s[1] * (ow - 1) + 1:s[1]]
        return {"Y": [cols.reshape(n, c * k[0] * k[1], oh * ow)]}


# --- rnn --------------------------------------------------------------------------------------
def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _cell(mode: str, gx: np.ndarray, h: np.ndarray, c: np.ndarray | None, w_hh: np.ndarray, b_hh: np.ndarray):
    """One step: gx = x @ W_ih^T + b_ih precomputed; returns (h, c)."""
    gh = h @ w_hh.T + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "GRU":
        xr, xz, xc = np.split(gx, 3, axis=-1)
        hr, hz, hc = np.split(gh, 3, axis=-1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
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
        return _present(self.op, {"Out": [inp.astype(x.dtype, copy=False)], "State": state[:n_state]})


# --- detection --------------------------------------------------------------------------------
@register_kernel("prior_box", inputs={"Input": ANY, "Image": ANY})
class PriorBox(Kernel):
    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        fh, fw = ins["Input"][0].shape[2:]
        ih, iw = ins["Image"][0].shape[2:]
        sw = float(a["step_w"]) or iw / fw
        sh = float(a["step_h"]) or ih / fh
        ars = expand_aspect_ratios([float(v) for v in a["aspect_ratios"]], bool(a["flip"]))
        maxs = [float(v) for v in a["max_sizes"] or []]
        sizes: list[tuple[float, float]] = []  # half widths/heights of the priors of one cell
        for s, ms in enumerate(float(v) for v in a["min_sizes"]):
            ratio = [(ms * np.sqrt(r) / 2, ms / np.sqrt(r) / 2) for r in ars]
            big = [(np.sqrt(ms * maxs[s]) / 2,) * 2] if maxs else []
            if a["min_max_aspect_ratios_order"]:
                sizes += [ratio[0], *big, *[ratio[i] for i, r in enumerate(ars) if abs(r - 1.0) >= 1e-6]]
            else:
                sizes += [*ratio, *big]
        half = np.array(sizes, np.float32)  # [P, 2]
        cx = ((np.arange(fw, dtype=np.float32) + np.float32(a["offset"])) * np.float32(sw))[None, :, None]
        cy = ((np.arange(fh, dtype=np.float32) + np.float32(a["offset"])) * np.float32(sh))[:, None, None]
        boxes = np.stack(np.broadcast_arrays((cx - half[:, 0]) / np.float32(iw), (cy - half[:, 1]) / np.float32(ih),
                                             (cx + half[:, 0]) / np.float32(iw), (cy + half[:, 1]) / np.float32(ih)),
                         axis=-1).astype(np.float32)
        if a["clip"]:
            np.clip(boxes, 0.0, 1.0, out=boxes)
        var = np.broadcast_to(np.asarray(a["variances"], np.float32), boxes.shape).copy()
        return {"Boxes": [boxes], "Variances": [var]}


@register_kernel("box_coder", inputs={"PriorBoxVar": ANY})
class BoxCoder(Kernel):
    def run(self, ins: Ins) -> Outs:
        pb, tb = ins["PriorBox"][0], ins["TargetBox"][0]
        norm = 0.0 if self.attrs["box_normalized"] else 1.0
        pw = pb[:, 2] - pb[:, 0] + norm
        ph = pb[:, 3] - pb[:, 1] + norm
        pcx, pcy = pb[:, 0] + pw / 2, pb[:, 1] + ph / 2
        if ins.get("PriorBoxVar"):
            var = ins["PriorBoxVar"][0]
        elif self.attrs.get("variance"):
            var = np.broadcast_to(np.asarray(self.attrs["variance"], pb.dtype), pb.shape)
        else:
            var = np.ones_like(pb)
        if str(self.attrs["code_type"]).lower() == "encode_center_size":
            tw = tb[:, 2] - tb[:, 0] + norm
            th = tb[:, 3] - tb[:, 1] + norm
            tcx, tcy = ((tb[:, 0] + tb[:, 2]) / 2)[:, None], ((tb[:, 1] + tb[:, 3]) / 2)[:, None]
            out = np.stack([(tcx - pcx) / pw, (tcy - pcy) / ph, np.log(np.abs(tw[:, None] / pw)),
                            np.log(np.abs(th[:, None] / ph))], axis=-1) / var[None]
            return {"OutputBox": [out.astype(tb.dtype)]}
        axis = int(self.attrs["axis"])
        sel = (slice(None), None) if axis == 1 else (None, slice(None))  # prior per row (axis 1) or column
        v = var[sel]
        cx = v[..., 0] * tb[..., 0] * pw[sel] + pcx[sel]
        cy = v[..., 1] * tb[..., 1] * ph[sel] + pcy[sel]
        w = np.exp(v[..., 2] * tb[..., 2]) * pw[sel]
        h = np.exp(v[..., 3] * tb[..., 3]) * ph[sel]
        out = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - norm, cy + h / 2 - norm], axis=-1)
        return {"OutputBox": [out.astype(tb.dtype)]}


@register_kernel("yolo_box", inputs={"ImgSize": ANY})
class YoloBox(Kernel):
    """Decode a YOLOv3 head: boxes in image pixels, scores = objectness * class probability (0 under conf_thresh)."""

    def run(self, ins: Ins) -> Outs:
        a = self.attrs
        x = ins["X"][0].astype(np.float64)
        img = ins["ImgSize"][0].astype(np.float64)
        n, _, gh, gw = x.shape
        anchors = np.asarray(a["anchors"], np.float64).reshape(-1, 2)
        na, cls = len(anchors), int(a["class_num"])
        scale = float(a["scale_x_y"])
        bias = -0.5 * (scale - 1.0)
        if a["iou_aware"]:
            iou, x = _sigmoid(x[:, :na]), x[:, na:]
        p = x.reshape(n, na, 5 + cls, gh, gw)
        conf = _sigmoid(p[:, :, 4])
        if a["iou_aware"]:
            f = float(a["iou_aware_factor"])
            conf = conf ** (1.0 - f) * iou ** f
        keep = conf >= float(a["conf_thresh"])
        ih, iw = img[:, 0].reshape(n, 1, 1, 1), img[:, 1].reshape(n, 1, 1, 1)
        ds = int(a["downsample_ratio"])
        cx = (np.arange(gw) + _sigmoid(p[:, :, 0]) * scale + bias) * iw / gw
        cy = (np.arange(gh)[:, None] + _sigmoid(p[:, :, 1]) * scale + bias) * ih / gh
        bw = np.exp(p[:, :, 2]) * anchors[:, 0].reshape(1, na, 1, 1) * iw / (ds * gw)
        bh = np.exp(p[:, :, 3]) * anchors[:, 1].reshape(1, na, 1, 1) * ih / (ds * gh)
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=-1)
        if a["clip_bbox"]:
            boxes[..., 0] = np.maximum(boxes[..., 0], 0)
            boxes[..., 1] = np.maximum(boxes[..., 1], 0)
            boxes[..., 2] = np.minimum(boxes[..., 2], iw - 1)
            boxes[..., 3] = np.minimum(boxes[..., 3], ih - 1)
        scores = conf[..., None] * _sigmoid(np.moveaxis(p[:, :, 5:], 2, -1))
        boxes = np.where(keep[..., None], boxes, 0.0).reshape(n, -1, 4)
        scores = np.where(keep[..., None], scores, 0.0).reshape(n, -1, cls)
        dt = ins["X"][0].dtype
        return {"Boxes": [boxes.astype(dt)], "Scores": [scores.astype(dt)]}


# --- gather / scatter ---------------------------------------------------------------------------
@generic("pixel_unshuffle")
class PixelUnshuffle(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, nhwc = _to_nchw(ins["X"][0], self.attrs)
        r = int(self.attrs["downscale_factor"])
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4).reshape(n, c * r * r, h // r, w // r)
        return {"Out": [_from_nchw(y, nhwc)]}


def _check_index(op: str, idx: np.ndarray, size: int) -> None:
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise KernelError(f"{op}: index values must be in [-{size}, {size}), got [{idx.min()}, {idx.max()}]")


@generic("gather_nd", Index=ANY)
class GatherNd(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, idx = ins["X"][0], ins["Index"][0]
        k = idx.shape[-1]
        for i in range(k):
            _check_index("gather_nd", idx[..., i], x.shape[i])
        return {"Out": [np.ascontiguousarray(x[tuple(idx[..., i] for i in range(k))])]}


@generic("scatter", Ids=ANY, Updates=ANY)
class Scatter(Kernel):
    """overwrite: rows Ids[i] = Updates[i] (the last write wins); else those rows are zeroed, then summed into."""

    def run(self, ins: Ins) -> Outs:
        x, ids, up = ins["X"][0], ins["Ids"][0].reshape(-1), ins["Updates"][0]
        _check_index("scatter", ids, x.shape[0])
        out = x.copy()
        if self.attrs["overwrite"]:
            for i, r in enumerate(ids):
                out[r] = up[i]
        else:
            out[ids] = 0
            np.add.at(out, ids, up)
        return {"Out": [out]}


@generic("take_along_axis", Index=ANY)
class TakeAlongAxis(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, idx = ins["Input"][0], ins["Index"][0]
        axis = _axis(int(self.attrs["Axis"]), x.ndim)
        _check_index("take_along_axis", idx, x.shape[axis])
        return {"Result": [np.take_along_axis(x, idx.astype(np.int64), axis)]}


@generic("repeat_interleave", RepeatsTensor=ANY)
class RepeatInterleave(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        reps: Any = ints(ins["RepeatsTensor"][0]) if ins.get("RepeatsTensor") else int(self.attrs["Repeats"])
        if isinstance(reps, list) and len(reps) == 1:
            reps = reps[0]
        return {"Out": [np.repeat(x, reps, axis=_axis(int(self.attrs["dim"]), x.ndim))]}


# --- multiclass NMS -----------------------------------------------------------------------------
def _iou(box: np.ndarray, others: np.ndarray, normalized: bool) -> np.ndarray:
    """Paddle's JaccardOverlap of one box with each of `others` (+1 pixel sizes when not normalized)."""
    norm = 0.0 if normalized else 1.0

    def area(b: np.ndarray) -> np.ndarray:
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        return np.where((w < 0) | (h < 0), 0.0, (w + norm) * (h + norm))

    apart = ((others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3]) | (others[:, 3] < box[1]))
    iw = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]) + norm
    ih = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]) + norm
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area(box) + area(others) - inter)
    return np.where(apart, 0.0, iou)


def nms_fast(boxes: np.ndarray, scores: np.ndarray, attrs: dict) -> list[int]:
    """Greedy NMS of one class: candidates over score_threshold by score (stable), top nms_top_k."""
    cand = np.flatnonzero(scores > float(attrs["score_threshold"]))
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    top_k = int(attrs["nms_top_k"])
    if -1 < top_k < len(cand):
        cand = cand[:top_k]
    thresh, eta = float(attrs["nms_threshold"]), float(attrs["nms_eta"])
    keep: list[int] = []
    for i in cand:
        if not keep or np.all(_iou(boxes[i], boxes[keep], bool(attrs["normalized"])) <= thresh):
            keep.append(int(i))
            if eta < 1.0 and thresh > 0.5:
                thresh *= eta
    return keep


@register_kernel("multiclass_nms3", inputs={"RoisNum": ANY}, outputs={"Index": ANY, "NmsRoisNum": ANY})
class MulticlassNms3(Kernel):
    """Per image and class NMS, then the best keep_top_k; rows [label, score, x1, y1, x2, y2] by label."""

    def run(self, ins: Ins) -> Outs:
        boxes, scores = ins["BBoxes"][0], ins["Scores"][0]
        a = self.attrs
        rows, index, counts = [], [], []
        for n in range(scores.shape[0]):
            dets = [(c, i) for c in range(scores.shape[1]) if c != int(a["background_label"])
                    for i in nms_fast(boxes[n], scores[n, c], a)]
            keep_top_k = int(a["keep_top_k"])
            if -1 < keep_top_k < len(dets):
                order = np.argsort([-scores[n, c, i] for c, i in dets], kind="stable")[:keep_top_k]
                dets = sorted((dets[j] for j in order), key=lambda d: d[0])  # by label, score order kept
            rows += [[c, scores[n, c, i], *boxes[n, i]] for c, i in dets]
            index += [n * scores.shape[2] + i for _, i in dets]
            counts.append(len(dets))
        out = np.array(rows, boxes.dtype).reshape(-1, 6)
        return {"Out": [out], "Index": [np.array(index, np.int32).reshape(-1, 1)],
                "NmsRoisNum": [np.array(counts, np.int32)]}


# --- roi_align, deformable_conv -----------------------------------------------------------------
def _bilinear_zero_pad(img: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """img [..., H, W] sampled at (y, x) [P] with zeros outside (deformable conv's rule) -> [..., P]."""
    h, w = img.shape[-2:]
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    ly, lx = y - y0, x - x0
    inside = (y > -1) & (x > -1) & (y < h) & (x < w)
    out = 0.0
    for dy, dx, wt in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yy, xx = y0 + dy, x0 + dx
        ok = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        out = out + img[..., np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)] * np.where(ok, wt, 0.0)
    return out


@register_kernel("roi_align", inputs={"RoisNum": ANY})
class RoiAlign(Kernel):
    """Average of sampling_ratio^2 (or adaptive) bilinear samples per bin; RoisNum maps ROIs to images."""

    def run(self, ins: Ins) -> Outs:
        x, rois = ins["X"][0], ins["ROIs"][0].astype(np.float64)
        a = self.attrs
        n, c, h, w = x.shape
        ph, pw, ratio = int(a["pooled_height"]), int(a["pooled_width"]), int(a["sampling_ratio"])
        counts = ins["RoisNum"][0].reshape(-1) if ins.get("RoisNum") else np.array([len(rois)])
        batch = np.repeat(np.arange(len(counts)), counts)
        off = 0.5 if a["aligned"] else 0.0
        out = np.zeros((len(rois), c, ph, pw), x.dtype)
        for r, (x0, y0, x1, y1) in enumerate(rois * float(a["spatial_scale"]) - off):
            rw, rh = x1 - x0, y1 - y0
            if not a["aligned"]:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
            gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
            ys = y0 + (np.arange(ph)[:, None] + (np.arange(gh)[None, :] + 0.5) / gh) * (rh / ph)  # [ph, gh]
            xs = x0 + (np.arange(pw)[:, None] + (np.arange(gw)[None, :] + 0.5) / gw) * (rw / pw)  # [pw, gw]
            yy, xx = np.broadcast_arrays(ys[:, None, :, None], xs[None, :, None, :])  # [ph, pw, gh, gw]
            yy, xx = yy.reshape(-1), xx.reshape(-1)
            outside = (yy < -1) | (yy > h) | (xx < -1) | (xx > w)
            yy, xx = np.maximum(yy, 0), np.maximum(xx, 0)
            yl, xl = np.minimum(yy.astype(np.int64), h - 1), np.minimum(xx.astype(np.int64), w - 1)
            yy, xx = np.where(yl >= h - 1, yl, yy), np.where(xl >= w - 1, xl, xx)
            yh, xh = np.minimum(yl + 1, h - 1), np.minimum(xl + 1, w - 1)
            ly, lx = yy - yl, xx - xl
            img = x[batch[r]].astype(np.float64)
            v = (img[:, yl, xl] * (1 - ly) * (1 - lx) + img[:, yl, xh] * (1 - ly) * lx
                 + img[:, yh, xl] * ly * (1 - lx) + img[:, yh, xh] * ly * lx) * ~outside
            out[r] = v.reshape(c, ph, pw, gh * gw).sum(-1) / max(gh * gw, 1)
        return {"Out": [out]}


@register_kernel("deformable_conv_v1")
@register_kernel("deformable_conv", inputs={"Mask": ANY})
class DeformableConv(Kernel):
    """Modulated deformable conv (DCNv2; v1 without Mask): im2col at offset positions, then a grouped GEMM."""

    def run(self, ins: Ins) -> Outs:
        x, off, wt = ins["Input"][0], ins["Offset"][0], ins["Filter"][0]
        mask = ins["Mask"][0] if ins.get("Mask") else None
        a = self.attrs
        (sh, sw), (ph, pw), (dh, dw) = ([int(v) for v in a[k]] for k in ("strides", "paddings", "dilations"))
        n, c, h, w = x.shape
        m, _, kh, kw = wt.shape
        g, dg = int(a["groups"]), int(a["deformable_groups"])
        ho, wo = off.shape[2:]
        base_y = (np.arange(ho) * sh - ph)[:, None]
        base_x = (np.arange(wo) * sw - pw)[None, :]
        cols = np.empty((n, c, kh * kw, ho, wo), np.float64)
        cg = c // dg
        for b, d, k in itertools.product(range(n), range(dg), range(kh * kw)):
            i, j = divmod(k, kw)
            y = base_y + i * dh + off[b, d * 2 * kh * kw + 2 * k]
            xx = base_x + j * dw + off[b, d * 2 * kh * kw + 2 * k + 1]
            v = _bilinear_zero_pad(x[b, d * cg:(d + 1) * cg].astype(np.float64), y.reshape(-1), xx.reshape(-1))
            if mask is not None:
                v = v * mask[b, d * kh * kw + k].reshape(-1)
            cols[b, d * cg:(d + 1) * cg, k] = v.reshape(cg, ho, wo)
        cols = cols.reshape(n, g, (c // g) * kh * kw, ho * wo)
        wg = wt.reshape(g, m // g, -1).astype(np.float64)
        out = np.einsum("gok,ngkp->ngop", wg, cols).reshape(n, m, ho, wo)
        return {"Output": [out.astype(x.dtype)]}
