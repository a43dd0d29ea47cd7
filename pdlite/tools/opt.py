"""`pdlite-opt`: paddle_lite_opt's options where they apply; writes `<optimize_out>.nb`.

    pdlite-opt --model_dir=mobilenet_v1 --valid_targets=x86,host --optimize_out=mobilenet_v1_opt
    pdlite-opt --model_file=m.pdmodel --param_file=m.pdiparams --optimize_out=m_opt
    pdlite-opt --print_all_ops
    pdlite-opt --print_supported_ops --valid_targets=host
    pdlite-opt --print_model_ops --model_dir=mobilenet_v1 --valid_targets=x86

Flags take `--flag`, `--flag=true` or `--flag=false`, as gflags does. The print options print
and exit (0; --print_model_ops exits 1 when some op of the model is supported nowhere).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from pdlite.errors import PdliteError
from pdlite.tools.common import HelpFormatter, one_line_warnings


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on", "y"):
        return True
    if t in ("0", "false", "no", "off", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    from pdlite import __version__

    p = argparse.ArgumentParser(prog="pdlite-opt", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--model_dir", default="", help="model folder (any layout pdlite reads)")
    p.add_argument("--model_file", default="", help="program file (.pdmodel, __model__, model)")
    p.add_argument("--param_file", default="", help="combined params file (.pdiparams, __params__, params)")
    p.add_argument("--optimize_out", default="", help="output path; '.nb' is added")
    p.add_argument("--optimize_out_type", default="naive_buffer", choices=["naive_buffer", "protobuf"],
                   help="naive_buffer: one .nb file (default); protobuf: <out>.pdmodel + <out>.pdiparams "
                        "(the optimized program for inspection, loadable by pdlite's CxxConfig)")
    p.add_argument("--valid_targets", default="host",
                   help="comma-separated targets in priority order, e.g. x86,host (default: host)")
    p.add_argument("--passes", default="", help="pdlite: comma-separated pass list replacing the default pipeline")
    for flag, what in (("print_all_ops", "print every op and the targets with kernels for it"),
                       ("print_supported_ops", "print the ops each of --valid_targets supports"),
                       ("print_model_ops", "print which of the model's ops each target supports")):
        p.add_argument(f"--{flag}", nargs="?", const=True, default=False, type=_bool, metavar="BOOL", help=what)
    p.add_argument("--quant_model", nargs="?", const=True, default=False, type=_bool, metavar="BOOL",
                   help="weight-only quantization of conv/fc/matmul weights (smaller .nb, dequantized at load)")
    p.add_argument("--quant_type", default="QUANT_INT16", choices=["QUANT_INT8", "QUANT_INT16"],
                   help="weight type with --quant_model (default QUANT_INT16, as paddle_lite_opt)")
    p.add_argument("--quiet", action="store_true", help="no progress lines (they only show on a terminal)")
    p.add_argument("--version", action="version", version=f"pdlite-opt {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    from pdlite.api.opt import Opt

    parser = build_parser()
    args = parser.parse_args(argv)
    progress = None
    if not args.quiet and sys.stdout.isatty():
        def progress(msg: str) -> None:
            print(msg, flush=True)
    try:
        with one_line_warnings("pdlite-opt"):
            return _run(parser, args, Opt(progress))
    except PdliteError as e:
        print(f"pdlite-opt: error: {e}", file=sys.stderr)
        return 1


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, opt: Any) -> int:
    """The work of main: the print options, or the optimized model written."""
    if args.model_dir:
        opt.set_model_dir(args.model_dir)
    if args.model_file:
        opt.set_model_file(args.model_file)
    if args.param_file:
        opt.set_param_file(args.param_file)
    opt.set_valid_places(args.valid_targets)
    if args.print_all_ops:
        opt.print_all_ops()
        return 0
    if args.print_supported_ops:
        opt.print_supported_ops()
        return 0
    if args.print_model_ops:
        report = opt.model_ops()
        print(report.text(), end="")
        return 1 if report.unsupported() else 0
    if not args.optimize_out or not (args.model_dir or args.model_file):
        parser.print_help()
        print("\npdlite-opt: give --model_dir (or --model_file) and --optimize_out, or a --print_* option",
              file=sys.stderr)
        return 2
    opt.set_quant_model(args.quant_model)
    opt.set_quant_type(args.quant_type)
    opt.set_model_type(args.optimize_out_type)
    opt.set_optimize_out(args.optimize_out)
    if args.passes:
        opt.set_passes_internal([s.strip() for s in args.passes.split(",") if s.strip()])
    out = opt.run()
    r = opt.last_report
    print(f"Saved the optimized model to {out} ({r['bytes'] / 1e6:.2f} MB): {r['ops_before']} ops -> "
          f"{r['ops_after']} ops; load {r['load_ms']:.0f} ms, optimize {r['optimize_ms']:.0f} ms, "
          f"write {r['write_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
