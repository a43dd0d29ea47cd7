"""The runtime program: instructions in execution order (built by `pdlite.runtime.build`)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pdlite.errors import KernelError, PdliteError
from pdlite.kernels.host import native
from pdlite.kernels.registry import KernelContext
from pdlite.runtime import instruction, memory, threads
from pdlite.runtime.instruction import Instruction, describe
from pdlite.runtime.steady import SteadyRunner

OFF = (False, 0, "0", "false", "False", "off")  # an on/off option's off values

# profiler hook: called with (instruction, seconds, outputs scope) after each instruction
Hook = Callable[[Instruction, float, dict[str, Any]], None]


class RuntimeProgram:
    def __init__(self, instructions: list[Instruction], release: list[tuple[str, ...]] | None = None,
                 native_gemm: bool | None = None) -> None:
        self.instructions = instructions
        # per instruction: intermediates to drop from the scope after it (memory_optimize_pass)
        self.release = release if release is not None else [() for _ in instructions]
        # the host kernels run their GEMMs on the native thread pool (BLAS then single-threaded); by
        # default, as the kernels' context says (one context is shared by a program's kernels)
        ctxs = (getattr(getattr(i, "kernel", None), "context", None) for i in instructions)
        ctx = next((c for c in ctxs if isinstance(c, KernelContext)), None)
        if native_gemm is None:
            native_gemm = native.use_native(ctx) and native.gemm_available()
        self.native_gemm = native_gemm
        if ctx is None or ctx.option("host_retain_memory", True) not in OFF:
            memory.retain_freed_memory()  # the next run reuses this run's freed activations (pdlite/runtime/memory.py)
        # runs on feed shapes seen before take the steady path (pdlite/runtime/steady.py); option steady_path
        self.steady = ctx is None or ctx.option("steady_path", True) not in OFF
        self._params: dict[str, Any] = {}
        self._steady: SteadyRunner | None = None

    def prepare(self, params: dict[str, Any]) -> None:
        self._params = params
        self._steady = None
        for inst in self.instructions:
            if not inst.prepared:
                weights = {n: params[n] for n in inst.op.input_names() if n in params}
                try:
                    inst.kernel.prepare(weights)
                except PdliteError:
                    raise
                except Exception as e:  # a kernel's weight re-layout on weights that do not fit its op
                    detail = ", ".join(f"{n}={describe(v)}" for n, v in weights.items())
                    raise KernelError(f"op {inst.op.type}: its kernel could not prepare the weights {detail}: "
                                      f"{type(e).__name__}: {e}") from e
                inst.prepared = True

    def run(self, scope: dict[str, Any], hook: Hook | None = None) -> None:
        threads.use_native_gemm(self.native_gemm)
        pool = (native.get_num_threads() or 1) if instruction.SPLIT_SMALL else 1
        if pool > 1 and hook is None:
            self._run_split(scope, pool)
            return
        if self.steady:
            runner = self._steady
            if runner is None or runner.instructions is not self.instructions or runner.release is not self.release:
                runner = self._steady = SteadyRunner(self.instructions, self.release, self._params)
            if runner.run(scope, hook):
                return
        if hook is None:
            pop = scope.pop
            for inst, release in zip(self.instructions, self.release):
                inst.run(scope)
                for name in release:
                    pop(name, None)
            return
        for inst, release in zip(self.instructions, self.release):
            t0 = time.perf_counter()
            inst.run(scope)
            hook(inst, time.perf_counter() - t0, scope)
            for name in release:
                scope.pop(name, None)

    def _run_split(self, scope: dict[str, Any], pool: int) -> None:
        """run() with the native pool at `pool` threads: instructions marked serial (work under SERIAL_WORK) run their
        kernels on this thread alone (the pool's count is process-wide; a thread count never changes a native
        kernel's results, docs/determinism.md), the others on the pool; the count is put back after the run."""
        pop = scope.pop
        now = pool
        try:
            for inst, release in zip(self.instructions, self.release):
                want = 1 if getattr(inst, "serial", False) else pool  # (a subgraph's or delegate's: no mark)
                if want != now:
                    native.set_pool_threads(want)
                    now = want
                inst.run(scope)
                for name in release:
                    pop(name, None)
        finally:
            if now != pool:
                native.set_pool_threads(pool)

    def __len__(self) -> int:
        return len(self.instructions)
