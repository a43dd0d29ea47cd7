"""The PIR op table, part 1: program structure, creation, tensor, math and activation ops.

Each entry maps one PIR op (`pd_op.*`, `builtin.*`) onto the ops of pdlite's registry, which
are Paddle's legacy (ProgramDesc) ops: same semantics, legacy names, slots and attributes. Most
entries are `op_map(legacy, ins, outs, attrs, fixed, args)` (pdlite.model_parser.pir_convert):
operand i -> input slot ins[i], result i -> output slot outs[i], PIR attributes copied under
their own names unless `attrs` renames or converts them, `fixed` attributes added, and the
IntArray / Scalar operands listed in `args` folded into their legacy attribute when constant
(else fed to the legacy tensor slot). In-place variants (`relu_`) use their base op's entry.
The vision, detection and sequence ops are in pdlite.model_parser.pir_mapping_nn; docs/pir.md
lists the table.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import VarType, numpy_dtype
from pdlite.core.program import VarDesc
from pdlite.model_parser.pir_convert import (
    PIR_OPS,
    IntArg,
    PirConverter,
    ScalarArg,
    const_ints,
    const_scalar,
    inputs,
    int_arg,
    op_map,
    operand,
    register_pir,
    scalar_arg,
    vartype,
)
from pdlite.model_parser.pir_decode import PirOp

# ---------------------------------------------------------------------- program structure


@register_pir("builtin.parameter", "builtin.constant")
def _parameter(c: PirConverter, op: PirOp) -> None:
    name = op.attrs.get("parameter_name", op.attrs.get("value"))
    if not isinstance(name, str) or not name:
        raise c.fail(op, "parameter has no name")
    if c.define(op, 0, name, persistable=True) != name:
        raise c.fail(op, f"parameter name {name!r} is used twice")


@register_pir("pd_op.data", "pd_op.feed", produces="feed")
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


@register_pir("pd_op.fetch", produces="fetch")
def _fetch(c: PirConverter, op: PirOp) -> None:
    name = op.attrs.get("name")
    if not isinstance(name, str) or not name or not op.inputs:
        raise c.fail(op, "fetch needs an operand and a 'name' attribute")
    src = c.name(op, op.inputs[0])
    if src != name:  # a parameter, a feed, an alias or a value fetched twice: copy it under the fetch name
        if c.claim(name) != name:
            raise c.fail(op, f"fetch name {name!r} is used twice")
        v = c.block.vars.get(src)
        c.block.vars[name] = VarDesc(name, dtype=v.dtype if v else VarType.FP32, shape=list(v.shape) if v else [])
        c.emit("assign", {"X": [src]}, {"Out": [name]})
        src = name
    c.emit("fetch", {"X": [src]}, {"Out": ["fetch"]}, {"col": int(op.attrs.get("col", 0))})


@register_pir("builtin.combine")
def _combine(c: PirConverter, op: PirOp) -> None:
    vid = op.outputs[0]
    c.vec_ids[vid] = list(op.inputs)
    c.vec_names[vid] = [c.name(op, v) for v in op.inputs]


def _element_const(c: PirConverter, vec: int, i: int) -> np.ndarray | None:
    return c.const(c.vec_ids[vec][i]) if vec in c.vec_ids else None


@register_pir("builtin.split")
def _split_vector(c: PirConverter, op: PirOp) -> None:
    vec = operand(op, 0)
    elems = c.vec_names.get(vec)
    if elems is None or len(elems) != len(op.outputs):
        raise c.fail(op, f"builtin.split of %{vec}: expected a vector of {len(op.outputs)} values")
    for i, out in enumerate(op.outputs):
        c.alias(out, elems[i], _element_const(c, vec, i))


@register_pir("builtin.slice")
def _slice_vector(c: PirConverter, op: PirOp) -> None:
    """builtin.slice: element `index` of a vector (a result of split, unbind, rnn's states ...)."""
    vec, index = operand(op, 0), op.attrs.get("index")
    elems = c.vec_names.get(vec)
    if elems is None or not isinstance(index, int) or not 0 <= index < len(elems):
        raise c.fail(op, f"builtin.slice of %{vec}: index {index!r} is not an element of a vector")
    c.alias(op.outputs[0], elems[index], _element_const(c, vec, index))


@register_pir("builtin.shadow_output")
def _ignore(c: PirConverter, op: PirOp) -> None:
    """builtin.shadow_output only names a value for the executor's scope: nothing to run."""


# ------------------------------------------------------------------------------- constants


@register_pir("pd_op.full", produces="fill_constant")
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


def _assign_value(c: PirConverter, op: PirOp, values: list[Any], shape: list[int], dtype: Any) -> None:
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


@register_pir("pd_op.full_int_array", produces="assign_value")
def _full_int_array(c: PirConverter, op: PirOp) -> None:
    values = list(op.attrs.get("value", []))
    _assign_value(c, op, values, [len(values)], op.attrs.get("dtype", "int64"))


@register_pir("pd_op.assign_value", produces="assign_value")
def _assign_value_op(c: PirConverter, op: PirOp) -> None:
    values = list(op.attrs.get("values", []))
    _assign_value(c, op, values, [int(d) for d in op.attrs.get("shape", [len(values)])],
                  op.attrs.get("dtype", "float32"))


@register_pir("pd_op.slice_array_dense", produces=("fill_constant", "lod_array_length", "elementwise_add",
                                                   "elementwise_max", "read_from_array"))
def _slice_array_dense(c: PirConverter, op: PirOp) -> None:
    """Paddle's SliceArrayDenseKernel: Out = a copy of input[start], start = starts[0], plus the array's length
    when negative, then at least 0 (PaddleDetection's RPN reads its per-image rois back so): read_from_array."""
    starts = const_ints(c, op, 1)
    if not starts:
        raise c.unsupported(op, "starts must be a constant (pd_op.full_int_array)")
    arr = c.name(op, op.inputs[0])

    def const(v: int) -> str:
        n = c.temp(arr, int(VarType.INT64))
        c.emit("fill_constant", {}, {"Out": [n]}, {"shape": [1], "value": float(v), "dtype": int(VarType.INT64),
                                                    "str_value": ""})
        return n

    index = const(starts[0])
    if starts[0] < 0:
        length, wrapped, index = c.temp(arr, int(VarType.INT64)), c.temp(arr, int(VarType.INT64)), index
        c.emit("lod_array_length", {"X": [arr]}, {"Out": [length]})
        c.emit("elementwise_add", {"X": [length], "Y": [index]}, {"Out": [wrapped]}, {"axis": -1})
        index = c.temp(arr, int(VarType.INT64))
        c.emit("elementwise_max", {"X": [wrapped], "Y": [const(0)]}, {"Out": [index]}, {"axis": -1})
    c.emit("read_from_array", {"X": [arr], "I": [index]}, {"Out": [c.define(op, 0)]})


@register_pir("pd_op.full_like", produces=("fill_any_like", "shape64", "fill_constant"))
def _full_like(c: PirConverter, op: PirOp) -> None:
    """full_like: fill_any_like; a computed fill value: fill_constant(ValueTensor, ShapeTensor = shape64(X))."""
    attrs: dict[str, Any] = {"dtype": vartype(c, op, op.attrs.get("dtype"))}
    ins = inputs(c, op, ("X",))
    if const_scalar(c, op, 1) is not None or operand(op, 1) == 0:
        scalar_arg(c, op, 1, ScalarArg("value"), attrs, ins)
        c.emit("fill_any_like", ins, c.outputs(op, ("Out",)), attrs)
        return
    x = ins["X"][0]
    shape = c.temp(x, VarType.INT64)
    c.emit("shape64", {"Input": [x]}, {"Out": [shape]})
    dtype = attrs["dtype"] if attrs["dtype"] >= 0 else c.var_dtype(x)
    c.emit("fill_constant", {"ValueTensor": [c.name(op, operand(op, 1))], "ShapeTensor": [shape]},
           c.outputs(op, ("Out",)), {"dtype": dtype, "value": 0.0, "shape": []})


@register_pir("pd_op.full_with_tensor", produces="fill_constant")
def _full_with_tensor(c: PirConverter, op: PirOp) -> None:
    attrs: dict[str, Any] = {"dtype": vartype(c, op, op.attrs.get("dtype", "float32")), "value": 0.0, "shape": []}
    ins = {"ValueTensor": [c.name(op, operand(op, 0))]}
    int_arg(c, op, 1, IntArg("shape", "ShapeTensor", "ShapeTensorList"), attrs, ins)
    c.emit("fill_constant", ins, c.outputs(op, ("Out",)), attrs)


# --------------------------------------------------------------------------- tensor ops


def _reduce(legacy: str) -> Any:
    """A reduction: the axis IntArray operand (or attribute, for all/any/amax/amin) -> dim; an empty
    axis reduces over all axes (a 0-D result unless keepdim)."""

    def conv(c: PirConverter, op: PirOp) -> None:
        attrs: dict[str, Any] = {"keep_dim": bool(op.attrs.get("keepdim", False))}
        ins = inputs(c, op, ("X",))
        if "axis" in op.attrs:
            dims = [int(a) for a in op.attrs["axis"]]
        elif len(op.inputs) > 1 and op.inputs[1] != 0:
            tmp: dict[str, Any] = {}
            int_arg(c, op, 1, IntArg("dim"), tmp, ins)
            dims = tmp["dim"]
        else:
            dims = []
        attrs.update(dim=dims, reduce_all=not dims or bool(op.attrs.get("reduce_all", False)))
        if "dtype" in op.attrs:
            attrs["out_dtype"] = vartype(c, op, op.attrs["dtype"])
        c.emit(legacy, ins, c.outputs(op, ("Out",)), attrs)

    conv.__doc__ = f"-> {legacy}"
    conv.produces = (legacy,)  # type: ignore[attr-defined]
    return conv


@register_pir("pd_op.cast", produces="cast")
def _cast(c: PirConverter, op: PirOp) -> None:
    ins = inputs(c, op, ("X",))
    attrs = {"in_dtype": c.var_dtype(ins["X"][0]), "out_dtype": vartype(c, op, op.attrs.get("dtype"))}
    c.emit("cast", ins, c.outputs(op, ("Out",)), attrs)


@register_pir("pd_op.arange", produces=("range", "cast"))
def _arange(c: PirConverter, op: PirOp) -> None:
    """arange(start, end, step, dtype) -> range, computing in `dtype` as Paddle's kernel does (legacy
    range computes in Start's dtype): operands of another dtype are cast first."""
    dtype = vartype(c, op, op.attrs.get("dtype"))
    ins: dict[str, list[str]] = {}
    for slot, vid in zip(("Start", "End", "Step"), op.inputs):
        name = c.name(op, vid)
        if dtype >= 0 and c.var_dtype(name) not in (-1, dtype):
            cast = c.temp(name, dtype)
            c.emit("cast", {"X": [name]}, {"Out": [cast]}, {"in_dtype": c.var_dtype(name), "out_dtype": dtype})
            name = cast
        ins[slot] = [name]
    c.emit("range", ins, c.outputs(op, ("Out",)))


@register_pir("pd_op.add_n", produces="sum")
def _add_n(c: PirConverter, op: PirOp) -> None:
    """add_n (a vector operand) -> sum (legacy add_n)."""
    c.emit("sum", {"X": c.names_of(op, operand(op, 0))}, c.outputs(op, ("Out",)))


@register_pir("pd_op.fill", produces="fill_any")
def _fill_any(c: PirConverter, op: PirOp) -> None:
    """fill(x, value) -> fill_any: the Scalar value as value_float and value_int."""
    attrs: dict[str, Any] = {}
    ins = inputs(c, op, ("X",))
    scalar_arg(c, op, 1, ScalarArg("value"), attrs, ins)
    value = attrs.pop("value", 0.0)
    c.emit("fill_any", ins, c.outputs(op, ("Out",)), {"value_float": float(value), "value_int": int(value)})


def _set_value(base: Any) -> Any:
    """set_value(_with_tensor): PIR's `values` (Scalars) also as the legacy typed list of Input's dtype."""

    def conv(c: PirConverter, op: PirOp) -> None:
        base(c, op)
        desc = c.emitted[-1][0]
        vt = c.var_dtype(desc.inputs["Input"][0])
        desc.attrs["dtype"] = vt
        values = list(desc.attrs.get("values", []))
        key = {VarType.FP32: "fp32_values", VarType.FP64: "fp64_values", VarType.INT32: "int32_values",
               VarType.INT64: "int64_values", VarType.BOOL: "bool_values"}.get(vt)
        if key is not None and values and "ValueTensor" not in desc.inputs:
            cast = bool if key == "bool_values" else int if key.startswith("int") else float
            desc.attrs[key] = [cast(v) for v in values]

    conv.__doc__ = "-> set_value"
    conv.produces = ("set_value",)  # type: ignore[attr-defined]
    return conv



_UNARY_SAME = ["relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "floor", "ceil", "round", "sin",
               "cos", "erf", "square", "reciprocal", "sign", "silu", "logsigmoid", "softsign", "log2", "log10",
               "log1p", "logical_not", "assign", "tan", "atan", "asin", "acos", "sinh", "cosh", "expm1", "trunc",
               "bitwise_not", "tanh_shrink", "asinh", "acosh", "atanh", "erfinv", "lgamma", "digamma"]
_BINARY = {"add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
           "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
           "elementwise_pow": "elementwise_pow", "floor_divide": "elementwise_floordiv",
           "remainder": "elementwise_mod", "fmax": "elementwise_fmax", "fmin": "elementwise_fmin",
           "heaviside": "elementwise_heaviside",
           "equal": "equal", "not_equal": "not_equal", "less_than": "less_than",
           "less_equal": "less_equal", "greater_than": "greater_than", "greater_equal": "greater_equal",
           "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
           "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor"}
_X_OUT_XSHAPE = ("Out", "XShape")

TABLE: dict[str, Any] = {
    "pd_op.assign_out_": op_map("assign", ("X", None)),
    "pd_op.share_data_": op_map("share_data"),
    "pd_op.full_batch_size_like": op_map("fill_constant_batch_size_like", ("Input",)),
    # empty: any values are a valid result; zeros are deterministic
    "pd_op.empty": op_map("fill_constant", (), fixed={"value": 0.0, "shape": []},
                          args={0: IntArg("shape", "ShapeTensor", "ShapeTensorList")}),
    "pd_op.empty_like": op_map("fill_any_like", fixed={"value": 0.0}),
    "pd_op.eye": op_map("eye", (), args={0: ScalarArg("num_rows", conv=int), 1: ScalarArg("num_columns", conv=int)}),
    "pd_op.linspace": op_map("linspace", ("Start", "Stop", "Num")),
    # activations
    "pd_op.relu6": op_map("relu6", fixed={"threshold": 6.0}),
    "pd_op.hardswish": op_map("hard_swish", fixed={"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    "pd_op.hardsigmoid": op_map("hard_sigmoid"),
    "pd_op.gelu": op_map("gelu"),
    "pd_op.leaky_relu": op_map("leaky_relu", attrs={"negative_slope": "alpha"}),
    "pd_op.elu": op_map("elu"),
    "pd_op.swish": op_map("swish", fixed={"beta": 1.0}),
    "pd_op.mish": op_map("mish", attrs={"lambda": "threshold"}),
    "pd_op.softplus": op_map("softplus"),
    "pd_op.softmax": op_map("softmax"),
    "pd_op.log_softmax": op_map("log_softmax"),
    "pd_op.prelu": op_map("prelu", ("X", "Alpha")),
    "pd_op.pow": op_map("pow", attrs={"y": "factor"}),
    "pd_op.hardtanh": op_map("brelu"),
    "pd_op.celu": op_map("celu"),
    "pd_op.selu": op_map("selu"),
    "pd_op.hardshrink": op_map("hard_shrink"),
    "pd_op.softshrink": op_map("softshrink", attrs={"threshold": "lambda"}),
    "pd_op.thresholded_relu": op_map("thresholded_relu"),
    "pd_op.logit": op_map("logit"),
    "pd_op.stanh": op_map("stanh"),
    "pd_op.scale": op_map("scale", args={1: ScalarArg("scale", "ScaleTensor")}),
    "pd_op.clip": op_map("clip", args={1: ScalarArg("min", "Min"), 2: ScalarArg("max", "Max")}),
    "pd_op.isnan": op_map("isnan_v2"),
    "pd_op.isinf": op_map("isinf_v2"),
    "pd_op.isfinite": op_map("isfinite_v2"),
    "pd_op.atan2": op_map("atan2", ("X1", "X2")),
    "pd_op.increment": op_map("increment", attrs={"value": "step"}),
    # linear algebra
    "pd_op.matmul": op_map("matmul_v2", ("X", "Y"), attrs={"transpose_x": "trans_x", "transpose_y": "trans_y"}),
    "pd_op.bmm": op_map("bmm", ("X", "Y")),
    "pd_op.einsum": op_map("einsum", ("Operands",), ("Out", "InnerCache", "XShape")),
    "pd_op.inverse": op_map("inverse", ("Input",), ("Output",)),
    "pd_op.kron": op_map("kron", ("X", "Y")),
    "pd_op.trace": op_map("trace", ("Input",)),
    "pd_op.diag": op_map("diag_v2"),
    "pd_op.frobenius_norm": op_map("frobenius_norm", attrs={"keepdim": "keep_dim"}, args={1: IntArg("dim")}),
    "pd_op.squared_l2_norm": op_map("squared_l2_norm"),
    "pd_op.matmul_with_flatten": op_map("mul", ("X", "Y")),
    "pd_op.fc": op_map("fc", ("Input", "W", "Bias")),
    "pd_op.embedding": op_map("lookup_table_v2", ("Ids", "W"), attrs={"sparse": None}),
    "pd_op.p_norm": op_map("p_norm"),
    "pd_op.norm": op_map("norm", outs=("Out", "Norm")),
    "pd_op.cumsum": op_map("cumsum", args={1: ScalarArg("axis", conv=int)}),
    "pd_op.cumprod": op_map("cumprod"),
    "pd_op.logsumexp": op_map("logsumexp"),
    "pd_op.mean_all": op_map("mean"),
    "pd_op.partial_sum": op_map("partial_sum"),
    "pd_op.partial_concat": op_map("partial_concat"),
    "pd_op.argmax": op_map("arg_max", args={1: ScalarArg("axis", conv=int)}),
    "pd_op.argmin": op_map("arg_min", args={1: ScalarArg("axis", conv=int)}),
    "pd_op.argsort": op_map("argsort", outs=("Out", "Indices")),
    "pd_op.topk": op_map("top_k_v2", outs=("Out", "Indices"), args={1: ScalarArg("k", "K", int)}),
    "pd_op.kthvalue": op_map("kthvalue", outs=("Out", "Indices")),
    "pd_op.unique": op_map("unique", outs=("Out", "Indices", "Index", "Counts"), fixed={"is_sorted": True}),
    "pd_op.mean": _reduce("reduce_mean"),
    "pd_op.sum": _reduce("reduce_sum"),
    "pd_op.max": _reduce("reduce_max"),
    "pd_op.min": _reduce("reduce_min"),
    "pd_op.prod": _reduce("reduce_prod"),
    "pd_op.all": _reduce("reduce_all"),
    "pd_op.any": _reduce("reduce_any"),
    "pd_op.amax": _reduce("reduce_amax"),
    "pd_op.amin": _reduce("reduce_amin"),
    # shapes and indexing
    "pd_op.shape": op_map("shape", ("Input",)),
    "pd_op.shape64": op_map("shape64", ("Input",)),
    "pd_op.numel": op_map("size", ("Input",)),
    "pd_op.reshape": op_map("reshape2", outs=_X_OUT_XSHAPE, fixed={"shape": []},
                            args={1: IntArg("shape", "Shape", "ShapeTensor")}),
    "pd_op.flatten": op_map("flatten_contiguous_range", outs=_X_OUT_XSHAPE),
    "pd_op.transpose": op_map("transpose2", outs=_X_OUT_XSHAPE, attrs={"perm": "axis"}),
    "pd_op.squeeze": op_map("squeeze2", outs=_X_OUT_XSHAPE, args={1: IntArg("axes")}),
    "pd_op.unsqueeze": op_map("unsqueeze2", outs=_X_OUT_XSHAPE,
                              args={1: IntArg("axes", "AxesTensor", "AxesTensorList")}),
    "pd_op.expand": op_map("expand_v2", args={1: IntArg("shape", "Shape", "expand_shapes_tensor")}),
    "pd_op.expand_as": op_map("expand_as_v2", ("X", "Y")),
    "pd_op.tile": op_map("tile", args={1: IntArg("repeat_times", "RepeatTimes", "repeat_times_tensor")}),
    "pd_op.roll": op_map("roll", args={1: IntArg("shifts", "ShiftsTensor")}),
    "pd_op.reverse": op_map("reverse", args={1: IntArg("axis")}),
    "pd_op.flip": op_map("flip"),
    "pd_op.concat": op_map("concat", args={1: ScalarArg("axis", "AxisTensor", int)}),
    "pd_op.stack": op_map("stack", outs=("Y",)),
    "pd_op.split": op_map("split", fixed={"num": 0}, args={1: IntArg("sections", None, "SectionsTensorList"),
                                                          2: ScalarArg("axis", "AxisTensor", int)}),
    "pd_op.split_with_num": op_map("split", fixed={"sections": []}, args={1: ScalarArg("axis", "AxisTensor", int)}),
    "pd_op.unstack": op_map("unstack", outs=("Y",)),
    "pd_op.unbind": op_map("unbind"),
    "pd_op.meshgrid": op_map("meshgrid"),
    "pd_op.broadcast_tensors": op_map("broadcast_tensors"),
    "pd_op.slice": op_map("slice", ("Input",), args={1: IntArg("starts", "StartsTensor", "StartsTensorList"),
                                                     2: IntArg("ends", "EndsTensor", "EndsTensorList")}),
    "pd_op.strided_slice": op_map("strided_slice", ("Input",), args={
        1: IntArg("starts", "StartsTensor", "StartsTensorList"), 2: IntArg("ends", "EndsTensor", "EndsTensorList"),
        3: IntArg("strides", "StridesTensor", "StridesTensorList")}),
    "pd_op.gather": op_map("gather", ("X", "Index"), args={2: ScalarArg("axis", "Axis", int)}),
    "pd_op.gather_nd": op_map("gather_nd", ("X", "Index")),
    "pd_op.index_select": op_map("index_select", ("X", "Index"), attrs={"axis": "dim"}),
    "pd_op.index_sample": op_map("index_sample", ("X", "Index")),
    "pd_op.take_along_axis": op_map("take_along_axis", ("Input", "Index"), ("Result",), attrs={"axis": "Axis"}),
    "pd_op.put_along_axis": op_map("put_along_axis", ("Input", "Index", "Value"), ("Result",),
                                   attrs={"axis": "Axis", "reduce": "Reduce", "include_self": "Include_self"}),
    "pd_op.scatter": op_map("scatter", ("X", "Ids", "Updates")),
    "pd_op.scatter_nd_add": op_map("scatter_nd_add", ("X", "Index", "Updates")),
    "pd_op.where": op_map("where", ("Condition", "X", "Y")),
    "pd_op.nonzero": op_map("where_index", ("Condition",)),
    "pd_op.masked_select": op_map("masked_select", ("X", "Mask"), ("Y",)),
    "pd_op.tril": op_map("tril_triu", fixed={"lower": True}),
    "pd_op.triu": op_map("tril_triu", fixed={"lower": False}),
    "pd_op.tril_triu": op_map("tril_triu"),
    "pd_op.one_hot": op_map("one_hot_v2", args={1: ScalarArg("depth", "depth_tensor", int)}),
    "pd_op.crop": op_map("crop_tensor", args={1: IntArg("shape", "Shape", "ShapeTensor"),
                                              2: IntArg("offsets", "Offsets", "OffsetsTensor")}),
    "pd_op.sequence_mask": op_map("sequence_mask", outs=("Y",), args={1: ScalarArg("maxlen", "MaxLenTensor", int)}),
    "pd_op.label_smooth": op_map("label_smooth", ("X", "PriorDist")),
    "pd_op.shard_index": op_map("shard_index"),
    "pd_op.repeat_interleave": op_map("repeat_interleave", attrs={"repeats": "Repeats", "axis": "dim"}),
    "pd_op.repeat_interleave_with_tensor_index": op_map("repeat_interleave", ("X", "RepeatsTensor"),
                                                        attrs={"axis": "dim"}),
    "pd_op.set_value": _set_value(op_map("set_value", ("Input",), args={
        1: IntArg("starts", None, "StartsTensorList"), 2: IntArg("ends", None, "EndsTensorList"),
        3: IntArg("steps", None, "StepsTensorList")})),
    "pd_op.set_value_with_tensor": _set_value(op_map("set_value", ("Input", "ValueTensor"), args={
        2: IntArg("starts", None, "StartsTensorList"), 3: IntArg("ends", None, "EndsTensorList"),
        4: IntArg("steps", None, "StepsTensorList")})),
    # quantization (pdlite.operators.quant)
    **{f"pd_op.{n}": op_map(n, ("X", "Scale", "ZeroPoint", "InAccum", "InState"), ("Y", "OutState", "OutAccum",
                                                                                 "OutScale"))
       for n in ("quantize_linear", "dequantize_linear")},
    **{f"pd_op.{n}": op_map(n, ("X", "InScale", "InAccum", "InState"), ("Out", "OutScale", "OutState", "OutAccum"))
       for n in ("fake_quantize_moving_average_abs_max", "fake_quantize_dequantize_moving_average_abs_max")},
    **{f"pd_op.{n}": op_map(n, ("X",), ("Out", "OutScale")) for n in (
        "fake_quantize_abs_max", "fake_quantize_dequantize_abs_max", "fake_channel_wise_quantize_abs_max",
        "fake_channel_wise_quantize_dequantize_abs_max")},
    "pd_op.fake_quantize_range_abs_max": op_map("fake_quantize_range_abs_max", ("X", "InScale", "Iter"),
                                                ("Out", "OutScale", "OutScales")),
    "pd_op.fake_dequantize_max_abs": op_map("fake_dequantize_max_abs", ("X", "Scale")),
    "pd_op.fake_channel_wise_dequantize_max_abs": op_map("fake_channel_wise_dequantize_max_abs", ("X", "Scales")),
    "pd_op.moving_average_abs_max_scale": op_map("moving_average_abs_max_scale", ("X", "InAccum", "InState"),
                                                 ("Out", "OutScale", "OutState", "OutAccum")),
    "pd_op.dequantize_abs_max": op_map("dequantize_abs_max", ("X", "Scale")),
    "pd_op.dequantize_log": op_map("dequantize_log", ("X", "Dict")),
}
TABLE.update({f"pd_op.{n}": op_map(n) for n in _UNARY_SAME})
TABLE.update({f"pd_op.{n}": op_map(legacy, ("X", "Y"), fixed={"axis": -1}) for n, legacy in _BINARY.items()})
for _name, _fn in TABLE.items():
    PIR_OPS.add(_name, _fn)


def mapping_table() -> list[tuple[str, str]]:
    """(PIR op, the legacy ops it becomes) for every entry, for docs and `pdlite` tools."""
    from pdlite.model_parser import pir_mapping_nn  # noqa: F401 (the table's second half)
    from pdlite.model_parser.pir_convert import produced_by

    return [(k, ", ".join(produced_by(fn)) or "(structure)") for k, fn in sorted(PIR_OPS.items())]


def mapping_markdown() -> str:
    """The mapping table as Markdown rows (docs/pir.md holds it between the table markers)."""
    rows = ["| PIR op | pdlite op(s) |", "|---|---|"]
    rows += [f"| {k} | {v} |" for k, v in mapping_table()]
    return "\n".join(rows) + "\n"
