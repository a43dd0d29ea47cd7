"""The deployment side, as paddlelite's: MobileConfig and the LightPredictor over an optimized `.nb`.

The light predictor runs no analysis: it rebuilds one instruction per stored op from the
kernel key `pdlite-opt` (or `CxxPredictor.save_optimized_model`) picked, and takes the
params as views into the file's buffer.
"""
from __future__ import annotations

import os
from typing import Any

from pdlite.api.config import ConfigBase
from pdlite.api.predictor import PredictorBase
from pdlite.errors import ConfigError, ModelFormatError, UnsupportedOpError
from pdlite.model_parser.naive_buffer import NaiveBufferModel, load_naive_buffer, load_naive_buffer_bytes
from pdlite.runtime.instruction import Instruction
from pdlite.runtime.runtime_program import RuntimeProgram


class MobileConfig(ConfigBase):
    """Config of the light predictor: an optimized model (`.nb`) from a file or from memory.

    pdlite options (`set_option`): "mmap" (bool, default False) maps the file instead of reading
    it; "verify_checksum" (bool, default True) checks the params' crc32 on load.
    """

    def __init__(self) -> None:
        super().__init__()
        self._model_file = ""
        self._model_buffer: bytes | None = None

    def set_model_from_file(self, path: str | os.PathLike) -> None:
        self._model_file = os.fspath(path)
        self._model_buffer = None

    def model_from_file(self) -> str:
        return self._model_file

    def set_model_from_buffer(self, buffer: bytes | bytearray | memoryview) -> None:
        if not isinstance(buffer, (bytes, bytearray, memoryview)):
            raise ConfigError(f"set_model_from_buffer: expected the .nb file's bytes, got {type(buffer).__name__}")
        self._model_buffer = bytes(buffer)
        self._model_file = ""

    def is_model_from_memory(self) -> bool:
        return self._model_buffer is not None

    def set_model_dir(self, model_dir: str | os.PathLike) -> None:
        """Old paddlelite API: a folder holding `model.nb` (or the `.nb` file itself)."""
        p = os.fspath(model_dir)
        self.set_model_from_file(os.path.join(p, "model.nb") if os.path.isdir(p) else p)

    def load(self) -> NaiveBufferModel:
        """Read and check the configured `.nb` (ModelFormatError when it is not a valid one)."""
        verify = bool(self.option("verify_checksum", True))
        if self._model_buffer is not None:
            return load_naive_buffer_bytes(self._model_buffer, verify=verify)
        if not self._model_file:
            raise ConfigError("MobileConfig has no model: call set_model_from_file(path.nb) or "
                              "set_model_from_buffer(bytes)")
        return load_naive_buffer(self._model_file, use_mmap=bool(self.option("mmap", False)), verify=verify)


def _bound_kernel(op: Any, model: NaiveBufferModel, options: dict[str, Any]) -> Any:
    """A `subgraph` op's kernel bound to its stored sub-block and device (None for other ops)."""
    if op.type != "subgraph":
        return None
    from pdlite.nnadapter.options import NNAdapterOptions
    from pdlite.nnadapter.subgraph_kernel import SubgraphKernel

    idx = int(op.attrs.get("sub_block", -1))
    if not 0 < idx < len(model.program.blocks):
        raise ModelFormatError(f"{model.source}: subgraph op points to block {idx}, which the model does not hold")
    opts = NNAdapterOptions.from_options(options)
    device = str(op.attrs.get("nnadapter_device") or "")
    if opts is None:  # the config names no device: use the one the model was optimized for
        if not device:
            raise ModelFormatError(f"{model.source}: subgraph op names no NNAdapter device; call "
                                   "MobileConfig.set_nnadapter_device_names([...])")
        opts = NNAdapterOptions((device,))
    kernel = SubgraphKernel(op)
    kernel.bind(model.program.blocks[idx], model.program, opts, opts.pick_device())
    return kernel


def build_runtime(model: NaiveBufferModel, options: dict[str, Any] | None = None) -> RuntimeProgram:
    """One instruction per block-0 op, with the kernel its key names (no analysis), and the stored
    release points of the memory plan. `options` (the config's) reach the kernels as their context."""
    from pdlite.kernels.registry import KERNELS, KernelContext
    from pdlite.operators.registry import OPS
    from pdlite.optimizer.analysis import load_target_kernels

    options = dict(options or {})
    load_runtime_registries()
    load_target_kernels({k.target for k in model.kernel_keys})
    context = KernelContext(options)
    insts = []
    missing = []
    for op, key in zip(model.program.main.ops, model.kernel_keys):
        opdef = OPS.get(op.type)
        kd = KERNELS.get(key)
        if opdef is None or kd is None:
            missing.append(f"  {op.type}: {'no op definition' if opdef is None else f'no kernel {key}'}")
            continue
        attached = opdef.attach(op)
        insts.append(Instruction(attached, opdef, kd, _bound_kernel(attached, model, options), context))
    if missing:
        raise UnsupportedOpError(
            f"{model.source}: this pdlite cannot run {len(missing)} op(s) of the optimized model (written by pdlite "
            f"{model.pdlite_version or '?'}; a plugin missing?):\n" + "\n".join(sorted(set(missing))))
    runtime = RuntimeProgram(insts, list(model.release) if model.release else None)
    if options.get("cuda_graph"):
        from pdlite.kernels.cuda.graph_runner import CudaGraphProgram

        runtime = CudaGraphProgram(runtime.instructions, options, runtime.release)
    return runtime


def load_runtime_registries() -> None:
    """Import the built-in ops and kernels and load plugins (passes are not needed here)."""
    import pdlite.kernels.host  # noqa: F401
    import pdlite.operators  # noqa: F401
    from pdlite.plugins import load_plugins

    load_plugins()


class LightPredictor(PredictorBase):
    """Runs an optimized model: instructions rebuilt from the stored kernel keys, no passes."""

    def __init__(self, config: MobileConfig) -> None:
        if not isinstance(config, MobileConfig):
            raise ConfigError(f"LightPredictor takes a MobileConfig, got {type(config).__name__}")
        self.config = config
        self.model = config.load()
        for n in self.model.feed_names:
            if n not in self.model.program.main.vars:
                raise ModelFormatError(f"{self.model.source}: feed {n!r} has no variable in block 0")
        runtime = build_runtime(self.model, config.options)
        self._setup(self.model.program, runtime, self.model.params, list(self.model.feed_names),
                    list(self.model.fetch_names), config.delegate())
