"""Paddle ops -> one ONNX model: the device-neutral IR every NNAdapter driver consumes.

`convert_ops` walks ops in order. Before each op it infers the op's output shapes with the
op's own definition (`OPS[type].infer_shape`, the same code the host runtime uses) from the
shapes known so far, and folds small outputs whose inputs are all constants (shape tensors:
`shape` -> `slice` -> `reshape2`) by running the host kernel; an op whose outputs are all
folded becomes ONNX initializers. Every other op goes to its registered converter.

Shapes are tuples whose unknown dims are -1 (None: rank unknown); the subgraph kernel converts
with concrete input shapes, `export-onnx` with the program's shapes (dynamic batch).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdlite.core.dtypes import numpy_dtype
from pdlite.core.program import OpDesc, VarDesc
from pdlite.errors import PdliteError
from pdlite.nnadapter.openvino_forms import separate_fc_activations
from pdlite.nnadapter.qdq_fusion import fuse_for_onnxruntime
from pdlite.nnadapter.qdq_openvino import float_thin_deconv_weights
from pdlite.nnadapter.registry import CONVERTERS, ConversionError
from pdlite.operators.registry import OPS, ShapeContext
from pdlite.registries import load_registries

OPSET = 17
IR_VERSION = 8
# ops never evaluated at conversion time, whatever their inputs
_NO_FOLD = frozenset({"uniform_random", "gaussian_random", "randint", "randperm", "bernoulli", "multinomial",
                      "dropout", "feed", "fetch", "subgraph",
                      # int8 weights stay int8 initializers read by DequantizeLinear (converters/quant.py)
                      "dequantize_linear"})
FOLD_MAX_ELEMENTS = 4096
# Rewrites of the converted model for one device's runtime, applied after conversion (device name -> rewrites).
# ONNX Runtime's CPU provider makes QLinearConv only where a conv's output is quantized right after it
# (qdq_fusion/); OpenVINO already runs Paddle's QDQ layout in int8 and was slower with that rewrite
# (0.6x-0.95x the speed without them on mobilenet_v1/v2, resnet18): it gets the device-neutral model but for
# ConvTransposes of few output channels, which it runs faster in fp32 (qdq_openvino.py), and, in its models with
# dynamic dims, the GELUs and Relus of fully connected layers in forms it does not fuse into them (openvino_forms.py:
# a new input shape then prepares no oneDNN primitive for them). Each rewrite is called with the model and the device's context
# properties.
DEVICE_REWRITES: dict[str, tuple[Callable[[Any, Mapping[str, str]], Any], ...]] = {
    "onnxruntime": (fuse_for_onnxruntime,), "intel_openvino": (float_thin_deconv_weights, separate_fc_activations)}

Shape = tuple[int, ...]


def require_onnx() -> Any:
    """The `onnx` module, or a PdliteError naming the pip extras that install it."""
    try:
        import onnx
    except ImportError:
        raise PdliteError("NNAdapter needs the 'onnx' package: pip install pdlite[onnx] (ONNX Runtime) or "
                          "pip install pdlite[openvino] (OpenVINO)") from None
    return onnx


class _NoValue(Exception):
    pass


class _Meta:
    """Shape and dtype of a tensor whose data is unknown (what shape inference sees)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Shape, dtype: np.dtype) -> None:
        self.shape = shape
        self.dtype = dtype

    def __array__(self, *a: Any, **k: Any) -> np.ndarray:
        raise _NoValue


@dataclass
class TensorInfo:
    """What is known about Paddle variables: shapes (-1 = unknown dim), dtypes, constant values."""

    shapes: dict[str, Shape | None] = field(default_factory=dict)
    dtypes: dict[str, np.dtype] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_vars(cls, vars_: dict[str, VarDesc], params: dict[str, Any] | None = None) -> TensorInfo:
        """Shapes and dtypes as the program declares them; params as constant values."""
        info = cls()
        for name, v in vars_.items():
            if not v.is_tensor:
                continue
            info.shapes[name] = tuple(int(d) for d in v.shape)
            if v.dtype is not None:
                try:
                    info.dtypes[name] = numpy_dtype(v.dtype)
                except PdliteError:
                    pass
        for name, arr in (params or {}).items():
            info.set_value(name, np.asarray(arr))
        return info

    def set_value(self, name: str, value: np.ndarray) -> None:
        self.values[name] = value
        self.shapes[name] = tuple(value.shape)
        self.dtypes[name] = value.dtype

    def shape(self, name: str) -> Shape | None:
        return self.shapes.get(name)

    def rank(self, name: str) -> int | None:
        s = self.shapes.get(name)
        return None if s is None else len(s)

    def dtype(self, name: str) -> np.dtype | None:
        return self.dtypes.get(name)

    def value(self, name: str) -> np.ndarray | None:
        return self.values.get(name)

    def static(self, name: str) -> bool:
        """True when every dim of the tensor is known."""
        s = self.shapes.get(name)
        return s is not None and all(d >= 0 for d in s)

    def copy(self) -> TensorInfo:
        return TensorInfo(dict(self.shapes), dict(self.dtypes), dict(self.values))


def infer_op(op: OpDesc, info: TensorInfo, vars_: dict[str, VarDesc], fold: bool = True) -> None:
    """Record the shapes (and, for small constant results, values) of `op`'s outputs in `info`."""
    opdef = OPS.get(op.type)
    shapes: dict[str, list[Shape]] | None = None
    if opdef is not None and opdef.infer_shape is not None and all(info.static(n) for n in op.input_names()):
        ins: dict[str, list[Any]] = {}
        for slot, names in op.inputs.items():
            ins[slot] = [info.values[n] if n in info.values
                         else _Meta(info.shapes[n], info.dtypes.get(n, np.dtype(np.float32))) for n in names]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                shapes = opdef.infer_shape(ShapeContext(opdef.attach(op), ins))
        except Exception:
            shapes = None
    for slot, names in op.outputs.items():
        got = (shapes or {}).get(slot) or []
        for i, n in enumerate(names):
            v = vars_.get(n)
            if i < len(got):
                info.shapes[n] = tuple(int(d) for d in got[i])
            elif v is not None and v.is_tensor:
                info.shapes[n] = tuple(int(d) for d in v.shape)
            else:
                info.shapes[n] = None
            info.values.pop(n, None)
            if v is not None and v.dtype is not None and v.is_tensor:
                try:
                    info.dtypes[n] = numpy_dtype(v.dtype)
                except PdliteError:
                    pass
    if op.type in ("shape", "shape64") and info.static(op.input("Input") or ""):
        out = op.output("Out")
        if out:
            dtype = np.int64 if op.type == "shape64" else np.int32
            info.set_value(out, np.asarray(info.shapes[op.input("Input")], dtype=dtype))
        return
    if fold and shapes is not None:
        _fold(op, info)


def _fold(op: OpDesc, info: TensorInfo) -> None:
    """Evaluate `op` on the host when all its inputs are constants and its outputs are small."""
    if op.type in _NO_FOLD or any(n not in info.values for n in op.input_names()):
        return
    outs = op.output_names()
    if not outs or any(not info.static(n) or int(np.prod(info.shapes[n])) > FOLD_MAX_ELEMENTS for n in outs):
        return
    from pdlite.core.types import TargetType
    from pdlite.kernels.registry import kernels_for

    opdef = OPS[op.type]
    attached = opdef.attach(op)
    ins = {slot: [info.values[n] for n in names] for slot, names in op.inputs.items() if names}
    for kd in kernels_for(op.type):
        if kd.key.target != TargetType.Host:
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = kd.cls(attached).run(ins)
        except Exception:
            continue
        for slot, names in op.outputs.items():
            for n, val in zip(names, res.get(slot) or []):
                val = np.asarray(val)
                if info.shapes.get(n) == tuple(val.shape):
                    want = info.dtypes.get(n)
                    info.set_value(n, val.astype(want) if want is not None and val.dtype != want else val)
        return


class ConvertContext:
    """What a converter sees: known tensor facts, ONNX names of Paddle vars, and the node builder."""

    def __init__(self, info: TensorInfo, needed: set[str], onnx_mod: Any) -> None:
        self.info = info
        self.onnx = onnx_mod
        self.nodes: list[Any] = []
        self.initializers: dict[str, Any] = {}
        self._current: dict[str, str] = {}  # paddle name -> ONNX name of its latest version
        self._used: set[str] = set()
        self._needed = needed
        self._counter = 0
        self.op: OpDesc | None = None

    # -- tensor facts (by Paddle name) ----------------------------------------------------------
    def shape(self, name: str) -> Shape | None:
        return self.info.shape(name)

    def rank(self, name: str) -> int | None:
        return self.info.rank(name)

    def dtype(self, name: str) -> np.dtype:
        return self.info.dtype(name) or np.dtype(np.float32)

    def value(self, name: str) -> np.ndarray | None:
        return self.info.value(name)

    def needed(self, name: str) -> bool:
        """True when a later op or the graph's outputs read this var."""
        return name in self._needed

    # -- names ------------------------------------------------------------------------------
    def fresh(self, hint: str = "t") -> str:
        while True:
            self._counter += 1
            name = f"_pd.{hint}.{self._counter}"
            if name not in self._used:
                self._used.add(name)
                return name

    def define_input(self, name: str) -> str:
        self._used.add(name)
        self._current[name] = name
        return name

    def tensor(self, name: str) -> str:
        """ONNX name holding the current value of Paddle var `name` (constants become initializers)."""
        cur = self._current.get(name)
        if cur is not None:
            return cur
        val = self.info.value(name)
        if val is None:
            raise ConversionError(f"var {name!r} has no value here (not an input of the subgraph, not produced "
                                  "by an earlier op, not a parameter)")
        onnx_name = name if name not in self._used else self.fresh("param")
        self._used.add(onnx_name)
        self.initializers[onnx_name] = self.onnx.numpy_helper.from_array(np.asarray(val, order="C"), onnx_name)
        self._current[name] = onnx_name
        return onnx_name

    def input(self, op: OpDesc, slot: str, i: int = 0) -> str:
        name = op.input(slot, i)
        if name is None:
            raise ConversionError(f"op {op.type}: input slot {slot!r} has no tensor #{i}")
        return self.tensor(name)

    def out(self, name: str) -> str:
        """A new ONNX name for a new version of Paddle var `name` (the name itself when free)."""
        onnx_name = name if name not in self._used else self.fresh(name.replace("/", "_"))
        self._used.add(onnx_name)
        self._current[name] = onnx_name
        return onnx_name

    def output(self, op: OpDesc, slot: str, i: int = 0) -> str:
        name = op.output(slot, i)
        if name is None:
            raise ConversionError(f"op {op.type}: output slot {slot!r} has no tensor #{i}")
        return self.out(name)

    # -- builders ---------------------------------------------------------------------------
    def const(self, value: Any, dtype: Any = None, hint: str = "c") -> str:
        """An initializer holding `value` (NumPy conversion with `dtype`)."""
        arr = np.asarray(np.asarray(value, dtype=dtype), order="C")
        name = self.fresh(hint)
        self.initializers[name] = self.onnx.numpy_helper.from_array(arr, name)
        return name

    def ints(self, values: Iterable[int]) -> str:
        """An int64 1-D initializer (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), dtype=np.int64), hint="i")

    def add(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int | None = None,
            **attrs: Any) -> Any:
        """Append an ONNX node; returns its output name (or the list of names when several)."""
        if outputs is None or isinstance(outputs, int):
            outs = [self.fresh(op_type.lower()) for _ in range(outputs or 1)]
        else:
            outs = list(outputs)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), outs,
                                                      name=self.fresh(f"n.{op_type}"), **attrs))
        return outs[0] if len(outs) == 1 else outs

    def cast(self, name: str, dtype: Any) -> str:
        to = self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        return self.add("Cast", [name], to=int(to))

    def onnx_dtype(self, dtype: Any) -> int:
        return int(self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


@dataclass
class GraphInput:
    name: str
    shape: Shape  # -1 = dynamic
    dtype: np.dtype
    dim_params: tuple[str | None, ...] = ()  # names of the dynamic dims (ONNX dim_param), by position


def _value_info(onnx_mod: Any, name: str, dtype: np.dtype | None, shape: Shape | None,
                dyn_names: Sequence[str] = ()) -> Any:
    elem = int(onnx_mod.helper.np_dtype_to_tensor_dtype(np.dtype(dtype or np.float32)))
    dims: list[Any] | None = None
    if shape is not None:
        dims = []
        for i, d in enumerate(shape):
            dims.append(int(d) if d >= 0 else (dyn_names[i] if i < len(dyn_names) else None))
    return onnx_mod.helper.make_tensor_value_info(name, elem, dims)


def convert_ops(ops: Sequence[OpDesc], inputs: Sequence[GraphInput], outputs: Sequence[str],
                info: TensorInfo, vars_: dict[str, VarDesc], *, graph_name: str = "pdlite",
                dynamic_dim_names: Sequence[str] = (), device: str | None = None,
                properties: Mapping[str, str] | None = None,
                infer: Callable[[OpDesc, TensorInfo], None] | None = None) -> Any:
    """An ONNX ModelProto computing `outputs` from `inputs` with `ops` (in topological order).

    `info` holds the params (values) and declared shapes; it is updated with inferred shapes.
    `device`: the NNAdapter device the model is for; its DEVICE_REWRITES are applied (None: the
    device-neutral model, as `export-onnx` writes it), given the device's context `properties`.
    `infer(op, info)` records each op's output shapes and folded values before the op converts (default:
    `infer_op` on `info`; the subgraph kernel's one-model-for-all-shapes conversion passes
    `dynamic.Probes.infer`, which keeps only what every input shape agrees on).
    Raises ConversionError naming the first op that cannot be converted and why.
    """
    onnx = require_onnx()
    load_registries()
    for gi in inputs:
        info.shapes[gi.name] = tuple(gi.shape)
        info.dtypes[gi.name] = np.dtype(gi.dtype)
        info.values.pop(gi.name, None)
    needed = set(outputs)
    for op in ops:
        needed.update(op.input_names())
    ctx = ConvertContext(info, needed, onnx)
    for gi in inputs:
        ctx.define_input(gi.name)
    for op in ops:
        written = set(op.output_names())
        for n in dict.fromkeys(op.input_names()):  # in the op's order: the initializers' order, the model's bytes
            if n in written and n in info.values:  # written in place (batch_norm's MeanOut): keep the value it reads
                ctx.tensor(n)
        if infer is None:
            infer_op(op, info, vars_)
        else:
            infer(op, info)
        outs = [n for n in op.output_names()]
        if outs and all(n in info.values for n in outs):
            for n in outs:  # folded: the outputs are constants
                ctx._current.pop(n, None)
            continue
        conv = CONVERTERS.get(op.type)
        opdef = OPS.get(op.type)
        if conv is None or opdef is None:
            raise ConversionError(f"op {op.type} ({_label(op)}): no converter registered")
        attached = opdef.attach(op)
        why = conv.refusal(attached, info)
        if why:
            raise ConversionError(f"op {op.type} ({_label(op)}): {why}")
        ctx.op = attached
        try:
            conv.convert(ctx, attached)
        except ConversionError as e:
            raise ConversionError(f"op {op.type} ({_label(op)}): {e}") from None
        except PdliteError:
            raise
        except Exception as e:
            raise ConversionError(f"op {op.type} ({_label(op)}): converter failed: {type(e).__name__}: {e}") from e
    graph_outputs = []
    for n in outputs:
        onnx_name = ctx.tensor(n)
        if onnx_name in ctx.initializers or onnx_name in {gi.name for gi in inputs} or onnx_name in [
                o.name for o in graph_outputs]:
            onnx_name = ctx.add("Identity", [onnx_name], [ctx.fresh("out")])
        graph_outputs.append(_value_info(onnx, onnx_name, info.dtype(n), info.shape(n), dynamic_dim_names))
    nodes = drop_identities(ctx.nodes, {o.name for o in graph_outputs})
    graph = onnx.helper.make_graph(
        nodes, graph_name,
        [_value_info(onnx, gi.name, gi.dtype, gi.shape, gi.dim_params or dynamic_dim_names) for gi in inputs],
        graph_outputs, list(ctx.initializers.values()))
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="pdlite", ir_version=IR_VERSION)
    for rewrite in DEVICE_REWRITES.get(device or "", ()):
        rewrite(model, properties or {})
    return model


def drop_identities(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Nodes without the Identity nodes that only rename a value produced by another node.

    The converters name their last node's output freely and end with an Identity into the
    Paddle var's name; here the producer writes that name directly instead (unless the renamed
    value is itself a graph output or read elsewhere).
    """
    producer = {o: n for n in nodes for o in n.output}
    uses: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    kept = []
    for n in nodes:
        src = n.input[0] if n.op_type == "Identity" and len(n.input) == 1 else None
        if src is not None and src in producer and uses.get(src) == 1 and src not in outputs:
            p = producer[src]
            p.output[list(p.output).index(src)] = n.output[0]
            producer[n.output[0]] = p
            continue
        kept.append(n)
    return kept


def _label(op: OpDesc) -> str:
    outs = op.output_names()
    return f"output {outs[0]!r}" if outs else "no outputs"


def refusal(op: OpDesc, info: TensorInfo) -> str | None:
    """Why `op` cannot go to a device (None when it can): no op definition, no converter, or its predicate."""
    load_registries()
    conv = CONVERTERS.get(op.type)
    if conv is None:
        return "no converter"
    opdef = OPS.get(op.type)
    if opdef is None:
        return "no op definition"
    try:
        attached = opdef.attach(op)
    except PdliteError as e:
        return str(e)
    return conv.refusal(attached, info)
