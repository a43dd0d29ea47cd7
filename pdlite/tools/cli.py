"""`pdlite`: run, benchmark, profile and inspect Paddle models from the command line."""
from __future__ import annotations

import argparse
import importlib
import sys

from pdlite.errors import PdliteError

# one module per command, each with `register(subparsers)`; listed explicitly
COMMANDS = ["pdlite.tools.run", "pdlite.tools.bench", "pdlite.tools.inspect_model", "pdlite.tools.graph",
            "pdlite.tools.plugins", "pdlite.tools.export_onnx",
            "pdlite.tools.check", "pdlite.tools.doctor", "pdlite.tools.ops",
            "pdlite.tools.batch", "pdlite.tools.ocr", "pdlite.tools.quantize"]


def _build_line() -> str:
    """One line on the host kernels in use, for --version (`pdlite doctor` says more)."""
    from pdlite.kernels.host import native

    if not native.available():
        return "native kernels: not built, NumPy kernels"
    return f"native kernels: {native.isa()}, GEMM via {native.build_info()['gemm']}"


def build_parser() -> argparse.ArgumentParser:
    from pdlite import __version__

    parser = argparse.ArgumentParser(prog="pdlite", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pdlite {__version__} ({_build_line()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PdliteError as e:
        print(f"pdlite {args.command}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
