"""What every predictor shares: named input/output handles around a prepared runtime program,
runs that are safe under threads, and `clone()`.

Threads. The runtime program is *reentrant*: a run keeps its values in its own scope, host
kernels allocate their outputs per call and only cache shape-derived plans. Kernels that hold
per-run state (NNAdapter subgraphs, whose device request is one per compiled model; delegate
kernels; any kernel with `reentrant = False`) are wrapped so that one run at a time enters them,
and a runtime that is not a plain RuntimeProgram (CUDA graphs) is run whole under one lock.
So clones, which share the program, the prepared kernels and the weights, run concurrently
with exact results. One predictor used from several threads is safe too: its handles keep data
per thread (pdlite/api/tensor.py) and its runs are serialised by a lock; clones run in parallel.

Copies. Inputs are copied when set (`from_numpy`); an output handed out is never an array a
later run writes into, nor a parameter or an input: outputs that are views of such arrays are
copied when the run ends.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite import __version__
from pdlite.api.tensor import Tensor
from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import Program
from pdlite.errors import InputError, ModelFormatError, PdliteError
from pdlite.nnadapter.subgraph_kernel import direct_program
from pdlite.runtime.instruction import Instruction, check_feed
from pdlite.runtime.profiler import HookChain, PrecisionProfiler, Profiler
from pdlite.runtime.runtime_program import Hook, RuntimeProgram
from pdlite.runtime.threads import run_threads

# attributes each predictor (and each clone) has of its own; everything else is shared by clones
PER_PREDICTOR = frozenset({"_inputs", "_outputs", "_lock", "profiler", "precision_profiler", "_hook"})


class _Serialised:
    """An instruction whose kernel keeps per-run state: one run at a time enters it (clones share the lock)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def run(self, scope: dict[str, Any]) -> None:
        with self.lock:
            self.inner.run(scope)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)

    def __repr__(self) -> str:
        return f"Serialised({self.inner!r})"


def _reentrant(inst: Any) -> bool:
    if type(inst) is not Instruction or getattr(inst.kernel, "reentrant", True) is False:
        return False
    try:
        from pdlite.nnadapter.subgraph_kernel import SubgraphKernel
    except ImportError:  # pragma: no cover
        return True
    return not isinstance(inst.kernel, SubgraphKernel)


def make_reentrant(runtime: RuntimeProgram) -> threading.Lock | None:
    """Wrap the runtime's non-reentrant instructions; returns a lock for whole runs when the runtime
    itself keeps state between runs (a CUDA graph program), else None."""
    if type(runtime) is not RuntimeProgram:
        return threading.Lock()
    runtime.instructions = [i if _reentrant(i) or isinstance(i, _Serialised) else _Serialised(i)  # type: ignore[misc]
                            for i in runtime.instructions]  # (a _Serialised runs as the Instruction it wraps)
    return None


def _root(a: np.ndarray) -> Any:
    """The object that owns an array's memory (the array itself when it owns it)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


class PredictorBase:
    """Named input/output tensors around a runtime program; runs safe under threads; `clone()`."""

    config: Any = None

    def _setup(self, program: Program, runtime: RuntimeProgram, params: dict[str, Any],
               feed_names: list[str], fetch_names: list[str], delegate: Any = None) -> None:
        runtime.prepare(params)
        if delegate is not None:
            from pdlite.delegate.runner import apply_delegate

            runtime = apply_delegate(delegate, program, runtime, params, fetch_names)
        self._program = program
        self._runtime = runtime
        self._params = params
        self._param_ids = frozenset(id(v) for v in params.values())
        self._serial = make_reentrant(runtime)
        # a program that is one NNAdapter subgraph: feeds straight to the device (no scope, no BLAS threads)
        self._direct = direct_program(runtime, feed_names, fetch_names)
        self._feed_names = feed_names
        self._fetch_names = fetch_names
        block = program.main
        self._feed_specs: dict[str, tuple[list[int], np.dtype | None]] = {}
        for n in feed_names:
            v = block.vars.get(n)
            dt = numpy_dtype(v.dtype, f"feed {n!r}") if v is not None and v.dtype is not None else None
            self._feed_specs[n] = (list(v.shape) if v is not None else [], dt)
        self._threads = self.config.threads() if self.config is not None else 1
        self._init_handles()

    def _init_handles(self) -> None:
        """This predictor's own handles, lock and profilers (a clone makes new ones)."""
        self._inputs = [Tensor(n, *reversed(self._feed_specs[n])) for n in self._feed_names]
        self._outputs = [Tensor(n) for n in self._fetch_names]
        self._lock = threading.Lock()
        options = self.config.options if self.config is not None else {}
        self.profiler = Profiler() if options.get("profile") else None
        self.precision_profiler = PrecisionProfiler() if options.get("precision_profile") else None
        self._hook: Hook | None = None
        if self.profiler or self.precision_profiler:
            self._hook = HookChain(self.profiler, self.precision_profiler)

    def clone(self) -> PredictorBase:
        """A predictor over the same program, prepared kernels and weights, with its own inputs and outputs.

        Costs a few handles (no loading, no analysis, no weight copies); run clones on as many threads as you like.
        """
        new = object.__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k not in PER_PREDICTOR})
        new._init_handles()
        return new

    # -- paddlelite API -----------------------------------------------------------------------
    def get_input(self, i: int) -> Tensor:
        """The input tensor at position `i` (feed order); InputError naming the inputs when out of range."""
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < len(self._inputs):
            raise InputError(f"get_input({i}): the model has {len(self._inputs)} input(s): {self._feed_names}")
        return self._inputs[i]

    def get_output(self, i: int) -> Tensor:
        """The output tensor at position `i` (fetch order); InputError naming the outputs when out of range."""
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < len(self._outputs):
            raise InputError(f"get_output({i}): the model has {len(self._outputs)} output(s): {self._fetch_names}")
        return self._outputs[i]

    def get_input_by_name(self, name: str) -> Tensor:
        """The input tensor named `name`; InputError naming the inputs when there is none."""
        try:
            return self._inputs[self._feed_names.index(name)]
        except ValueError:
            raise InputError(f"no input named {name!r}; inputs are {self._feed_names}") from None

    def get_output_by_name(self, name: str) -> Tensor:
        """The output tensor named `name`; InputError naming the outputs when there is none."""
        try:
            return self._outputs[self._fetch_names.index(name)]
        except ValueError:
            raise InputError(f"no output named {name!r}; outputs are {self._fetch_names}") from None

    def get_input_names(self) -> list[str]:
        """The model's input names, in feed order."""
        return list(self._feed_names)

    def get_output_names(self) -> list[str]:
        """The model's output names, in fetch order."""
        return list(self._fetch_names)

    def get_version(self) -> str:
        """pdlite's version string (paddlelite returns its own)."""
        return __version__

    def run(self) -> None:
        """Run on the inputs this thread set; the outputs are this thread's until its next run."""
        if self._direct is not None and self._hook is None:
            # one device subgraph: the feeds straight to the device. The runner answers only for feeds whose
            # shapes and dtypes it compiled, which the general path below checked first (check_feed), and the
            # device's outputs are arrays of its own (never a feed or a weight): no checks, no copies here.
            direct_feeds = {t.name: t.raw() for t in self._inputs}
            with self._lock:
                outs = self._direct(direct_feeds)
            if outs is not None:  # None: a signature not built yet, one that fell back to the host, a feed unset
                for t, v in zip(self._outputs, outs):
                    t._set(v)
                return
        feeds: dict[str, Any] = {}
        for t in self._inputs:
            data = t.raw()
            if data is None:
                raise InputError(f"input {t.name!r} was not set; call get_input_by_name({t.name!r}).from_numpy(...) "
                                 f"(inputs: {self._feed_names})")
            if isinstance(data, np.ndarray):
                shape, dtype = self._feed_specs[t.name]
                check_feed(t.name, data, shape, dtype)
            feeds[t.name] = data
        scope: dict[str, Any] = dict(self._params)
        scope.update(feeds)
        runtime = self._runtime
        try:
            with self._lock, run_threads(self._threads, bool(getattr(runtime, "native_gemm", False))):
                if self._serial is not None:
                    with self._serial:
                        runtime.run(scope, self._hook)
                else:
                    runtime.run(scope, self._hook)
        except PdliteError as e:
            empty = [f"{n!r} {list(v.shape)}" for n, v in feeds.items() if 0 in tuple(v.shape)]
            if empty:  # kernels run empty tensors where they can, not all do
                raise InputError(f"zero-size input {', '.join(empty)}: this model cannot run on an empty batch "
                                 f"(give at least one row): {e}") from e
            raise
        missing = [t.name for t in self._outputs if t.name not in scope]
        if missing:
            raise ModelFormatError(f"the program fetches {missing}, but none of its ops computes them")
        self._publish([scope[t.name] for t in self._outputs], feeds)

    def _publish(self, values: Sequence[Any], feeds: Mapping[str, Any]) -> None:
        """Hand this run's output `values` to the output tensors (private copies where they alias a feed or a weight)."""
        fed = {id(_root(v)) for v in feeds.values()}
        for t, v in zip(self._outputs, values):
            t._set(self._private(v, fed))

    def _private(self, value: Any, fed: set[int]) -> Any:
        """`value`, or a copy of it when it shares memory with a parameter, an input or a buffer not made by this run."""
        if not isinstance(value, np.ndarray):
            return value
        root = _root(value)
        if not isinstance(root, np.ndarray) or id(root) in self._param_ids or id(root) in fed \
                or not root.flags.writeable:
            return value.copy()
        return value

    # -- pdlite conveniences ------------------------------------------------------------------
    def predict(self, feeds: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Set inputs (by name or position), run, and return the outputs as NumPy arrays (new arrays: no later
        run writes into them)."""
        if isinstance(feeds, Mapping):
            unknown = set(feeds) - set(self._feed_names)
            if unknown:
                raise InputError(f"unknown input(s) {sorted(unknown)}; inputs are {self._feed_names}")
            for k, v in feeds.items():
                self.get_input_by_name(k).from_numpy(v)
        else:
            feeds = list(feeds)
            if len(feeds) != len(self._inputs):
                raise InputError(f"expected {len(self._inputs)} input(s) {self._feed_names}, got {len(feeds)}")
            for t, v in zip(self._inputs, feeds):
                t.from_numpy(v)
        self.run()
        return [self._handout(t) for t in self._outputs]

    @staticmethod
    def _handout(t: Tensor) -> np.ndarray:
        d = t.raw()
        return d if isinstance(d, np.ndarray) else t.numpy()

    def set_hook(self, hook: Hook | None) -> None:
        """Call `hook(instruction, seconds, scope)` after every instruction (profilers use this)."""
        self._hook = hook

    @property
    def runtime_program(self) -> RuntimeProgram:
        """The instructions the predictor runs (ops after the passes, each with its kernel)."""
        return self._runtime

    @property
    def program(self) -> Program:
        """The model's program (blocks, ops, variables) as loaded."""
        return self._program
