"""`pdlite ops`: the op support table, generated from the registries (docs/ops.md is its Markdown form).

For every op type with an op definition: whether a host kernel exists, whether a kernel of each optional
target exists (CUDA, OpenCL: FP32 / FP16; "any" for precision-generic ones such as shape), whether the NNAdapter devices can take it (an ONNX converter; "cond." when a capability predicate may
refuse some attribute forms, which then run on the host), and the Paddle 3 PIR op names that become it.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ops", help="print the op support table (host, CUDA, OpenCL, devices, PIR names)")
    p.add_argument("--markdown", metavar="FILE", help="write the table as Markdown (docs/ops.md) instead")
    p.add_argument("--filter", help="only op types containing this text")
    p.set_defaults(func=main)


def _pir_names(op_types: set[str]) -> dict[str, list[str]]:
    """PIR op name(s) per legacy op type: the ops each PIR mapping declares it produces."""
    from pdlite.model_parser.pir_convert import produced_by
    from pdlite.model_parser.pir_mapping import PIR_OPS

    out: dict[str, list[str]] = {}
    for pir_name, fn in PIR_OPS.items():
        for t in produced_by(fn):
            if t in op_types:
                out.setdefault(t, []).append(pir_name)
    return out


def optional_targets() -> list:
    """The targets whose kernel package is an optional dependency (CUDA, OpenCL): one column each."""
    from pdlite.registries import TARGET_KERNEL_MODULES

    return sorted(TARGET_KERNEL_MODULES)


def rows() -> list[dict[str, str]]:
    """One row per op type: op, host, one column per optional target (cuda, opencl), devices, pir."""
    from pdlite.api.opt import load_kernels_of
    from pdlite.core.types import PrecisionType, TargetType
    from pdlite.kernels.registry import KERNELS
    from pdlite.nnadapter.registry import CONVERTERS
    from pdlite.operators.registry import OPS
    from pdlite.registries import load_registries

    # built-ins only (plugins add rows of their own to a user's `pdlite ops`, not to the docs)
    load_registries(plugins=False)
    load_kernels_of(None)  # the optional targets whose backend (torch, pyopencl) is installed
    op_types = set(OPS)
    host: set[str] = set()
    extra = {t: {} for t in optional_targets()}
    for key in KERNELS:
        if key.target in (TargetType.Host, TargetType.X86):
            host.add(key.op_type)
        elif key.target in extra:
            p = key.precision.name if key.precision in (PrecisionType.FP32, PrecisionType.FP16) else "any"
            extra[key.target].setdefault(key.op_type, set()).add(p)
    pir = _pir_names(op_types)
    out = []
    for t in sorted(op_types):
        conv = CONVERTERS.get(t)
        row = {"op": t, "host": "yes" if t in host else ""}
        row.update({target.name.lower(): "/".join(sorted(have.get(t, ()))) for target, have in extra.items()})
        row["devices"] = "" if conv is None else ("cond." if conv.supports is not None else "yes")
        row["pir"] = ", ".join(sorted(pir.get(t, [])))
        out.append(row)
    return out


def markdown(table: list[dict[str, str]]) -> str:
    n = len(table)
    targets = [t.name for t in optional_targets()]
    counts = {k: sum(1 for r in table if r[k]) for k in ("host", *(t.lower() for t in targets), "devices", "pir")}
    lines = [
        "# Op support",
        "",
        "Generated from the registries by `pdlite ops --markdown docs/ops.md`; a test keeps it current.",
        "`devices` = the NNAdapter devices (intel_openvino, onnxruntime, and plugins' ONNX-based ones) through",
        "the ONNX converters: `yes` always, `cond.` when a capability predicate may refuse some forms (those ops",
        "stay on the host, and `pdlite inspect MODEL` says why). `pir` = the Paddle 3 PIR ops that become it.",
        "The target columns (CUDA: docs/cuda.md, OpenCL: docs/opencl.md) give the precisions of the target's kernels",
        "(`any`: precision-generic, e.g. `shape`); an op without one runs on the host, with io_copy ops inserted",
        "around it; a kernel may still leave some forms to the host (OpenCL: NHWC layouts, training-mode batch_norm).",
        "",
        f"{n} op types: host {counts['host']}, "
        + "".join(f"{t} {counts[t.lower()]}, " for t in targets)
        + f"devices {counts['devices']}, from PIR {counts['pir']}.",
        "",
        "| op | host | " + "".join(f"{t} | " for t in targets) + "devices | PIR |",
        "|---|---|" + "---|" * len(targets) + "---|---|",
    ]
    for r in table:
        lines.append(f"| {r['op']} | {r['host']} | " + "".join(f"{r[t.lower()]} | " for t in targets)
                     + f"{r['devices']} | {r['pir']} |")
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    table = rows()
    if args.filter:
        table = [r for r in table if args.filter in r["op"]]
    if args.markdown:
        Path(args.markdown).write_text(markdown(table))
        print(f"{len(table)} op types written to {args.markdown}")
        return 0
    w = max(len(r["op"]) for r in table) if table else 2
    targets = [t.name.lower() for t in optional_targets()]
    print(f"{'op':<{w}}  host  " + "".join(f"{t:<9}  " for t in targets) + "devices  pir")
    for r in table:
        print(f"{r['op']:<{w}}  {r['host'] or '-':<4}  " + "".join(f"{r[t] or '-':<9}  " for t in targets)
              + f"{r['devices'] or '-':<7}  {r['pir']}")
    return 0
