"""Paddle 3 PIR programs (`inference.json` + `.pdiparams`): the PIR front end.

pdlite has one op set (pdlite.operators, Paddle's legacy ops) and two front ends onto it: the
legacy ProgramDesc reader (framework_proto / program_io) and this one. A PIR program is decoded
(pdlite.model_parser.pir_decode), then each op is translated by its entry of the PIR op table
(pdlite.model_parser.pir_mapping, pir_mapping_nn) through the converter of
pdlite.model_parser.pir_convert, so graph, passes, kernels and device converters work unchanged.
The `.pdiparams` file holds the parameters sorted by name, exactly like a legacy combined
params file. docs/pir.md describes the format and the table.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pdlite.core.program import Program
from pdlite.errors import ModelFormatError
from pdlite.model_parser import pir_control_flow, pir_mapping, pir_mapping_nn  # noqa: F401 (they fill PIR_OPS)
from pdlite.model_parser.pir_convert import PIR_OPS, PirConverter, convert
from pdlite.model_parser.pir_decode import DTYPE_NAMES, PirOp, PirType, decode_attr, decode_op, decode_program
from pdlite.model_parser.program_io import check_var_ranks

__all__ = ["DTYPE_NAMES", "PIR_OPS", "PirConverter", "PirOp", "PirType", "decode_attr", "decode_op",
           "decode_program", "load_pir", "parse_pir_program"]


# ---------------------------------------------------------------------------------- loading


def parse_pir_program(data: bytes | str, source: str = "<PIR model buffer>") -> Program:
    """A Program for the PIR JSON document `data`; `source` names it in errors."""
    base, ops, nested = decode_program(data, source)
    version = base.get("version")
    program = convert(ops, nested, source)
    program.extra["pir_version"] = version
    check_var_ranks(program, source)
    if not program.fetch_names():  # no feed is fine: a program of constants is legal
        raise ModelFormatError(f"{source}: the PIR program has no pd_op.fetch op")
    return program


def _read(path: str | os.PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelFormatError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{what} {path} is a folder, expected a file") from None
    except OSError as e:
        raise ModelFormatError(f"cannot read {what} {path}: {e}") from None


def load_pir(json_path: str | os.PathLike | bytes | None, params_path: str | os.PathLike | bytes | None = None,
             *, json_buffer: bytes | None = None, params_buffer: bytes | None = None) -> Any:
    """Load a PIR model: program from a JSON file or bytes, parameters from a `.pdiparams` file
    or bytes (sorted by name, as Paddle's save_combine writes them). Returns a LoadedModel."""
    from pdlite.model_parser.loader import LoadedModel, load_params_combined

    if isinstance(json_path, (bytes, bytearray, memoryview)):
        json_buffer, json_path = bytes(json_path), None
    if isinstance(params_path, (bytes, bytearray, memoryview)):
        params_buffer, params_path = bytes(params_path), None
    if json_buffer is None:
        if json_path is None:
            raise ModelFormatError("load_pir needs a PIR JSON file or buffer")
        json_buffer = _read(json_path, "PIR model file")
    source = str(json_path) if json_path is not None else "<PIR model buffer>"
    program = parse_pir_program(json_buffer, source)
    wanted = program.persistable_names()
    if params_buffer is None and params_path is not None:
        params_buffer = _read(params_path, "params file")
    if params_buffer is None:
        if wanted:
            expected = Path(json_path).with_suffix(".pdiparams") if json_path is not None else "a params buffer"
            raise ModelFormatError(f"{source}: the program has {len(wanted)} parameters but no params file "
                                   f"was given or found (expected {expected})")
        params = {}
    else:
        psource = str(params_path) if params_path is not None else "<params buffer>"
        params = load_params_combined(program, params_buffer, psource)
    return LoadedModel(program, params, "pir-json", str(json_path) if json_path is not None else None,
                       str(params_path) if params_path is not None else None)
