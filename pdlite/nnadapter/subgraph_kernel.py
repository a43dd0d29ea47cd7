"""The `subgraph` op's kernel: convert its block to ONNX, build it with the device driver, run it.

One model for every input shape. On its first run the kernel converts the sub-block's ops with the dims
the program leaves open (-1 in the var descs, or a fed size other than the declared one) kept symbolic
(ONNX dim_param; shapes computed inside the graph; see `pdlite.nnadapter.dynamic` for how no shape of
one input is baked into the graph), builds it with the driver (through the on-disk model cache,
`model_cache.py`) and serves every later input signature whose fixed dims and dtypes match with that one
model: ONNX Runtime one session, OpenVINO one compiled model with dynamic dims. A signature that does not
fit (a dim the model fixed now differs) widens the model: it is converted and built again with that dim
symbolic too, and replaces the first. Each signature seen is kept in a table, so a run is one dict lookup
and `driver.run` with the input arrays as they are (no conversion, no copies). A new signature the dynamic
model fits costs pdlite the feed checks and one more lookup: the direct runner serves it too (see
`direct_runner`); what remains is the runtime's own per-shape work.

A device whose runtime runs static models faster (`Driver.promote_hot_shapes`: OpenVINO) also gives a
signature that earned it a model compiled for its own shape: 3 runs in a row, or as much run time on the
dynamic model as building that took (see `_earned`); those share the per-shape LRU below, and one dropped
from it goes back to the dynamic model.

One model per input shape (a bounded LRU, `NNAdapterOptions.shape_cache_size`, default 16) where the
dynamic model is not possible: a device that runs static shapes only (`Driver.dynamic_shapes = False`),
a block whose conversion needs a dim or value the input shapes do not fix (a converter refuses), or a
dynamic model the device cannot build, that fails on its first run, or that fails on a later shape (that
shape alone). The reason is logged (logger "pdlite.nnadapter", debug) and kept in `shape_mode` (which
`pdlite inspect --device` prints).

If converting, building or the first run of a newly built model fails (a device may accept a model it
then cannot run), the kernel warns once (naming the device and the reason) and runs the sub-block's
original ops with host kernels for that signature: the "original runtime program", analysed lazily
with host places the first time it is needed. A device never fails a run that the host would have
done, but for the user's own settings: a context property value the device refuses (a ConfigError,
e.g. INTEL_OPENVINO_INFERENCE_PRECISION_HINT=fp8) is raised at the first run, naming the property,
instead of running around it.

The kernel keeps per-run state (its compiled models, each device request), so runs enter it one at a
time, under its own lock. `direct_runner` serves the common whole-program case (feed -> one subgraph ->
fetch) without the general run loop: see its docstring.
"""
from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.program import BlockDesc, OpDesc, Program
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, TargetType
from pdlite.errors import ConfigError, InputError, KernelError, ModelFormatError, PdliteError
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.nnadapter.model_cache import forget
from pdlite.nnadapter.options import DEFAULT_SHAPE_CACHE_SIZE, NNAdapterOptions
from pdlite.operators.quant import is_quant_op

HOST_ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
MAX_SIGNATURES = DEFAULT_SHAPE_CACHE_SIZE  # per-shape models kept per subgraph by default (least recently used dropped)
MAX_SERVED = 4096  # signatures remembered as served by the dynamic model (forgotten all at once beyond it)
PROMOTE_STREAK = 3  # runs in a row of one signature that earn it a static model (drivers with promote_hot_shapes)
PROMOTE_MIN_S = 0.5  # floor of the run time that earns one (the dynamic model's build time when it took longer)
log = logging.getLogger("pdlite.nnadapter")


class NNAdapterFallbackWarning(RuntimeWarning):
    """A subgraph could not be built for its device and runs on the host."""


class _Compiled:
    __slots__ = ("model", "patterns")

    def __init__(self, model: Any, patterns: tuple | None = None) -> None:
        self.model = model
        self.patterns = patterns  # the dynamic model's inputs: ((shape with -1, dtype), ...); None: one signature


class _Fallback:
    __slots__ = ()


_FALLBACK = _Fallback()


@register_kernel("subgraph", target=TargetType.NNAdapter, precision=ANY_PRECISION, layout=ANY_LAYOUT,
                 inputs={"Inputs": HOST_ANY}, outputs={"Outputs": HOST_ANY})
class SubgraphKernel(Kernel):
    """Runs one subgraph on an NNAdapter device; see the module docstring."""

    def __init__(self, op: OpDesc, block: BlockDesc | None = None, program: Program | None = None,
                 options: NNAdapterOptions | None = None, device: str | None = None) -> None:
        super().__init__(op)
        self.block = block
        self.program = program
        self.options = options
        self.device = device
        self.in_names: list[str] = list(op.inputs.get("Inputs") or [])
        self.out_names: list[str] = list(op.outputs.get("Outputs") or [])
        data = set(op.attrs.get("input_data_names") or [])
        self.data_index = [i for i, n in enumerate(self.in_names) if n in data]
        self.data_names = [self.in_names[i] for i in self.data_index]
        self._entries: dict[tuple, _Compiled | _Fallback] = {}  # every signature served -> its model / host
        self._per_shape: OrderedDict[tuple, None] = OrderedDict()  # the signatures of per-shape entries (LRU)
        self._dynamic: _Compiled | None = None
        self._no_widen = False  # a wider dynamic model failed: shapes the current one does not fit go per shape
        self._cache_file: str | None = None  # the model cache's file of the model built last
        self._loaded = False  # whether that model was loaded from there (not compiled)
        self._expect: list[tuple[Any, Any]] | None = None  # the last converted model's inferred output shapes, dtypes
        # promotion of hot signatures to static models (Driver.promote_hot_shapes): seconds each has run on the
        # dynamic model, the signature of the last run and how many runs in a row it had, the run time that
        # earns a static model (0: no promotion), signatures whose static model failed
        self._hot: dict[tuple, float] = {}
        self._last_key: tuple | None = None
        self._streak = 0
        self._promote_after = 0.0
        self._unpromotable: set[tuple] = set()
        self._driver: Any = None
        self._host: Any = None
        self._params: dict[str, Any] = {}
        self._warned = False
        self._lock = threading.Lock()  # one run at a time (the device requests are per compiled model)
        self.builds = 0  # models built or loaded (tests and tools read it)
        self.cache_hits = 0
        # "dynamic": one model serves every shape; "per-shape: <reason>" otherwise; "" before the first run
        self.shape_mode = ""

    def bind(self, block: BlockDesc, program: Program, options: NNAdapterOptions, device: str) -> None:
        """Attach what the op desc alone does not carry (set by subgraph_detect_pass)."""
        self.block, self.program, self.options, self.device = block, program, options, device

    def bind_program(self, program: Any) -> None:
        """Bind to the stored sub-block and device when the runtime is rebuilt from a `.nb`: the device
        the config names (`nnadapter_device_names`), else the one the model was optimized for."""
        if self.block is not None:
            return
        idx = int(self.op.attrs["sub_block"])
        if not 0 < idx < len(program.blocks):
            raise ModelFormatError(f"subgraph op points to block {idx}, which the model does not hold")
        opts = NNAdapterOptions.from_options(dict(self.context.options))
        if opts is None:
            device = str(self.op.attrs.get("nnadapter_device") or "")
            if not device:
                raise ModelFormatError("subgraph op names no NNAdapter device; call "
                                       "MobileConfig.set_nnadapter_device_names([...])")
            opts = NNAdapterOptions((device,))
        self.bind(program.blocks[idx], program, opts, opts.pick_device())

    def prepare(self, params: Mapping[str, Any]) -> None:
        self._params = {n: params[n] for n in self.in_names if n in params}

    # -- hot path -----------------------------------------------------------------------------
    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        vals = ins.get("Inputs") or []
        data = [vals[i] for i in self.data_index]
        key = tuple([(a.shape, a.dtype) for a in data])
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return {"Outputs": self._new_signature(key, vals, data)}
            if entry is not _FALLBACK:
                if entry.patterns is None:
                    self._per_shape.move_to_end(key)
                elif self._promote_after:
                    return {"Outputs": self._run_counted(key, entry, vals, data)}
                return {"Outputs": self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])}
            return {"Outputs": self._run_host(vals)}

    def direct_runner(self, feed_names: Sequence[str],
                      fetch_names: Sequence[str]) -> Callable[[Mapping[str, Any]], list[Any] | None] | None:
        """For a program that is this one subgraph (its data inputs are feeds, the fetches among its outputs):
        `run(feeds) -> outputs in fetch order`, straight from the feeds to the driver (no scope, no
        instruction, no parameter gathering: the parameters are constants of the compiled model). It returns
        None, having done nothing, when a feed is unset or the feeds' signature was not served yet or
        falls back to the host: the caller then takes the general path (which checks the feeds, builds, checks
        the first run, runs host kernels with the config's threads). So a signature it runs went through that
        path's checks first, or is a new one that the model for all shapes fits and whose feeds pass the same
        checks (`check_feed` against the program's feed vars; one that fails them is left to that path, which
        raises): it runs on that model here, as the general path would run it (no model built, no host run).
        None instead of a runner when the program does not have that form (every feed a data input of this
        subgraph, every fetch one of its outputs)."""
        if set(self.data_names) != set(feed_names) or set(fetch_names) - set(self.out_names):
            return None
        names = list(self.data_names)
        main = self.program.main if self.program is not None else None
        specs = None if main is None else {n: _feed_spec(main, n) for n in names}
        pick = [self.out_names.index(n) for n in fetch_names]
        whole = pick == list(range(len(self.out_names)))  # the fetches are the outputs, in order
        label = f"subgraph({self.out_names[0] if self.out_names else ''})"
        entries, lock = self._entries, self._lock

        def run(feeds: Mapping[str, Any]) -> list[Any] | None:
            data = [feeds[n] for n in names]
            try:
                key = tuple([(a.shape, a.dtype) for a in data])
            except AttributeError:  # an input not set (None)
                return None
            with lock:
                entry = entries.get(key)
                if entry is None:  # a new signature: on the dynamic model when it fits and the feeds pass
                    dyn = self._dynamic
                    if specs is None or dyn is None or self.shape_mode != "dynamic" \
                            or not _fits_key(dyn.patterns, key) or not _feeds_pass(names, data, specs):
                        return None
                    outs = self._serve_dynamic(key, dyn, data)
                    if outs is None:  # the general path decides (a model for that shape)
                        return None
                    return outs if whole else [outs[i] for i in pick]
                if entry is _FALLBACK:
                    return None
                if entry.patterns is None:
                    self._per_shape.move_to_end(key)
                try:
                    if entry.patterns is not None and self._promote_after:
                        outs = self._run_counted(key, entry, None, data)
                    else:
                        outs = self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])
                except PdliteError:
                    raise
                except Exception as e:  # reported as Instruction.run reports a kernel's failure
                    raise KernelError(f"kernel subgraph on device {self.device!r} failed on op {label}: "
                                      f"{type(e).__name__}: {e}") from e
            return outs if whole else [outs[i] for i in pick]

        return run

    # -- a new input signature ----------------------------------------------------------------
    def _check_bound(self) -> None:
        if self.block is None or self.options is None or self.device is None:
            raise PdliteError("subgraph kernel has no block/device: it is created by subgraph_detect_pass "
                              "(or call kernel.bind(block, program, options, device))")

    def _quantized(self) -> bool:
        """True when the sub-block holds quantize / dequantize ops (an int8 subgraph)."""
        assert self.block is not None
        return any(is_quant_op(op.type) for op in self.block.ops)

    def _new_signature(self, key: tuple, vals: list[Any], data: list[Any]) -> list[Any]:
        """Outputs for a signature not served before; on the way, the model that serves it is chosen (the
        dynamic model, a wider one, or one for this shape alone) and remembered."""
        self._check_bound()
        if self._driver is None:
            from pdlite.nnadapter.registry import get_driver

            self._driver = get_driver(self.device)()  # type: ignore[arg-type]
        if not self.shape_mode:
            if not getattr(self._driver, "dynamic_shapes", True):
                self._per_shape_mode(f"device {self.device!r} runs static shapes only")
            elif not getattr(self._driver, "dynamic_int8", True) and self._quantized():
                self._per_shape_mode(f"device {self.device!r} runs int8 (quantized) subgraphs on static shapes only")
            else:
                self.shape_mode = "dynamic"
        if self.shape_mode == "dynamic":
            dyn = self._dynamic
            if dyn is not None and _fits(dyn.patterns, data):
                outs = self._serve_dynamic(key, dyn, data)
                if outs is not None:
                    return outs
            elif dyn is None or not self._no_widen:
                outs = self._build_dynamic(key, vals, data)
                if outs is not None:
                    return outs
        return self._build_per_shape(key, vals, data)

    def _serve_dynamic(self, key: tuple, dyn: _Compiled, data: list[Any]) -> list[Any] | None:
        """Run a new signature that the dynamic model fits on it and remember that it serves the signature; None
        when the device fails on it (that shape alone then gets a model of its own)."""
        try:
            outs = self._driver.run(dyn.model, [np.asarray(a, order="C") for a in data])
            if len(outs) != len(self.out_names):
                raise PdliteError(f"the device returned {len(outs)} outputs, expected {len(self.out_names)}")
        except Exception as e:
            log.debug("NNAdapter %s: subgraph %s's dynamic model failed on %s (%s: %s); a model for that shape",
                      self.device, self._label(), _sig(key), type(e).__name__, e)
            return None
        if len(self._entries) >= MAX_SERVED:
            for k in [k for k, e in self._entries.items() if e is dyn]:
                del self._entries[k]
        self._entries[key] = dyn
        return outs

    # -- hot signatures get static models (drivers that run those faster) ------------------------
    def _earned(self, key: tuple) -> bool:
        """Counts a run of `key` on the dynamic model; True when the signature has earned a static model of its
        own: PROMOTE_STREAK runs in a row (a fixed-shape workload), or as much run time on the dynamic model as
        building it took (a shape that keeps coming back among others: at most twice the cost of knowing)."""
        if key == self._last_key:
            self._streak += 1
        else:
            self._last_key, self._streak = key, 1
        if key in self._unpromotable:
            return False
        return self._streak >= PROMOTE_STREAK or self._hot.get(key, 0.0) >= self._promote_after

    def _values(self, data: Sequence[Any]) -> list[Any]:
        """The op's input values (what `run` gets) from its data inputs and its parameters."""
        given = dict(zip(self.data_names, data))
        return [given[n] if n in given else self._params.get(n) for n in self.in_names]

    def _run_counted(self, key: tuple, entry: _Compiled, vals: list[Any] | None, data: list[Any]) -> list[Any]:
        """A run of `key` on the dynamic model, counted towards its promotion (`vals` None: gathered only then)."""
        if self._earned(key):
            outs = self._promote(key, self._values(data) if vals is None else vals, data)
            if outs is not None:
                return outs
        t0 = time.perf_counter()
        outs = self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])
        if len(self._hot) >= MAX_SERVED:
            self._hot.clear()
        self._hot[key] = self._hot.get(key, 0.0) + time.perf_counter() - t0
        return outs

    def _promote(self, key: tuple, vals: list[Any], data: list[Any]) -> list[Any] | None:
        """A static model for signature `key` (kept with the per-shape models); its outputs, or None when it
        cannot be built (the dynamic model keeps serving the signature)."""
        self._hot.pop(key, None)
        try:
            entry = _Compiled(self._compile(self.onnx_model(vals, data)))
        except ConfigError:
            raise
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        else:
            outs, why = self._first_run(entry, vals, data)
        if why:
            self._unpromotable.add(key)
            log.debug("NNAdapter %s: subgraph %s keeps %s on the model for all shapes: %s", self.device,
                      self._label(), _sig(key), why)
            return None
        self._keep_per_shape(key, entry)
        log.debug("NNAdapter %s: subgraph %s: %s has a static model of its own", self.device, self._label(),
                  _sig(key))
        return outs

    def _keep_per_shape(self, key: tuple, entry: _Compiled | _Fallback) -> None:
        """Serve `key` with `entry`, one of the per-shape models; beyond the LRU's size the least recently used
        is dropped (a signature the dynamic model fits goes back to it)."""
        self._entries[key] = entry
        self._per_shape[key] = None
        dyn = self._dynamic
        while len(self._per_shape) > self._cache_size():
            old = self._per_shape.popitem(last=False)[0]
            if dyn is not None and _fits_key(dyn.patterns, old):
                self._entries[old] = dyn
            else:
                self._entries.pop(old, None)

    def _build_dynamic(self, key: tuple, vals: list[Any], data: list[Any]) -> list[Any] | None:
        """Convert and build the model with symbolic dims (wider than the current one, when there is one),
        check its first run against the host; its outputs, or None (and per-shape mode) when that fails."""
        from pdlite.nnadapter.dynamic import dynamic_dims

        assert self.block is not None
        old = self._dynamic
        flags = []
        for i, (n, a) in enumerate(zip(self.data_names, data)):
            v = self.block.vars.get(n)
            dyn = dynamic_dims(tuple(v.shape) if v is not None and v.is_tensor else None, tuple(a.shape))
            if old is not None and old.patterns is not None:
                pat, dt = old.patterns[i]
                if dt != a.dtype or len(pat) != a.ndim:
                    dyn = (True,) * a.ndim
                else:
                    dyn = tuple(k or p < 0 or p != d for k, p, d in zip(dyn, pat, a.shape))
            flags.append(dyn)
        t0 = time.perf_counter()
        try:
            model = self.onnx_model(vals, data, flags)
            compiled = _Compiled(self._compile(model), tuple(
                (tuple(-1 if k else int(d) for d, k in zip(a.shape, f)), a.dtype) for a, f in zip(data, flags)))
        except ConfigError:  # the user's settings (a context property's value): said, not run around
            raise
        except Exception as e:
            why = f"no model for all shapes: {type(e).__name__}: {e}"
        else:
            outs, why = self._first_run(compiled, vals, data)
            why = why and f"the model for all shapes failed its first run: {why}"
        if why:
            if old is None:
                self._per_shape_mode(why)
            else:  # the model so far keeps the shapes it fits; the others get models of their own
                self._no_widen = True
                log.debug("NNAdapter %s: subgraph %s not widened to %s: %s", self.device, self._label(), _sig(key),
                          why)
            return None
        if old is not None:
            for k in [k for k, e in self._entries.items() if e is old]:
                del self._entries[k]
        self._dynamic = compiled
        self._entries[key] = compiled
        if getattr(self._driver, "promote_hot_shapes", False):
            self._promote_after = max(time.perf_counter() - t0, PROMOTE_MIN_S)
        log.debug("NNAdapter %s: subgraph %s built for all shapes: inputs %s", self.device, self._label(),
                  [list(p) for p, _ in compiled.patterns or ()])
        return outs

    def _per_shape_mode(self, why: str) -> None:
        self.shape_mode = f"per-shape: {why}"
        self._dynamic = None
        log.debug("NNAdapter %s: subgraph %s gets one model per input shape (at most %d kept): %s", self.device,
                  self._label(), self._cache_size(), why)

    def _cache_size(self) -> int:
        return self.options.shape_cache_size if self.options is not None else MAX_SIGNATURES

    def _build_per_shape(self, key: tuple, vals: list[Any], data: list[Any]) -> list[Any]:
        entry: _Compiled | _Fallback
        try:
            entry = _Compiled(self._compile(self.onnx_model(vals, data)))
        except ConfigError:
            raise
        except Exception as e:
            self._warn(e)
            entry = _FALLBACK
        outs = None
        if entry is not _FALLBACK:
            outs, why = self._first_run(entry, vals, data)
            if why:
                self._warn(PdliteError(why))
                entry = _FALLBACK
        self._keep_per_shape(key, entry)
        return outs if outs is not None else self._run_host(vals)

    def _first_run(self, entry: _Compiled, vals: list[Any], data: list[Any]) -> tuple[list[Any] | None, str]:
        """Run a newly built model once, as the last step of building it: (outputs, "") if the device runs it
        with the output counts, shapes and dtypes of the host kernels (which the ops after the subgraph expect),
        else (the host's outputs or None, why not). The shapes and dtypes the conversion inferred for this input
        settle it when the device's agree (no host run: PP-OCRv4 rec's host run was most of its first call);
        otherwise the host kernels run and decide. A model loaded from the model cache passed this check in the
        process that compiled it (an entry that fails it is removed): not checked again."""
        loaded, self._loaded = self._loaded, False
        try:
            outs = self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])
            if len(outs) != len(self.out_names):
                raise PdliteError(f"the device returned {len(outs)} outputs, expected {len(self.out_names)}")
        except Exception as e:
            forget(self._cache_file)
            return None, f"{type(e).__name__}: {e}"
        if loaded or self._as_inferred(outs):
            return outs, ""
        try:
            host = self._run_host(vals)
        except PdliteError:  # no host kernels for these ops: nothing to check the device against
            return outs, ""
        for name, d, h in zip(self.out_names, outs, host):
            d, h = np.asarray(d), np.asarray(h)
            if d.shape != h.shape or d.dtype != h.dtype:
                forget(self._cache_file)
                return host, (f"output {name!r} is {d.dtype}{list(d.shape)} on the device, "
                              f"{h.dtype}{list(h.shape)} with host kernels")
        return outs, ""

    def _as_inferred(self, outs: Sequence[Any]) -> bool:
        """Whether the device's outputs have the shapes and dtypes the op definitions' shape inference gave for
        this input during conversion (what the host kernels produce; checked without running them). Anything
        else (an unknown shape, a mismatch) is decided by running the host kernels."""
        expect, self._expect = self._expect, None
        if expect is None or len(expect) != len(outs):
            return False
        for o, (shape, dtype) in zip(outs, expect):
            o = np.asarray(o)
            if shape is None or dtype is None or tuple(o.shape) != shape or o.dtype != dtype:
                return False
        return True

    def onnx_model(self, vals: list[Any], data: list[Any], dynamic: Sequence[Sequence[bool]] | None = None) -> Any:
        """The ONNX model of this subgraph for these input values (params) and data shapes; with `dynamic` (per
        data input, per dim: symbolic or not) the model for every shape that agrees on the other dims."""
        from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops
        from pdlite.nnadapter.dynamic import Probes, pattern

        assert self.block is not None
        params = {n: v for n, v in zip(self.in_names, vals) if n not in self.data_names}
        info = TensorInfo.from_vars(self.block.vars, params)
        infer, probes = None, None
        if dynamic is None:
            inputs = [GraphInput(n, tuple(a.shape), np.dtype(a.dtype)) for n, a in zip(self.data_names, data)]
        else:
            pats = [pattern(tuple(a.shape), f) for a, f in zip(data, dynamic)]
            inputs = [GraphInput(n, p, np.dtype(a.dtype), tuple(f"{n}_d{i}" if d < 0 else None
                                                               for i, d in enumerate(p)))
                      for n, a, p in zip(self.data_names, data, pats)]
            probes = Probes(info, self.block.vars,
                            [(n, tuple(a.shape), p) for n, a, p in zip(self.data_names, data, pats)])
            infer = probes.infer
        model = convert_ops(self.block.ops, inputs, self.out_names, info, self.block.vars,
                            graph_name=f"pdlite_subgraph_{self.block.idx}", device=self.device,
                            properties=self.options.properties if self.options is not None else None, infer=infer)
        real = info if probes is None else probes.probes[0]  # the facts at this input's own shapes
        self._expect = [(real.shapes.get(n) if real.static(n) else None, real.dtypes.get(n)) for n in self.out_names]
        return model

    def _compile(self, model: Any) -> Any:
        from pdlite.nnadapter.model_cache import build_cached, configured_dir

        assert self.options is not None and self.device is not None
        if len(model.graph.output) != len(self.out_names):
            raise PdliteError(f"converted model has {len(model.graph.output)} outputs, expected {len(self.out_names)}")
        compiled, self._cache_file, loaded = build_cached(
            self._driver, model.SerializeToString(), self.device, self.options.properties,
            configured_dir(self.options.model_cache_dir))
        self.builds += 1
        self.cache_hits += loaded
        self._loaded = loaded
        return compiled

    def _label(self) -> str:
        return f"{self.op.attrs.get('sub_block')} ({self.out_names[0] if self.out_names else ''})"

    def _warn(self, e: Exception) -> None:
        if self._warned:
            return
        self._warned = True
        ops = self.block.ops if self.block is not None else []
        types = sorted({op.type for op in ops})
        warnings.warn(
            f"NNAdapter device {self.device!r} could not run subgraph {self.op.attrs.get('sub_block')} "
            f"({len(ops)} ops: {', '.join(types)}): {type(e).__name__}: {e}; running its ops with host kernels",
            NNAdapterFallbackWarning, stacklevel=4)

    # -- host fallback ------------------------------------------------------------------------
    def _host_program(self) -> Any:
        if self._host is None:
            from pdlite.core.graph import Graph
            from pdlite.optimizer.optimizer import Optimizer
            from pdlite.optimizer.pass_registry import PassContext
            from pdlite.runtime.build import runtime_from_graph

            assert self.block is not None and self.options is not None
            blk = BlockDesc(self.block.idx, self.block.parent_idx, dict(self.block.vars),
                            [op.copy() for op in self.block.ops], self.block.forward_block_idx)
            graph = Graph(blk)
            ctx = PassContext(list(self.options.host_places), dict(self._params), {},
                              {"feed_names": list(self.data_names), "fetch_names": list(self.out_names),
                               "program": self.program})
            Optimizer(["static_kernel_pick_pass", "type_target_cast_pass"]).run(graph, ctx)
            rt = runtime_from_graph(graph)
            rt.prepare(self._params)
            self._host = rt
        return self._host

    def _run_host(self, vals: list[Any]) -> list[Any]:
        rt = self._host_program()
        scope = dict(zip(self.in_names, vals))
        rt.run(scope)
        return [scope[n] for n in self.out_names]


def _fits(patterns: tuple | None, data: Sequence[Any]) -> bool:
    """Whether arrays `data` match a dynamic model's inputs (dtypes, ranks, the dims it fixed)."""
    return _fits_key(patterns, tuple((a.shape, a.dtype) for a in data))


def _fits_key(patterns: tuple | None, key: tuple) -> bool:
    """Whether a signature ((shape, dtype) per data input) matches a dynamic model's inputs."""
    from pdlite.nnadapter.dynamic import matches

    return patterns is not None and len(patterns) == len(key) and all(
        dt == kd and matches(p, tuple(ks)) for (p, dt), (ks, kd) in zip(patterns, key))


def _feed_spec(block: BlockDesc, name: str) -> tuple[list[int], np.dtype | None]:
    """(declared shape, dtype) of feed `name` as the predictor checks it (`check_feed`)."""
    from pdlite.core.dtypes import numpy_dtype

    v = block.vars.get(name)
    dt = numpy_dtype(v.dtype, f"feed {name!r}") if v is not None and v.dtype is not None else None
    return (list(v.shape) if v is not None else [], dt)


def _feeds_pass(names: Sequence[str], data: Sequence[Any], specs: Mapping[str, tuple]) -> bool:
    """Whether arrays `data` pass the predictor's feed checks (rank, fixed dims, dtype)."""
    from pdlite.runtime.instruction import check_feed

    try:
        for n, a in zip(names, data):
            if type(a) is not np.ndarray:
                return False
            check_feed(n, a, *specs[n])
    except InputError:
        return False
    return True


def _sig(key: tuple) -> str:
    return ", ".join(f"{np.dtype(dt)}{list(s)}" for s, dt in key)


def direct_program(runtime: Any, feed_names: Sequence[str],
                   fetch_names: Sequence[str]) -> Callable[[Mapping[str, Any]], list[Any] | None] | None:
    """The direct runner (`SubgraphKernel.direct_runner`) of a runtime program that is one subgraph
    instruction fed by the feeds and fetched whole, else None. Predictors call it once per program."""
    from pdlite.runtime.runtime_program import RuntimeProgram

    if type(runtime) is not RuntimeProgram or len(runtime.instructions) != 1:
        return None
    inst = runtime.instructions[0]
    kernel = getattr(getattr(inst, "inner", inst), "kernel", None)  # an instruction, or one wrapped in a lock
    if not isinstance(kernel, SubgraphKernel):
        return None
    return kernel.direct_runner(feed_names, fetch_names)
