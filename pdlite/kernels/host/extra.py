"""Host kernels of the ops in pdlite.operators.extra (plain NumPy, Paddle's CPU semantics), and the
small helpers the rnn and detection kernels share with them (`ANY`, `generic`, `present`, `sigmoid`).

Compare/logical ops return bool; index ops return int64 indices; the float kernels compute
in the input dtype except where Paddle accumulates in double (noted on the kernel).
"""
from __future__ import annotations

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


def present(op: Any, outs: Outs) -> Outs:
    """The output slots the op has (the optional statistics outputs may be absent)."""
    return {k: v for k, v in outs.items() if op.outputs.get(k)}


def sigmoid(v: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-v)) in v's dtype (the rnn cells and yolo_box use it)."""
    return 1.0 / (1.0 + np.exp(-v))


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
        return {"Out": [np.asarray(np.broadcast_to(x, shape), order="C")]}


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
        return {"Out": [np.asarray(out, order="C")]}


@generic("flip")
class Flip(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axes = [_axis(int(a), x.ndim) for a in self.attrs["axis"]]
        return {"Out": [np.asarray(np.flip(x, axes), order="C")]}


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
        return {"Out": [np.asarray(g, order="C") for g in np.meshgrid(*[v.reshape(-1) for v in ins["X"]],
                                                                     indexing="ij")]}


@generic("broadcast_tensors")
class BroadcastTensors(Kernel):
    """Every X broadcast to their common shape (a copy each)."""

    def run(self, ins: Ins) -> Outs:
        xs = ins["X"]
        return {"Out": [np.array(v) for v in np.broadcast_arrays(*xs)]}


@generic("unbind")
class Unbind(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = _axis(int(self.attrs["axis"]), x.ndim)
        return {"Out": [np.asarray(np.take(x, i, axis=a), order="C") for i in range(x.shape[a])]}


# --- norms ------------------------------------------------------------------------------------
@register_kernel("norm")
class Norm(Kernel):
    """Out = X / sqrt(sum(X^2, axis) + epsilon), Norm = that denominator."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axis = _axis(int(self.attrs["axis"]), x.ndim)
        norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True) + np.float32(self.attrs["epsilon"]))
        return present(self.op, {"Out": [(x / norm).astype(x.dtype, copy=False)],
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
        return present(self.op, {"Y": [np.asarray(y, dtype=x.dtype, order="C")], "Mean": [mean.astype(x.dtype)],
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
        return present(self.op, {"Y": [y.reshape(x.shape).astype(x.dtype)],
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
    return np.asarray(y.transpose(0, 2, 3, 1) if nhwc else y, order="C")


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
        if k == 0:  # an empty index selects all of X for each index row (Paddle broadcasts X)
            return {"Out": [np.asarray(np.broadcast_to(x, idx.shape[:-1] + x.shape), order="C")]}
        for i in range(k):
            _check_index("gather_nd", idx[..., i], x.shape[i])
        return {"Out": [np.asarray(x[tuple(idx[..., i] for i in range(k))], order="C")]}


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
