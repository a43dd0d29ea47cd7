"""The host's int8 passes for int8 codes between ops: an integer conv writes the codes the next one reads.

Under the same conditions as the other int8 passes (quant_int8.int8_enabled), after quant_pointwise_chain_pass:

- quant_dwconv_int8_pass: a depthwise conv (conv2d, depthwise_conv2d or fused_conv2d with groups = channels, one
  filter each, NCHW) whose input holds the values of one int8 grid - written by an op whose last step is a QDQ pair
  of one per-tensor scale s (a quantized_conv2d's output QDQ or its chain's last step, a pointwise_chain's last step,
  a quantize_dequantize_linear) - and whose filter is on the int8 grid (quant_int8.int8_grid) -> quantized_conv2d
  with groups = channels and in_scale s. It quantizes its input back to the codes the pair wrote: quantize(dequantize
  (q)) == q at s, checked on every code (quant_native.codes_identity; else the conv stays float). A
  quantize_dequantize_linear read by the conv alone goes, the conv reading its input (the same codes). The sums are
  exact; the float result differs from the fp32 simulation's float sums by their rounding, as the other int8 convs.
- quant_chain_fold_pass: a pointwise_chain of one input written by a quantized_conv2d without post_ops and read by
  nothing else -> that conv's post_ops (the steps run in its epilogue: the chains of depthwise convs made int8 above).
- quant_codes_pass (config option `host_int8_codes`, default on): a quantized_conv2d whose output is not fetched and
  is read only as the Input of quantized_conv2d ops of one in_scale s and round type, each in a form that packs codes
  (1x1 stride 1 without padding, the direct form, depthwise) -> the writer writes codes (`code_scale` s: its float
  output quantized as each reader did), the readers read them (`in_codes`); the tensor between them is uint8 (bytes
  q + 128), its scale the readers' in_scale. The quantization moves from each reader into the writer's epilogue: the
  same codes, the same sums, the same bits. Where the writer's last step is itself the QDQ of s (its output QDQ, or
  its chain's last step) and quantize(dequantize(q)) == q at s, that step goes too (the codes it quantized are those
  the readers would get back).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.kernels.host import native
from pdlite.kernels.host import quant_native as qn
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.passes.quant_int8 import QMAX, _act_attrs, _Int8Rewrite, _param, int8_enabled, int8_grid
from pdlite.optimizer.pattern import input_node

_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "groups", "dilations", "data_format")


def _f32(v: Any) -> float:
    return float(np.float32(v))


def _last_qdq(program: list[float]) -> tuple[float, int] | None:
    """(scale, round_type) of a chain program's last step when it is an int8 QDQ, else None."""
    steps = qn.chain_steps(program) if len(program) else []
    if not steps or steps[-1][0] != qn.CHAIN_QDQ or int(steps[-1][1][3]) != QMAX:
        return None
    return _f32(steps[-1][1][1]), int(steps[-1][1][2])


def _grid_of(ctx: PassContext, v: Node) -> tuple[float, int] | None:
    """(s, round_type) where the op writing v ends with a QDQ pair of per-tensor scale s that gives its codes back."""
    p = v.inputs[0] if v.inputs else None
    if p is None or p.op is None:
        return None
    a = p.op.attrs
    grid = None
    if p.op.type == "quantized_conv2d":
        post = list(a.get("post_ops") or [])
        grid = _last_qdq(post) if post else (
            (_f32(a["out_scale"]), int(a["out_round_type"])) if float(a.get("out_scale", 0.0)) > 0 else None)
    elif p.op.type == "pointwise_chain":
        grid = _last_qdq(list(a.get("post_ops") or []))
    elif p.op.type == "quantize_dequantize_linear" and int(a["qmax"]) == QMAX:
        s = ctx.params.get(p.op.input("Scale"))
        if s is not None and np.asarray(s).size == 1 and float(np.asarray(s).reshape(-1)[0]) > 0:
            grid = _f32(np.asarray(s).reshape(-1)[0]), int(a["round_type"])
    return grid if grid is not None and qn.codes_identity(*grid) else None


@register_pass("quant_dwconv_int8_pass")
class QuantDwconvInt8(_Int8Rewrite):
    types = ("conv2d", "depthwise_conv2d", "fused_conv2d")

    def rewrite(self, graph: Graph, node: Node, ctx: PassContext) -> bool:
        op = node.op
        if op.type == "fused_conv2d" and op.attrs.get("conv_type", "conv2d") not in ("conv2d", "depthwise_conv2d"):
            return False
        w = ctx.params.get(op.input("Filter"))
        groups = int(op.attrs.get("groups") or 1)
        if w is None or np.asarray(w).dtype != np.float32 or np.asarray(w).ndim != 4:
            return False
        w = np.asarray(w)
        v = input_node(node, op.input("Input"))
        c = int(v.var.shape[1]) if v.var is not None and len(v.var.shape or []) == 4 else -1
        if (groups <= 1 or w.shape[0] != groups or w.shape[1] != 1 or c not in (-1, groups)
                or str(op.attrs.get("data_format", "NCHW")) not in ("NCHW", "AnyLayout")
                or w.shape[2] * w.shape[3] >= 1 << 16):
            return False
        act = _act_attrs(op.attrs, "act_type") if op.type == "fused_conv2d" else {"act_type": ""}
        grid = _grid_of(ctx, v)
        w_grid = int8_grid(w, 0)
        if act is None or grid is None or w_grid is None:
            return False
        fetched = set(ctx.meta.get("fetch_names", []))
        src, drop = v, None
        p = v.inputs[0]
        if p.op.type == "quantize_dequantize_linear" and len(v.outputs) == 1 and v.name not in fetched:
            src, drop = input_node(p, p.op.input("X")), p  # read the pair's input: quantize gives the same codes
        wname = op.input("Filter")
        w8v = _param(graph, ctx, f"{wname}@int8", w_grid[0])
        sv = _param(graph, ctx, f"{wname}@int8_scale", w_grid[1])
        attrs = {k: op.attrs[k] for k in _CONV_ATTRS if k in op.attrs}
        attrs.update(act, in_scale=grid[0], round_type=grid[1], qmax=QMAX)
        ins = {"Input": [src.name], "Filter": [w8v.name], "WeightScale": [sv.name]}
        keep = [s for s in ("Bias", "ResidualData") if op.inputs.get(s)]
        ins.update({s: list(op.inputs[s]) for s in keep})
        desc = OpDesc("quantized_conv2d", ins, {"Output": list(op.outputs["Output"])}, attrs)
        old_w = input_node(node, wname)
        readers = [src, w8v, sv] + [input_node(node, n) for s in keep for n in op.inputs[s]]
        graph.replace_ops([node], desc, readers, list(node.outputs))
        if not old_w.outputs and old_w in graph:
            graph.remove_var(old_w)
            ctx.params.pop(wname, None)
        if drop is not None and not v.outputs:
            scale = input_node(drop, drop.op.input("Scale"))
            graph.remove_op(drop, orphan_outputs=True)
            for u in (v, scale):
                if u in graph and not u.inputs and not u.outputs:
                    graph.remove_var(u)
        return True


@register_pass("quant_chain_fold_pass")
class QuantChainFold(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx):
            return False
        fetched = set(ctx.meta.get("fetch_names", []))
        done = 0
        for ch in list(graph.op_nodes()):
            if ch not in graph or ch.op is None or ch.op.type != "pointwise_chain" or ch.op.inputs.get("Y"):
                continue
            x = input_node(ch, ch.op.input("X"))
            prod = x.inputs[0] if x.inputs else None
            if (prod is None or prod.op is None or prod.op.type != "quantized_conv2d" or prod.op.attrs.get("post_ops")
                    or len(x.outputs) != 1 or x.name in fetched or ch.op.attrs.get("x_ops")):
                continue
            out = ch.outputs[0]
            graph.remove_op(ch, orphan_outputs=True)
            graph.replace_output(prod, x, out)
            if x in graph and not x.inputs and not x.outputs:
                graph.remove_var(x)
            prod.op.attrs["post_ops"] = list(ch.op.attrs["post_ops"])
            done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"rewrites": done}
        return done > 0


def _reads_codes(ctx: PassContext, r: Node) -> bool:
    """Whether quantized_conv2d r packs its Input in a form that can read codes (native qconv / qdwconv)."""
    w = ctx.params.get(r.op.input("Filter"))
    if w is None or np.asarray(w).ndim != 4:
        return False
    shape = np.asarray(w).shape
    a = r.op.attrs
    strides = tuple(int(s) for s in a.get("strides", [1, 1]))
    if int(a.get("groups") or 1) > 1:
        return True
    if shape[2:] == (1, 1):
        return strides == (1, 1) and not any(int(p) for p in a.get("paddings", [0, 0])) and str(
            a.get("padding_algorithm", "EXPLICIT")) != "SAME"
    return qn.direct_form(tuple(shape[2:]), strides, shape[1])


@register_pass("quant_codes_pass")
class QuantCodes(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        if not int8_enabled(ctx) or ctx.options.get("host_int8_codes", True) in native._FALSE:
            return False
        fetched = set(ctx.meta.get("fetch_names", []))
        done = dropped = 0
        for p in graph.topological_order():
            if p.op is None or p.op.type != "quantized_conv2d" or float(p.op.attrs.get("code_scale", 0.0)) > 0:
                continue
            v = next(u for u in p.outputs if u.name == p.op.output("Output"))
            readers = list(v.outputs)
            if not readers or v.name in fetched or not all(
                    r.op.type == "quantized_conv2d" and r.op.input("Input") == v.name
                    and v.name not in r.op.inputs.get("ResidualData", []) and not r.op.attrs.get("in_codes")
                    and _reads_codes(ctx, r) for r in readers):
                continue
            grids = {(_f32(r.op.attrs["in_scale"]), int(r.op.attrs["round_type"])) for r in readers}
            if len(grids) != 1:
                continue
            s, rt = grids.pop()
            a = p.op.attrs
            post = list(a.get("post_ops") or [])
            if qn.codes_identity(s, rt):  # the writer's own last QDQ of s: its codes are the readers' codes
                if post and _last_qdq(post) == (s, rt):
                    steps = qn.chain_steps(post)
                    a["post_ops"] = [float(t) for code, vals in steps[:-1] for t in (code, len(vals), *vals)]
                    dropped += 1
                elif not post and float(a.get("out_scale", 0.0)) > 0 and (
                        _f32(a["out_scale"]), int(a["out_round_type"])) == (s, rt):
                    a["out_scale"] = 0.0
                    dropped += 1
            a.update(code_scale=s, code_round_type=rt)
            for r in readers:
                r.op.attrs["in_codes"] = True
            if v.var is not None:
                v.var.dtype = var_type_of(np.dtype(np.uint8))
            done += 1
        ctx.meta.setdefault("pass_stats", {})[self.name] = {"edges": done, "qdq_dropped": dropped}
        return done > 0
