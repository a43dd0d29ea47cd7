"""Configurations, as paddlelite's: CxxConfig (full analysis) and MobileConfig (optimized model)."""
from __future__ import annotations

import enum
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from pdlite.core.types import DataLayoutType, Place, PowerMode, PrecisionType, TargetType, with_fp16_places
from pdlite.errors import ConfigError

_CPU_TARGETS = frozenset({TargetType.Host, TargetType.X86, TargetType.Any})
_warned_targets: set[TargetType] = set()


def warn_host_fallback(places: Sequence[Place], kernel_targets: set[TargetType]) -> None:
    """Say once per target that places naming a target without pdlite kernels (ARM, XPU, ...) run on the host."""
    for p in places:
        t = p.target
        if t in _CPU_TARGETS or t in kernel_targets or t in _warned_targets:
            continue
        _warned_targets.add(t)
        warnings.warn(f"Place({t.name}, ...): pdlite has no {t.name} kernels for this model; its ops run on the "
                      "host (x86) kernels", RuntimeWarning, stacklevel=3)


_IMAGE_LAYOUTS = (DataLayoutType.ImageDefault, DataLayoutType.ImageFolder, DataLayoutType.ImageNW)


class CLTuneMode(enum.IntEnum):
    """paddlelite's OpenCL tuning modes (pdlite's OpenCL kernels use fixed work-group sizes: kept, no tuning)."""

    CL_TUNE_NONE = 0
    CL_TUNE_RAPID = 1
    CL_TUNE_NORMAL = 2
    CL_TUNE_EXHAUSTIVE = 3


class CLPrecisionType(enum.IntEnum):
    """paddlelite's OpenCL precisions (as CLTuneMode)."""

    CL_PRECISION_AUTO = 0
    CL_PRECISION_FP32 = 1
    CL_PRECISION_FP16 = 2


class ConfigBase:
    def __init__(self) -> None:
        self._threads = 1
        self._power_mode = PowerMode.LITE_POWER_NO_BIND
        self._options: dict[str, Any] = {}

    def set_threads(self, threads: int) -> None:
        """The compute threads of the predictor (>= 1; default 1), for pdlite's kernels and the BLAS."""
        if int(threads) < 1:
            raise ConfigError(f"set_threads: threads must be >= 1, got {threads}")
        self._threads = int(threads)

    def threads(self) -> int:
        """The compute threads set with set_threads (default 1)."""
        return self._threads

    def set_power_mode(self, mode: PowerMode | int) -> None:
        """paddlelite's power mode (LITE_POWER_HIGH, ...): stored and reported; pdlite does not bind cores."""
        self._power_mode = PowerMode(mode)

    def power_mode(self) -> PowerMode:
        """The power mode set with set_power_mode (kept for paddlelite compatibility; pdlite schedules threads itself).
        """
        return self._power_mode

    def set_delegate(self, delegate: Any) -> None:
        """Hand runs of kernels to a `pdlite.delegate.Delegate` (None: pdlite's own kernels only)."""
        from pdlite.delegate import Delegate

        if delegate is not None and not isinstance(delegate, Delegate):
            raise ConfigError(f"set_delegate: expected a pdlite.delegate.Delegate, got {type(delegate).__name__}")
        self._delegate = delegate

    def delegate(self) -> Any:
        """The delegate set with set_delegate (None: the kernels run as they are)."""
        return getattr(self, "_delegate", None)

    def enable_profiler(self, on: bool = True) -> None:
        """Time every op; read `predictor.profiler.table()` after runs."""
        self._options["profile"] = bool(on)

    def enable_precision_profiler(self, on: bool = True) -> None:
        """Record statistics of every op's outputs; read `predictor.precision_profiler.table()`."""
        self._options["precision_profile"] = bool(on)

    # pdlite extensions: free-form options read by passes, kernels and tools
    def set_option(self, key: str, value: Any) -> None:
        """Set a pdlite option by name (e.g. `host_native`, False for the NumPy kernels); read back with option(key)."""
        self._options[key] = value

    def option(self, key: str, default: Any = None) -> Any:
        """The pdlite option `key` (set_option), or `default` when it was not set."""
        return self._options.get(key, default)

    @property
    def options(self) -> dict[str, Any]:
        """All pdlite options set on this config (name -> value; the dict itself, not a copy)."""
        return self._options

    # CUDA target (kernels on torch; see docs/cuda.md)
    def set_cuda_device(self, device: str) -> None:
        """The torch device of the CUDA kernels: "cuda", "cuda:1", or "cpu" (same kernels on torch's CPU)."""
        if not isinstance(device, str) or device.split(":")[0] not in ("cuda", "cpu"):
            raise ConfigError(f"set_cuda_device: give 'cuda', 'cuda:<index>' or 'cpu', got {device!r}")
        self._options["cuda_device"] = device

    def set_cuda_graph(self, on: bool = True) -> None:
        """Capture the device part of the program in a CUDA graph and replay it (recaptured per input shapes)."""
        self._options["cuda_graph"] = bool(on)

    def set_cuda_device_outputs(self, on: bool = True) -> None:
        """Leave fetched results on the device: outputs' `raw()` are torch tensors (`numpy()` still copies)."""
        self._options["cuda_device_outputs"] = bool(on)

    # -- NNAdapter (subgraphs on other runtimes; see docs/nnadapter.md) --------------------------
    def set_nnadapter_device_names(self, names: Sequence[str]) -> None:
        """Devices that run the supported subgraphs, in preference order ("intel_openvino", "onnxruntime")."""
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"set_nnadapter_device_names: give a list of device names, got {names!r}")
        self._options["nnadapter_device_names"] = list(names)

    def nnadapter_device_names(self) -> list[str]:
        """The NNAdapter devices the subgraphs run on, in priority order ([] for the host only)."""
        return list(self._options.get("nnadapter_device_names", []))

    def set_nnadapter_context_properties(self, properties: str) -> None:
        """Device settings as "KEY=VALUE;KEY=VALUE", e.g. "INTEL_OPENVINO_INFERENCE_NUM_THREADS=2"."""
        from pdlite.nnadapter.options import parse_context_properties

        parse_context_properties(properties)  # refuse malformed text now
        self._options["nnadapter_context_properties"] = str(properties)

    def nnadapter_context_properties(self) -> str:
        """The NNAdapter context properties, `KEY=VALUE;KEY=VALUE` ('' when none were set)."""
        return str(self._options.get("nnadapter_context_properties", ""))

    def set_nnadapter_model_cache_dir(self, model_cache_dir: str | os.PathLike) -> None:
        """Keep compiled device models in this folder and reuse them across predictors."""
        self._options["nnadapter_model_cache_dir"] = os.fspath(model_cache_dir)

    def set_nnadapter_shape_cache_size(self, size: int) -> None:
        """Models kept per subgraph where the device gets one model per input shape (a device of static shapes
        only, or a subgraph that cannot convert for all shapes); least recently used dropped. Default 16."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"set_nnadapter_shape_cache_size: expected a positive integer, got {size!r}")
        self._options["nnadapter_shape_cache_size"] = size

    def set_nnadapter_subgraph_partition_config_path(self, path: str | os.PathLike) -> None:
        """A file of ops to keep off the device: lines `op_type` or `op_type:in_var,...:out_var,...`."""
        self._options["nnadapter_subgraph_partition_config_path"] = os.fspath(path)

    def set_nnadapter_subgraph_partition_config_buffer(self, text: str) -> None:
        """The partition config's text itself (same format as the file)."""
        self._options["nnadapter_subgraph_partition_config_buffer"] = str(text)

    def nnadapter_model_cache_dir(self) -> str:
        """The folder where compiled NNAdapter device models are cached ('' when not set)."""
        return str(self._options.get("nnadapter_model_cache_dir", ""))

    def nnadapter_subgraph_partition_config_path(self) -> str:
        """The subgraph partition config file (ops kept off the devices; '' when none)."""
        return str(self._options.get("nnadapter_subgraph_partition_config_path", ""))

    def set_nnadapter_mixed_precision_quantization_config_path(self, path: str | os.PathLike) -> None:
        """Ops whose quantization to drop on the device. Accepted: pdlite's NNAdapter devices run every op in
        float (ONNX fp32), so the listed ops already run unquantized. A missing file is an error ("" = none)."""
        path = os.fspath(path)
        if path and not os.path.isfile(path):
            raise ConfigError(f"set_nnadapter_mixed_precision_quantization_config_path: {path!r} does not exist")
        self._options["nnadapter_mixed_precision_quantization_config_path"] = path

    def nnadapter_mixed_precision_quantization_config_path(self) -> str:
        """The mixed-precision quantization config file ('' when none)."""
        return str(self._options.get("nnadapter_mixed_precision_quantization_config_path", ""))

    def set_nnadapter_mixed_precision_quantization_config_buffer(self, text: str | bytes) -> None:
        """The mixed-precision quantization config's text itself (accepted as the path form is)."""
        self._options["nnadapter_mixed_precision_quantization_config_buffer"] = \
            text.decode() if isinstance(text, bytes) else str(text)

    def nnadapter_mixed_precision_quantization_config_buffer(self) -> str:
        """The mixed-precision quantization config given as text ('' when none)."""
        return str(self._options.get("nnadapter_mixed_precision_quantization_config_buffer", ""))

    def set_nnadapter_dynamic_shape_info(self, info: Mapping[str, Sequence[Sequence[int]]]) -> None:
        """Per input name, the shapes the device model must serve. A device model is compiled once for every
        shape the program allows (symbolic dims), so the table is validated and kept, not needed."""
        if not isinstance(info, Mapping):
            raise ConfigError(f"set_nnadapter_dynamic_shape_info: give {{input name: [shape, ...]}}, got {info!r}")
        table: dict[str, list[list[int]]] = {}
        for name, shapes in info.items():
            try:
                table[str(name)] = [[int(d) for d in s] for s in shapes]
            except (TypeError, ValueError):
                raise ConfigError(f"set_nnadapter_dynamic_shape_info: input {name!r}: expected a list of shapes "
                                  f"(lists of ints), got {shapes!r}") from None
        self._options["nnadapter_dynamic_shape_info"] = table

    def nnadapter_dynamic_shape_info(self) -> dict[str, list[list[int]]]:
        """Input name -> the shapes given to set_nnadapter_dynamic_shape_info (validated and kept)."""
        return dict(self._options.get("nnadapter_dynamic_shape_info", {}))

    def set_nnadapter_model_cache_buffers(self, model_cache_token: str, model_cache_buffer: Any) -> None:
        """A compiled device model from memory, by its cache token. Kept with the config; pdlite's devices
        compile from the model itself (or reuse set_nnadapter_model_cache_dir's files)."""
        buffers = dict(self._options.get("nnadapter_model_cache_buffers", {}))
        buffers[str(model_cache_token)] = bytes(model_cache_buffer)
        self._options["nnadapter_model_cache_buffers"] = buffers

    def nnadapter_model_cache_buffers(self) -> dict[str, bytes]:
        """Model cache token -> the compiled device model given to set_nnadapter_model_cache_buffers (kept)."""
        return dict(self._options.get("nnadapter_model_cache_buffers", {}))

    # -- OpenCL (pdlite's OpenCL target, docs/opencl.md); Metal: pdlite has no such target ---------
    def set_opencl_binary_path_name(self, path: str, name: str) -> None:
        """paddlelite's OpenCL binary cache: pdlite keeps its built OpenCL programs in the folder `path` (one file
        per program and device, named by a hash: option `opencl_cache_dir`); `name` is kept for paddlelite's API."""
        self._options["opencl_cache_dir"] = os.fspath(path) or "."
        self._options["opencl_binary_name"] = str(name)

    def set_opencl_tune(self, tune_mode: Any = CLTuneMode.CL_TUNE_NONE, path: str = "", name: str = "",
                        lws_repeats: int = 4) -> None:
        """paddlelite's local-work-size tuning: the mode is checked and kept; pdlite's OpenCL kernels use fixed
        work-group sizes (16x16 tiles, 64 items), so nothing is tuned and no file is written."""
        try:
            self._options["opencl_tune"] = CLTuneMode(tune_mode)
        except ValueError:
            raise ConfigError(f"set_opencl_tune: tune_mode must be a CLTuneMode, got {tune_mode!r}") from None

    def set_opencl_precision(self, precision: Any = CLPrecisionType.CL_PRECISION_AUTO) -> None:
        """CL_PRECISION_FP16 puts Place(OpenCL, FP16) before each OpenCL FP32 place (half storage, float arithmetic;
        docs/opencl.md); FP32 and AUTO keep the places as given. A MobileConfig's .nb keeps the precision it was
        optimized with (`pdlite-opt` / `Opt.enable_fp16()`)."""
        try:
            self._options["opencl_precision"] = CLPrecisionType(precision)
        except ValueError:
            raise ConfigError(f"set_opencl_precision: give a CLPrecisionType, got {precision!r}") from None

    def _no_target(self, call: str, target: str) -> None:
        raise ConfigError(f"{type(self).__name__}.{call}(): pdlite has no {target} target; run on the host "
                          "(Place(TargetType.X86)), on a GPU through the CUDA or OpenCL target (Place(TargetType.CUDA), "
                          "Place(TargetType.OpenCL)), or "
                          "through an NNAdapter device (set_nnadapter_device_names(['intel_openvino']))")

    def set_metal_lib_path(self, path: str) -> None:
        """paddlelite's Metal setting: pdlite has no Metal target, so this raises ConfigError."""
        self._no_target("set_metal_lib_path", "Metal")

    def set_metal_use_mps(self, flag: bool = True) -> None:
        """paddlelite's Metal setting: pdlite has no Metal target, so this raises ConfigError."""
        self._no_target("set_metal_use_mps", "Metal")

    def set_metal_use_aggressive(self, flag: bool = True) -> None:
        """paddlelite's Metal setting: pdlite has no Metal target, so this raises ConfigError."""
        self._no_target("set_metal_use_aggressive", "Metal")

    def set_metal_use_memory_reuse(self, flag: bool = True) -> None:
        """paddlelite's Metal setting: pdlite has no Metal target, so this raises ConfigError."""
        self._no_target("set_metal_use_memory_reuse", "Metal")

    def set_metal_device(self, device: Any) -> None:
        """paddlelite's Metal setting: pdlite has no Metal target, so this raises ConfigError."""
        self._no_target("set_metal_device", "Metal")

    # x86 math threads (paddlelite's name for the same count)
    def set_x86_math_num_threads(self, threads: int) -> None:
        """paddlelite's name for set_threads."""
        self.set_threads(threads)

    def x86_math_num_threads(self) -> int:
        """paddlelite's name for threads()."""
        return self.threads()


def model_and_params(model: Any, args: tuple[Any, ...], call: str) -> tuple[bytes, bytes | None]:
    """The (model, params) bytes of set_model_buffer(model, params) or set_model_buffer(model, size, params, size)."""
    if len(args) == 3:
        msize, params, psize = args
        model, params = model[:int(msize)], (params[:int(psize)] if params is not None else None)
    elif len(args) <= 1:
        params = args[0] if args else None
    else:
        raise ConfigError(f"{call}: give (model, params) or (model, model_size, params, params_size)")
    as_bytes = lambda b: b.encode("latin-1") if isinstance(b, str) else bytes(b)  # noqa: E731
    if not isinstance(model, (bytes, bytearray, memoryview, str)):
        raise ConfigError(f"{call}: the model buffer must be bytes, got {type(model).__name__}")
    if params is not None and not isinstance(params, (bytes, bytearray, memoryview, str)):
        raise ConfigError(f"{call}: the params buffer must be bytes, got {type(params).__name__}")
    return as_bytes(model), (as_bytes(params) if params is not None and len(params) else None)


class CxxConfig(ConfigBase):
    """Config of the full predictor: loads any Paddle model format and runs the analysis phase."""

    def __init__(self) -> None:
        super().__init__()
        self._model_dir = ""
        self._model_file = ""
        self._param_file = ""
        self._model_buffer: bytes | None = None
        self._param_buffer: bytes | None = None
        self._valid_places: list[Place] = [Place(TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW)]
        self._passes: list[str] | None = None

    # -- model --------------------------------------------------------------------------------
    def set_model_dir(self, model_dir: str | os.PathLike) -> None:
        """The model folder: any layout pdlite reads (inference.pdmodel, __model__ + __params__, non-combined, PIR
        inference.json); detected at load."""
        self._model_dir = os.fspath(model_dir)

    def model_dir(self) -> str:
        """The model folder set with set_model_dir ('' when the model comes from files or memory)."""
        return self._model_dir

    def set_model_file(self, path: str | os.PathLike) -> None:
        """The program file (.pdmodel, __model__, model or PIR .json); with set_param_file for its params."""
        self._model_file = os.fspath(path)

    def model_file(self) -> str:
        """The program file set with set_model_file ('' when not set)."""
        return self._model_file

    def set_param_file(self, path: str | os.PathLike) -> None:
        """The combined params file (.pdiparams, __params__, params) of the program set with set_model_file."""
        self._param_file = os.fspath(path)

    def param_file(self) -> str:
        """The combined params file set with set_param_file ('' when not set)."""
        return self._param_file

    def set_model_buffer(self, model_buffer: bytes, *args: Any) -> None:
        """set_model_buffer(model, params) or paddlelite's set_model_buffer(model, model_size, params, params_size)."""
        model, params = model_and_params(model_buffer, args, "CxxConfig.set_model_buffer")
        self._model_buffer, self._param_buffer = model, params

    def is_model_from_memory(self) -> bool:
        """True when the model was given as bytes (set_model_buffer), not as files."""
        return self._model_buffer is not None

    # -- places and passes --------------------------------------------------------------------
    def set_valid_places(self, places: Sequence[Place]) -> None:
        """The places (target, precision) kernels may run on, in priority order; raises ConfigError for an empty list or
        a non-Place."""
        places = list(places)
        if not places or not all(isinstance(p, Place) for p in places):
            raise ConfigError("set_valid_places: give a non-empty list of pdlite.Place")
        self._valid_places = places

    def valid_places(self) -> list[Place]:
        """The places set with set_valid_places (a copy)."""
        return list(self._valid_places)

    def analysis_places(self) -> list[Place]:
        """The places the analysis picks kernels from: valid_places(), OpenCL places of paddlelite's image layouts
        (ImageDefault, ImageFolder, ImageNW) as NCHW ones (pdlite's OpenCL kernels keep buffers), and OpenCL FP16
        places first where set_opencl_precision(CL_PRECISION_FP16) asked for them."""
        places = [Place(p.target, p.precision, DataLayoutType.NCHW, p.device)
                  if p.target == TargetType.OpenCL and p.layout in _IMAGE_LAYOUTS else p for p in self.valid_places()]
        places = list(dict.fromkeys(places))
        if self._options.get("opencl_precision") == CLPrecisionType.CL_PRECISION_FP16:
            return with_fp16_places(places, (TargetType.OpenCL,))
        return places

    def set_passes(self, passes: Sequence[str]) -> None:
        """Override the analysis pipeline (an ordered list of pass names; see `pdlite.default_passes()`)."""
        self._passes = list(passes)

    def set_passes_internal(self, passes: Sequence[str] = ()) -> None:
        """paddlelite's name: run these passes (an empty list: the default pipeline)."""
        self._passes = list(passes) if passes else None

    def add_discarded_pass(self, name: str) -> None:
        """Leave one pass out of the pipeline."""
        self._passes = [p for p in self.passes() if p != name]

    def passes(self) -> list[str]:
        """The analysis passes the predictor will run: the ones set, else pdlite's default pipeline."""
        from pdlite.optimizer.pipeline import default_passes

        return list(self._passes) if self._passes is not None else default_passes()

    def set_graph_debug(self, on: bool = True) -> None:
        """Lint the graph after every pass and name the pass that broke it."""
        self._options["graph_debug"] = bool(on)

    def model_source(self) -> dict[str, Any]:
        """Where the model comes from, as keyword arguments of pdlite.model_parser.load_model (None for what was not
        set)."""
        return dict(model_dir=self._model_dir or None, model_file=self._model_file or None,
                    param_file=self._param_file or None, model_buffer=self._model_buffer,
                    param_buffer=self._param_buffer)
