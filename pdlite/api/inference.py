"""paddle.inference's Python API on pdlite: `from pdlite import inference` where a script had
`from paddle import inference`.

    config = inference.Config("model_dir", "inference")   # inference.json or inference.pdmodel
    config.disable_gpu()
    config.set_cpu_math_library_num_threads(4)
    predictor = inference.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    handle.copy_from_cpu(x)
    predictor.run()
    out = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()

The predictor is a pdlite CxxPredictor (or LightPredictor for a `.nb`) behind paddle's names;
`clone()` shares weights and the analysed program, and clones run concurrently on threads.
Calls pdlite cannot honour raise a pdlite error naming the call and the alternative.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pdlite import __version__
from pdlite.api.base import PredictorBase
from pdlite.api.inference_config import Config, PassBuilder, PrecisionType
from pdlite.api.predictor import create_paddle_predictor
from pdlite.api.tensor import Tensor as LiteTensor
from pdlite.errors import ConfigError, InputError

__all__ = ["Config", "DataType", "InternalUtils", "PassBuilder", "PlaceType", "PrecisionType", "Predictor", "PredictorPool",
           "Tensor", "convert_to_mixed_precision", "create_predictor", "get_num_bytes_of_data_type",
           "get_trt_compile_version", "get_trt_runtime_version", "get_version", "XpuConfig"]


class DataType(enum.IntEnum):
    """paddle.inference.DataType (the values of Paddle's PaddleDType)."""

    FLOAT32 = 0
    INT64 = 1
    INT32 = 2
    UINT8 = 3
    INT8 = 4
    FLOAT16 = 5
    BOOL = 6
    FLOAT64 = 7
    BFLOAT16 = 8


class PlaceType(enum.IntEnum):
    """paddle.inference.PlaceType."""

    UNK = -1
    CPU = 0
    GPU = 1
    XPU = 2
    CUSTOM = 4


_DTYPES: dict[DataType, np.dtype] = {
    DataType.FLOAT32: np.dtype(np.float32), DataType.INT64: np.dtype(np.int64), DataType.INT32: np.dtype(np.int32),
    DataType.UINT8: np.dtype(np.uint8), DataType.INT8: np.dtype(np.int8), DataType.FLOAT16: np.dtype(np.float16),
    DataType.BOOL: np.dtype(np.bool_), DataType.FLOAT64: np.dtype(np.float64),
}
_OF_DTYPE = {v: k for k, v in _DTYPES.items()}


def get_version() -> str:
    """The engine's version text (Paddle prints version, commit and branch lines)."""
    return f"version: pdlite {__version__}\ncommit: pdlite\nbranch: pdlite"


def get_num_bytes_of_data_type(dtype: DataType | int) -> int:
    """Bytes per element of a DataType."""
    dt = DataType(int(dtype))
    return 2 if dt == DataType.BFLOAT16 else _DTYPES[dt].itemsize


def get_trt_compile_version() -> tuple[int, int, int]:
    """(0, 0, 0): no TensorRT (as a CPU build of Paddle answers)."""
    return (0, 0, 0)


def get_trt_runtime_version() -> tuple[int, int, int]:
    """TensorRT's runtime version as paddle.inference reports it: (0, 0, 0), pdlite has no TensorRT."""
    return (0, 0, 0)


def convert_to_mixed_precision(*args: Any, **kwargs: Any) -> None:
    """paddle.inference's offline fp16 conversion: raises ConfigError naming pdlite's inference-time fp16 instead."""
    raise ConfigError("convert_to_mixed_precision(): pdlite does not rewrite models to fp16; run in fp16 at "
                      "inference time instead: config.enable_use_gpu(100, 0, PrecisionType.Half) (CUDA target) or "
                      "config.enable_openvino_engine(PrecisionType.Half)")


class XpuConfig:
    """paddle.inference.XpuConfig: pdlite has no XPU target."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError("XpuConfig(): pdlite has no XPU target; run on the CPU (the default), on a GPU with "
                          "config.enable_use_gpu(...), or through config.enable_openvino_engine() / enable_onnxruntime()")


class InternalUtils:
    """paddle.inference.InternalUtils (TensorRT and XPU internals): every call refuses, naming it."""

    @staticmethod
    def _refuse(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            """A Paddle Inference internal with no pdlite counterpart: raises ConfigError saying to drop the call."""
            raise ConfigError(f"InternalUtils.{name}(): a Paddle Inference internal (TensorRT / XPU tuning) with no "
                              "pdlite counterpart; drop the call")

        return call


for _n in ("disable_tensorrt_half_ops", "set_transformer_maskid", "set_transformer_posid"):
    setattr(InternalUtils, _n, staticmethod(InternalUtils._refuse(_n)))


class _Name(str):
    """A tensor's name, readable as `t.name` and as `t.name()`."""

    def __call__(self) -> str:
        return str(self)


class Tensor:
    """paddle.inference's tensor handle over a pdlite Tensor: copy_from_cpu copies, copy_to_cpu returns a new array."""

    def __init__(self, tensor: LiteTensor) -> None:
        self._t = tensor
        self.name = _Name(tensor.name)

    def copy_from_cpu(self, data: Any) -> None:
        """Set the data (a copy: changing `data` afterwards does not change the next run)."""
        if not isinstance(data, np.ndarray):
            data = np.asarray(data)
        self._t.from_numpy(data)

    def share_external_data(self, data: np.ndarray) -> None:
        """Zero-copy opt-in: the predictor reads `data` itself (do not change it until run() returns)."""
        self._t.share_data(data)

    def share_external_data_by_ptr_name(self, *args: Any) -> None:
        """paddle.inference's raw-pointer sharing: raises ConfigError naming share_external_data(array) and
        copy_from_cpu."""
        raise ConfigError("Tensor.share_external_data_by_ptr_name(): pdlite tensors are NumPy arrays, not device "
                          "pointers: use share_external_data(array) (zero-copy) or copy_from_cpu(array)")

    def copy_to_cpu(self) -> np.ndarray:
        """A new array holding the data (a later run does not change it)."""
        return self._t.numpy()

    def reshape(self, shape: Sequence[int] | int) -> None:
        """Declare the input's shape before copy_from_cpu (as paddle.inference's reshape); an int is a 1-D shape."""
        self._t.resize([int(shape)] if isinstance(shape, (int, np.integer)) else shape)

    def shape(self) -> list[int]:
        """The shape of the data (or the shape declared with reshape)."""
        return self._t.shape()

    def lod(self) -> list[list[int]]:
        """The level-of-detail offsets (one list per level; [] for a plain tensor)."""
        return self._t.lod()

    def set_lod(self, lod: Sequence[Sequence[int]]) -> None:
        """Set the level-of-detail offsets (one list of offsets per level)."""
        self._t.set_lod(lod)

    def type(self) -> DataType:
        """The data's DataType (FLOAT32, INT64, ...); InputError before any data or declared dtype."""
        dt = self._t.dtype()
        if dt is None:
            raise InputError(f"tensor {self._t.name!r}: no data and no declared dtype yet")
        try:
            return _OF_DTYPE[np.dtype(dt)]
        except KeyError:
            raise InputError(f"tensor {self._t.name!r}: dtype {dt} has no paddle.inference DataType") from None

    def place(self) -> PlaceType:
        """PlaceType.GPU when the data is on the CUDA target, else PlaceType.CPU."""
        return PlaceType.GPU if self._t.target().name == "CUDA" else PlaceType.CPU

    def __repr__(self) -> str:
        return f"inference.Tensor({self._t.name!r}, shape={self.shape()})"


_PREDICTOR_UNSUPPORTED = {
    "get_serialized_program": "pdlite keeps no serialized program: save an optimized model with pdlite-opt",
}


class Predictor:
    """paddle.inference.Predictor on a pdlite predictor."""

    def __init__(self, config: Config, _lite: PredictorBase | None = None) -> None:
        if not isinstance(config, Config):
            raise ConfigError(f"create_predictor takes a pdlite.inference.Config, got {type(config).__name__}")
        self._config = config
        self._lite = _lite if _lite is not None else create_paddle_predictor(config.to_lite())
        self._inputs = {n: Tensor(self._lite.get_input_by_name(n)) for n in self._lite.get_input_names()}
        self._outputs = {n: Tensor(self._lite.get_output_by_name(n)) for n in self._lite.get_output_names()}

    @property
    def lite(self) -> PredictorBase:
        """The pdlite predictor underneath (paddlelite API, `predict`, profilers)."""
        return self._lite

    @property
    def profiler(self) -> Any:
        """The per-op profiler of the underlying predictor (None unless profiling was enabled on the config)."""
        return self._lite.profiler

    def get_input_names(self) -> list[str]:
        """The model's input names, in feed order."""
        return self._lite.get_input_names()

    def get_output_names(self) -> list[str]:
        """The model's output names, in fetch order."""
        return self._lite.get_output_names()

    def get_input_handle(self, name: str) -> Tensor:
        """The input tensor named `name`, to fill with copy_from_cpu / share_external_data; InputError naming the inputs
        when there is none."""
        try:
            return self._inputs[name]
        except KeyError:
            raise InputError(f"get_input_handle({name!r}): no such input; inputs are {list(self._inputs)}") from None

    def get_output_handle(self, name: str) -> Tensor:
        """The output tensor named `name`, to read with copy_to_cpu after run(); InputError naming the outputs when
        there is none."""
        try:
            return self._outputs[name]
        except KeyError:
            raise InputError(f"get_output_handle({name!r}): no such output; outputs are {list(self._outputs)}") from None

    # the pre-2.0 zero-copy names
    get_input_tensor = get_input_handle
    get_output_tensor = get_output_handle

    def run(self, inputs: Sequence[Any] | None = None) -> list[np.ndarray] | None:
        """run(): on the inputs set through the handles. run([arrays]): feed them in input order and return the
        outputs as new NumPy arrays (one atomic call: safe from several threads)."""
        if inputs is None:
            self._lite.run()
            return None
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            raise InputError("Predictor.run(inputs): give a list of arrays, one per input "
                             f"({self.get_input_names()})")
        return self._lite.predict([np.asarray(a) for a in inputs])

    def zero_copy_run(self) -> None:
        """paddle.inference's older name of run() with no arguments: run on the inputs set through the handles."""
        self._lite.run()

    def clone(self) -> Predictor:
        """A predictor sharing the weights and the analysed program, with its own handles (for another thread)."""
        return Predictor(self._config, self._lite.clone())

    def try_shrink_memory(self) -> int:
        """Intermediates are dropped after each run already; nothing held to release (returns 0)."""
        return 0

    def clear_intermediate_tensor(self) -> None:
        """Intermediates are not kept between runs (memory_optimize_pass frees them during the run)."""

    def get_input_tensor_shape(self) -> dict[str, list[int]]:
        """Each input's shape as the model declares it (-1 = any)."""
        return {n: list(self._lite._feed_specs[n][0]) for n in self.get_input_names()}

    def register_output_hook(self, hook: Callable[[str, str, Any], None]) -> None:
        """hook(op_type, var_name, value) for every op output after it runs (value: a NumPy array)."""
        self._add_hook(hook, outputs=True)

    def register_input_hook(self, hook: Callable[[str, str, Any], None]) -> None:
        """hook(op_type, var_name, value) for every op input (called once the op has run)."""
        self._add_hook(hook, outputs=False)

    def _add_hook(self, hook: Callable[[str, str, Any], None], outputs: bool) -> None:
        prev = self._lite._hook

        def call(inst: Any, seconds: float, scope: dict[str, Any]) -> None:
            if prev is not None:
                prev(inst, seconds, scope)
            names = inst.op.output_names() if outputs else inst.op.input_names()
            for n in names:
                if n in scope:
                    hook(inst.op.type, n, scope[n])

        self._lite.set_hook(call)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        why = _PREDICTOR_UNSUPPORTED.get(name)
        if why is not None:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise ConfigError(f"Predictor.{name}(): {why}")

            return refuse
        raise AttributeError(f"pdlite.inference.Predictor has no attribute {name!r}")


def create_predictor(config: Config) -> Predictor:
    """A predictor for `config` (analysis runs now; a `.nb` model loads without analysis)."""
    return Predictor(config)


class PredictorPool:
    """`size` predictors over one model: the first made from `config`, the others its clones (shared weights)."""

    def __init__(self, config: Config, size: int = 1) -> None:
        if int(size) < 1:
            raise ConfigError(f"PredictorPool: size must be >= 1, got {size}")
        first = Predictor(config)
        self._predictors = [first, *(first.clone() for _ in range(int(size) - 1))]

    def retrieve(self, idx: int) -> Predictor:
        """The predictor at position `idx` of the pool; InputError when out of range."""
        if not 0 <= idx < len(self._predictors):
            raise InputError(f"PredictorPool.retrieve({idx}): the pool holds {len(self._predictors)} predictor(s)")
        return self._predictors[idx]

    def __len__(self) -> int:
        return len(self._predictors)
