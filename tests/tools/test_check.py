"""`pdlite check`: every path is exercised and a wrong reference is reported as a failure."""
from __future__ import annotations

import shutil

import numpy as np

from pdlite.tools.cli import main
from tests.conftest import model_dir


def test_check_passes_on_a_model_and_fails_on_a_bad_reference(capsys, tmp_path):
    src = model_dir("transformer_encoder")
    good = tmp_path / "good"
    shutil.copytree(src, good)
    rc = main(["check", str(good), "--paths", "host,host-unfused,nb,delegate"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for path in ("host ", "host-unfused", "nb ", "delegate"):
        assert any(line.strip().startswith(path.strip()) and " ok " in line for line in out.splitlines()), out
    assert "0 run(s) / 0 conv op(s) replaced" in out  # a transformer has no convolutions

    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    z = dict(np.load(bad / "case.npz"))
    key = next(k for k in z if k.startswith("out:"))
    z[key] = z[key] * 1.01
    np.savez(bad / "case.npz", **z)
    rc = main(["check", str(bad), "--paths", "host"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL max rel err" in out and "SOME CHECKS FAILED" in out


def test_check_discovers_model_folders_in_a_parent(capsys, tmp_path):
    shutil.copytree(model_dir("ppocr_cls_v2"), tmp_path / "zoo" / "cls")
    rc = main(["check", str(tmp_path / "zoo"), "--paths", "delegate"])
    out = capsys.readouterr().out
    assert rc == 0 and "== " in out and "cls" in out
    # (residual adds fused into the convs: longer runs; the squeeze-excitation blocks' 1x1 convs are inside
    # squeeze_excitation ops, host ops the reference delegate leaves alone)
    assert "10 run(s) / 35 conv op(s) replaced" in out
