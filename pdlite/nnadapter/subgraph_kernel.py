"""The `subgraph` op's kernel: convert its block to ONNX, build it with the device driver, run it.

Per distinct input signature (shapes and dtypes of the data inputs) the kernel converts the
sub-block's ops with those concrete shapes, builds the model with the driver (through the
on-disk model cache when one is configured) and keeps it; later runs with that signature go
straight to `driver.run` with the input arrays as they are (no conversion, no copies).
If converting, building or the first run of a newly built model fails (a device may accept a
model it then cannot run), the kernel warns once (naming the device and the reason) and runs the
sub-block's original ops with host kernels for that signature: the "original runtime program",
analysed lazily with host places the first time it is needed. A device never fails a run that
the host would have done, but for the user's own settings: a context property value the device
refuses (a ConfigError, e.g. INTEL_OPENVINO_INFERENCE_PRECISION_HINT=fp8) is raised at the first
run, naming the property, instead of running around it.

The kernel keeps per-run state (its compiled models, each device request), so runs enter it one at a
time, under its own lock. `direct_runner` serves the common whole-program case (feed -> one subgraph ->
fetch) without the general run loop: see its docstring.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.core.program import BlockDesc, OpDesc, Program
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, HOST, TargetType
from pdlite.errors import ConfigError, KernelError, ModelFormatError, PdliteError
from pdlite.kernels.registry import Kernel, TensorType, register_kernel
from pdlite.nnadapter.options import NNAdapterOptions

HOST_ANY = TensorType(HOST, ANY_PRECISION, ANY_LAYOUT)
MAX_SIGNATURES = 16  # compiled models kept per subgraph (least recently used dropped)


class NNAdapterFallbackWarning(RuntimeWarning):
    """A subgraph could not be built for its device and runs on the host."""


class _Compiled:
    __slots__ = ("model",)

    def __init__(self, model: Any) -> None:
        self.model = model


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
        self._entries: OrderedDict[tuple, _Compiled | _Fallback] = OrderedDict()
        self._driver: Any = None
        self._host: Any = None
        self._params: dict[str, Any] = {}
        self._warned = False
        self._lock = threading.Lock()  # one run at a time (the device requests are per compiled model)
        self.builds = 0  # models built or loaded (tests and tools read it)
        self.cache_hits = 0

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
                entry = self._build(key, vals, data)
                if entry is not _FALLBACK:
                    return {"Outputs": self._first_run(key, entry, vals, data)}
            if entry is not _FALLBACK:
                return {"Outputs": self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])}
            return {"Outputs": self._run_host(vals)}

    def direct_runner(self, feed_names: Sequence[str],
                      fetch_names: Sequence[str]) -> Callable[[Mapping[str, Any]], list[Any] | None] | None:
        """For a program that is this one subgraph (its data inputs are feeds, the fetches among its outputs):
        `run(feeds) -> outputs in fetch order`, straight from the feeds to the driver (no scope, no
        instruction, no parameter gathering: the parameters are constants of the compiled model). It returns
        None, having done nothing, when a feed is unset or the feeds' signature has no compiled model yet or
        falls back to the host: the caller then takes the general path (which checks the feeds, builds, checks
        the first run, runs host kernels with the config's threads). So a signature it runs went through that
        path's checks first. None instead of a runner when the program does not have that form (every feed a
        data input of this subgraph, every fetch one of its outputs)."""
        if set(self.data_names) != set(feed_names) or set(fetch_names) - set(self.out_names):
            return None
        names = list(self.data_names)
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
                if entry is None or entry is _FALLBACK:
                    return None
                try:
                    outs = self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])
                except PdliteError:
                    raise
                except Exception as e:  # reported as Instruction.run reports a kernel's failure
                    raise KernelError(f"kernel subgraph on device {self.device!r} failed on op {label}: "
                                      f"{type(e).__name__}: {e}") from e
            return outs if whole else [outs[i] for i in pick]

        return run

    # -- building -----------------------------------------------------------------------------
    def _check_bound(self) -> None:
        if self.block is None or self.options is None or self.device is None:
            raise PdliteError("subgraph kernel has no block/device: it is created by subgraph_detect_pass "
                              "(or call kernel.bind(block, program, options, device))")

    def _build(self, key: tuple, vals: list[Any], data: list[Any]) -> _Compiled | _Fallback:
        self._check_bound()
        entry: _Compiled | _Fallback
        try:
            entry = _Compiled(self._compile(vals, data))
        except ConfigError:  # the user's settings (a context property's value): said, not run around
            raise
        except Exception as e:
            self._warn(e)
            entry = _FALLBACK
        self._entries[key] = entry
        if len(self._entries) > MAX_SIGNATURES:
            self._entries.popitem(last=False)
        return entry

    def _first_run(self, key: tuple, entry: _Compiled, vals: list[Any], data: list[Any]) -> list[Any]:
        """Run a newly built model once, as the last step of building it, beside the host ops: if the
        device cannot run it, or returns other output counts, shapes or dtypes than the host kernels
        (which the ops after the subgraph expect), this signature falls back to the host."""
        try:
            outs = self._driver.run(entry.model, [np.asarray(a, order="C") for a in data])
            if len(outs) != len(self.out_names):
                raise PdliteError(f"the device returned {len(outs)} outputs, expected {len(self.out_names)}")
        except Exception as e:
            self._warn(e)
            self._entries[key] = _FALLBACK
            return self._run_host(vals)
        try:
            host = self._run_host(vals)
        except PdliteError:  # no host kernels for these ops: nothing to check the device against
            return outs
        for name, d, h in zip(self.out_names, outs, host):
            d, h = np.asarray(d), np.asarray(h)
            if d.shape != h.shape or d.dtype != h.dtype:
                self._warn(PdliteError(f"output {name!r} is {d.dtype}{list(d.shape)} on the device, "
                                       f"{h.dtype}{list(h.shape)} with host kernels"))
                self._entries[key] = _FALLBACK
                return host
        return outs

    def onnx_model(self, vals: list[Any], data: list[Any]) -> Any:
        """The ONNX model of this subgraph for these input values (params) and data shapes."""
        from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops

        assert self.block is not None
        params = {n: v for n, v in zip(self.in_names, vals) if n not in self.data_names}
        info = TensorInfo.from_vars(self.block.vars, params)
        inputs = [GraphInput(n, tuple(a.shape), np.dtype(a.dtype)) for n, a in zip(self.data_names, data)]
        return convert_ops(self.block.ops, inputs, self.out_names, info, self.block.vars,
                           graph_name=f"pdlite_subgraph_{self.block.idx}", device=self.device,
                           properties=self.options.properties if self.options is not None else None)

    def _compile(self, vals: list[Any], data: list[Any]) -> Any:
        from pdlite.nnadapter.registry import get_driver

        assert self.options is not None and self.device is not None
        model = self.onnx_model(vals, data)
        if len(model.graph.output) != len(self.out_names):
            raise PdliteError(f"converted model has {len(model.graph.output)} outputs, expected {len(self.out_names)}")
        blob = model.SerializeToString()
        if self._driver is None:
            self._driver = get_driver(self.device)()
        props = self.options.properties
        path = None
        if self.options.model_cache_dir:
            h = hashlib.sha256(blob)
            h.update(self.device.encode())
            h.update(repr(sorted(props.items())).encode())
            h.update(self._driver.cache_token(props).encode())
            path = os.path.join(self.options.model_cache_dir, f"{h.hexdigest()}.{self.device}")
            if os.path.isfile(path):
                try:
                    compiled = self._driver.build(blob, props, path)
                    self.cache_hits += 1
                    self.builds += 1
                    return compiled
                except Exception:  # a stale or broken cache entry: rebuild it
                    os.unlink(path)
        compiled = self._driver.build(blob, props, path)
        self.builds += 1
        return compiled

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
