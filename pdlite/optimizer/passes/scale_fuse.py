"""Scalar arithmetic as `scale` ops, and chains of scales merged.

- elementwise_to_scale_pass: X <op> c or c <op> X with c a one-element float32 param (and X a
  float32 tensor of rank >= rank(c), so the output keeps X's shape) becomes scale(X):
  X + c -> (1, c); X - c -> (1, -c); c - X -> (-1, c); X * c, c * X -> (c, 0); X / c -> (1/c, 0)
  as (scale, bias) with bias_after_scale. (X / c and X * (1/c) may differ in the last bit.)
- scales_fuse_pass: scale2(scale1(X)) -> one scale: with each written as s*X + t
  (bias_before_scale: s*(X + b) = s*X + s*b), the result is s1*s2*X + (t1*s2 + t2).
These feed conv_scale_fuse_pass (a per-tensor affine map after a conv folds into its weights).
"""
from __future__ import annotations

import numpy as np

from pdlite.core.dtypes import VarType
from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.optimizer.pass_registry import PassContext, register_pass
from pdlite.optimizer.pattern import Fuser, Match, Pattern, param_value, replace_ops

OPS_C_RIGHT = ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div")
OPS_C_LEFT = ("elementwise_add", "elementwise_sub", "elementwise_mul")


def _pattern(c_slot: str, types: tuple[str, ...]) -> Pattern:
    p = Pattern()
    x_slot = "X" if c_slot == "Y" else "Y"
    p.op("ew", types, inputs={x_slot: p.var("x", persistable=False), c_slot: p.var("c", persistable=True)},
         outputs={"Out": p.var("out")})
    return p


def affine(op: OpDesc) -> tuple[float, float]:
    """(s, t) with scale(X) = s * X + t."""
    s, b = float(op.attrs["scale"]), float(op.attrs["bias"])
    return (s, b) if bool(op.attrs["bias_after_scale"]) else (s, s * b)


def scale_desc(x: str, out: str, s: float, t: float) -> OpDesc:
    return OpDesc("scale", {"X": [x]}, {"Out": [out]}, {"scale": float(s), "bias": float(t), "bias_after_scale": True})


@register_pass("elementwise_to_scale_pass")
class ElementwiseToScale(Fuser):
    def pattern(self) -> list[Pattern]:
        return [_pattern("Y", OPS_C_RIGHT), _pattern("X", OPS_C_LEFT)]

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        c = param_value(ctx, m["c"])
        x: Node = m["x"]
        if c is None or c.size != 1 or c.dtype != np.float32:
            return "the param is not one float32 value"
        if x.var is None or x.var.dtype != VarType.FP32 or len(x.var.shape) < c.ndim:
            return "X is not a float32 tensor of rank >= the param's"
        if m.op("ew").type == "elementwise_div" and float(c.reshape(-1)[0]) == 0.0:
            return "division by zero"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        op = m.op("ew")
        c = float(np.asarray(param_value(ctx, m["c"])).reshape(-1)[0])
        c_left = op.input("X") == m["c"].name
        if op.type == "elementwise_add":
            s, t = 1.0, c
        elif op.type == "elementwise_sub":
            s, t = (-1.0, c) if c_left else (1.0, -c)
        elif op.type == "elementwise_mul":
            s, t = c, 0.0
        else:  # elementwise_div by a non-zero constant (check refuses 0); only built for a div, so x + 0.0 is fine
            s, t = 1.0 / c, 0.0
        replace_ops(graph, [m["ew"]], scale_desc(m["x"].name, m["out"].name, s, t))


@register_pass("scales_fuse_pass")
class ScalesFuse(Fuser):
    def pattern(self) -> Pattern:
        p = Pattern()
        y = p.var("y", intermediate=True)
        p.op("s1", "scale", inputs={"X": p.var("x")}, outputs={"Out": y})
        p.op("s2", "scale", inputs={"X": y}, outputs={"Out": p.var("out")})
        return p

    def check(self, graph: Graph, m: Match, ctx: PassContext) -> str | None:
        if m.op("s1").inputs.get("ScaleTensor") or m.op("s2").inputs.get("ScaleTensor"):
            return "scale comes from a tensor"
        if m["x"].var is None or m["x"].var.dtype != VarType.FP32:
            return "X is not float32"
        return None

    def rewrite(self, graph: Graph, m: Match, ctx: PassContext) -> None:
        (s1, t1), (s2, t2) = affine(m.op("s1")), affine(m.op("s2"))
        replace_ops(graph, [m["s1"], m["s2"]], scale_desc(m["x"].name, m["out"].name, s1 * s2, t1 * s2 + t2))
