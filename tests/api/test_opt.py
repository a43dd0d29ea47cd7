"""Opt and pdlite-opt: valid targets, the op tables, opt -> .nb -> MobileConfig on every legacy model."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pdlite.api.opt import parse_valid_targets
from pdlite.core.types import DataLayoutType, Place, PrecisionType, TargetType
from pdlite.errors import ConfigError
from pdlite.lite import CxxConfig, MobileConfig, Opt, create_paddle_predictor
from pdlite.model_parser.naive_buffer import load_naive_buffer
from pdlite.tools.opt import main as opt_main
from tests.api.test_nb import TINY_REF, TINY_X, write_tiny_model
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir

REL = 1e-4  # max|got - ref| <= 1e-4 * max|ref|, as the CxxPredictor tests


def _mobile(path) -> object:
    cfg = MobileConfig()
    cfg.set_model_from_file(str(path))
    return create_paddle_predictor(cfg)


def _rows(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """Header and rows (by first cell) of a table printed by pdlite-opt (cells split on 2+ spaces)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    split = [re.split(r" {2,}", ln.strip()) for ln in lines]
    header = split[0]
    return header, {r[0]: r for r in split[2:] if len(r) > 1}


def _column_marks(text: str, op: str) -> dict[str, str]:
    """{column name: cell} of `op`'s row, read at each header name's character position (cells are left-aligned;
    an empty cell reads as "")."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = lines[0]
    row = next(ln for ln in lines[2:] if ln.split()[0] == op)
    marks = {}
    for m in re.finditer(r"\S+", header):
        cell = row[m.start():]
        marks[m.group()] = cell.split()[0] if cell[:1].strip() else ""
    return marks


# -- valid targets --------------------------------------------------------------------------------

def test_parse_valid_targets():
    assert parse_valid_targets("x86,host") == [Place(TargetType.X86), Place(TargetType.Host)]
    assert parse_valid_targets(" ARM , Host,arm") == [Place(TargetType.ARM), Place(TargetType.Host)]
    p = Place(TargetType.Host, PrecisionType.Any, DataLayoutType.Any)
    assert parse_valid_targets([p, "x86", TargetType.Host]) == [p, Place(TargetType.X86), Place(TargetType.Host)]
    with pytest.raises(ConfigError, match="unknown target 'gpu'.*x86"):
        parse_valid_targets("x86,gpu")
    with pytest.raises(ConfigError, match="at least one"):
        parse_valid_targets(" , ")
    with pytest.raises(ConfigError):
        Opt().set_model_type("onnx")


# -- Opt on the tiny model ------------------------------------------------------------------------

def test_opt_run_writes_nb(tmp_path):
    d = write_tiny_model(tmp_path / "tiny")
    opt = Opt()
    opt.set_model_dir(str(d))
    opt.set_valid_places("x86,host")
    opt.set_optimize_out(str(tmp_path / "out" / "tiny_opt"))
    opt.set_model_type("naive_buffer")
    path = opt.run()
    assert path == str(tmp_path / "out" / "tiny_opt.nb")
    m = load_naive_buffer(path)
    assert opt.last_report["ops_before"] == 3 and opt.last_report["ops_after"] == len(m.program.main.ops) <= 3
    assert m.valid_places() == [Place(TargetType.X86), Place(TargetType.Host)]
    assert m.meta["source"] == "tiny" and m.meta["passes"]
    np.testing.assert_allclose(_mobile(path).predict([TINY_X])[0], TINY_REF, rtol=1e-6)
    text = Opt().print_model_ops(path)  # a .nb works too: its (optimized) ops
    assert _column_marks(text, "elementwise_mul")["Host"] == "Y" and "op types" in text
    assert f"({len(m.program.main.ops)} ops)" in text


def test_run_optimize_paddlelite_order_and_nb_suffix_kept(tmp_path):
    d = write_tiny_model(tmp_path / "tiny")
    out = Opt().run_optimize("", str(d / "inference.pdmodel"), str(d / "inference.pdiparams"), "naive_buffer",
                             "host", str(tmp_path / "m.nb"))
    assert out == str(tmp_path / "m.nb")
    np.testing.assert_allclose(_mobile(out).predict([TINY_X])[0], TINY_REF, rtol=1e-6)


def test_protobuf_output_loads_in_cxx(tmp_path):
    d = write_tiny_model(tmp_path / "tiny")
    opt = Opt()
    opt.set_model_dir(str(d))
    opt.set_model_type("protobuf")
    opt.set_optimize_out(str(tmp_path / "pb"))
    out = opt.run()
    assert out.endswith("pb.pdmodel") and (tmp_path / "pb.pdiparams").is_file()
    cfg = CxxConfig()
    cfg.set_model_file(out)
    cfg.set_param_file(str(tmp_path / "pb.pdiparams"))
    np.testing.assert_allclose(create_paddle_predictor(cfg).predict([TINY_X])[0], TINY_REF, rtol=1e-6)


def test_opt_without_model_or_output():
    with pytest.raises(ConfigError, match="set_optimize_out"):
        Opt().run()
    opt = Opt()
    opt.set_optimize_out("x")
    with pytest.raises(ConfigError, match="set_model_dir"):
        opt.run()


# -- the op tables --------------------------------------------------------------------------------

def test_print_all_ops(capsys):
    assert opt_main(["--print_all_ops"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("OP_name") and "Host" in text.splitlines()[0]
    assert _column_marks(text, "relu")["Host"] == "Y"
    assert _column_marks(text, "elementwise_add")["Host"] == "Y"
    assert text.rstrip().endswith("ops")


def test_print_supported_ops(capsys):
    assert opt_main(["--print_supported_ops=true", "--valid_targets=x86,host"]) == 0
    text = capsys.readouterr().out
    assert "Supported OPs on 'X86'" in text and "Supported OPs on 'Host'" in text
    host_part = text.split("Supported OPs on 'Host'")[1]
    assert " relu" in host_part and " elementwise_add" in host_part
    assert opt_main(["--print_supported_ops=false", "--print_all_ops=0"]) == 2  # nothing asked: usage


def test_print_model_ops_tiny_and_unsupported(tmp_path, capsys):
    d = write_tiny_model(tmp_path / "ok")
    assert opt_main(["--print_model_ops", f"--model_dir={d}", "--valid_targets=x86"]) == 0
    text = capsys.readouterr().out
    marks = _column_marks(text, "relu")
    assert marks["X86"] == "Y" and marks["Host"] == "Y"
    assert "All 3 op types (3 ops)" in text
    bad = write_tiny_model(tmp_path / "bad", op3="my_custom_op")
    assert opt_main(["--print_model_ops", "--model_dir", str(bad)]) == 1
    text = capsys.readouterr().out
    assert _column_marks(text, "my_custom_op")["Host"] == "-"
    assert "not supported" in text and "my_custom_op" in text.splitlines()[-1]


def test_print_model_ops_real_model(capsys):
    d = model_dir("mobilenet_v3_small")
    code = opt_main(["--print_model_ops", "--model_dir", str(d), "--valid_targets", "host"])
    text = capsys.readouterr().out
    header, rows = _rows(text)
    assert header[:3] == ["OP_name", "count", "Host"]
    assert "conv2d" in rows and "feed" not in rows and "fetch" not in rows
    assert int(rows["conv2d"][1]) > 10
    assert code == 0 and "All " in text.splitlines()[-1]
    assert _column_marks(text, "conv2d")["Host"] == "Y"


# -- the command ----------------------------------------------------------------------------------

def test_cli_optimizes(tmp_path, capsys):
    d = write_tiny_model(tmp_path / "tiny")
    out = tmp_path / "cli_opt"
    assert opt_main([f"--model_dir={d}", f"--optimize_out={out}", "--valid_targets=host"]) == 0
    text = capsys.readouterr().out
    assert f"Saved the optimized model to {out}.nb" in text
    assert f"3 ops -> {len(load_naive_buffer(f'{out}.nb').program.main.ops)} ops" in text
    np.testing.assert_allclose(_mobile(f"{out}.nb").predict([TINY_X])[0], TINY_REF, rtol=1e-6)


def test_cli_errors(tmp_path, capsys):
    assert opt_main([]) == 2
    d = write_tiny_model(tmp_path / "tiny")
    assert opt_main([f"--model_dir={d}", "--optimize_out=x", "--valid_targets=gpu"]) == 1
    assert "unknown target 'gpu'" in capsys.readouterr().err
    assert opt_main([f"--model_dir={tmp_path / 'missing'}", f"--optimize_out={tmp_path / 'x'}"]) == 1
    assert "pdlite-opt: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        opt_main(["--optimize_out_type=onnx"])


# -- every legacy model: opt -> .nb -> MobileConfig -------------------------------------------------

@pytest.mark.parametrize("name", LEGACY_MODELS)
def test_opt_then_mobile_matches_reference(name, tmp_path):
    ins, outs = load_case(name)
    opt = Opt()
    opt.set_model_dir(str(model_dir(name)))
    opt.set_valid_places("x86,host")
    opt.set_optimize_out(str(tmp_path / name))
    path = opt.run()
    pred = _mobile(path)
    assert pred.get_output_names() == list(outs)
    got = pred.predict({n: ins[n] for n in pred.get_input_names()})
    for g, (n, ref) in zip(got, outs.items()):
        assert_close_rel(g, ref, REL, f"{name}:{n} via .nb")
