"""`pdlite`: run, benchmark, profile and inspect Paddle models from the command line."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from pdlite.errors import PdliteError
from pdlite.tools.common import HelpFormatter, one_line_warnings

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


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: every flag's help shows its default (common.HelpFormatter)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    from pdlite import __version__

    parser = argparse.ArgumentParser(prog="pdlite", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"pdlite {__version__} ({_build_line()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    for action in sub._choices_actions:  # `pdlite CMD -h` starts with the line `pdlite -h` lists for CMD
        cmd = sub.choices[action.dest]
        if cmd.description is None:
            cmd.description = action.help
    return parser


def main(argv: list[str] | None = None) -> int:
    from pdlite.nnadapter.model_cache import default_model_cache

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with one_line_warnings(f"pdlite {args.command}"), default_model_cache():  # compiled device models kept
            return int(args.func(args) or 0)
    except PdliteError as e:
        print(f"pdlite {args.command}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a file named on the command line that cannot be read or written
        print(f"pdlite {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
