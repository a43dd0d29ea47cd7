"""`pdlite.inference.Config`: paddle.inference's Config, turned into a CxxConfig (or a MobileConfig for a `.nb`).

Every call a Paddle deploy script makes is accepted: calls that mean something on pdlite are
mapped (threads, IR optimisation, deleted passes, memory optimisation, profiling, GPU -> the
CUDA target on torch, OpenVINO / ONNX Runtime -> NNAdapter devices); CPU-library tuning that
pdlite has no counterpart for (oneDNN caches, bf16 ops) is accepted and noted at debug level;
calls for hardware or engines pdlite does not have (TensorRT, XPU, IPU, custom devices) raise a
ConfigError that names the call and what to use instead. See docs/migrating.md.
"""
from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pdlite.api.config import CxxConfig, model_and_params
from pdlite.api.mobile import MobileConfig
from pdlite.core.types import Place, TargetType
from pdlite.core.types import PrecisionType as LitePrecision
from pdlite.errors import ConfigError
from pdlite.model_parser.naive_buffer import MAGIC as NB_MAGIC

log = logging.getLogger("pdlite.inference")


class PrecisionType(enum.IntEnum):
    """paddle.inference.PrecisionType (also Config.Precision)."""

    Float32 = 0
    Int8 = 1
    Half = 2
    Bfloat16 = 3


# The passes a program needs to run at all; switch_ir_optim(False) keeps only these.
ESSENTIAL_PASSES = ("feed_fetch_strip_pass", "subgraph_detect_pass", "static_kernel_pick_pass",
                    "type_target_cast_pass", "memory_optimize_pass")

# Paddle Inference pass names -> the pdlite passes that do the same rewrite (delete_pass removes these).
PADDLE_PASSES: dict[str, tuple[str, ...]] = {
    "simplify_with_basic_ops_pass": ("identity_dropout_eliminate_pass",),
    "delete_dropout_op_pass": ("identity_dropout_eliminate_pass",),
    "delete_dropout_op_x_pass": ("identity_dropout_eliminate_pass",),
    "identity_op_clean_pass": ("identity_scale_eliminate_pass", "identity_assign_eliminate_pass"),
    "delete_assign_op_pass": ("identity_assign_eliminate_pass",),
    "constant_folding_pass": ("constant_folding_pass",),
    "fc_fuse_pass": ("fc_fuse_pass",),
    "conv_bn_fuse_pass": ("conv_bn_fuse_pass",),
    "conv_elementwise_add_fuse_pass": ("conv_elementwise_add_fuse_pass",),
    "conv_affine_channel_fuse_pass": ("conv_scale_fuse_pass",),
    "conv_activation_mkldnn_fuse_pass": ("conv_activation_fuse_pass",),
    "conv_relu_mkldnn_fuse_pass": ("conv_activation_fuse_pass",),
    "conv_elementwise_add_act_fuse_pass": ("conv_activation_fuse_pass",),
    "elementwise_act_onednn_fuse_pass": ("elementwise_activation_fuse_pass",),
    "scale_matmul_fuse_pass": ("scales_fuse_pass", "fc_scale_fuse_pass"),
    "matmul_scale_fuse_pass": ("fc_scale_fuse_pass",),
    "matmul_v2_scale_fuse_pass": ("fc_scale_fuse_pass",),
    "memory_optimize_pass": ("memory_optimize_pass",),
}

_GPU_ALT = ("pdlite has no {what}; for a GPU use config.enable_use_gpu(...) (pdlite's CUDA target on torch), "
            "on CPU config.enable_openvino_engine() or config.enable_onnxruntime()")
_DEVICE_ALT = ("pdlite has no {what} target; run on the CPU (the default), on a GPU with config.enable_use_gpu(...), "
               "or through OpenVINO / ONNX Runtime (config.enable_openvino_engine() / config.enable_onnxruntime()); "
               "new hardware comes in as a pdlite plugin (docs/adding_hardware.md)")

# paddle.inference.Config calls that pdlite cannot honour: name -> why, and what to use instead
UNSUPPORTED: dict[str, str] = {
    **{n: _GPU_ALT.format(what="TensorRT") for n in (
        "enable_tensorrt_engine", "enable_tensorrt_dla", "enable_tensorrt_explicit_quantization",
        "enable_tensorrt_inspector", "enable_tensorrt_memory_optim", "enable_tensorrt_varseqlen",
        "enable_tuned_tensorrt_dynamic_shape", "set_trt_dynamic_shape_info", "collect_shape_range_info",
        "exp_disable_tensorrt_ops", "exp_disable_tensorrt_subgraph", "exp_disable_tensorrt_dynamic_shape_ops",
        "exp_specify_tensorrt_subgraph_precision", "mark_trt_engine_outputs", "set_tensorrt_optimization_level")},
    **{n: _DEVICE_ALT.format(what="XPU") for n in ("enable_xpu", "set_xpu_device_id", "set_xpu_config",
                                                    "xpu_config")},
    **{n: _DEVICE_ALT.format(what="IPU") for n in ("enable_ipu", "set_ipu_config", "set_ipu_custom_info",
                                                    "load_ipu_config")},
    **{n: _DEVICE_ALT.format(what="NPU / custom device") for n in ("enable_custom_device", "enable_npu",
                                                                   "enable_mlu")},
    "enable_lite_engine": "pdlite is itself a Paddle-Lite-style engine: drop the call (the model already runs on it)",
    "enable_cinn": "pdlite has no CINN compiler: drop the call (pdlite's own passes fuse ops)",
    "exp_enable_use_cutlass": _GPU_ALT.format(what="CUTLASS"),
    "exp_sparse_conv_using_buffer": "pdlite has no sparse-conv buffers: drop the call",
    "enable_custom_passes": "pdlite runs its own passes: give pdlite pass names with config.pass_builder().set_passes",
    "to_native_config": "pdlite has no NativeConfig: use this Config itself",
}

# accepted calls that configure CPU libraries pdlite does not use: name -> what pdlite does instead
NO_EFFECT: dict[str, str] = {
    "set_mkldnn_cache_capacity": "pdlite caches per-shape plans itself",
    "set_onednn_cache_capacity": "pdlite caches per-shape plans itself",
    "enable_mkldnn_int8": "int8 needs a quantized model (pdlite runs its quantized ops as they are)",
    "enable_onednn_int8": "int8 needs a quantized model (pdlite runs its quantized ops as they are)",
    "set_mkldnn_op": "pdlite's host kernels run every op", "set_onednn_op": "pdlite's host kernels run every op",
    "set_bfloat16_op": "pdlite's host kernels compute in fp32",
    "disable_mkldnn_fc_passes": "pdlite's fc_fuse_pass stays (use delete_pass('fc_fuse_pass'))",
    "disable_onednn_fc_passes": "pdlite's fc_fuse_pass stays (use delete_pass('fc_fuse_pass'))",
    "enable_ort_optimization": "ONNX Runtime runs with its default graph optimisation",
    "enable_low_precision_io": "inputs and outputs keep their dtypes",
    "exp_enable_mixed_precision_ops": "pdlite runs in the precision of the picked places",
    "exp_disable_mixed_precision_ops": "pdlite runs in the precision of the picked places",
    "enable_save_optim_model": "write an optimized model with pdlite-opt (or CxxPredictor.save_optimized_model)",
    "use_optimized_model": "load an optimized .nb with Config('model.nb') instead",
    "set_optim_cache_dir": "pdlite analyses in memory; NNAdapter compile caches use the model cache dir",
    "set_optimization_level": "pdlite runs one pass pipeline (switch_ir_optim(False) turns fusions off)",
    "enable_new_executor": "pdlite has one executor", "enable_new_ir": "pdlite reads PIR and legacy programs alike",
    "switch_specify_input_names": "inputs are always addressed by name",
}

# getters of engines pdlite does not have: they report "off"
_OFF_GETTERS: dict[str, Any] = {
    "tensorrt_engine_enabled": False, "tensorrt_dla_enabled": False, "tensorrt_dynamic_shape_enabled": False,
    "tensorrt_explicit_quantization_enabled": False, "tensorrt_inspector_enabled": False,
    "tensorrt_varseqlen_enabled": False, "tuned_tensorrt_dynamic_shape": False, "trt_allow_build_at_runtime": False,
    "tensorrt_optimization_level": 0, "shape_range_info_collected": False, "shape_range_info_path": "",
    "use_xpu": False, "xpu_device_id": 0, "lite_engine_enabled": False, "mkldnn_int8_enabled": False,
    "onednn_int8_enabled": False, "fraction_of_gpu_memory_for_pool": 0.0,
}


def _unsupported(owner: str, name: str, why: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise ConfigError(f"{owner}.{name}(): {why}")

    call.__name__ = name
    return call


def _known_pass(name: str) -> bool:
    from pdlite.optimizer.pass_registry import PASSES
    from pdlite.registries import load_registries

    load_registries()
    return name in PASSES


class PassBuilder:
    """Config.pass_builder(): the pdlite pass pipeline this config will run, editable by name."""

    def __init__(self, config: Config) -> None:
        self._config = config

    def all_passes(self) -> list[str]:
        """The passes the predictor will run, in order."""
        return self._config._pipeline()

    def set_passes(self, passes: Sequence[str]) -> None:
        """Replace the pass list; ConfigError naming the known passes for an unknown one."""
        for p in passes:
            self._check(p)
        self._config._passes = list(passes)

    def append_pass(self, name: str) -> None:
        """Run the pass `name` last; ConfigError naming the known passes for an unknown one."""
        self._check(name)
        self._config._passes = [*self._config._pipeline(), name]

    def insert_pass(self, idx: int, name: str) -> None:
        """Run the pass `name` at position `idx` of the list; ConfigError for an unknown pass."""
        self._check(name)
        passes = self._config._pipeline()
        passes.insert(int(idx), name)
        self._config._passes = passes

    def delete_pass(self, name: str) -> None:
        """Do not run the pass `name` (Config.delete_pass)."""
        self._config.delete_pass(name)

    def analysis_passes(self) -> list[str]:
        """[]: pdlite has no analysis passes apart from all_passes()."""
        return []

    def append_analysis_pass(self, name: str) -> None:
        """Ignored (logged at debug level): pdlite has no separate analysis passes."""
        log.debug("append_analysis_pass(%r): pdlite has no separate analysis passes; ignored", name)

    def turn_on_debug(self) -> None:
        """Lint the graph after every pass, naming the pass that broke it (Config.switch_ir_debug(True))."""
        self._config.switch_ir_debug(True)

    def debug_string(self) -> str:
        """The pass list, one name a line."""
        return "\n".join(self.all_passes())

    @staticmethod
    def _check(name: str) -> None:
        if not _known_pass(name):
            from pdlite.optimizer.pipeline import default_passes

            raise ConfigError(f"pass_builder: no pdlite pass named {name!r}; pdlite's passes are "
                              f"{', '.join(default_passes())} (see docs/optimizer.md)")


class Config:
    """paddle.inference.Config for pdlite: Config(), Config(model_dir), Config(model_file, params_file),
    Config(model_dir, prefix) (prefix.json or prefix.pdmodel), Config(other_config); a `.nb` runs on the
    light predictor."""

    Precision = PrecisionType
    Float32, Int8, Half, Bfloat16 = (PrecisionType.Float32, PrecisionType.Int8, PrecisionType.Half,
                                     PrecisionType.Bfloat16)

    def __init__(self, *args: Any) -> None:
        self._model_dir = ""
        self._prog_file = ""
        self._params_file = ""
        self._buffers: tuple[bytes, bytes | None] | None = None
        self._threads = 1
        self._use_gpu = False
        self._gpu = (100, 0, PrecisionType.Float32)
        self._mkldnn = True
        self._ir_optim = True
        self._ir_debug = False
        self._memory_optim: bool | None = None
        self._feed_fetch_ops = False
        self._glog_disabled = False
        self._profile = False
        self._devices: list[str] = []
        self._ov_precision = PrecisionType.Float32
        self._bf16 = False  # enable_mkldnn_bfloat16: OpenVINO's subgraphs in bf16 unless a precision is given
        self._deleted: list[str] = []
        self._passes: list[str] | None = None
        self._options: dict[str, Any] = {}
        if len(args) == 1 and isinstance(args[0], Config):
            self.__dict__.update({k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                                  for k, v in args[0].__dict__.items()})
        elif len(args) == 1:
            self.set_model(args[0])
        elif len(args) == 2:
            self.set_model(args[0], args[1])
        elif args:
            raise ConfigError(f"Config() takes 0, 1 or 2 arguments (model_dir | model_file, params_file | model_dir, "
                              f"prefix), got {len(args)}")

    # -- model --------------------------------------------------------------------------------
    def set_model(self, model: str | os.PathLike, params: str | os.PathLike | None = None) -> None:
        """set_model(model_dir), set_model(model_file, params_file) or set_model(model_dir, prefix)."""
        model = os.fspath(model)
        if params is None:
            if os.path.isfile(model):  # a single file: a .nb, or a program whose params sit beside it
                self._prog_file, self._model_dir = model, ""
            else:
                self._model_dir, self._prog_file, self._params_file = model, "", ""
            return
        params = os.fspath(params)
        if os.path.isdir(model) and not os.path.isfile(params):
            prefix = os.path.join(model, params)
            prog = next((prefix + s for s in (".json", ".pdmodel") if os.path.isfile(prefix + s)), "")
            if not prog:
                raise ConfigError(f"Config({model!r}, {params!r}): found neither {params}.json nor {params}.pdmodel "
                                  f"in {model}")
            self._prog_file, self._params_file, self._model_dir = prog, prefix + ".pdiparams", ""
            return
        self._prog_file, self._params_file, self._model_dir = model, params, ""

    def set_prog_file(self, path: str | os.PathLike) -> None:
        """The program file (.pdmodel, or PIR .json)."""
        self._prog_file = os.fspath(path)

    def set_params_file(self, path: str | os.PathLike) -> None:
        """The params file (.pdiparams) of the program file."""
        self._params_file = os.fspath(path)

    def model_dir(self) -> str:
        """The model folder given to the constructor or set_model ('' when the model was given as files or memory)."""
        return self._model_dir

    def prog_file(self) -> str:
        """The program file (.pdmodel or .json) given to the constructor or set_prog_file ('' when none)."""
        return self._prog_file

    def params_file(self) -> str:
        """The params file (.pdiparams) given to the constructor or set_params_file ('' when none)."""
        return self._params_file

    def set_model_buffer(self, prog: bytes | str, *args: Any) -> None:
        """set_model_buffer(prog, prog_size, params, params_size) as Paddle's, or (prog, params)."""
        self._buffers = model_and_params(prog, args, "Config.set_model_buffer")

    def model_from_memory(self) -> bool:
        """True when the model was given as bytes (set_model_buffer)."""
        return self._buffers is not None

    # -- devices ------------------------------------------------------------------------------
    def disable_gpu(self) -> None:
        """Run on the CPU (undo enable_use_gpu)."""
        self._use_gpu = False

    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0,
                       precision_mode: PrecisionType | int = PrecisionType.Float32) -> None:
        """Run on pdlite's CUDA target (kernels on torch): needs torch with CUDA."""
        try:
            import torch
        except ImportError:
            raise ConfigError("Config.enable_use_gpu(): pdlite's GPU target runs on torch, which is not installed: "
                              "pip install 'pdlite[torch]' (a CUDA build), or drop the call to run on the CPU") from None
        if not torch.cuda.is_available():
            raise ConfigError("Config.enable_use_gpu(): torch sees no CUDA device (torch.cuda.is_available() is "
                              "False); call disable_gpu() to run on the CPU")
        if not 0 <= int(device_id) < torch.cuda.device_count():
            raise ConfigError(f"Config.enable_use_gpu(): device_id {device_id} out of range: torch sees "
                              f"{torch.cuda.device_count()} CUDA device(s)")
        self._use_gpu = True
        self._gpu = (int(memory_pool_init_size_mb), int(device_id), PrecisionType(int(precision_mode)))

    def use_gpu(self) -> bool:
        """True after enable_use_gpu (the CUDA target through torch)."""
        return self._use_gpu

    def gpu_device_id(self) -> int:
        """The CUDA device set with enable_use_gpu (0 unless given)."""
        return self._gpu[1]

    def memory_pool_init_size_mb(self) -> int:
        """The GPU memory pool size given to enable_use_gpu (recorded; torch manages CUDA memory)."""
        return self._gpu[0]

    def enable_openvino_engine(self, inference_precision: PrecisionType | int = PrecisionType.Float32) -> None:
        """Run the supported subgraphs on OpenVINO (pdlite's NNAdapter device intel_openvino)."""
        self._ov_precision = PrecisionType(int(inference_precision))
        self._devices = ["intel_openvino"]

    def enable_mkldnn_bfloat16(self) -> None:
        """Paddle's oneDNN bfloat16. pdlite's host kernels compute in fp32 (no effect there); with
        enable_openvino_engine() given no other precision, OpenVINO runs its subgraphs in bf16
        (INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16)."""
        self._bf16 = True

    enable_onednn_bfloat16 = enable_mkldnn_bfloat16

    def mkldnn_bfloat16_enabled(self) -> bool:
        """True after enable_mkldnn_bfloat16 / enable_onednn_bfloat16."""
        return self._bf16

    def openvino_engine_enabled(self) -> bool:
        """True when subgraphs run on OpenVINO (enable_openvino_engine)."""
        return "intel_openvino" in self._devices

    def enable_onnxruntime(self) -> None:
        """Run the supported subgraphs on ONNX Runtime (pdlite's NNAdapter device onnxruntime)."""
        self._devices = ["onnxruntime"]

    def enable_auto_device(self) -> None:
        """pdlite's own: run each call where pdlite measures it fastest, the host or an installed device (the
        NNAdapter device `auto`, pdlite/api/auto_online.py: new input shapes priced, outputs checked against the
        host, what it learnt cached per model content)."""
        self._devices = ["auto"]

    def auto_device_enabled(self) -> bool:
        """True when the device is `auto` (measured per model and input shape, the fastest kept)."""
        return self._devices == ["auto"]

    def disable_onnxruntime(self) -> None:
        """Stop running subgraphs on ONNX Runtime (undo enable_onnxruntime)."""
        self._devices = [d for d in self._devices if d != "onnxruntime"]

    def onnxruntime_enabled(self) -> bool:
        """True when subgraphs run on ONNX Runtime (enable_onnxruntime)."""
        return "onnxruntime" in self._devices

    # -- CPU ----------------------------------------------------------------------------------
    def set_cpu_math_library_num_threads(self, n: int) -> None:
        """The compute threads (>= 1) for pdlite's kernels and the BLAS; ConfigError otherwise."""
        if int(n) < 1:
            raise ConfigError(f"set_cpu_math_library_num_threads: threads must be >= 1, got {n}")
        self._threads = int(n)

    def cpu_math_library_num_threads(self) -> int:
        """The compute threads set with set_cpu_math_library_num_threads (default 1)."""
        return self._threads

    def enable_mkldnn(self) -> None:
        """Accepted: pdlite's host kernels (NumPy + native) play oneDNN's part; the flag is only reported."""
        self._mkldnn = True

    def disable_mkldnn(self) -> None:
        """paddle.inference's oneDNN switch: recorded only; pdlite's host kernels are its own."""
        self._mkldnn = False

    enable_onednn, disable_onednn = enable_mkldnn, disable_mkldnn

    def mkldnn_enabled(self) -> bool:
        """True after enable_mkldnn() (recorded only; pdlite's host kernels are its own)."""
        return self._mkldnn

    onednn_enabled = mkldnn_enabled

    # -- optimisation ---------------------------------------------------------------------------
    def switch_ir_optim(self, x: bool = True) -> None:
        """Off: no fusion, elimination or folding passes (only those a program needs to run)."""
        self._ir_optim = bool(x)

    def ir_optim(self) -> bool:
        """True when the analysis passes run (switch_ir_optim; default True)."""
        return self._ir_optim

    def switch_ir_debug(self, x: bool = True, passes: Sequence[str] = ()) -> None:
        """Lint the graph after every pass and name the pass that broke it."""
        self._ir_debug = bool(x)

    def enable_memory_optim(self, x: bool = True) -> None:
        """pdlite's memory_optimize_pass (on unless disabled with enable_memory_optim(False))."""
        self._memory_optim = bool(x)

    def delete_pass(self, name: str) -> None:
        """Remove a pass: a pdlite pass name, or a Paddle pass name mapped to the pdlite pass that does the same;
        Paddle passes with no pdlite counterpart are ignored (noted at debug level)."""
        targets = PADDLE_PASSES.get(name, (name,) if _known_pass(name) else ())
        if not targets:
            log.debug("delete_pass(%r): no pdlite pass corresponds to this Paddle pass; ignored", name)
        self._deleted += [t for t in targets if t not in self._deleted]

    def pass_builder(self) -> PassBuilder:
        """A PassBuilder over this config's pass list (all_passes, delete_pass, insert_pass, ...)."""
        return PassBuilder(self)

    def _pipeline(self) -> list[str]:
        from pdlite.optimizer.pipeline import default_passes

        passes = list(self._passes) if self._passes is not None else default_passes()
        if not self._ir_optim:
            passes = [p for p in passes if p in ESSENTIAL_PASSES]
        if self._memory_optim is False:
            passes = [p for p in passes if p != "memory_optimize_pass"]
        return [p for p in passes if p not in self._deleted or p in ESSENTIAL_PASSES[:4]]

    # -- misc switches --------------------------------------------------------------------------
    def switch_use_feed_fetch_ops(self, x: bool = True) -> None:
        """Accepted: pdlite strips feed/fetch ops and always feeds by name (zero-copy handles)."""
        self._feed_fetch_ops = bool(x)

    def use_feed_fetch_ops_enabled(self) -> bool:
        """The switch_use_feed_fetch_ops setting (recorded; pdlite feeds by handle either way)."""
        return self._feed_fetch_ops

    def specify_input_name(self) -> bool:
        """True: pdlite always feeds inputs by name."""
        return True

    def disable_glog_info(self) -> None:
        """Accepted: pdlite logs through Python's logging (silent unless you configure it)."""
        self._glog_disabled = True

    def glog_info_disabled(self) -> bool:
        """True after disable_glog_info()."""
        return self._glog_disabled

    def enable_profile(self) -> None:
        """Time every op; read `predictor.profiler.table()` (pdlite) after runs."""
        self._profile = True

    def new_ir_enabled(self) -> bool:
        """True: pdlite reads PIR (.json) programs as well as the older ProgramDesc ones."""
        return True

    def tensorrt_precision_mode(self) -> PrecisionType:
        """PrecisionType.Float32: pdlite has no TensorRT engine."""
        return PrecisionType.Float32

    # pdlite extension: any CxxConfig option
    def set_option(self, key: str, value: Any) -> None:
        """Set a pdlite option by name (e.g. `host_native`, False for the NumPy kernels)."""
        self._options[key] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in UNSUPPORTED:
            return _unsupported("Config", name, UNSUPPORTED[name])
        if name in NO_EFFECT:
            return self._no_effect(name)
        if name in _OFF_GETTERS:
            value = _OFF_GETTERS[name]
            return lambda: value
        raise AttributeError(f"pdlite.inference.Config has no attribute {name!r}")

    def _no_effect(self, name: str) -> Callable[..., None]:
        def call(*args: Any, **kwargs: Any) -> None:
            log.debug("Config.%s: accepted, no effect on pdlite (%s)", name, NO_EFFECT[name])

        call.__name__ = name
        return call

    # -- summary ------------------------------------------------------------------------------
    def summary(self) -> str:
        """A table of this config's settings (model files, threads, devices, passes), as paddle.inference's summary().
        """
        rows = [("model_dir", self._model_dir), ("model_file", self._prog_file), ("params_file", self._params_file),
                ("model_from_memory", self.model_from_memory()), ("cpu_math_thread", self._threads),
                ("enable_mkldnn", self._mkldnn), ("use_gpu", self._use_gpu), ("gpu_device_id", self._gpu[1]),
                ("nnadapter_devices", ",".join(self._devices) or "-"), ("ir_optim", self._ir_optim),
                ("ir_debug", self._ir_debug), ("memory_optim", self._memory_optim is not False),
                ("enable_profile", self._profile), ("enable_log", not self._glog_disabled),
                ("passes", len(self._pipeline()))]
        w = max(len(k) for k, _ in rows)
        vals = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in rows]
        v = max(len(x) for _, x in vals)
        line = f"+{'-' * (w + 2)}+{'-' * (v + 2)}+"
        body = [f"| {k.ljust(w)} | {x.ljust(v)} |" for k, x in vals]
        return "\n".join([line, f"| {'Option'.ljust(w)} | {'Value'.ljust(v)} |", line, *body, line]) + "\n"

    def __str__(self) -> str:
        return self.summary()

    # -- to pdlite ------------------------------------------------------------------------------
    def is_optimized_model(self) -> bool:
        """True when the model is a pdlite `.nb` (run by the light predictor, no analysis)."""
        return self._prog_file.endswith(".nb") or (self._buffers is not None and self._buffers[0][:8] == NB_MAGIC)

    def to_lite(self) -> CxxConfig | MobileConfig:
        """The paddlelite-style config this Config stands for."""
        if self.is_optimized_model():
            m = MobileConfig()
            if self._buffers is not None:
                m.set_model_from_buffer(self._buffers[0])
            else:
                m.set_model_from_file(self._prog_file)
            self._common(m)
            return m
        c = CxxConfig()
        if self._buffers is not None:
            c.set_model_buffer(*self._buffers)
        elif self._prog_file:
            c.set_model_file(self._prog_file)
            if self._params_file:
                c.set_param_file(self._params_file)
        elif self._model_dir:
            c.set_model_dir(self._model_dir)
        else:
            raise ConfigError("Config has no model: give Config(model_dir), Config(model_file, params_file) or "
                              "Config(model_dir, prefix), or call set_model(...)")
        c.set_valid_places(self._places())
        c.set_passes(self._pipeline())
        if self._ir_debug:
            c.set_graph_debug(True)
        if self._use_gpu:
            c.set_cuda_device(f"cuda:{self._gpu[1]}")
        self._common(c)
        return c

    def _common(self, c: Any) -> None:
        c.set_threads(self._threads)
        if self._profile:
            c.enable_profiler(True)
        if self._devices:
            c.set_nnadapter_device_names(list(self._devices))
            precision = self._ov_precision
            if precision == PrecisionType.Float32 and self._bf16:  # enable_mkldnn_bfloat16: bf16 where asked
                precision = PrecisionType.Bfloat16
            if "intel_openvino" in self._devices and precision != PrecisionType.Float32:
                hint = {PrecisionType.Half: "f16", PrecisionType.Bfloat16: "bf16"}.get(precision, "f32")
                c.set_nnadapter_context_properties(f"INTEL_OPENVINO_INFERENCE_PRECISION_HINT={hint}")
        for k, v in self._options.items():
            c.set_option(k, v)

    def _places(self) -> list[Place]:
        host = Place(TargetType.Host, LitePrecision.FP32)
        if self._use_gpu:
            cuda = [Place(TargetType.CUDA, LitePrecision.FP32)]
            if self._gpu[2] == PrecisionType.Half:
                cuda.insert(0, Place(TargetType.CUDA, LitePrecision.FP16))
            return [*cuda, host]
        if self._devices:
            return [Place(TargetType.NNAdapter, LitePrecision.FP32), Place(TargetType.X86, LitePrecision.FP32), host]
        return [host]


def known_calls() -> Iterable[str]:
    """Every paddle.inference.Config call name this module answers (implemented, no-effect, off or refused)."""
    own = [n for n in dir(Config) if not n.startswith("_")]
    return sorted({*own, *UNSUPPORTED, *NO_EFFECT, *_OFF_GETTERS})
