"""`pdlite inspect MODEL`: inputs, outputs, op histogram, parameters, and who supports which op."""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from pdlite.core.dtypes import VarType, numpy_dtype


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="inputs/outputs, op histogram, params, support per target and device")
    p.add_argument("model", help="model folder or program file (.pdmodel / __model__ / .json)")
    p.add_argument("--params", help="params file (default: found beside the program file)")
    p.set_defaults(func=main)


def _load(model: str, params: str | None):
    from pdlite.model_parser import load_model
    from pdlite.tools.common import source_config

    return load_model(**source_config(model, params, "inspect").model_source())


def support_table(op_types: list[str]) -> tuple[list[str], dict[str, dict[str, bool]]]:
    """Columns (targets, then NNAdapter devices) and, per op type, whether each supports it."""
    from pdlite.kernels.registry import KERNELS
    from pdlite.registries import load_registries

    load_registries()
    from pdlite.api.opt import load_kernels_of

    load_kernels_of(None)  # the optional targets whose backend is installed (CUDA: torch, OpenCL: pyopencl)
    # the NNAdapter target's one kernel is the subgraph op: the devices' own columns say what they take
    targets = sorted({k.target.name for k in KERNELS} - {"NNAdapter"})
    cols = list(targets)
    conv: dict[str, set[str]] = {}
    try:
        from pdlite.nnadapter.registry import CONVERTERS, DRIVERS

        for dev in DRIVERS:
            cols.append(dev)
            conv[dev] = set(CONVERTERS)
    except ImportError:
        pass
    table: dict[str, dict[str, bool]] = {}
    for t in op_types:
        have = {k.target.name for k in KERNELS if k.op_type == t}
        row = {c: c in have for c in targets}
        for dev, ops in conv.items():
            row[dev] = t in ops
        table[t] = row
    return cols, table


def placement(prog, params: dict) -> dict[str, tuple[int, int, Counter]]:
    """Per op type: (ops, ops an NNAdapter device can take, Counter of why the others stay on the host).

    The reasons are the ONNX converters' own refusals (no converter, an attribute or input form they cannot
    express, a shape they need and do not know), judged on the declared shapes and the parameters.
    """
    from pdlite.nnadapter.convert import TensorInfo, refusal

    out: dict[str, tuple[int, int, Counter]] = {}
    # blocks run by while / conditional_block: their ops always run on the host, with the control-flow op
    in_control_flow = {int(op.attrs["sub_block"]) for b in prog.blocks for op in b.ops
                       if op.type in ("while", "conditional_block") and "sub_block" in op.attrs}
    for block in prog.blocks:
        info = TensorInfo.from_vars(block.vars, params)
        for op in block.ops:
            if op.type in ("feed", "fetch"):
                continue
            n, k, why = out.get(op.type, (0, 0, Counter()))
            reason = (f"inside a {_block_owner(prog, block.idx)} block (run on the host with it)"
                      if block.idx in in_control_flow else refusal(op, info))
            if reason is None:
                k += 1
            else:
                why[reason] += 1
            out[op.type] = (n + 1, k, why)
    return out


def _block_owner(prog, idx: int) -> str:
    return next(op.type for b in prog.blocks for op in b.ops
                if op.type in ("while", "conditional_block") and int(op.attrs.get("sub_block", -1)) == idx)


def print_placement(prog, params: dict, host_types: set[str]) -> None:
    """Where each op type runs: host kernel, and how many of its ops an NNAdapter device takes (and why not)."""
    try:
        table = placement(prog, params)
    except ImportError:
        return
    print("\nplacement (host: a host kernel exists; device: ops an NNAdapter device (ONNX converters) takes;")
    print("the subgraph partitioner may still keep small or constant-only groups on the host):")
    print(f"  {'op type':<28} {'host':>5} {'device':>8}  why not on a device")
    for t in sorted(table):
        n, k, why = table[t]
        reasons = "; ".join(f"{r}" + (f" (x{c})" if c > 1 else "") for r, c in why.most_common())
        print(f"  {t:<28} {('yes' if t in host_types else 'NO'):>5} {f'{k}/{n}':>8}  {reasons}")


def main(args: argparse.Namespace) -> int:
    m = _load(args.model, args.params)
    prog = m.program
    block = prog.main
    print(f"model: {args.model}  (format: {m.format})")
    print("\ninputs:")
    for n in prog.feed_names():
        v = block.vars.get(n)
        dt = numpy_dtype(v.dtype) if v is not None and v.dtype is not None else "?"
        print(f"  {n}: shape {list(v.shape) if v else '?'} {dt}")
    print("outputs:")
    for n in prog.fetch_names():
        v = block.vars.get(n)
        dt = numpy_dtype(v.dtype) if v is not None and v.dtype is not None and v.dtype != VarType.LOD_TENSOR else "?"
        print(f"  {n}: shape {list(v.shape) if v else '?'} {dt}")
    hist = Counter(op.type for b in prog.blocks for op in b.ops if op.type not in ("feed", "fetch"))
    print(f"\nops: {sum(hist.values())} in {len(prog.blocks)} block(s), {len(hist)} types")
    for t, c in hist.most_common():
        print(f"  {t:<28} {c}")
    n_params = sum(int(np.prod(t.array.shape)) for t in m.params.values())
    n_bytes = sum(t.array.nbytes for t in m.params.values())
    print(f"\nparameters: {len(m.params)} tensors, {n_params:,} values, {n_bytes / 1e6:.2f} MB")
    cols, table = support_table(sorted(hist))
    idle = [c for c in cols if not any(table[t][c] for t in hist)]
    cols = [c for c in cols if c not in idle]
    print("\nsupport (Y = a kernel or converter exists):")
    print(f"  {'op type':<28} " + " ".join(f"{c:>14}" for c in cols))
    for t in sorted(hist):
        print(f"  {t:<28} " + " ".join(f"{('Y' if table[t][c] else '-'):>14}" for c in cols))
    if idle:
        print(f"  (no kernel or converter for any of these ops: {', '.join(idle)})")
    host_types = {t for t in hist if table[t].get("Host")}
    print_placement(prog, {k: t.array for k, t in m.params.items()}, host_types)
    from pdlite.nnadapter.dynamic import shape_notes

    print("\n" + "\n".join(shape_notes([(n, block.vars[n].shape if n in block.vars else None)
                                         for n in prog.feed_names()])))
    missing = [t for t in hist if not any(table[t].values())]
    if missing:
        print(f"\nunsupported everywhere: {', '.join(sorted(missing))}")
    return 0
