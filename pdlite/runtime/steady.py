"""The steady path: a runtime program's run on feed shapes it has run before, as a flat list of bound calls.

`Instruction.run` pays a few microseconds per op in Python on every run: it gathers its inputs into a dict of lists,
keys its shape-inference cache on their shapes, tests whether that entry was checked, calls the kernel (which builds
dicts of its own and looks up its per-shape plan) and stores the outputs. On a small model that is a quarter of
the run (MobileNetV3-small: 74 instructions). Once a program has run a set of feed shapes, those costs buy nothing
on a later run of the same shapes: every instruction whose kernel outputs matched shape inference (the
instruction's checked mark) sees the same input shapes, dtypes and strides again, so its kernel takes the same
path and writes outputs of the same layout.

`SteadyRunner` records, on the second run of a feed key (each non-parameter input the program reads before writing
it: shape, strides and dtype), one step per instruction:
- bound: the kernel's `bind(ins, fixed)` (pdlite/kernels/registry.py) returned one call for these shapes, e.g. a
  conv's native plan: the step is `scope[out] = fn(scope[x])`;
- generic: a checked instruction whose kernel does not bind: `kernel.run` on the inputs, outputs stored, with no
  shape key and no check;
- constant: an op whose outputs' values the key fixes (a shape op; shape arithmetic such as slice, concat or cast on
  such values and parameters): a fresh copy of the recorded outputs. An instruction whose value-dependent shape
  inference read only such values (reshape2 whose ShapeTensor is computed from a shape op) then binds like any
  other, the values in its `fixed` slots;
- re-checked: an instruction that is not marked checked (shape inference reading values the key does not fix, such
  as reshape2 with a fed ShapeTensor; no shape inference; control flow, subgraph and delegate instructions;
  non-array inputs): it runs
  through `Instruction.run` as on the normal path, and its outputs' shapes, strides and dtypes are compared with the
  recorded ones; a difference ends the steady run there and the rest runs on the normal path. An instruction whose
  outputs are not arrays ends the recorded list (the rest always runs normally).
Later runs with that key run the list, the memory plan's releases included. The program's parameters (the values
`prepare` saw, under names no instruction writes) are checked by identity on each run (~3 us for a hundred): bound
calls may hold them (a conv's packed weights), and generic steps would not see a new one's shape; a run with another
parameter object takes the normal path. A step that raises is run again through `Instruction.run`, so errors name
the op as usual. The plans of the last PLANS keys are kept.

Hooks (profilers) are called after each step, so they time what runs. The normal path stays for the split-thread
mode, feeds that are not NumPy arrays and changed parameters; the config option `steady_path` (default on) turns
this path off, for comparisons and debugging. Results are the same bits: the same kernels run on the same inputs
(tests/core/test_steady_path.py runs the models and the conformance programs both ways).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from operator import is_, itemgetter
from typing import Any

import numpy as np

from pdlite.kernels.registry import RECENT_SHAPES, Bound, remember
from pdlite.runtime.instruction import Instruction, _shapes_key, _ValueTracking

Step = Callable[[dict[str, Any]], None]

# ops whose outputs' values follow from their inputs' shapes and their attributes alone
SHAPE_VALUED = frozenset({"shape", "shape64", "size", "fill_any_like", "fill_zeros_like",
                          "fill_constant_batch_size_like"})
# deterministic ops of shape arithmetic: their outputs' values follow from their inputs' values and attributes
SHAPE_ARITHMETIC = frozenset({
    "slice", "strided_slice", "concat", "stack", "split", "gather", "cast", "scale", "assign", "assign_value",
    "fill_constant", "range", "squeeze", "squeeze2", "unsqueeze", "unsqueeze2", "reshape", "reshape2",
    "flatten_contiguous_range", "transpose2", "expand_v2", "tile", "reduce_prod", "reduce_sum", "reduce_max",
    "reduce_min", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_floordiv",
    "elementwise_mod", "elementwise_max", "elementwise_min", "equal", "not_equal", "less_than", "less_equal",
    "greater_than", "greater_equal", "logical_and", "logical_or", "logical_not",
})
CONSTANT_MAX = 4096  # elements of an instruction's outputs up to which values fixed by the feed key are kept
# plans kept per program (the most recent keys): more than an instruction's RECENT_SHAPES, as a plan is small (its
# steps hold the kernels' plans, not copies) and OCR's recogniser meets ten line widths per page of the examples
PLANS = 4 * RECENT_SHAPES
# Recording costs about one more normal run (binding, closures: 0.4x MobileNetV3-small's run, 1.2x the transformer
# encoder's) and a steady run saves a quarter to a third of one. Keys that recur too rarely for their plans to pay
# (more than PLANS varied shapes in turn) would make every record a loss: past RECORD_GRACE records, a program records
# only while its steady runs number at least RECORD_PAYBACK per record so far.
RECORD_GRACE = 2 * RECENT_SHAPES
RECORD_PAYBACK = 2
Hook = Callable[[Any, float, dict[str, Any]], None]


class _Diverged(Exception):
    """A re-checked instruction's outputs differ from the recorded ones: the rest of the run is the normal path's."""


class SteadyPlan:
    """The recorded steps of one feed key: (step, release) for instructions [0, len(steps)), the rest normal."""

    def __init__(self, steps: list[tuple[Step, tuple[str, ...]]], kinds: list[str]) -> None:
        self.steps = steps
        self.kinds = kinds  # per step: "bound", "generic", "constant" or "checked" (tests, reports)

    def counts(self) -> dict[str, int]:
        return {k: self.kinds.count(k) for k in ("bound", "generic", "constant", "checked")}


class SteadyRunner:
    """Steady plans of one runtime program's instruction list (rebuilt by the program when that list is replaced)."""

    def __init__(self, instructions: Sequence[Any], release: Sequence[tuple[str, ...]],
                 params: Mapping[str, Any]) -> None:
        self.instructions = instructions
        self.release = release
        written: set[str] = set()
        external: dict[str, None] = {}
        for inst in instructions:
            for n in inst.op.input_names():
                if n not in written:
                    external.setdefault(n)
            written.update(inst.op.output_names())
        # parameters: prepared values of names no instruction writes, checked by identity on each run (a changed
        # one takes the normal path); the key covers the other inputs
        self.params = {n: params[n] for n in external if n in params and n not in written}
        self._param_values = tuple(self.params.values())
        self._get_params = itemgetter(*self.params) if len(self.params) > 1 else None
        self.feeds = [n for n in external if n not in self.params]
        self.plans: dict[tuple, SteadyPlan] = {}
        self._seen: dict[tuple, None] = {}  # keys run once: recorded on their second run
        self.records = 0
        self.steady_runs = 0  # (counts shared by clones' threads without a lock: approximate, which is enough)

    def key(self, scope: dict[str, Any]) -> tuple | None:
        """Shape, strides and dtype of each feed; None when one is missing or not a NumPy array."""
        k = []
        for n in self.feeds:
            v = scope.get(n)
            if type(v) is not np.ndarray:
                return None
            k.append((v.shape, v.strides, v.dtype))
        return tuple(k)

    def same_params(self, scope: dict[str, Any]) -> bool:
        """Whether `scope` holds the prepared parameters (the same objects)."""
        try:
            if self._get_params is not None:
                return all(map(is_, self._get_params(scope), self._param_values))
            return all(scope[n] is v for n, v in self.params.items())
        except KeyError:
            return False

    def run(self, scope: dict[str, Any], hook: Hook | None = None) -> bool:
        """Run the program on `scope` (`hook(instruction, seconds, scope)` after each instruction, as
        RuntimeProgram.run calls it); False (nothing run) when the feeds give no key or a parameter changed."""
        key = self.key(scope)
        if key is None or not self.same_params(scope):
            return False
        plan = self.plans.get(key)
        if plan is None:
            if key not in self._seen:
                remember(self._seen, key, None, 2 * PLANS)
                self._run_normal(scope, 0, hook)
            elif self.records < RECORD_GRACE or self.steady_runs >= RECORD_PAYBACK * self.records:
                self.records += 1
                remember(self.plans, key, self._record(scope, hook), PLANS)
            else:
                self._run_normal(scope, 0, hook)  # plans have not been paying: no recording for now
            return True
        self.steady_runs += 1
        if hook is not None:
            self._run_hooked(plan, scope, hook)
            return True
        steps = plan.steps
        pop = scope.pop
        i = 0
        try:
            for i, (step, release) in enumerate(steps):  # noqa: B007 - i names the step that raised
                step(scope)
                for name in release:
                    pop(name, None)
        except _Diverged:
            self._finish(scope, i)
        except Exception:
            self.instructions[i].run(scope)  # raises the usual error, naming the op
            self._finish(scope, i)
        else:
            if len(steps) < len(self.instructions):
                self._run_normal(scope, len(steps))
        return True

    def _run_hooked(self, plan: SteadyPlan, scope: dict[str, Any], hook: Hook) -> None:
        """The steady run with `hook` called after each step (profilers time what runs)."""
        insts, clock = self.instructions, time.perf_counter
        for i, (step, release) in enumerate(plan.steps):
            t0 = clock()
            try:
                step(scope)
            except _Diverged:
                hook(insts[i], clock() - t0, scope)
                self._finish(scope, i, hook)
                return
            except Exception:
                insts[i].run(scope)  # raises the usual error, naming the op
                hook(insts[i], clock() - t0, scope)
                self._finish(scope, i, hook)
                return
            hook(insts[i], clock() - t0, scope)
            for name in release:
                scope.pop(name, None)
        self._run_normal(scope, len(plan.steps), hook)

    def _finish(self, scope: dict[str, Any], i: int, hook: Hook | None = None) -> None:
        """After instruction i ran (outside its step): its releases, then the rest on the normal path."""
        for name in self.release[i]:
            scope.pop(name, None)
        self._run_normal(scope, i + 1, hook)

    def _run_normal(self, scope: dict[str, Any], start: int, hook: Hook | None = None) -> None:
        pop = scope.pop
        for inst, release in zip(self.instructions[start:], self.release[start:]):
            _run_instruction(inst, scope, hook)
            for name in release:
                pop(name, None)

    def _record(self, scope: dict[str, Any], hook: Hook | None = None) -> SteadyPlan:
        """A normal run that records each instruction's step while its inputs are at hand."""
        steps: list[tuple[Step, tuple[str, ...]]] = []
        kinds: list[str] = []
        pop = scope.pop
        building = True
        derived: set[str] = set()  # variables whose values this key fixes (constant steps' outputs)
        for inst, release in zip(self.instructions, self.release):
            ins = None
            if building and type(inst) is Instruction:
                ins = {slot: [scope.get(n) for n in names] for slot, names in inst._in_slots}
            _run_instruction(inst, scope, hook)
            if building:
                derived.difference_update(inst.op.output_names())
                made = None
                if ins is not None and all(type(v) is np.ndarray for vals in ins.values() for v in vals):
                    made = self._constant_step(inst, scope, derived) or self._steady_step(inst, ins, scope, derived)
                if made is None:
                    made = _checked_step(inst, scope)
                if made is None:
                    building = False  # outputs that are not arrays: the rest runs normally
                else:
                    steps.append((made[0], release))
                    kinds.append(made[1])
            for name in release:
                pop(name, None)
        return SteadyPlan(steps, kinds)

    def _constant_step(self, inst: Instruction, scope: dict[str, Any], derived: set[str]) -> tuple[Step, str] | None:
        """For an op whose outputs' values this key fixes (SHAPE_VALUED; SHAPE_ARITHMETIC on parameters and such
        values: a shape computation such as shape -> slice -> reshape2's ShapeTensor), a step storing a fresh copy of
        this run's small, C-contiguous outputs; None otherwise."""
        t = inst.op.type
        if t not in SHAPE_VALUED and not (t in SHAPE_ARITHMETIC and all(
                n in derived or n in self.params for n in inst.op.input_names())):
            return None
        names = [n for ns in inst._out_slots.values() for n in ns]
        vals = [v for v in map(scope.get, names) if type(v) is np.ndarray and v.flags.c_contiguous]
        if not names or len(vals) < len(names) or sum(v.size for v in vals) > CONSTANT_MAX:
            return None
        kept = [(n, v.copy()) for n, v in zip(names, vals)]
        derived.update(names)

        def step(scope: dict[str, Any]) -> None:
            for n, v in kept:
                scope[n] = v.copy()  # (a kernel's output is the run's own array)

        return step, "constant"

    def _steady_step(self, inst: Instruction, ins: dict[str, list[Any]], scope: dict[str, Any],
                     derived: set[str]) -> tuple[Step, str] | None:
        """A bound or generic step for an instruction run on inputs `ins` whose outputs are checked (or whose
        value-dependent shape inference read only values this key fixes), else None."""
        if inst.opdef.infer_shape is None:
            return None
        c = inst._shape_cache
        if c is not None and not c[2] and c[0] == _shapes_key(ins):
            if c is not inst._checked:
                return None
            shapes = c[1] or {}
        else:  # value-dependent inference (checked on every run): steady when what it reads is fixed by the key
            found = _fixed_inference(inst, ins, derived.union(self.params))
            if found is None:
                return None
            shapes = found
        for slot, names in inst._out_slots.items():
            want = shapes.get(slot)
            if want is None or len(want) < len(names) or any(type(scope.get(n)) is not np.ndarray for n in names):
                return None
        slots = dict(inst._in_slots)
        fixed = frozenset(s for s, names in slots.items() if all(n in self.params or n in derived for n in names))
        try:
            b = inst.kernel.bind(ins, fixed)
        except Exception:  # noqa: BLE001 - a kernel that cannot bind runs through its run()
            b = None
        step = _bound_step(b, slots, inst._out_slots) if b is not None else None
        if step is None:
            return _generic_step(inst), "generic"
        return step, "bound"


def _fixed_inference(inst: Instruction, ins: dict[str, list[Any]], fixed: set[str]) -> dict[str, list[tuple]] | None:
    """The output shapes shape inference gives on `ins` when it reads input values, all of them variables in
    `fixed` (values the feed key fixes); None otherwise (reads none, reads another, or fails). Run again here: an
    instruction keeps no cache entry when inference reads more than a few values (reshape2 with five ShapeTensor
    parts, PP-OCRv4 rec's attention)."""
    ctx = _ValueTracking(inst.op, ins)
    try:
        raw = inst.opdef.infer_shape(ctx)  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - it succeeded in this run's Instruction.run; any doubt: not steady
        return None
    slots = dict(inst._in_slots)
    if not ctx.read or not raw or not all(slots[s][i] in fixed for s, i in ctx.read):
        return None
    return {slot: [tuple(int(d) for d in sh) for sh in lst] for slot, lst in raw.items()}


def _run_instruction(inst: Any, scope: dict[str, Any], hook: Hook | None) -> None:
    if hook is None:
        inst.run(scope)
        return
    t0 = time.perf_counter()
    inst.run(scope)
    hook(inst, time.perf_counter() - t0, scope)


def _bound_step(b: Bound, ins: Mapping[str, list[str]], outs: Mapping[str, list[str]]) -> Step | None:
    """`scope[writes] = b.fn(*scope[reads])` with the slots resolved to variable names (None if one is unknown)."""
    try:
        rd = [ins[s][i] for s, i in b.reads]
        wr = [outs[s][i] for s, i in b.writes]
    except (KeyError, IndexError):
        return None
    fn = b.fn
    if len(wr) != 1:
        def step_n(scope: dict[str, Any]) -> None:
            for n, v in zip(wr, fn(*[scope[r] for r in rd])):
                scope[n] = v

        return step_n
    o = wr[0]
    if len(rd) == 1:
        a = rd[0]

        def step_1(scope: dict[str, Any]) -> None:
            scope[o] = fn(scope[a])

        return step_1
    if len(rd) == 2:
        a, b2 = rd

        def step_2(scope: dict[str, Any]) -> None:
            scope[o] = fn(scope[a], scope[b2])

        return step_2

    def step(scope: dict[str, Any]) -> None:
        scope[o] = fn(*[scope[r] for r in rd])

    return step


def _generic_step(inst: Instruction) -> Step:
    """The kernel's run on the instruction's inputs, its outputs stored (Instruction._run_checked without the shape
    key and the dict of inputs' checks)."""
    run = inst.kernel.run
    in_slots = inst._in_slots
    out_slots = inst._out_slots

    def step(scope: dict[str, Any]) -> None:
        outs = run({slot: [scope[n] for n in names] for slot, names in in_slots})
        for slot, vals in outs.items():
            names = out_slots.get(slot)
            if names:
                for n, v in zip(names, vals):
                    scope[n] = v

    return step


def _checked_step(inst: Any, scope: dict[str, Any]) -> tuple[Step, str] | None:
    """A step running `inst` as the normal path does, then comparing its outputs with this run's; None when an
    output is not a NumPy array."""
    names = inst.op.output_names()
    sigs = []
    for n in names:
        v = scope.get(n)
        if type(v) is not np.ndarray:
            return None
        sigs.append((n, v.shape, v.strides, v.dtype))
    run = inst.run

    def step(scope: dict[str, Any]) -> None:
        run(scope)
        for n, shape, strides, dtype in sigs:
            v = scope.get(n)
            if type(v) is not np.ndarray or v.shape != shape or v.strides != strides or v.dtype != dtype:
                raise _Diverged

    return step, "checked"
