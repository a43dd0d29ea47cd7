"""`pdlite graph MODEL -o g.svg|g.dot [--after-passes]`: draw the SSA graph (graphviz if installed)."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess

from pdlite.errors import PdliteError

DRAWN_FORMATS = ("svg", "png", "pdf", "jpg", "jpeg", "gif", "ps", "eps")  # graphviz `dot -T...` formats we offer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="draw the SSA graph as DOT or SVG")
    p.add_argument("model", help="model folder or program file (.pdmodel / __model__ / .json)")
    p.add_argument("--params", help="params file (default: found beside the program file)")
    p.add_argument("-o", "--output", required=True,
                   help="g.dot / g.gv (DOT text), or g.svg / g.png / g.pdf (drawn by graphviz's `dot` program)")
    p.add_argument("--after-passes", action="store_true", help="the graph after the analysis passes")
    p.set_defaults(func=main)


def model_dot(model: str, params: str | None, after_passes: bool) -> str:
    from pdlite.core.graph import Graph
    from pdlite.tools.common import source_config

    cfg = source_config(model, params, "graph")
    if after_passes:
        from pdlite.api.predictor import CxxPredictor

        return CxxPredictor(cfg).analysis.graph.to_dot("after_passes")
    from pdlite.model_parser import load_model

    m = load_model(**cfg.model_source())
    return Graph(m.program.main).to_dot("program")


def main(args: argparse.Namespace) -> int:
    dot = model_dot(args.model, args.params, args.after_passes)
    out = args.output
    if out.endswith(".dot") or out.endswith(".gv"):
        with open(out, "w") as f:
            f.write(dot)
        print(f"DOT written to {out} ({dot.count('->')} edges)")
        return 0
    fmt = out.rsplit(".", 1)[-1].lower() if "." in os.path.basename(out) else ""
    if fmt not in DRAWN_FORMATS:
        raise PdliteError(f"cannot write {out!r}: name it .dot or .gv (DOT text, no graphviz needed), or "
                          f"{', '.join('.' + f for f in DRAWN_FORMATS)} (drawn with graphviz)")
    exe = shutil.which("dot")
    if exe is None:
        raise PdliteError(f"graph: writing {out!r} ({fmt}) needs graphviz's `dot` program, which is not installed "
                          f"(apt install graphviz, brew install graphviz); or ask for DOT: -o "
                          f"{out.rsplit('.', 1)[0]}.dot")
    done = subprocess.run([exe, f"-T{fmt}", "-o", out], input=dot.encode(), capture_output=True)
    if done.returncode != 0:
        raise PdliteError(f"graph: graphviz could not write {out!r}: {done.stderr.decode(errors='replace').strip()}")
    print(f"{fmt.upper()} written to {out}")
    return 0
