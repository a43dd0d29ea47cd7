"""Host kernels of the ops in pdlite.operators.manip (tril_triu, reverse, unique, set_value,
partial_sum, partial_concat), Paddle's CPU semantics, any dtype.

unique (phi UniqueRawKernel): is_sorted False (the legacy op's default) gives Out in first-appearance
order and Index (the inverse); sorted without axis gives the sorted distinct values, Indices (first
occurrence), Index (inverse) and Counts; with an axis, the slices along it compared
lexicographically after Paddle's transpose that swaps that axis with axis 0.
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.errors import KernelError
from pdlite.kernels.host.extra import ANY, Ins, Outs, generic, present
from pdlite.kernels.registry import Kernel, register_kernel
from pdlite.operators.creation import assign_values
from pdlite.operators.manip import crop_bounds, slice_shape


@generic("tril_triu")
class TrilTriu(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, k = ins["X"][0], int(self.attrs["diagonal"])
        return {"Out": [np.tril(x, k) if self.attrs["lower"] else np.triu(x, k)]}


@generic("reverse")
class Reverse(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        axes = tuple(int(a) for a in self.attrs["axis"])
        return {"Out": [np.asarray(np.flip(x, axes), order="C") if axes else x.copy()]}


# --- unique ---------------------------------------------------------------------------------------
def _first_order_unique(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values in first-appearance order, inverse)."""
    _, first, inv = np.unique(flat, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")  # sorted id -> appearance id
    return flat[np.sort(first)], rank[inv.reshape(-1)]


def unique_along(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(out, first indices, inverse, counts) of the slices of x along `axis` (Paddle's UniqueDim)."""
    perm = list(range(x.ndim))
    perm[0], perm[axis] = axis, 0
    xt = np.transpose(x, perm)
    rows = xt.reshape(xt.shape[0], -1)
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(len(rows))
    srt = rows[order]
    new = np.ones(len(srt), bool)
    if len(srt) > 1:
        new[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    group = np.cumsum(new) - 1
    inverse = np.empty(len(rows), np.int64)
    inverse[order] = group
    first = order[new]
    counts = np.bincount(group, minlength=int(new.sum()))
    out = np.transpose(xt[first], perm)
    return np.asarray(out, order="C"), first, inverse, counts


@generic("unique")
class Unique(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = self.attrs
        it = numpy_dtype(int(a["dtype"]), "unique.dtype")
        if not a["is_sorted"]:
            out, inv = _first_order_unique(x.reshape(-1))
            return present(self.op, {"Out": [out], "Index": [inv.astype(it)]})
        axis = [int(v) for v in a["axis"]]
        if not axis:
            out, first, inv, counts = np.unique(x.reshape(-1), return_index=True, return_inverse=True,
                                                return_counts=True)
            inv = inv.reshape(-1)
        else:
            out, first, inv, counts = unique_along(x, axis[0] + x.ndim if axis[0] < 0 else axis[0])
        return present(self.op, {"Out": [out], "Indices": [first.astype(it)], "Index": [inv.astype(it)],
                                 "Counts": [counts.astype(it)]})


# --- set_value ------------------------------------------------------------------------------------
@generic("set_value", ValueTensor=ANY, StartsTensorList=ANY, EndsTensorList=ANY, StepsTensorList=ANY)
class SetValue(Kernel):
    """Out = Input; Out[slices] = value broadcast to the slice (decrease_axes dropped, none_axes added)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["Input"][0]
        a = self.attrs
        axes = [int(v) for v in a["axes"]]

        def pick(slot: str, key: str, fill: int) -> list[int]:
            if ins.get(slot):
                return [int(np.asarray(t).reshape(-1)[0]) for t in ins[slot]]
            return [int(v) for v in a.get(key) or []] or [fill] * len(axes)

        starts, ends, steps = pick("StartsTensorList", "starts", 0), pick("EndsTensorList", "ends", 0), \
            pick("StepsTensorList", "steps", 1)
        if ins.get("ValueTensor"):
            value = np.asarray(ins["ValueTensor"][0])
        else:
            vals = assign_values(a)
            shape = [int(v) for v in a.get("shape") or []] or [len(vals)]
            value = np.asarray(vals).reshape(shape)
        sl = [slice(None)] * x.ndim
        for ax, s, e, st in zip(axes, starts, ends, steps):
            sl[ax] = slice(s, e, st)
        target = slice_shape(x.shape, axes, starts, ends, steps)
        decrease = {int(d) for d in a.get("decrease_axes") or []}
        value_shape = [d for i, d in enumerate(target) if i not in decrease]
        for na in sorted(int(v) for v in a.get("none_axes") or []):
            value_shape.insert(na, 1)
        try:
            v = np.broadcast_to(value.astype(x.dtype, copy=False), value_shape).reshape(target)
        except ValueError:
            raise KernelError(f"set_value: value of shape {list(value.shape)} does not broadcast to the slice "
                              f"{list(value_shape)} of Input {list(x.shape)}") from None
        out = x.copy()
        out[tuple(sl)] = v
        return {"Out": [out]}


# --- partial_sum, partial_concat ------------------------------------------------------------------
def _partial(attrs: dict, xs: list[np.ndarray]) -> list[np.ndarray]:
    d = xs[0].shape[1]
    start = int(attrs["start_index"])
    start = start + d if start < 0 else start
    length = int(attrs["length"])
    length = d - start if length < 0 else length
    return [x[:, start:start + length] for x in xs]


@generic("partial_sum")
class PartialSum(Kernel):
    def run(self, ins: Ins) -> Outs:
        parts = _partial(self.attrs, ins["X"])
        out = parts[0].copy()
        for p in parts[1:]:
            out += p
        return {"Out": [out]}


@generic("partial_concat")
class PartialConcat(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [np.concatenate(_partial(self.attrs, ins["X"]), axis=1)]}


# --- indexing and masking -------------------------------------------------------------------------
@generic("index_sample", Index=ANY)
class IndexSample(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, idx = ins["X"][0], ins["Index"][0].astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= x.shape[1]):
            raise KernelError(f"index_sample: Index values must be in [0, {x.shape[1]}), got "
                              f"[{idx.min()}, {idx.max()}]")
        return {"Out": [np.take_along_axis(x, idx, axis=1)]}


@generic("masked_select", Mask=ANY)
class MaskedSelect(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, mask = np.broadcast_arrays(ins["X"][0], ins["Mask"][0].astype(bool))
        return {"Y": [np.asarray(x[mask], order="C")]}


@generic("crop_tensor", Shape=ANY, ShapeTensor=ANY, Offsets=ANY, OffsetsTensor=ANY)
class CropTensor(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        offsets, sizes = crop_bounds(self.attrs, x.shape, ins)
        return {"Out": [np.asarray(x[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))], order="C")]}


@generic("sequence_mask", MaxLenTensor=ANY)
class SequenceMask(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        maxlen = (int(np.asarray(ins["MaxLenTensor"][0]).reshape(-1)[0]) if ins.get("MaxLenTensor")
                  else int(self.attrs["maxlen"]))
        if maxlen < 0:
            maxlen = int(x.max()) if x.size else 0
        y = np.arange(maxlen) < x[..., None]
        return {"Y": [y.astype(numpy_dtype(int(self.attrs["out_dtype"]), "sequence_mask.out_dtype"))]}


@generic("scatter_nd_add", Index=ANY, Updates=ANY)
class ScatterNdAdd(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, idx, up = ins["X"][0], ins["Index"][0].astype(np.int64), ins["Updates"][0]
        out = x.copy()
        k = idx.shape[-1]
        for i in range(k):
            if idx.size and (idx[..., i].min() < -x.shape[i] or idx[..., i].max() >= x.shape[i]):
                raise KernelError(f"scatter_nd_add: Index[..., {i}] out of range for X {list(x.shape)}")
        np.add.at(out, tuple(idx[..., i] for i in range(k)), up.astype(x.dtype, copy=False))
        return {"Out": [out]}


@generic("top_k", K=ANY)
class TopKV1(Kernel):
    """The k largest along the last axis, by value then index (Paddle's CPU full sort)."""

    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        k = int(np.asarray(ins["K"][0]).reshape(-1)[0]) if ins.get("K") else int(self.attrs["k"])
        idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return {"Out": [np.take_along_axis(x, idx, -1)], "Indices": [idx.astype(np.int64)]}


@generic("lod_reset", Y=ANY)
class LodReset(Kernel):
    def run(self, ins: Ins) -> Outs:
        return {"Out": [ins["X"][0]]}


@generic("increment")
class Increment(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        return {"Out": [(x + np.asarray(self.attrs["step"]).astype(x.dtype)).astype(x.dtype)]}


@generic("fill_any")
class FillAny(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        v = self.attrs["value_float"] if x.dtype.kind == "f" else self.attrs["value_int"]
        return {"Out": [np.full(x.shape, v, x.dtype)]}


@register_kernel("label_smooth", inputs={"PriorDist": ANY})
class LabelSmooth(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        eps = x.dtype.type(self.attrs["epsilon"])
        if ins.get("PriorDist"):
            prior = ins["PriorDist"][0].reshape(-1)
            return {"Out": [(x.dtype.type(1) - eps) * x + eps * prior]}
        return {"Out": [(x.dtype.type(1) - eps) * x + eps / x.dtype.type(x.shape[-1])]}


@generic("shard_index")
class ShardIndex(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = self.attrs
        n, shards, sid = int(a["index_num"]), int(a["nshards"]), int(a["shard_id"])
        size = (n + shards - 1) // shards
        out = np.where(x // size == sid, x - sid * size, int(a["ignore_value"]))
        return {"Out": [out.astype(x.dtype)]}


# --- legacy (Paddle 2.x) forms --------------------------------------------------------------------
@generic("pad2d", Paddings=ANY)
class Pad2d(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        a = self.attrs
        p = [int(v) for v in (np.asarray(ins["Paddings"][0]).reshape(-1) if ins.get("Paddings") else a["paddings"])]
        hw = [(p[0], p[1]), (p[2], p[3])]
        pw = [(0, 0), (0, 0), *hw] if a["data_format"] == "NCHW" else [(0, 0), *hw, (0, 0)]
        if a["mode"] == "constant":
            return {"Out": [np.pad(x, pw, constant_values=np.asarray(a["pad_value"]).astype(x.dtype))]}
        return {"Out": [np.pad(x, pw, mode=str(a["mode"]))]}


@generic("one_hot", depth_tensor=ANY)
class OneHotV1(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0][..., 0].astype(np.int64)
        a = self.attrs
        depth = int(np.asarray(ins["depth_tensor"][0]).reshape(-1)[0]) if ins.get("depth_tensor") else int(a["depth"])
        bad = (x < 0) | (x >= depth)
        if bad.any() and not a["allow_out_of_range"]:
            raise KernelError(f"one_hot: X holds {x[bad][:3].tolist()} outside [0, {depth}) and allow_out_of_range "
                              "is false")
        out = (np.arange(depth) == x[..., None]) & ~bad[..., None]
        return {"Out": [out.astype(numpy_dtype(int(a["dtype"]), "one_hot.dtype"))]}


@generic("expand_as", target_tensor=ANY)
class ExpandAsV1(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, t = ins["X"][0], ins["target_tensor"][0]
        return {"Out": [np.tile(x, [td // d for d, td in zip(x.shape, t.shape)])]}
