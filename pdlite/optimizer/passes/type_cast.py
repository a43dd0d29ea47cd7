"""type_target_cast_pass: insert io_copy / calib / layout ops where kernels disagree on tensor types.

Every var gets a tensor type: the producer kernel's declared output type, or for graph
inputs and params (Host, their dtype's precision). Where a consumer kernel declares a
different target, an `io_copy` op is inserted (the CPU targets Host/X86/ARM share memory);
a different floating precision (FP32 <-> FP16) gets a `calib` op; a different explicit
layout (NCHW <-> NHWC) a `layout` op. One cast per (var, wanted type) is shared by all
consumers. Fetched vars that end on a device are copied back to the host.
"""
from __future__ import annotations

from pdlite.core.graph import Graph, Node
from pdlite.core.program import OpDesc, VarDesc
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, DataLayoutType, PrecisionType, TargetType
from pdlite.errors import UnsupportedOpError
from pdlite.kernels.registry import KernelDef, TensorType, kernels_for
from pdlite.optimizer.pass_registry import Pass, PassContext, register_pass
from pdlite.optimizer.passes.kernel_pick import CPU_TARGETS, _var_precision

FLOATS = (PrecisionType.FP32, PrecisionType.FP16)


def same_memory(a: TargetType, b: TargetType) -> bool:
    return a == b or TargetType.Any in (a, b) or (a in CPU_TARGETS and b in CPU_TARGETS)


def tensor_type_of(node: Node) -> TensorType:
    """The type of a var node: its producer kernel's output type, else host memory of its dtype."""
    prod = node.producer()
    if prod is not None and "kernel" in prod.info:
        kd: KernelDef = prod.info["kernel"]
        assert prod.op is not None
        for slot, names in prod.op.outputs.items():
            if node.name in names:
                t = kd.output_type(slot)
                if t.precision == ANY_PRECISION:
                    t = TensorType(t.target, _var_precision(node) or ANY_PRECISION, t.layout)
                return t
    return TensorType(TargetType.Host, _var_precision(node), ANY_LAYOUT)


def find_cast_kernel(op_type: str, src: TensorType, dst: TensorType) -> KernelDef | None:
    for kd in kernels_for(op_type):
        if kd.input_type("Input").matches(src) and kd.output_type("Out").matches(dst):
            return kd
    return None


def needed_casts(src: TensorType, dst: TensorType) -> list[tuple[str, TensorType, TensorType]]:
    """The chain of (cast op, from, to) turning a `src` tensor into a `dst` one."""
    steps = []
    cur = src
    if not same_memory(cur.target, dst.target):
        nxt = TensorType(dst.target, cur.precision, cur.layout)
        steps.append(("io_copy", cur, nxt))
        cur = nxt
    if cur.precision in FLOATS and dst.precision in FLOATS and cur.precision != dst.precision:
        nxt = TensorType(cur.target, dst.precision, cur.layout)
        steps.append(("calib", cur, nxt))
        cur = nxt
    explicit = (DataLayoutType.NCHW, DataLayoutType.NHWC)
    if cur.layout in explicit and dst.layout in explicit and cur.layout != dst.layout:
        nxt = TensorType(cur.target, cur.precision, dst.layout)
        steps.append(("layout", cur, nxt))
    return steps


@register_pass("type_target_cast_pass")
class TypeTargetCastPass(Pass):
    def apply(self, graph: Graph, ctx: PassContext) -> bool:
        modified = False
        # fetched results come back to host memory
        fetch = ctx.meta.get("fetch_names", [])
        for var in graph.var_nodes():
            if var.name in fetch and var.producer() is not None:
                t = tensor_type_of(var)
                if not same_memory(t.target, TargetType.Host):
                    self._copy_back(graph, var, t)
                    modified = True
        cache: dict[tuple[int, TensorType], Node] = {}
        for node in graph.topological_order():
            kd: KernelDef | None = node.info.get("kernel")
            if kd is None or node.op is None or node.op.type in ("io_copy", "calib", "layout"):
                continue
            for var in list(node.inputs):
                slot = next(s for s, names in node.op.inputs.items() if var.name in names)
                want = kd.input_type(slot)
                src = tensor_type_of(var)
                cur = var
                for cast_type, a, b in needed_casts(src, want):
                    key = (cur.id, b)
                    if key not in cache:
                        cache[key] = self._insert(graph, cur, cast_type, a, b)
                    cur = cache[key]
                if cur is not var:
                    graph.replace_input(node, var, cur)
                    modified = True
        return modified

    def _insert(self, graph: Graph, var: Node, cast_type: str, src: TensorType, dst: TensorType) -> Node:
        kd = find_cast_kernel(cast_type, src, dst)
        if kd is None:
            raise UnsupportedOpError(
                f"type_target_cast_pass: var {var.name!r} is {src} but a consumer needs {dst}, and no "
                f"{cast_type!r} kernel converts between them")
        name = f"{var.name}/{cast_type}/{dst.target.name}_{dst.precision.name}_{dst.layout.name}"
        desc = graph.vars[var.name] if var.name in graph.vars else VarDesc(var.name)
        out = graph.add_var(VarDesc(name, desc.type, desc.dtype, list(desc.shape), desc.lod_level))
        attrs = {"src": src.layout.name, "dst": dst.layout.name} if cast_type == "layout" else {}
        op = OpDesc(cast_type, {"Input": [var.name]}, {"Out": [name]}, attrs)
        node = graph.add_op(op, [var], [out])
        node.info["kernel"] = kd
        return out

    def _copy_back(self, graph: Graph, var: Node, t: TensorType) -> None:
        dst = TensorType(TargetType.Host, t.precision, t.layout)
        kd = find_cast_kernel("io_copy", t, dst)
        if kd is None:
            raise UnsupportedOpError(f"fetched var {var.name!r} lives on {t.target.name} and no io_copy kernel "
                                     "brings it back to the host")
        prod = var.producer()
        assert prod is not None and prod.op is not None
        dev_name = f"{var.name}/{t.target.name}"
        desc = graph.vars[var.name]
        dev = graph.add_var(VarDesc(dev_name, desc.type, desc.dtype, list(desc.shape), desc.lod_level))
        # the producer now writes dev_name; an io_copy writes the fetched name
        graph.replace_output(prod, var, dev)
        # fetch_copy marks the copy that brings a fetched result back (a device target may keep it)
        want = _var_precision(var)
        if t.precision in FLOATS and want in FLOATS and want != t.precision:
            # a reduced-precision result: copied as it is, then converted to the var's dtype on the host
            calib = find_cast_kernel("calib", dst, TensorType(TargetType.Host, want, t.layout))
            if calib is None:
                raise UnsupportedOpError(f"fetched var {var.name!r} is {t.precision.name} on {t.target.name}; "
                                         f"no host calib kernel makes it {want.name}")
            host = graph.add_var(VarDesc(f"{var.name}/Host_{t.precision.name}", desc.type, desc.dtype,
                                         list(desc.shape), desc.lod_level))
            op = OpDesc("io_copy", {"Input": [dev_name]}, {"Out": [host.name]}, {"fetch_copy": True})
            graph.add_op(op, [dev], [host]).info["kernel"] = kd
            op = OpDesc("calib", {"Input": [host.name]}, {"Out": [var.name]}, {})
            graph.add_op(op, [host], [var]).info["kernel"] = calib
            return
        op = OpDesc("io_copy", {"Input": [dev_name]}, {"Out": [var.name]}, {"fetch_copy": True})
        node = graph.add_op(op, [dev], [var])
        node.info["kernel"] = kd
