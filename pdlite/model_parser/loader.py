"""Finding, loading and saving Paddle inference models (program + parameters).

Layouts recognised in a model folder, in this order:

- `inference.pdmodel` + `inference.pdiparams`           format "pdmodel"
- `model` + `params`, `__model__` + `__params__`         format "combined"
- `__model__` + one LoDTensor file per persistable var  format "non-combined"
- a single `X.pdmodel` (+ `X.pdiparams`)                 format "pdmodel"
- `inference.json` / a single `X.json` + `.pdiparams`    format "pir-json" (pdlite.model_parser.pir)

A combined params file holds the program's persistable tensors (Program.persistable_names():
sorted, feed/fetch excluded) one after another; it must hold exactly those, with the shapes
their VarDescs declare.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from pdlite.core.program import Program, VarDesc
from pdlite.errors import ModelFormatError
from pdlite.model_parser.lod_tensor import LoDTensor, lod_tensor_chunks, read_lod_tensor
from pdlite.model_parser.program_io import parse_program, serialize_program

PathLike = str | os.PathLike


@dataclass
class LoadedModel:
    """A loaded model: its program, its parameters by name, and where they came from."""

    program: Program
    params: dict[str, LoDTensor] = field(default_factory=dict)
    format: str = "pdmodel"  # "pdmodel", "combined", "non-combined", "buffer", "pir-json"
    model_path: str | None = None
    params_path: str | None = None  # the params file, or the folder of a non-combined model


def _read(path: Path, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ModelFormatError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{what} {path} is a folder, expected a file") from None
    except OSError as e:
        raise ModelFormatError(f"cannot read {what} {path}: {e}") from None


def _persistable_vars(program: Program) -> dict[str, VarDesc]:
    found: dict[str, VarDesc] = {}
    for block in program.blocks:
        for v in block.vars.values():
            found.setdefault(v.name, v)
    return {n: found[n] for n in program.persistable_names()}


def _check_shape(var: VarDesc, t: LoDTensor, source: str) -> None:
    expected, got = list(var.shape), t.shape
    if len(expected) == len(got) and all(e < 0 or e == g for e, g in zip(expected, got)):
        return
    if t.array.size == 1 and len(got) <= 1 and expected in ([], [1]):
        return  # a 0-D tensor saved as [1] or the other way round
    if [d for d in expected if d != 1] == [d for d in got if d != 1] and all(e > 0 for e in expected):
        return  # only size-1 dims differ (Paddle's quantization saves [C] scales as [1, C]); Paddle reads these
    raise ModelFormatError(
        f"{source}: parameter {var.name!r} has shape {got}, but the program declares shape {expected}"
    )


def load_params_combined(program: Program, data: bytes | bytearray | memoryview, source: str) -> dict[str, LoDTensor]:
    """Read a combined params file/buffer: the program's persistable tensors in sorted name order."""
    wanted = _persistable_vars(program)
    params: dict[str, LoDTensor] = {}
    pos, end = 0, len(data)
    for name, var in wanted.items():
        if pos >= end:
            raise ModelFormatError(
                f"{source}: holds {len(params)} tensors but the program has {len(wanted)} persistable "
                f"variables; {name!r} and the ones after it are missing"
            )
        t, pos = read_lod_tensor(data, pos, source, name)
        _check_shape(var, t, source)
        params[name] = t
    if pos != end:
        raise ModelFormatError(
            f"{source}: {end - pos} bytes left over after the {len(wanted)} tensors the program declares "
            "(params file does not belong to this model?)"
        )
    return params


def _var_file(model_dir: Path, name: str) -> Path:
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise ModelFormatError(f"{model_dir}: persistable variable name {name!r} cannot be a file name")
    return model_dir / name


def load_params_separate(program: Program, model_dir: PathLike) -> dict[str, LoDTensor]:
    """Read a non-combined model's params: one LoDTensor file per persistable variable, named after it."""
    model_dir = Path(model_dir)
    params: dict[str, LoDTensor] = {}
    for name, var in _persistable_vars(program).items():
        path = _var_file(model_dir, name)
        if not path.is_file():
            raise ModelFormatError(f"{model_dir}: no file for persistable variable {name!r} (expected {path})")
        data = _read(path, f"params file of {name!r}")
        t, pos = read_lod_tensor(data, 0, str(path), name)
        if pos != len(data):
            raise ModelFormatError(f"{path}: {len(data) - pos} bytes left over after tensor {name!r}")
        _check_shape(var, t, str(path))
        params[name] = t
    return params


def _load_pir(
    json_path: PathLike | None, params_path: PathLike | None, json_buffer: bytes | None = None,
    params_buffer: bytes | None = None,
) -> LoadedModel:  # fmt: skip
    """Hook for PIR (Paddle 3 JSON) programs: delegates to pdlite.model_parser.pir.load_pir if present."""
    try:
        pir = importlib.import_module("pdlite.model_parser.pir")
    except ModuleNotFoundError as e:
        if e.name not in ("pdlite.model_parser.pir",):
            raise
        raise ModelFormatError(
            f"{json_path or '<model buffer>'}: this is a PIR (Paddle 3 JSON) program; PIR programs are "
            "handled by pdlite.model_parser.pir, which is not available"
        ) from None
    return pir.load_pir(json_path, params_path, json_buffer=json_buffer, params_buffer=params_buffer)


def _looks_like_json(data: bytes) -> bool:
    return data[:64].lstrip()[:1] == b"{"


def _load_files(
    model_path: Path, params_path: Path | None, fmt: str, separate_dir: Path | None = None
) -> LoadedModel:
    """Load a program file plus its params: a combined file, else one file per variable in
    `separate_dir`, else none (only if the program has no persistable variables)."""
    if model_path.suffix == ".json":
        return _load_pir(model_path, params_path)
    data = _read(model_path, "model file")
    if _looks_like_json(data):
        return _load_pir(model_path, params_path)
    program = parse_program(data, str(model_path))
    params: dict[str, LoDTensor] = {}
    where: Path | None = params_path
    if params_path is not None:
        params = load_params_combined(program, _read(params_path, "params file"), str(params_path))
    elif program.persistable_names():
        if separate_dir is None:
            raise ModelFormatError(
                f"{model_path}: the program has {len(program.persistable_names())} persistable variables "
                f"but no params file was given or found (expected {model_path.with_suffix('.pdiparams')})"
            )
        params, fmt, where = load_params_separate(program, separate_dir), "non-combined", separate_dir
    return LoadedModel(program, params, fmt, str(model_path), str(where) if where else None)


def _same_stem_params(model_path: Path) -> Path | None:
    p = model_path.with_suffix(".pdiparams")
    return p if p.is_file() else None


def _load_dir(model_dir: Path) -> LoadedModel:
    if not model_dir.is_dir():
        raise ModelFormatError(f"model folder not found: {model_dir}")
    inf = model_dir / "inference.pdmodel"
    if inf.is_file():
        return _load_files(inf, _same_stem_params(inf), "pdmodel")
    if (model_dir / "inference.json").is_file():
        params = model_dir / "inference.pdiparams"
        return _load_pir(model_dir / "inference.json", params if params.is_file() else None)
    for model_name, params_name in (("model", "params"), ("__model__", "__params__")):
        if (model_dir / model_name).is_file() and (model_dir / params_name).is_file():
            return _load_files(model_dir / model_name, model_dir / params_name, "combined")
    if (model_dir / "__model__").is_file():
        return _load_files(model_dir / "__model__", None, "non-combined", separate_dir=model_dir)
    pdmodels = sorted(p for p in model_dir.glob("*.pdmodel") if p.is_file())
    if len(pdmodels) == 1:
        return _load_files(pdmodels[0], _same_stem_params(pdmodels[0]), "pdmodel")
    if len(pdmodels) > 1:
        raise ModelFormatError(
            f"{model_dir}: several programs ({', '.join(p.name for p in pdmodels)}); pass model_file and param_file"
        )
    jsons = [p for p in sorted(model_dir.glob("*.json")) if _same_stem_params(p)]
    if len(jsons) == 1:
        return _load_pir(jsons[0], _same_stem_params(jsons[0]))
    raise ModelFormatError(
        f"no Paddle model found in {model_dir}: looked for inference.pdmodel(+.pdiparams), inference.json, "
        "model+params, __model__(+__params__ or one file per parameter), *.pdmodel"
    )


def load_model(
    model_dir: PathLike | None = None,
    model_file: PathLike | None = None,
    param_file: PathLike | None = None,
    model_buffer: bytes | bytearray | memoryview | None = None,
    param_buffer: bytes | bytearray | memoryview | None = None,
) -> LoadedModel:
    """Load a model from a folder, from a program (+ params) file, or from in-memory buffers."""
    if model_buffer is not None:
        if _looks_like_json(bytes(model_buffer[:64])):
            return _load_pir(None, None, json_buffer=bytes(model_buffer), params_buffer=param_buffer)
        program = parse_program(model_buffer, "<model buffer>")
        params: dict[str, LoDTensor] = {}
        if param_buffer is not None:
            params = load_params_combined(program, param_buffer, "<params buffer>")
        elif program.persistable_names():
            raise ModelFormatError(
                f"<model buffer>: the program has {len(program.persistable_names())} persistable variables "
                "but no params buffer was given"
            )
        return LoadedModel(program, params, "buffer")
    if model_file is not None:
        model_path = Path(model_file)
        params_path = Path(param_file) if param_file is not None else _same_stem_params(model_path)
        fmt = "pdmodel" if model_path.suffix == ".pdmodel" else "combined"
        return _load_files(model_path, params_path, fmt, Path(model_dir) if model_dir is not None else None)
    if model_dir is not None:
        return _load_dir(Path(model_dir))
    raise ModelFormatError("load_model needs model_dir, model_file or model_buffer")


def save_params_combined(program: Program, params: dict[str, LoDTensor], path: PathLike) -> None:
    """Write the program's persistable tensors, sorted by name, into one file (Paddle's combined layout)."""
    names = program.persistable_names()
    _check_params_match(names, params)
    with open(path, "wb") as f:
        for name in names:
            for chunk in lod_tensor_chunks(params[name]):
                f.write(chunk)


def save_params_separate(program: Program, params: dict[str, LoDTensor], model_dir: PathLike) -> None:
    """Write each persistable tensor to its own file in `model_dir`, named after the variable."""
    names = program.persistable_names()
    _check_params_match(names, params)
    model_dir = Path(model_dir)
    for name in names:
        path = _var_file(model_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            for chunk in lod_tensor_chunks(params[name]):
                f.write(chunk)


def _check_params_match(names: list[str], params: dict[str, LoDTensor]) -> None:
    missing = [n for n in names if n not in params]
    unused = sorted(set(params) - set(names))
    if missing or unused:
        raise ModelFormatError(
            "params do not match the program's persistable variables: "
            + (f"missing {missing[:10]}{' ...' if len(missing) > 10 else ''}" if missing else "")
            + ("; " if missing and unused else "")
            + (f"not in the program {unused[:10]}{' ...' if len(unused) > 10 else ''}" if unused else "")
        )


def save_model(
    program: Program, params: dict[str, LoDTensor], model_path: PathLike, params_path: PathLike | None = None
) -> None:
    """Write the program to `model_path` and the params to `params_path` (combined) or, when it is
    None, one file per parameter next to the program (non-combined)."""
    model_path = Path(model_path)
    data = serialize_program(program)
    if params_path is not None:
        save_params_combined(program, params, params_path)
    else:
        save_params_separate(program, params, model_path.parent)
    with open(model_path, "wb") as f:
        f.write(data)
