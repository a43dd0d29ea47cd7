"""attention_fuse_pass: a transformer's multi-head self-attention, from the q / k / v split to the heads side by side
again, -> one fused_attention op (pdlite/operators/fused.py; host kernel pdlite/kernels/host/attention.py).

The chain (fc_siblings_fuse_pass makes the split: q, k and v from one fc of [Wq | Wk | Wv]):

    qkv (B, S, 3 H D) -split(axis 2, three sections of H D)-> q, k, v
    each: reshape2 (0, 0, H, D) -> transpose2 (0, 2, 1, 3)          (B, H, S, D)
    matmul_v2(q, k, trans_y) or matmul(q, k, transpose_Y, alpha)     (B, H, S, S)
    [scale(s, bias 0)]  softmax(last axis)  matmul_v2 / matmul(., v)  (B, H, S, D)
    transpose2 (0, 2, 1, 3) -> reshape2 (0, 0, H D)                  (B, S, H D)

-> fused_attention(X=qkv, head_number=H, alpha=(the matmul's alpha) * s) writing the last reshape's output. Every var
in between must have that one reader, be neither fetched nor written in place, and the reshapes' / transposes'
XShape outputs unread. Host programs only (no NNAdapter devices, host places): the devices' converters know the
unfused ops. The scores are summed by the native kernel's own loops, not the BLAS's: outputs within fp32 rounding of
the unfused ops (docs/determinism.md).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc
from pdlite.core.types import TargetType
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.pattern import replace_ops, versions

HOST_TARGETS = {TargetType.Host, TargetType.X86, TargetType.ARM, TargetType.Any}


def host_program(ctx: PassContext) -> bool:
    """Whether the program runs on the host alone (no NNAdapter devices, host places): the host-kernel fusions'
    condition (the devices' converters know the unfused ops)."""
    return not ctx.options.get("nnadapter_device_names") and ctx.targets <= HOST_TARGETS
HEADS_FIRST = [0, 2, 1, 3]  # (B, S, H, D) <-> (B, H, S, D)


def _attr_list(op: OpDesc, name: str) -> list[int]:
    return [int(v) for v in op.attrs.get(name) or []]


class _Chain:
    """Walks the chain from a split, collecting its ops; `why` says where it stopped (empty: a match)."""

    def __init__(self, graph: Graph, fetch: set[str]) -> None:
        self.graph, self.fetch = graph, fetch
        self.ops: list[Node] = []
        self.why = ""

    def reader(self, v: Node, types: tuple[str, ...], slot: str) -> Node | None:
        """The one op reading intermediate var `v`, of one of `types`, in `slot`; None (and why) otherwise."""
        if v.name in self.fetch or v.persistable or versions(self.graph, v.name) > 1:
            self.why = f"{v.name!r} is fetched, a parameter or written in place"
            return None
        if len(v.outputs) != 1:
            self.why = f"{v.name!r} has {len(v.outputs)} readers"
            return None
        op = v.outputs[0]
        if op.op is None or op.op.type not in types or op.op.input(slot) != v.name:
            self.why = f"{v.name!r} is not read as {slot} of {'/'.join(types)}"
            return None
        return op

    def out(self, op: Node, slot: str) -> Node | None:
        """op's output var in `slot`, its other outputs (XShape) unread."""
        assert op.op is not None
        name = op.op.output(slot)
        for v in op.outputs:
            if v.name != name and v.outputs:
                self.why = f"{op.op.type}'s {v.name!r} is read"
                return None
        self.ops.append(op)
        return next((v for v in op.outputs if v.name == name), None)

    def layout(self, v: Node, kind: str, shape: list[int] | None = None) -> Node | None:
        """The output of the reshape2 (shape) or transpose2 (HEADS_FIRST) reading v."""
        op = self.reader(v, (kind,), "X")
        if op is None:
            return None
        assert op.op is not None
        if kind == "reshape2":
            if op.op.input("Shape") or op.op.inputs.get("ShapeTensor") or _attr_list(op.op, "shape") != shape:
                self.why = f"reshape2 of {v.name!r} is not to {shape}"
                return None
        elif _attr_list(op.op, "axis") != HEADS_FIRST:
            self.why = f"transpose2 of {v.name!r} is not {HEADS_FIRST}"
            return None
        return self.out(op, "Out")

    def matmul(self, v: Node, slot: str, trans_y: bool) -> tuple[Node, float] | None:
        """The matmul_v2 / matmul reading v in `slot` (X not transposed, Y as trans_y), and its alpha."""
        op = self.reader(v, ("matmul_v2", "matmul"), slot)
        if op is None:
            return None
        d = op.op
        assert d is not None
        v2 = d.type == "matmul_v2"
        tx = bool(d.attrs.get("trans_x" if v2 else "transpose_X", False))
        ty = bool(d.attrs.get("trans_y" if v2 else "transpose_Y", False))
        if tx or ty != trans_y:
            self.why = f"{d.type} reading {v.name!r} has other transposes"
            return None
        out = self.out(op, "Out")
        return None if out is None else (out, 1.0 if v2 else float(d.attrs.get("alpha", 1.0)))


def match(graph: Graph, split: Node, fetch: set[str]) -> tuple[list[Node], Node, int, float] | str:
    """(the chain's ops, its output var, heads, alpha) from `split`, or why it is not attention."""
    d = split.op
    assert d is not None
    x = next((v for v in split.inputs if v.name == d.input("X")), None)
    shape = list(x.var.shape) if x is not None and x.var is not None else []
    secs = _attr_list(d, "sections")
    if d.inputs.get("AxisTensor") or d.inputs.get("SectionsTensorList"):
        return "the split's axis or sections are tensors"
    if len(shape) != 3 or int(d.attrs.get("axis", 0)) not in (2, -1) or shape[2] <= 0:
        return "the split is not of a 3-D input along its last axis"
    if secs != [shape[2] // 3] * 3 and not (not secs and int(d.attrs.get("num", 0)) == 3):
        return "the split is not into three equal parts"
    outs = [next(v for v in split.outputs if v.name == n) for n in d.outputs["Out"]]
    if len(outs) != 3:
        return "the split is not into three equal parts"
    c = _Chain(graph, fetch)
    c.ops.append(split)
    # the head geometry from q's reshape: (0, 0, H, D)
    reader = outs[0].outputs[0] if len(outs[0].outputs) == 1 else None
    want = _attr_list(reader.op, "shape") if reader is not None and reader.op is not None else []
    if len(want) != 4 or want[:2] != [0, 0] or want[2] <= 0 or want[2] * want[3] != shape[2] // 3:
        return "q is not reshaped to (0, 0, heads, head size)"
    heads = want[2]
    qkv = []
    for v in outs:
        r = c.layout(v, "reshape2", want)
        t = c.layout(r, "transpose2") if r is not None else None
        if t is None:
            return c.why
        qkv.append(t)
    s = c.matmul(qkv[0], "X", True)
    if s is None or c.reader(qkv[1], ("matmul_v2", "matmul"), "Y") is not c.ops[-1]:
        return c.why or "k is not q k^T's second operand"
    scores, alpha = s
    sc = c.reader(scores, ("scale", "softmax"), "X")
    if sc is not None and sc.op is not None and sc.op.type == "scale":
        if sc.op.inputs.get("ScaleTensor") or float(sc.op.attrs.get("bias", 0.0)) != 0.0:
            return "the scores' scale comes from a tensor or adds a bias"
        alpha *= float(sc.op.attrs.get("scale", 1.0))
        scores = c.out(sc, "Out")  # type: ignore[assignment]
        sc = c.reader(scores, ("softmax",), "X") if scores is not None else None
    if sc is None or sc.op is None or int(sc.op.attrs.get("axis", -1)) not in (-1, 3):
        return c.why or "no softmax over the scores' last axis"
    p = c.out(sc, "Out")
    o = c.matmul(p, "X", False) if p is not None else None
    if o is None or c.reader(qkv[2], ("matmul_v2", "matmul"), "Y") is not c.ops[-1]:
        return c.why or "v is not the product's second operand"
    if o[1] != 1.0:
        return "the product with v has an alpha"
    t = c.layout(o[0], "transpose2")
    out = c.layout(t, "reshape2", [0, 0, shape[2] // 3]) if t is not None else None
    if out is None:
        return c.why
    return c.ops, out, heads, alpha


@register_pass("attention_fuse_pass")
class AttentionFuse(Pass):
    """split of q / k / v -> reshapes, transposes -> q k^T (* s) -> softmax -> . v -> transpose, reshape ->
    fused_attention (this module's docstring)."""

    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        stats = ctx.meta.setdefault("pass_stats", {}).setdefault(self.name, {"rewrites": 0, "refused": Counter()})
        if not host_program(ctx):
            return False
        fetch = set(ctx.meta.get("fetch_names", []))
        modified = False
        for split in [n for n in graph.op_nodes() if n.op is not None and n.op.type == "split"]:
            if split not in graph:
                continue
            m: Any = match(graph, split, fetch)
            if isinstance(m, str):
                stats["refused"][m] += 1
                continue
            ops, out, heads, alpha = m
            x = split.op.input("X")  # type: ignore[union-attr]
            new = OpDesc("fused_attention", {"X": [x]}, {"Out": [out.name]},
                         {"head_number": int(heads), "alpha": float(alpha)})
            replace_ops(graph, ops, new)
            stats["rewrites"] += 1
            modified = True
        return modified
