"""Model formats: Paddle's ProgramDesc protobuf, LoDTensor params files, and model folder layouts."""
from __future__ import annotations

from pdlite.model_parser.loader import (
    LoadedModel,
    load_model,
    load_params_combined,
    load_params_separate,
    save_model,
    save_params_combined,
    save_params_separate,
)
from pdlite.model_parser.lod_tensor import LoDTensor, read_lod_tensor, write_lod_tensor
from pdlite.model_parser.program_io import parse_program, serialize_program

__all__ = [
    "LoDTensor",
    "LoadedModel",
    "load_model",
    "load_params_combined",
    "load_params_separate",
    "parse_program",
    "read_lod_tensor",
    "save_model",
    "save_params_combined",
    "save_params_separate",
    "serialize_program",
    "write_lod_tensor",
]
