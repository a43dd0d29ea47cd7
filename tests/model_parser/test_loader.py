"""Model folders and files: layout detection, params loading and checking, byte-exact saving."""
from __future__ import annotations

import os
import re
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from pdlite.errors import ModelFormatError
from pdlite.model_parser import (
    LoDTensor,
    load_model,
    load_params_combined,
    parse_program,
    save_model,
    write_lod_tensor,
)
from pdlite.model_parser.loader import save_params_combined, save_params_separate
from tests.conftest import PIR_MODELS, find_model
from tests.model_parser.conftest import LAYOUTS, legacy_model

FORMATS = {"inference.pdmodel": "pdmodel", "__model__": "combined"}


def _link(src: Path, dst: Path) -> None:
    try:
        os.symlink(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_load_every_model(name):
    d = legacy_model(name)
    model_name, params_name = LAYOUTS[name]
    m = load_model(d)
    assert m.format == ("non-combined" if params_name is None else FORMATS[model_name])
    assert m.model_path == str(d / model_name)
    assert m.params_path == str(d / params_name if params_name else d)
    names = m.program.persistable_names()
    assert list(m.params) == names and len(names) > 30
    for block in m.program.blocks:
        for v in block.vars.values():
            if v.name in m.params:
                t = m.params[v.name]
                assert t.shape == v.shape and t.var_type == v.dtype and t.lod == []
                assert t.array.flags.writeable and t.array.flags.owndata and t.array.flags.aligned


def test_params_match_files_independently():
    """The combined file is the sorted params back to back: check offsets and values by hand."""
    d = legacy_model("transformer_encoder")
    m = load_model(d)
    data = (d / "inference.pdiparams").read_bytes()
    pos = 0
    for name in sorted(m.params):
        t = m.params[name]
        assert data[pos : pos + 4] == b"\0\0\0\0"
        (desc_len,) = np.frombuffer(data, "<i4", 1, pos + 16)
        pos += 20 + int(desc_len)
        n = t.array.nbytes
        assert np.array_equal(np.frombuffer(data, "<f4", t.array.size, pos).reshape(t.shape), t.array), name
        pos += n
    assert pos == len(data)
    emb = m.params[m.program.main.ops[1].input("W")] if m.program.main.ops[1].type == "lookup_table_v2" else None
    assert emb is None or emb.shape == [1000, 128]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_save_reproduces_original_bytes(name, tmp_path):
    d = legacy_model(name)
    model_name, params_name = LAYOUTS[name]
    m = load_model(d)
    if params_name is None:
        save_model(m.program, m.params, tmp_path / "__model__")
        files = [model_name] + m.program.persistable_names()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)
    else:
        save_model(m.program, m.params, tmp_path / model_name, tmp_path / params_name)
        files = [model_name, params_name]
    for f in files:
        assert (tmp_path / f).read_bytes() == (d / f).read_bytes(), f


def _layout_dir(tmp_path: Path, files: dict[str, Path]) -> Path:
    out = tmp_path / "m"
    out.mkdir()
    for dst, src in files.items():
        _link(src, out / dst)
    return out


def test_layout_detection(tmp_path):
    d = legacy_model("transformer_encoder")
    model, params = d / "inference.pdmodel", d / "inference.pdiparams"
    cases = [
        ({"inference.pdmodel": model, "inference.pdiparams": params}, "pdmodel", "inference.pdmodel"),
        ({"model": model, "params": params}, "combined", "model"),
        ({"__model__": model, "__params__": params}, "combined", "__model__"),
        ({"net.pdmodel": model, "net.pdiparams": params, "README": model}, "pdmodel", "net.pdmodel"),
    ]
    ref = load_model(d)
    for i, (files, fmt, model_file) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        out = _layout_dir(tmp_path / str(i), files)
        m = load_model(out)
        assert (m.format, Path(m.model_path).name) == (fmt, model_file)
        assert list(m.params) == list(ref.params)
        assert all(m.params[k] == ref.params[k] for k in ref.params)


def test_non_combined_layout_detection(tmp_path):
    d = legacy_model("mobilenet_v3_small_noncombined")
    out = tmp_path / "nc"
    out.mkdir()
    for f in d.iterdir():
        if f.name not in ("case.npz", "README.txt"):
            _link(f, out / f.name)
    m = load_model(out)
    assert m.format == "non-combined" and m.params_path == str(out) and len(m.params) == 210
    # the same through model_file + model_dir
    m2 = load_model(model_dir=out, model_file=out / "__model__")
    assert m2.format == "non-combined" and list(m2.params) == list(m.params)
    twin = find_model("mobilenet_v3_small")
    if twin is not None:  # same weights as the combined twin
        ref = load_model(twin)
        assert all(m.params[k] == ref.params[k] for k in ref.params)
    os.remove(out / "conv2d_3.w_0")
    with pytest.raises(ModelFormatError, match=r"no file for persistable variable 'conv2d_3.w_0'.*conv2d_3.w_0"):
        load_model(out)


def test_explicit_files_and_buffers():
    d = legacy_model("transformer_encoder")
    model, params = d / "inference.pdmodel", d / "inference.pdiparams"
    ref = load_model(d)
    a = load_model(model_file=model, param_file=params)
    b = load_model(model_file=str(model))  # same-stem .pdiparams found
    c = load_model(model_buffer=model.read_bytes(), param_buffer=params.read_bytes())
    e = load_model(model_buffer=bytearray(model.read_bytes()), param_buffer=memoryview(params.read_bytes()))
    assert (a.format, b.format, c.format, e.format) == ("pdmodel", "pdmodel", "buffer", "buffer")
    assert c.model_path is None and c.params_path is None
    for m in (a, b, c, e):
        assert list(m.params) == list(ref.params) and all(m.params[k] == ref.params[k] for k in ref.params)
    with pytest.raises(ModelFormatError, match="no params buffer was given"):
        load_model(model_buffer=model.read_bytes())


def test_missing_things_are_named(tmp_path):
    d = legacy_model("transformer_encoder")
    out = _layout_dir(tmp_path, {"inference.pdmodel": d / "inference.pdmodel"})
    with pytest.raises(ModelFormatError, match=r"no params file was given or found \(expected .*inference.pdiparams\)"):
        load_model(out)
    with pytest.raises(ModelFormatError, match="params file not found: .*nope.pdiparams"):
        load_model(model_file=out / "inference.pdmodel", param_file=out / "nope.pdiparams")
    with pytest.raises(ModelFormatError, match="model file not found: .*absent.pdmodel"):
        load_model(model_file=out / "absent.pdmodel", param_file=d / "inference.pdiparams")
    with pytest.raises(ModelFormatError, match="model folder not found"):
        load_model(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFormatError, match="no Paddle model found in .*empty"):
        load_model(empty)
    _link(d / "inference.pdmodel", empty / "a.pdmodel")
    _link(d / "inference.pdmodel", empty / "b.pdmodel")
    with pytest.raises(ModelFormatError, match="several programs"):
        load_model(empty)
    with pytest.raises(ModelFormatError, match="needs model_dir, model_file or model_buffer"):
        load_model()


def test_params_disagreeing_with_program(tmp_path):
    d = legacy_model("transformer_encoder")
    m = load_model(d)
    names = m.program.persistable_names()
    data = (d / "inference.pdiparams").read_bytes()
    # one tensor short: cut at the start of the last tensor
    last = write_lod_tensor(m.params[names[-1]])
    assert data.endswith(last)
    with pytest.raises(ModelFormatError, match=rf"holds {len(names) - 1} tensors .* {names[-1]!r}"):
        load_params_combined(m.program, data[: -len(last)], "p.pdiparams")
    with pytest.raises(ModelFormatError, match="4 bytes left over"):
        load_params_combined(m.program, data + b"\0" * 4, "p.pdiparams")
    # a parameter with another shape than its VarDesc declares
    params = dict(m.params)
    name = names[0]
    params[name] = LoDTensor(np.zeros(m.params[name].array.size + 1, np.float32))
    save_params_combined(m.program, params, tmp_path / "bad.pdiparams")
    expected = m.params[name].shape
    msg = rf"{name!r} has shape \[{params[name].shape[0]}\], but the program declares shape {re.escape(str(expected))}"
    with pytest.raises(ModelFormatError, match=msg):
        load_model(model_file=d / "inference.pdmodel", param_file=tmp_path / "bad.pdiparams")
    # saving checks the params against the program
    del params[name]
    params["stray"] = LoDTensor(np.zeros(1, np.float32))
    with pytest.raises(ModelFormatError, match=rf"missing \[{name!r}\]; not in the program \['stray'\]"):
        save_params_separate(m.program, params, tmp_path)
    # a params file from another model
    other = find_model("mobilenet_v3_small")
    if other is not None:
        with pytest.raises(ModelFormatError):
            load_model(model_file=d / "inference.pdmodel", param_file=other / "inference.pdiparams")


def test_program_without_params(tmp_path):
    d = legacy_model("transformer_encoder")
    prog = parse_program((d / "inference.pdmodel").read_bytes())
    for b in prog.blocks:
        for v in b.vars.values():
            v.persistable = False
    save_model(prog, {}, tmp_path / "inference.pdmodel")
    m = load_model(tmp_path)
    assert m.params == {} and m.params_path is None and m.format == "pdmodel"


def test_unsafe_var_names_rejected(tmp_path):
    from pdlite.core.program import VarDesc
    from pdlite.model_parser.program_io import serialize_program

    d = legacy_model("transformer_encoder")
    prog = parse_program((d / "inference.pdmodel").read_bytes())
    prog.main.vars["../escape"] = VarDesc("../escape", shape=[1], persistable=True)
    (tmp_path / "__model__").write_bytes(serialize_program(prog))
    with pytest.raises(ModelFormatError, match="'../escape' cannot be a file name"):
        load_model(tmp_path)


def test_pir_hook_without_pir_module(tmp_path, monkeypatch):
    out = _layout_dir(tmp_path, {"inference.json": Path(__file__)})
    monkeypatch.setitem(sys.modules, "pdlite.model_parser.pir", None)  # import fails as if absent
    with pytest.raises(ModelFormatError, match=r"PIR .* handled by pdlite.model_parser.pir"):
        load_model(out)
    with pytest.raises(ModelFormatError, match="pdlite.model_parser.pir"):
        load_model(model_buffer=b' {"program": {}}')


def test_pir_hook_delegates(tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("pdlite.model_parser.pir")
    fake.load_pir = lambda *a, **k: calls.append((a, k)) or "loaded"
    monkeypatch.setitem(sys.modules, "pdlite.model_parser.pir", fake)
    out = _layout_dir(tmp_path, {"inference.json": Path(__file__), "inference.pdiparams": Path(__file__)})
    assert load_model(out) == "loaded"
    assert calls[-1][0] == (out / "inference.json", out / "inference.pdiparams")
    assert load_model(model_file=out / "inference.json") == "loaded"
    assert load_model(model_buffer=b'{"a": 1}', param_buffer=b"p") == "loaded"
    assert calls[-1][1] == {"json_buffer": b'{"a": 1}', "params_buffer": b"p"}
    single = tmp_path / "single"
    single.mkdir()
    _link(Path(__file__), single / "net.json")
    _link(Path(__file__), single / "net.pdiparams")
    assert load_model(single) == "loaded" and calls[-1][0][0] == single / "net.json"


@pytest.mark.parametrize("name", PIR_MODELS)
def test_pir_model_folder_goes_to_pir(name):
    d = find_model(name)
    if d is None:
        pytest.skip(f"model {name!r} not available")
    try:
        m = load_model(d)
    except ModelFormatError as e:
        assert "pdlite.model_parser.pir" in str(e) or "PIR" in str(e)
    else:
        assert m.format == "pir-json"
