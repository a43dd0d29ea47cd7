"""One instruction: an op (shape check and inference) and its picked kernel (launch)."""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import host_array
from pdlite.core.program import OpDesc
from pdlite.errors import InputError, KernelError, PdliteError
from pdlite.kernels.registry import Kernel, KernelContext, KernelDef, remember
from pdlite.operators.registry import OpDef, ShapeContext


def describe(v: Any) -> str:
    shape = tuple(getattr(v, "shape", ()))
    dtype = str(getattr(v, "dtype", type(v).__name__)).replace("torch.", "")
    return f"{dtype}{list(shape)}"


class _ValueTracking(ShapeContext):
    """A ShapeContext that records which inputs' values shape inference reads."""

    def __init__(self, op: OpDesc, values: dict[str, list[Any]]) -> None:
        super().__init__(op, values)
        self.read: list[tuple[str, int]] = []

    def value(self, slot: str, i: int = 0) -> np.ndarray:
        v = super().value(slot, i)
        self.read.append((slot, i))
        return v


def _shapes_key(ins: dict[str, list[Any]]) -> tuple:
    """The input shapes an op's cached shape inference is keyed on; a tensor array (a list) by its elements'."""
    return tuple([v.shape if type(v) is not list else ("array", *(getattr(e, "shape", None) for e in v))
                  for vals in ins.values() for v in vals])


def _value_key(v: Any) -> tuple[np.dtype, tuple[int, ...], bytes]:
    """What a value-dependent inference read, compared on each run: the dtype object itself (str(dtype) cost ~3 us,
    a third of a cached reshape2-with-ShapeTensor instruction), the shape and the bytes."""
    a = v if type(v) is np.ndarray else host_array(v)
    return a.dtype, a.shape, a.tobytes()


# Work (multiply-adds, or elements touched) below which an instruction runs its native kernels on the calling thread
# only (RuntimeProgram.run): handing a job of a few microseconds to the native pool's other threads costs about what
# it saves on an idle CPU, and on a busy one the caller waits for a worker the OS has not scheduled (mobilenet_v3_small's
# squeeze-and-excitation convs on 1x1 maps, 83k multiply-adds, 17-19 us on one thread; the pools, gates and the
# PP-OCR classifier's convs on 2x96 maps). 0: never.
SERIAL_WORK = 1 << 18
# Whether instructions are marked serial and RuntimeProgram.run puts those on one native thread. Off: on a quiet
# machine (AMD EPYC, 2 threads, benchmarks/serial_small_ops.py --rounds 15) it was slower, MobileNetV3-small 1.376 ms
# against 1.242 with every instruction on the pool, PP-OCR cls 0.686 against 0.663; it helped only on a loaded
# machine, where the caller waits for pool workers the OS has not scheduled. Results are the same either way. Off,
# shape inference does not estimate the work either.
SPLIT_SMALL = False
_WEIGHT_SLOTS = ("Filter", "W", "Y")


def work_estimate(ins: dict[str, list[Any]], out_shapes: dict[str, list[tuple]]) -> int:
    """Elements read and written, plus multiply-adds where a weight slot names a reduction: a Filter's
    (OC, C/groups, kh, kw) gives C/groups*kh*kw per output, a 2-D W / Y the larger of its last two dims."""
    out = 0
    for lst in out_shapes.values():
        for s in lst:
            out += int(np.prod(s)) if s else 1
    total, per_out = out, 1
    for slot, vals in ins.items():
        for v in vals:
            shape = getattr(v, "shape", None)
            if shape is None or type(v) is list:
                continue
            n = int(np.prod(shape)) if shape else 1
            total += n
            if slot in _WEIGHT_SLOTS and len(shape) >= 2:
                per_out = max(per_out, n // max(1, shape[0]) if slot == "Filter" else max(shape[-2], shape[-1]))
    return total + out * (per_out - 1)


class Instruction:
    """Runs one op: gather inputs from the scope, infer and check shapes, launch, store outputs.

    Shape inference runs once per set of input shapes (cached); for ops whose output shapes depend
    on input values (value_dependent), the cache key also holds the values that inference read, so
    such ops are cached too (e.g. reshape2 without a ShapeTensor, or with an unchanged one).
    """

    def __init__(self, op: OpDesc, opdef: OpDef, kernel_def: KernelDef, kernel: Kernel | None = None,
                 context: KernelContext | None = None) -> None:
        self.op = op
        self.opdef = opdef
        self.kernel_def = kernel_def
        self.kernel = kernel if kernel is not None else kernel_def.create(op, context)
        self._in_slots = [(s, list(n)) for s, n in op.inputs.items() if n]
        self._out_slots = {s: list(n) for s, n in op.outputs.items() if n}
        # (input shapes, inferred output shapes as tuples, [(slot, i, value key)] read by inference)
        self._shape_cache: tuple[tuple, dict[str, list[tuple]], list[tuple[str, int, Any]]] | None = None
        # the cache entry whose inferred shapes the kernel's outputs have matched once: later runs on those input
        # shapes store the outputs unchecked (the kernels' output shapes follow from their input shapes; value-
        # dependent inference is never marked). ~0.4 us an instruction, ~3% of MobileNetV2's time at batch 1.
        self._checked: tuple | None = None
        # earlier sets of input shapes: {input shapes: (cache entry, checked entry or None)}, the last RECENT_SHAPES
        # ones displaced from _shape_cache, so that alternating shapes (a dynamic batch of 1..8 requests, OCR lines
        # of several widths) do not infer and check every op again on each run: clones share instructions
        self._recent: dict[tuple, tuple[tuple, tuple | None]] = {}
        self.prepared = False
        # the inferred shapes' work is under SERIAL_WORK: RuntimeProgram.run runs the kernels on one native thread
        self.serial = False

    def __repr__(self) -> str:
        return f"Instruction({self.op.type} -> {self.kernel_def.key})"

    @property
    def label(self) -> str:
        outs = self.op.output_names()
        return f"{self.op.type}({outs[0] if outs else ''})"

    def gather(self, scope: dict[str, Any]) -> dict[str, list[Any]]:
        try:
            return {slot: [scope[n] for n in names] for slot, names in self._in_slots}
        except KeyError:
            pass
        for slot, names in self._in_slots:
            for n in names:
                if n not in scope:
                    raise KernelError(
                        f"op {self.label}: input {slot}={n!r} has no value (not fed, not a parameter, "
                        "not produced by an earlier op)") from None
        raise AssertionError("unreachable")

    def infer_shapes(self, ins: dict[str, list[Any]]) -> dict[str, list[tuple]] | None:
        fn = self.opdef.infer_shape
        if fn is None:
            return None
        key = _shapes_key(ins)
        c = self._shape_cache
        if c is not None and c[0] == key and (not c[2] or all(_value_key(ins[s][i]) == k for s, i, k in c[2])):
            return c[1]
        if c is not None:  # displaced: kept among the recent ones
            remember(self._recent, c[0], (c, self._checked if self._checked is c else None))
        old = self._recent.get(key)
        if old is not None and (not old[0][2] or all(_value_key(ins[s][i]) == k for s, i, k in old[0][2])):
            self._shape_cache, self._checked = old
            self.serial = SPLIT_SMALL and bool(old[0][1]) and work_estimate(ins, old[0][1]) < SERIAL_WORK
            return old[0][1]
        ctx = _ValueTracking(self.op, ins)
        raw = fn(ctx)
        shapes = {slot: [tuple(int(d) for d in s) for s in lst] for slot, lst in raw.items()} if raw else raw
        self.serial = SPLIT_SMALL and bool(shapes) and work_estimate(ins, shapes) < SERIAL_WORK
        read = [(s, i, _value_key(ins[s][i])) for s, i in dict.fromkeys(ctx.read)]
        if len(read) <= 4 and all(len(k[2]) <= 256 for _, _, k in read):  # small shape tensors: cache
            self._shape_cache = (key, shapes, read)
        else:
            self._shape_cache = None
        return shapes

    def run(self, scope: dict[str, Any]) -> None:
        try:
            ins = {slot: [scope[n] for n in names] for slot, names in self._in_slots}
        except KeyError:
            ins = self.gather(scope)  # raises, naming the missing input
        shapes = None
        c = None
        if self.opdef.infer_shape is not None:
            c = self._shape_cache  # inlined cache hit of infer_shapes (the common case)
            if c is not None and not c[2] and c[0] == _shapes_key(ins):
                if c is self._checked:
                    self._run_checked(ins, scope)
                    return
                shapes = c[1]
            else:
                try:
                    shapes = self.infer_shapes(ins)
                    c = self._shape_cache  # the entry for these shapes (new, or a recent one restored)
                except PdliteError:
                    raise
                except Exception as e:
                    raise KernelError(f"shape inference of op {self.label} failed with inputs {_detail(ins)}: "
                                      f"{type(e).__name__}: {e}") from e
        outs = self._launch(ins)
        out_slots = self._out_slots
        for slot, vals in outs.items():
            names = out_slots.get(slot)
            if not names:
                continue
            want = shapes.get(slot) if shapes else None
            if want is None:
                for n, v in zip(names, vals):
                    scope[n] = v
                continue
            for i, (n, v) in enumerate(zip(names, vals)):
                if i < len(want) and v.shape != want[i]:
                    raise KernelError(
                        f"op {self.label}: kernel {self.kernel_def.key} produced {slot}[{i}] ({n!r}) of shape "
                        f"{list(v.shape)} but shape inference says {list(want[i])}")
                scope[n] = v
        if c is not None and shapes is c[1] and not c[2]:
            self._checked = c

    def _launch(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        try:
            return self.kernel.run(ins)
        except PdliteError:
            raise
        except Exception as e:
            raise KernelError(f"kernel {self.kernel_def.key} failed on op {self.label} with inputs {_detail(ins)}: "
                              f"{type(e).__name__}: {e}") from e

    def _run_checked(self, ins: dict[str, list[Any]], scope: dict[str, Any]) -> None:
        """run() on input shapes whose outputs have matched shape inference: launch and store."""
        outs = self._launch(ins)
        out_slots = self._out_slots
        for slot, vals in outs.items():
            names = out_slots.get(slot)
            if names:
                for n, v in zip(names, vals):
                    scope[n] = v


def _detail(ins: dict[str, list[Any]]) -> str:
    return ", ".join(f"{s}={[describe(v) for v in vals]}" for s, vals in ins.items())


def check_feed(name: str, value: np.ndarray, want_shape: list[int], want_dtype: np.dtype | None) -> None:
    """Refuse a feed of the wrong rank, fixed dims or dtype, naming the input."""
    if want_shape:
        if value.ndim != len(want_shape):
            raise InputError(f"input {name!r}: expected rank {len(want_shape)} (shape {want_shape}, -1 = any), "
                             f"got shape {list(value.shape)}")
        for i, (w, g) in enumerate(zip(want_shape, value.shape)):
            if w >= 0 and w != g:
                raise InputError(f"input {name!r}: dim {i} must be {w} (model shape {want_shape}), "
                                 f"got shape {list(value.shape)}")
    if want_dtype is not None and value.dtype != want_dtype:
        raise InputError(f"input {name!r}: expected dtype {want_dtype}, got {value.dtype}")
