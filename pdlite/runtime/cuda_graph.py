"""CUDA graphs for a runtime program: capture its device part once per input signature, then replay.

`CudaGraphProgram` is a RuntimeProgram (same instructions) whose `run` works like this:

1. A new input signature (the feeds' shapes, dtypes and devices) is run eagerly, on a side
   stream (this warms up cuDNN / cuBLAS and fills the kernels' per-shape caches), and its results
   are returned. The program is then captured in a `torch.cuda.CUDAGraph` from that run's values.
2. The instructions are classified from the values the eager run left in the scope:
   - *post*: instructions that read device data on the host (the io_copy that brings results
     back, or any host kernel fed by one) and everything after them on the host. They run
     eagerly after each replay. A device kernel fed by such a value makes the program not
     capturable (it would have to wait for the GPU in the middle).
   - *staged* io_copy Host->CUDA: each gets a static device buffer; inside the graph the copy is
     replaced by that buffer, and before each replay the new host value is copied into it
     (only when it derives from the feeds; constants stay as captured).
   - *pre*: host instructions whose inputs derive from the feeds' values: run eagerly before each
     replay (their results feed staged copies). Host instructions that derive only from shapes
     (`shape` reads metadata, fill_constant ...) are static: their values are kept from the capture.
   - everything else (the device kernels) is captured.
3. A replay: restore the static host values, run *pre*, restage, `graph.replay()`, put the
   captured outputs into the scope, run *post*.

Graphs are kept per signature (LRU, `cuda_graph_cache` option, default 4). A capture that fails
(a kernel that synchronizes, data-dependent host work between device kernels, ...) turns graphs
off for this program with a warning and it keeps running eagerly. With a profiler hook, or on a
device other than CUDA, the program runs eagerly.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from pdlite.core.types import TargetType
from pdlite.errors import PdliteError
from pdlite.kernels.cuda.base import to_torch, torch_device
from pdlite.kernels.registry import KernelContext
from pdlite.runtime.instruction import Instruction
from pdlite.runtime.runtime_program import Hook, RuntimeProgram

Signature = tuple[tuple[str, tuple[int, ...], str, str], ...]


class NotCapturable(PdliteError):
    """The program (for these inputs) cannot be captured in a CUDA graph."""


class _Stale(Exception):
    """A staged input changed shape or dtype: the captured graph does not fit any more."""


def _on_device(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type == "cuda"


def _is_tensor(v: Any) -> bool:
    return isinstance(v, torch.Tensor)


@dataclass
class Stage:
    """A Host->CUDA io_copy replaced by a static buffer (restaged before each replay if `dynamic`)."""

    inst: Instruction
    src: str
    dst: str
    dynamic: bool


@dataclass
class GraphPlan:
    """How the instructions split around a graph (see the module docstring)."""

    pre: list[Instruction]
    post: list[Instruction]
    stages: list[Stage]
    region: list[tuple[Instruction, tuple[str, ...]]]  # captured instructions and the names to drop after each
    static: list[str]  # host values made inside the region, kept from the capture
    outputs: list[str]  # device values made inside the region and read after it (or by nobody: results)


def plan_graph(instructions: list[Instruction], scope: dict[str, Any], feeds: set[str],
               release: list[tuple[str, ...]] | None = None, on_device: Callable[[Any], bool] = _on_device,
               ) -> GraphPlan:
    """Classify the instructions from the values an eager run (without releases) left in `scope`."""
    post: list[Instruction] = []
    pre: list[Instruction] = []
    stages: list[Stage] = []
    post_vars: dict[str, Instruction] = {}  # var computed after device data came to the host -> its op
    dyn = set(feeds)
    region_made: dict[str, bool] = {}  # var made by a region instruction -> is a device value
    staged: set[int] = set()
    for inst in instructions:
        ins, outs = inst.op.input_names(), inst.op.output_names()
        kd = inst.kernel_def
        # declared host outputs (a fetch copy kept on the device by cuda_device_outputs still counts)
        host_out = all(kd.output_type(s).target == TargetType.Host for s, names in inst.op.outputs.items() if names)
        dev_out = not host_out and any(on_device(scope.get(n)) for n in outs)
        meta = bool(getattr(inst.kernel, "metadata_only", False))
        reads_dev = not meta and any(on_device(scope.get(n)) for n in ins)
        if any(n in post_vars for n in ins) or (reads_dev and not dev_out):
            if dev_out:
                n = next(n for n in ins if n in post_vars)
                raise NotCapturable(f"op {inst.label} runs on the device after {post_vars[n].label} brought "
                                    f"device data to the host ({n!r}): the GPU would have to wait in between")
            post.append(inst)
            post_vars.update(dict.fromkeys(outs, inst))
            continue
        dynamic = not meta and any(n in dyn for n in ins)
        if dynamic:
            dyn.update(outs)
        if not dev_out and dynamic:
            pre.append(inst)
            continue
        if (inst.op.type == "io_copy" and dev_out and kd.input_type("Input").target == TargetType.Host
                and getattr(inst.kernel, "_const", None) is None):
            stages.append(Stage(inst, inst.op.inputs["Input"][0], inst.op.outputs["Out"][0], dynamic))
            staged.add(id(inst))
        region_made.update({n: on_device(scope.get(n)) for n in outs})
    read_after = {n for inst in (*pre, *post) for n in inst.op.input_names()}
    read_any = {n for inst in instructions for n in inst.op.input_names()}
    outputs = [n for n, dev in region_made.items() if dev and (n in read_after or n not in read_any)]
    static = [n for n, dev in region_made.items() if not dev]
    keep = set(outputs) | set(static) | {st.src for st in stages}
    drops = release if release is not None else [() for _ in instructions]
    skip = {id(i) for i in (*pre, *post)} | staged
    region = [(inst, tuple(n for n in rel if n not in keep))
              for inst, rel in zip(instructions, drops) if id(inst) not in skip]
    pre_made = {n for inst in pre for n in inst.op.output_names()}
    for inst, _ in region:
        if any(n in pre_made for n in inst.op.input_names()):
            raise NotCapturable(f"op {inst.label} reads host values computed from the inputs' values on every run")
    return GraphPlan(pre, post, stages, region, static, outputs)


Recorder = Callable[[Callable[[], None]], Any]


def cuda_recorder(fn: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """Capture what `fn` launches in a CUDA graph."""
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        fn()
    return graph


@dataclass
class Captured:
    """One captured graph and what a replay needs around it."""

    plan: GraphPlan
    graph: Any  # has .replay()
    buffers: dict[str, torch.Tensor]  # staged io_copy output -> its static buffer
    scope: dict[str, Any]  # the values the region wrote while it was captured (static tensors)
    static_values: dict[str, Any] = field(default_factory=dict)

    def replay(self, scope: dict[str, Any]) -> None:
        plan = self.plan
        scope.update(self.static_values)
        for inst in plan.pre:
            inst.run(scope)
        for st in plan.stages:
            if not st.dynamic:
                continue
            buf = self.buffers[st.dst]
            v = scope[st.src]
            t = v if _is_tensor(v) else to_torch(v, torch.device("cpu"))
            if tuple(t.shape) != tuple(buf.shape) or t.dtype != buf.dtype:
                raise _Stale(st.src)
            buf.copy_(t)
        self.graph.replay()
        for n in plan.outputs:
            scope[n] = self.scope[n]
        for inst in plan.post:
            inst.run(scope)


def capture(plan: GraphPlan, scope: dict[str, Any], recorder: Recorder = cuda_recorder) -> Captured:
    """Record the plan's region, starting from an eager run's values (`scope`), with static input buffers."""
    buffers = {st.dst: scope[st.dst].clone() for st in plan.stages}
    region_scope = dict(scope)
    region_scope.update(buffers)

    def run_region() -> None:
        region_scope.update(buffers)
        for inst, drop in plan.region:
            inst.run(region_scope)
            for n in drop:
                region_scope.pop(n, None)

    graph = recorder(run_region)
    static_values = {n: region_scope[n] for n in plan.static if n in region_scope}
    return Captured(plan, graph, buffers, region_scope, static_values)


class CudaGraphProgram(RuntimeProgram):
    """A RuntimeProgram that replays CUDA graphs of its device part (see the module docstring)."""

    def __init__(self, instructions: list[Instruction], options: Mapping[str, Any] | None = None,
                 release: list[tuple[str, ...]] | None = None) -> None:
        super().__init__(instructions, release)
        self.options = dict(options or {})
        self.max_graphs = max(1, int(self.options.get("cuda_graph_cache", 4)))
        self.graphs: OrderedDict[Signature, Captured] = OrderedDict()
        self.disabled: str | None = None
        self._param_names: set[str] = set()
        self._device_type: str | None = None
        produced = {n for inst in instructions for n in inst.op.output_names()}
        self._external = list(dict.fromkeys(n for inst in instructions for n in inst.op.input_names()
                                            if n not in produced))

    def prepare(self, params: dict[str, Any]) -> None:
        super().prepare(params)
        self._param_names = set(params)

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.graphs.clear()
        warnings.warn(f"pdlite: CUDA graphs are off for this predictor, running eagerly: {reason}",
                      RuntimeWarning, stacklevel=3)

    def run(self, scope: dict[str, Any], hook: Hook | None = None) -> None:
        if hook is not None or self.disabled:
            super().run(scope, hook)
            return
        if self._device_type is None:
            self._device_type = torch_device(KernelContext(self.options)).type
            if self._device_type != "cuda":
                self._disable(f"the CUDA kernels run on torch's {self._device_type!r} device, not on a GPU")
                super().run(scope)
                return
        feeds = [n for n in self._external if n in scope and n not in self._param_names]
        sig: Signature = tuple((n, tuple(scope[n].shape), str(scope[n].dtype),
                                str(scope[n].device) if _is_tensor(scope[n]) else "host") for n in feeds)
        cap = self.graphs.get(sig)
        if cap is not None:
            self.graphs.move_to_end(sig)
            base = dict(scope)
            try:
                cap.replay(scope)
                return
            except _Stale:
                del self.graphs[sig]
                scope.clear()
                scope.update(base)
        self._warm_and_capture(scope, sig, set(feeds))

    def _warm_and_capture(self, scope: dict[str, Any], sig: Signature, feeds: set[str]) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for inst in self.instructions:  # no releases: the plan reads every value
                inst.run(scope)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        try:
            cap = capture(plan_graph(self.instructions, scope, feeds, self.release), scope)
        except NotCapturable as e:
            self._disable(str(e))
            return
        except Exception as e:  # a kernel that cannot be captured (it synchronizes, uploads, ...)
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the capture error is the one to report
                pass
            self._disable(f"capture failed: {type(e).__name__}: {e}")
            return
        self.graphs[sig] = cap
        while len(self.graphs) > self.max_graphs:
            self.graphs.popitem(last=False)
