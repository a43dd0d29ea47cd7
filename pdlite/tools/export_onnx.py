"""`pdlite export-onnx MODEL -o model.onnx`: the whole model as one ONNX file (dynamic batch where possible)."""
from __future__ import annotations

import argparse
import os

from pdlite.tools.common import parse_named, parse_shape, source_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-onnx", help="write a Paddle model as one ONNX file (pdlite's NNAdapter converters)")
    p.add_argument("model", help="model folder or program file (.pdmodel / __model__ / .json)")
    p.add_argument("--params", help="params file (default: found beside the program file)")
    p.add_argument("-o", "--output", required=True, help="ONNX file to write")
    p.add_argument("--shape", action="append", metavar="NAME=1,3,224,224",
                   help="fix an input's shape (-1 keeps a dim dynamic); default: the model's declared shape")
    p.add_argument("--no-check", action="store_true", help="skip onnx.checker (full check with shape inference)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pdlite.model_parser import load_model
    from pdlite.nnadapter.export import export_program

    model = load_model(**source_config(args.model, args.params, "export-onnx").model_source())
    named = parse_named(args.shape, model.program.feed_names(), "--shape")
    shapes = {k: parse_shape(v, k) for k, v in named.items()}
    onnx_model = export_program(model.program, model.params, shapes=shapes, check=not args.no_check,
                                name=os.path.basename(os.path.normpath(args.model)))
    d = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(d, exist_ok=True)
    with open(args.output, "wb") as f:
        f.write(onnx_model.SerializeToString())
    g = onnx_model.graph
    print(f"wrote {args.output}: {len(g.node)} ONNX nodes, opset {onnx_model.opset_import[0].version}")
    for vi in g.input:
        print(f"  input  {vi.name}: {_dims(vi)}")
    for vi in g.output:
        print(f"  output {vi.name}: {_dims(vi)}")
    return 0


def _dims(vi: object) -> list:
    t = vi.type.tensor_type  # type: ignore[attr-defined]
    if not t.HasField("shape"):
        return ["?"]
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
