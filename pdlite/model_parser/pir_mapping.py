"""The PIR op -> legacy op table used by `pdlite.model_parser.pir`.

Each entry maps one PIR op (`pd_op.*`, `builtin.*`) onto the ops of pdlite's registry, which
are Paddle's legacy (ProgramDesc) ops: same semantics, legacy names, slots and attributes.
Most entries are `simple(legacy_type, input_slots, output_slots, attrs, fixed)`: operand i
goes to input_slots[i], result i to output_slots[i], PIR attribute `a` to legacy attribute
`attrs[a]`, plus `fixed` attributes. PIR passes IntArray / Scalar arguments (kernel sizes,
shapes, axes, ...) as operands, usually made by pd_op.full_int_array / pd_op.full; when
they are constant they are folded into the legacy attributes (and the constant op is
dropped when nothing else reads it), otherwise they go to the legacy tensor slot
(ShapeTensor, StartsTensor, ...) where there is one. docs/pir.md lists the table.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType, numpy_dtype
from pdlite.core.program import VarDesc
from pdlite.model_parser.pir import DTYPE_NAMES, Conversion, PirConverter, PirOp

Slots = tuple[str | None, ...]

# -------------------------------------------------------------------------------- helpers


def _operand(op: PirOp, i: int) -> int:
    return op.inputs[i] if i < len(op.inputs) else 0


def _ins(c: PirConverter, op: PirOp, slots: Slots) -> dict[str, list[str]]:
    """Input slots: operand i -> slots[i] (tensor or vector operands; null operands left out)."""
    return {s: c.names_of(op, v) for s, v in zip(slots, op.inputs) if s is not None and v != 0}


def _attrs(op: PirOp, spec: dict[str, str] | None) -> dict[str, Any]:
    return {dst: op.attrs[src] for src, dst in (spec or {}).items() if src in op.attrs}


def vartype(c: PirConverter, op: PirOp, name: str | None, what: str = "dtype") -> int:
    """VarType number of a dtype attribute value ("float32" -> 5); "Undefined" -> -1."""
    if name is None or str(name).lower().startswith("undefined"):
        return -1
    try:
        return int(DTYPE_NAMES[str(name)])
    except KeyError:
        raise c.fail(op, f"attribute {what!r}: unknown data type {name!r}") from None


def const_ints(c: PirConverter, op: PirOp, i: int) -> list[int] | None:
    """Operand i as a list of ints when it is a constant (None when it is computed)."""
    v = c.const(_operand(op, i))
    return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def const_scalar(c: PirConverter, op: PirOp, i: int) -> Any:
    v = c.const(_operand(op, i))
    if v is None:
        return None
    flat = np.asarray(v).reshape(-1)
    if flat.size != 1:
        raise c.fail(op, f"operand #{i} should hold one value, holds {flat.size}")
    return flat[0].item()


def int_arg(c: PirConverter, op: PirOp, i: int, attrs: dict[str, Any], attr: str, ins: dict[str, list[str]],
            tensor_slot: str | None, list_slot: str | None = None, what: str = "") -> None:
    """An IntArray operand: folded into `attr` when constant, else fed to the legacy tensor slot
    (`list_slot` for a vector of scalars, `tensor_slot` for one tensor)."""
    vid = _operand(op, i)
    if vid == 0:
        return
    ints = const_ints(c, op, i)
    if ints is not None:
        attrs[attr] = ints
        return
    if list_slot is not None and vid in c.vec_names:
        ins[list_slot] = c.names_of(op, vid)
    elif tensor_slot is not None and vid not in c.vec_names:
        ins[tensor_slot] = [c.name(op, vid)]
    else:
        raise c.unsupported(op, f"{what or attr} must be a constant (pd_op.full_int_array / pd_op.full)")


def scalar_arg(c: PirConverter, op: PirOp, i: int, attrs: dict[str, Any], attr: str, ins: dict[str, list[str]],
               tensor_slot: str | None, conv: Callable[[Any], Any] = float) -> None:
    """A Scalar operand: folded into `attr` when constant, else fed to `tensor_slot`."""
    vid = _operand(op, i)
    if vid == 0:
        return
    v = const_scalar(c, op, i)
    if v is not None:
        attrs[attr] = conv(v)
    elif tensor_slot is not None:
        ins[tensor_slot] = [c.name(op, vid)]
    else:
        raise c.unsupported(op, f"{attr} must be a constant (pd_op.full)")


def simple(legacy: str, ins: Slots = ("X",), outs: Slots = ("Out",), attrs: dict[str, str] | None = None,
           fixed: dict[str, Any] | None = None) -> Conversion:
    """A one-to-one mapping: operands, results and attributes renamed, `fixed` attributes added."""

    def conv(c: PirConverter, op: PirOp) -> None:
        a = _attrs(op, attrs)
        a.update(fixed or {})
        c.emit(legacy, _ins(c, op, ins), c.outputs(op, outs), a)

    conv.__doc__ = f"-> {legacy}"
    return conv


# ---------------------------------------------------------------------- program structure


def _parameter(c: PirConverter, op: PirOp) -> None:
    name = op.attrs.get("parameter_name", op.attrs.get("value"))
    if not isinstance(name, str) or not name:
        raise c.fail(op, "parameter has no name")
    if c.define(op, 0, name, persistable=True) != name:
        raise c.fail(op, f"parameter name {name!r} is used twice")


def _data(c: PirConverter, op: PirOp) -> None:
    name = op.attrs.get("name")
    if not isinstance(name, str) or not name:
        raise c.fail(op, "feed has no 'name' attribute")
    if c.define(op, 0, name) != name:
        raise c.fail(op, f"feed name {name!r} is used twice")
    c.block.vars[name].need_check_feed = True
    col = op.attrs.get("col", c.n_feeds) if op.name == "pd_op.feed" else c.n_feeds
    c.emit("feed", {"X": ["feed"]}, {"Out": [name]}, {"col": int(col)})
    c.n_feeds += 1


def _fetch(c: PirConverter, op: PirOp) -> None:
    name = op.attrs.get("name")
    if not isinstance(name, str) or not name or not op.inputs:
        raise c.fail(op, "fetch needs an operand and a 'name' attribute")
    src = c.name(op, op.inputs[0])
    if src != name:  # a parameter, a feed or a value fetched twice: copy it under the fetch name
        if c.claim(name) != name:
            raise c.fail(op, f"fetch name {name!r} is used twice")
        v = c.block.vars.get(src)
        c.block.vars[name] = VarDesc(name, dtype=v.dtype if v else VarType.FP32, shape=list(v.shape) if v else [])
        c.emit("assign", {"X": [src]}, {"Out": [name]})
        src = name
    c.emit("fetch", {"X": [src]}, {"Out": ["fetch"]}, {"col": int(op.attrs.get("col", 0))})


def _combine(c: PirConverter, op: PirOp) -> None:
    vid = op.outputs[0]
    c.vec_ids[vid] = list(op.inputs)
    c.vec_names[vid] = [c.name(op, v) for v in op.inputs]


def _split_vector(c: PirConverter, op: PirOp) -> None:
    vec = _operand(op, 0)
    elems = c.vec_names.get(vec)
    if elems is None or len(elems) != len(op.outputs):
        raise c.fail(op, f"builtin.split of %{vec}: expected a vector of {len(op.outputs)} values")
    for i, out in enumerate(op.outputs):
        c.names[out] = elems[i]
        if vec in c.vec_ids:
            v = c.const(c.vec_ids[vec][i])
            if v is not None:
                c.consts[out] = v


def _full(c: PirConverter, op: PirOp) -> None:
    shape = [int(d) for d in op.attrs.get("shape", [1])]
    vt = vartype(c, op, op.attrs.get("dtype", "float32"))
    value = op.attrs.get("value", 0.0)
    if isinstance(value, complex) or vt < 0:
        raise c.unsupported(op, f"full of {op.attrs.get('dtype')} {value!r} is not supported")
    dt = numpy_dtype(vt, c.source)
    c.consts[op.outputs[0]] = np.full(shape, value, dtype=dt)
    attrs: dict[str, Any] = {"shape": shape, "value": float(value), "dtype": vt, "str_value": ""}
    if dt.kind in "iu" and abs(int(value)) > 2**24:
        attrs["str_value"] = str(int(value))
    c.emit("fill_constant", {}, {"Out": [c.define(op, 0)]}, attrs, droppable=True)


def _assign_value(c: PirConverter, op: PirOp, values: list[Any], shape: list[int], dtype: str) -> None:
    vt = vartype(c, op, dtype)
    if vt < 0:
        raise c.fail(op, "constant without a data type")
    dt = numpy_dtype(vt, c.source)
    arr = np.asarray(values, dtype=dt).reshape(shape)
    c.consts[op.outputs[0]] = arr
    key = {"i": "int64_values" if dt.itemsize == 8 else "int32_values", "b": "bool_values"}.get(dt.kind, "fp32_values")
    vals = [bool(x) if dt.kind == "b" else int(x) if dt.kind in "iu" else float(x) for x in arr.reshape(-1)]
    c.emit("assign_value", {}, {"Out": [c.define(op, 0)]}, {"shape": list(shape), "dtype": vt, key: vals},
           droppable=True)


def _full_int_array(c: PirConverter, op: PirOp) -> None:
    values = list(op.attrs.get("value", []))
    _assign_value(c, op, values, [len(values)], op.attrs.get("dtype", "int64"))


def _assign_value_op(c: PirConverter, op: PirOp) -> None:
    values = list(op.attrs.get("values", []))
    _assign_value(c, op, values, [int(d) for d in op.attrs.get("shape", [len(values)])],
                  op.attrs.get("dtype", "float32"))


# ------------------------------------------------------------------------- vision ops

_CONV = {"strides": "strides", "paddings": "paddings", "padding_algorithm": "padding_algorithm",
         "dilations": "dilations", "groups": "groups", "data_format": "data_format"}


def _conv_transpose(c: PirConverter, op: PirOp) -> None:
    attrs = _attrs(op, {**_CONV, "output_padding": "output_padding"})
    ins = _ins(c, op, ("Input", "Filter"))
    int_arg(c, op, 2, attrs, "output_size", ins, None, what="output_size")
    c.emit("conv2d_transpose", ins, c.outputs(op, ("Output",)), attrs)


_POOL = {"strides": "strides", "paddings": "paddings", "ceil_mode": "ceil_mode", "exclusive": "exclusive",
         "data_format": "data_format", "pooling_type": "pooling_type", "global_pooling": "global_pooling",
         "adaptive": "adaptive", "padding_algorithm": "padding_algorithm"}


def _pool2d(c: PirConverter, op: PirOp) -> None:
    attrs = _attrs(op, _POOL)
    ins = _ins(c, op, ("X",))
    int_arg(c, op, 1, attrs, "ksize", ins, None, what="kernel_size")
    c.emit("pool2d", ins, c.outputs(op, ("Out",)), attrs)


def _interp(method: str) -> Conversion:
    def conv(c: PirConverter, op: PirOp) -> None:
        attrs = _attrs(op, {"data_format": "data_layout", "out_d": "out_d", "out_h": "out_h", "out_w": "out_w",
                            "scale": "scale", "interp_method": "interp_method", "align_corners": "align_corners",
                            "align_mode": "align_mode"})
        ins = _ins(c, op, ("X",))
        size = const_ints(c, op, 1) if _operand(op, 1) else None
        if size is not None and len(size) in (1, 2, 3):
            for k, v in zip(("out_d", "out_h", "out_w")[3 - len(size):], size):
                attrs[k] = v
        elif _operand(op, 1):
            ins["OutSize"] = [c.name(op, _operand(op, 1))]
        if _operand(op, 2):
            ins["SizeTensor"] = c.names_of(op, _operand(op, 2))
        if _operand(op, 3):
            ins["Scale"] = [c.name(op, _operand(op, 3))]
        c.emit(f"{method}_interp_v2", ins, c.outputs(op, ("Out",)), attrs)

    conv.__doc__ = f"-> {method}_interp_v2"
    return conv


_DROPOUT_MODES = {"upscale_in_train": "upscale_in_train", "downscale_in_infer": "downgrade_in_infer",
                  "downgrade_in_infer": "downgrade_in_infer"}


def _dropout(c: PirConverter, op: PirOp) -> None:
    mode = op.attrs.get("mode", "upscale_in_train")
    if mode not in _DROPOUT_MODES:
        raise c.fail(op, f"unknown dropout mode {mode!r}")
    attrs = {"is_test": bool(op.attrs.get("is_test", True)), "dropout_implementation": _DROPOUT_MODES[mode],
             "seed": int(op.attrs.get("seed", 0)), "fix_seed": bool(op.attrs.get("fix_seed", False)),
             "dropout_prob": float(op.attrs.get("p", 0.5))}
    ins = _ins(c, op, ("X",))
    scalar_arg(c, op, 2, attrs, "dropout_prob", ins, None)
    c.emit("dropout", ins, c.outputs(op, ("Out", "Mask")), attrs)


# ---------------------------------------------------------------------- tensor ops


def _reshape(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"shape": []}
    ins = _ins(c, op, ("X",))
    int_arg(c, op, 1, attrs, "shape", ins, "Shape", "ShapeTensor")
    c.emit("reshape2", ins, c.outputs(op, ("Out", "XShape")), attrs)


def _axes_op(legacy: str, attr: str, tensor_slot: str | None, list_slot: str | None, outs: Slots,
             extra: dict[str, str] | None = None) -> Conversion:
    """Ops whose operand #1 is an IntArray of axes / shape / repeat times."""

    def conv(c: PirConverter, op: PirOp) -> None:
        attrs = _attrs(op, extra)
        ins = _ins(c, op, ("X",))
        int_arg(c, op, 1, attrs, attr, ins, tensor_slot, list_slot)
        c.emit(legacy, ins, c.outputs(op, outs), attrs)

    conv.__doc__ = f"-> {legacy}"
    return conv


def _reduce(legacy: str) -> Conversion:
    def conv(c: PirConverter, op: PirOp) -> None:
        attrs: dict[str, Any] = {"keep_dim": bool(op.attrs.get("keepdim", False))}
        ins = _ins(c, op, ("X",))
        if op.name.endswith((".all", ".any", ".amax", ".amin")) and "axis" in op.attrs:
            dims = [int(a) for a in op.attrs["axis"]]
        else:
            dims = const_ints(c, op, 1) if len(op.inputs) > 1 else []
            if dims is None:
                raise c.unsupported(op, "axis must be a constant (pd_op.full_int_array)")
        attrs.update(dim=dims, reduce_all=not dims or bool(op.attrs.get("reduce_all", False)))
        if "dtype" in op.attrs:
            attrs["out_dtype"] = vartype(c, op, op.attrs["dtype"])
        c.emit(legacy, ins, c.outputs(op, ("Out",)), attrs)

    conv.__doc__ = f"-> {legacy}"
    return conv


def _concat(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"axis": 0}
    ins = _ins(c, op, ("X",))
    scalar_arg(c, op, 1, attrs, "axis", ins, "AxisTensor", int)
    c.emit("concat", ins, c.outputs(op, ("Out",)), attrs)


def _split(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"num": 0, "axis": 0, "sections": []}
    ins = _ins(c, op, ("X",))
    if op.name.endswith("split_with_num"):
        attrs["num"] = int(op.attrs.get("num", 0))
        scalar_arg(c, op, 1, attrs, "axis", ins, "AxisTensor", int)
    else:
        int_arg(c, op, 1, attrs, "sections", ins, None, "SectionsTensorList")
        scalar_arg(c, op, 2, attrs, "axis", ins, "AxisTensor", int)
    c.emit("split", ins, c.outputs(op, ("Out",)), attrs)


def _slice(c: PirConverter, op: PirOp) -> None:
    attrs = _attrs(op, {"axes": "axes", "infer_flags": "infer_flags", "decrease_axis": "decrease_axis"})
    attrs.setdefault("decrease_axis", [])
    ins = _ins(c, op, ("Input",))
    int_arg(c, op, 1, attrs, "starts", ins, "StartsTensor", "StartsTensorList")
    int_arg(c, op, 2, attrs, "ends", ins, "EndsTensor", "EndsTensorList")
    c.emit("slice", ins, c.outputs(op, ("Out",)), attrs)


def _strided_slice(c: PirConverter, op: PirOp) -> None:
    attrs = _attrs(op, {"axes": "axes"})
    attrs.update(decrease_axis=[], infer_flags=[1] * len(attrs.get("axes", [])))
    ins = _ins(c, op, ("Input",))
    int_arg(c, op, 1, attrs, "starts", ins, "StartsTensor", "StartsTensorList")
    int_arg(c, op, 2, attrs, "ends", ins, "EndsTensor", "EndsTensorList")
    int_arg(c, op, 3, attrs, "strides", ins, "StridesTensor", "StridesTensorList")
    c.emit("strided_slice", ins, c.outputs(op, ("Out",)), attrs)


def _scale(c: PirConverter, op: PirOp) -> None:
    attrs = {"scale": 1.0, "bias": float(op.attrs.get("bias", 0.0)),
             "bias_after_scale": bool(op.attrs.get("bias_after_scale", True))}
    ins = _ins(c, op, ("X",))
    scalar_arg(c, op, 1, attrs, "scale", ins, "ScaleTensor")
    c.emit("scale", ins, c.outputs(op, ("Out",)), attrs)


def _clip(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {}
    ins = _ins(c, op, ("X",))
    scalar_arg(c, op, 1, attrs, "min", ins, "Min")
    scalar_arg(c, op, 2, attrs, "max", ins, "Max")
    c.emit("clip", ins, c.outputs(op, ("Out",)), attrs)


def _cast(c: PirConverter, op: PirOp) -> None:
    src = c.block.vars.get(c.name(op, _operand(op, 0)))
    attrs = {"in_dtype": int(src.dtype) if src is not None and src.dtype is not None else -1,
             "out_dtype": vartype(c, op, op.attrs.get("dtype"))}
    c.emit("cast", _ins(c, op, ("X",)), c.outputs(op, ("Out",)), attrs)


def _arg(legacy: str) -> Conversion:
    def conv(c: PirConverter, op: PirOp) -> None:
        attrs = {"keepdims": bool(op.attrs.get("keepdims", False)), "flatten": bool(op.attrs.get("flatten", False)),
                 "dtype": vartype(c, op, op.attrs.get("dtype", "int64"))}
        ins = _ins(c, op, ("X",))
        scalar_arg(c, op, 1, attrs, "axis", ins, None, int)
        c.emit(legacy, ins, c.outputs(op, ("Out",)), attrs)

    return conv


def _full_like(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"dtype": vartype(c, op, op.attrs.get("dtype"))}
    ins = _ins(c, op, ("X",))
    scalar_arg(c, op, 1, attrs, "value", ins, None)
    c.emit("fill_any_like", ins, c.outputs(op, ("Out",)), attrs)


def _scalar_attr_op(legacy: str, ins_slots: Slots, idx: int, attr: str, tensor_slot: str | None, outs: Slots,
                    spec: dict[str, str] | None = None, conv_: Callable[[Any], Any] = int) -> Conversion:
    """Ops with one Scalar operand (axis, k, num_classes ...) folded into `attr`."""

    def conv(c: PirConverter, op: PirOp) -> None:
        attrs = _attrs(op, spec)
        ins = _ins(c, op, ins_slots)
        scalar_arg(c, op, idx, attrs, attr, ins, tensor_slot, conv_)
        c.emit(legacy, ins, c.outputs(op, outs), attrs)

    conv.__doc__ = f"-> {legacy}"
    return conv


def _full_with_tensor(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"dtype": vartype(c, op, op.attrs.get("dtype", "float32")), "value": 0.0, "shape": []}
    ins = {"ValueTensor": [c.name(op, _operand(op, 0))]}
    int_arg(c, op, 1, attrs, "shape", ins, "ShapeTensor", "ShapeTensorList")
    c.emit("fill_constant", ins, c.outputs(op, ("Out",)), attrs)


def _tril_triu(lower: bool) -> Conversion:
    return simple("tril_triu", attrs={"diagonal": "diagonal"}, fixed={"lower": lower})


def _ignore(c: PirConverter, op: PirOp) -> None:
    """builtin.shadow_output only names a value for the executor's scope: nothing to run."""


def _shape64(c: PirConverter, op: PirOp) -> None:
    c.emit("shape64", _ins(c, op, ("Input",)), c.outputs(op, ("Out",)))


# ------------------------------------------------------------------------- the table

_UNARY_SAME = ["relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "floor", "ceil", "round", "sin",
               "cos", "erf", "square", "reciprocal", "sign", "silu", "logsigmoid", "softsign", "log2", "log10",
               "log1p", "logical_not", "assign", "tan", "atan", "asin", "acos", "sinh", "cosh", "expm1", "trunc",
               "bitwise_not"]
_BINARY = {"add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
           "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
           "elementwise_pow": "elementwise_pow", "floor_divide": "elementwise_floordiv",
           "remainder": "elementwise_mod", "equal": "equal", "not_equal": "not_equal", "less_than": "less_than",
           "less_equal": "less_equal", "greater_than": "greater_than", "greater_equal": "greater_equal",
           "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
           "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor"}

PIR_OPS: dict[str, Conversion] = {
    # program structure
    "builtin.parameter": _parameter,
    "builtin.constant": _parameter,
    "pd_op.data": _data,
    "pd_op.feed": _data,
    "pd_op.fetch": _fetch,
    "builtin.combine": _combine,
    "builtin.split": _split_vector,
    "pd_op.full": _full,
    "pd_op.full_int_array": _full_int_array,
    "pd_op.assign_value": _assign_value_op,
    "pd_op.assign_value_": _assign_value_op,
    "pd_op.full_like": _full_like,
    "pd_op.full_with_tensor": _full_with_tensor,
    "builtin.shadow_output": _ignore,
    # vision
    "pd_op.conv2d": simple("conv2d", ("Input", "Filter"), ("Output",), _CONV),
    "pd_op.depthwise_conv2d": simple("depthwise_conv2d", ("Input", "Filter"), ("Output",), _CONV),
    "pd_op.conv2d_transpose": _conv_transpose,
    "pd_op.depthwise_conv2d_transpose": _conv_transpose,
    "pd_op.pool2d": _pool2d,
    "pd_op.max_pool2d_with_index": simple(
        "max_pool2d_with_index", outs=("Out", "Mask"),
        attrs={"kernel_size": "ksize", "strides": "strides", "paddings": "paddings",
               "global_pooling": "global_pooling", "adaptive": "adaptive", "ceil_mode": "ceil_mode"}),
    "pd_op.batch_norm": simple(
        "batch_norm", ("X", "Mean", "Variance", "Scale", "Bias"),
        ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
        {"is_test": "is_test", "momentum": "momentum", "epsilon": "epsilon", "data_format": "data_layout",
         "use_global_stats": "use_global_stats", "trainable_statistics": "trainable_statistics"}),
    "pd_op.layer_norm": simple("layer_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance"),
                               {"epsilon": "epsilon", "begin_norm_axis": "begin_norm_axis"}),
    "pd_op.group_norm": simple("group_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance"),
                               {"epsilon": "epsilon", "groups": "groups", "data_format": "data_layout"}),
    "pd_op.instance_norm": simple("instance_norm", ("X", "Scale", "Bias"), ("Y", "SavedMean", "SavedVariance"),
                                  {"epsilon": "epsilon"}),
    "pd_op.nearest_interp": _interp("nearest"),
    "pd_op.bilinear_interp": _interp("bilinear"),
    "pd_op.bicubic_interp": _interp("bicubic"),
    "pd_op.linear_interp": _interp("linear"),
    "pd_op.trilinear_interp": _interp("trilinear"),
    "pd_op.pixel_shuffle": simple("pixel_shuffle", attrs={"upscale_factor": "upscale_factor",
                                                          "data_format": "data_format"}),
    "pd_op.pad3d": _axes_op("pad3d", "paddings", "Paddings", None, ("Out",),
                            {"mode": "mode", "pad_value": "value", "data_format": "data_format"}),
    "pd_op.dropout": _dropout,
    # activations
    "pd_op.relu6": simple("relu6", fixed={"threshold": 6.0}),
    "pd_op.hardswish": simple("hard_swish", fixed={"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    "pd_op.hardsigmoid": simple("hard_sigmoid", attrs={"slope": "slope", "offset": "offset"}),
    "pd_op.gelu": simple("gelu", attrs={"approximate": "approximate"}),
    "pd_op.leaky_relu": simple("leaky_relu", attrs={"negative_slope": "alpha"}),
    "pd_op.elu": simple("elu", attrs={"alpha": "alpha"}),
    "pd_op.swish": simple("swish", fixed={"beta": 1.0}),
    "pd_op.mish": simple("mish", attrs={"lambda": "threshold"}),
    "pd_op.softplus": simple("softplus", attrs={"beta": "beta", "threshold": "threshold"}),
    "pd_op.softmax": simple("softmax", attrs={"axis": "axis"}),
    "pd_op.log_softmax": simple("log_softmax", attrs={"axis": "axis"}),
    "pd_op.prelu": simple("prelu", ("X", "Alpha"), attrs={"mode": "mode", "data_format": "data_format"}),
    "pd_op.pow": simple("pow", attrs={"y": "factor"}),
    "pd_op.hardtanh": simple("brelu", attrs={"t_min": "t_min", "t_max": "t_max"}),
    "pd_op.celu": simple("celu", attrs={"alpha": "alpha"}),
    "pd_op.selu": simple("selu", attrs={"scale": "scale", "alpha": "alpha"}),
    "pd_op.hardshrink": simple("hard_shrink", attrs={"threshold": "threshold"}),
    "pd_op.softshrink": simple("softshrink", attrs={"threshold": "lambda"}),
    "pd_op.tanh_shrink": simple("tanh_shrink"),
    "pd_op.thresholded_relu": simple("thresholded_relu", attrs={"threshold": "threshold"}),
    "pd_op.logit": simple("logit", attrs={"eps": "eps"}),
    "pd_op.scale": _scale,
    "pd_op.clip": _clip,
    "pd_op.cast": _cast,
    # linear algebra, embedding
    "pd_op.matmul": simple("matmul_v2", ("X", "Y"), attrs={"transpose_x": "trans_x", "transpose_y": "trans_y"}),
    "pd_op.bmm": simple("matmul_v2", ("X", "Y"), fixed={"trans_x": False, "trans_y": False}),
    "pd_op.embedding": simple("lookup_table_v2", ("Ids", "W"), attrs={"padding_idx": "padding_idx"}),
    # shapes and indexing
    "pd_op.reshape": _reshape,
    "pd_op.flatten": simple("flatten_contiguous_range", outs=("Out", "XShape"),
                            attrs={"start_axis": "start_axis", "stop_axis": "stop_axis"}),
    "pd_op.transpose": simple("transpose2", outs=("Out", "XShape"), attrs={"perm": "axis"}),
    "pd_op.squeeze": _axes_op("squeeze2", "axes", None, None, ("Out", "XShape")),
    "pd_op.unsqueeze": _axes_op("unsqueeze2", "axes", "AxesTensor", "AxesTensorList", ("Out", "XShape")),
    "pd_op.expand": _axes_op("expand_v2", "shape", "Shape", "expand_shapes_tensor", ("Out",)),
    "pd_op.tile": _axes_op("tile", "repeat_times", "RepeatTimes", "repeat_times_tensor", ("Out",)),
    "pd_op.roll": _axes_op("roll", "shifts", "ShiftsTensor", None, ("Out",), {"axis": "axis"}),
    "pd_op.concat": _concat,
    "pd_op.stack": simple("stack", outs=("Y",), attrs={"axis": "axis"}),
    "pd_op.split": _split,
    "pd_op.split_with_num": _split,
    "pd_op.slice": _slice,
    "pd_op.strided_slice": _strided_slice,
    "pd_op.gather": _scalar_attr_op("gather", ("X", "Index"), 2, "axis", "Axis", ("Out",)),
    "pd_op.index_select": simple("index_select", ("X", "Index"), attrs={"axis": "dim"}),
    "pd_op.where": simple("where", ("Condition", "X", "Y")),
    "pd_op.flip": simple("flip", attrs={"axis": "axis"}),
    "pd_op.gather_nd": simple("gather_nd", ("X", "Index")),
    "pd_op.index_sample": simple("index_sample", ("X", "Index")),
    "pd_op.take_along_axis": simple("take_along_axis", ("Input", "Index"), ("Result",), {"axis": "Axis"}),
    "pd_op.scatter": simple("scatter", ("X", "Ids", "Updates"), attrs={"overwrite": "overwrite"}),
    "pd_op.unstack": simple("unstack", outs=("Y",), attrs={"axis": "axis", "num": "num"}),
    "pd_op.unbind": simple("unbind", attrs={"axis": "axis"}),
    "pd_op.meshgrid": simple("meshgrid"),
    "pd_op.expand_as": simple("expand_as_v2", ("X", "Y"), attrs={"target_shape": "target_shape"}),
    "pd_op.tril": _tril_triu(True),
    "pd_op.triu": _tril_triu(False),
    "pd_op.argsort": simple("argsort", outs=("Out", "Indices"), attrs={"axis": "axis", "descending": "descending"}),
    "pd_op.p_norm": simple("p_norm", attrs={"porder": "porder", "axis": "axis", "epsilon": "epsilon",
                                            "keepdim": "keepdim", "asvector": "asvector"}),
    "pd_op.nonzero": simple("where_index", ("Condition",)),
    "pd_op.linspace": simple("linspace", ("Start", "Stop", "Num"), attrs={"dtype": "dtype"}),
    "pd_op.pixel_unshuffle": simple("pixel_unshuffle", attrs={"downscale_factor": "downscale_factor",
                                                              "data_format": "data_format"}),
    "pd_op.channel_shuffle": simple("channel_shuffle", attrs={"groups": "groups", "data_format": "data_format"}),
    "pd_op.grid_sample": simple("grid_sampler", ("X", "Grid"), ("Output",),
                                {"mode": "mode", "padding_mode": "padding_mode", "align_corners": "align_corners"}),
    "pd_op.atan2": simple("atan2", ("X1", "X2")),
    "pd_op.isnan": simple("isnan_v2"),
    "pd_op.isinf": simple("isinf_v2"),
    "pd_op.isfinite": simple("isfinite_v2"),
    "pd_op.shape": simple("shape", ("Input",)),
    "pd_op.shape64": _shape64,
    "pd_op.numel": simple("size", ("Input",)),
    "pd_op.one_hot": _scalar_attr_op("one_hot_v2", ("X",), 1, "depth", None, ("Out",)),
    "pd_op.cumsum": _scalar_attr_op("cumsum", ("X",), 1, "axis", None, ("Out",),
                                    {"flatten": "flatten", "exclusive": "exclusive", "reverse": "reverse"}),
    "pd_op.topk": _scalar_attr_op("top_k_v2", ("X",), 1, "k", "K", ("Out", "Indices"),
                                  {"axis": "axis", "largest": "largest", "sorted": "sorted"}),
    "pd_op.argmax": _arg("arg_max"),
    "pd_op.argmin": _arg("arg_min"),
    "pd_op.arange": simple("range", ("Start", "End", "Step")),
    # reductions
    "pd_op.mean": _reduce("reduce_mean"),
    "pd_op.sum": _reduce("reduce_sum"),
    "pd_op.max": _reduce("reduce_max"),
    "pd_op.min": _reduce("reduce_min"),
    "pd_op.prod": _reduce("reduce_prod"),
    "pd_op.all": _reduce("reduce_all"),
    "pd_op.any": _reduce("reduce_any"),
    "pd_op.amax": _reduce("reduce_amax"),
    "pd_op.amin": _reduce("reduce_amin"),
    "pd_op.logsumexp": simple("logsumexp", attrs={"axis": "axis", "keepdim": "keepdim", "reduce_all": "reduce_all"}),
}
PIR_OPS.update({f"pd_op.{n}": simple(n) for n in _UNARY_SAME})
PIR_OPS.update({f"pd_op.{n}": simple(legacy, ("X", "Y"), fixed={"axis": -1}) for n, legacy in _BINARY.items()})


def mapping_table() -> list[tuple[str, str]]:
    """(PIR op, what it becomes) for every entry, for docs and `pdlite` tools."""
    return [(k, (fn.__doc__ or fn.__name__).strip()) for k, fn in sorted(PIR_OPS.items())]
