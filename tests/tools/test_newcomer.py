"""A newcomer's first commands (issue 38): a flag naming an input the model lacks, a bad flag value, a stray file in
a batch folder, a plain input path, an unknown device, a txt graph, pdlite-opt's warning, the inspect table, and
every flag's help with its default. Errors are one line (argparse's usage line aside), never a traceback."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pytest

from pdlite.tools.cli import build_parser, main
from tests.conftest import REPO, model_dir

CLS = "ppocr_cls_v2"  # one input x [-1, 3, -1, -1], output softmax_0.tmp_0 [N, 2]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `pdlite ARGV`; argparse's exit (status 2) included."""
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = int(e.code or 0)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line_error(err: str, prog: str) -> str:
    """The error line of stderr: no traceback, one `prog: error: ...` line (after argparse's usage lines)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1 and errors[0].startswith(prog) and errors[0] == lines[-1], err
    return errors[0]


@pytest.mark.parametrize("command", ["bench", "run"])
def test_shape_of_an_input_the_model_lacks_is_refused(capsys, command):
    """`--shape y=...` on a model whose input is x ran the default shape silently (batch-1 numbers for a batch-2
    benchmark); now an error naming the model's inputs."""
    extra = ["--repeats", "1", "--warmup", "0"] if command == "bench" else ["--random"]
    rc, _, err = _cli(capsys, command, str(model_dir(CLS)), "--shape", "y=2,3,48,64", *extra, "--device", "host")
    assert rc == 1
    assert "--shape y: the model has no input 'y'; its inputs are ['x']" in _one_line_error(err, f"pdlite {command}")


def test_shape_forms_of_the_peer_tools(capsys):
    """NAME=dims, NAME[dims] (benchmark_app's -shape) and bare dims (Paddle-Lite's --input_shape) on one input."""
    d = str(model_dir(CLS))
    for flag, value in (("--shape", "x=2,3,48,64"), ("-shape", "x[2,3,48,64]"), ("--input_shape", "2,3,48,64")):
        rc, out, err = _cli(capsys, "bench", d, flag, value, "-niter", "1", "--warmup", "0", "-d", "host")
        assert rc == 0, err
        assert "inputs: x [2, 3, 48, 64] float32" in out and "latency over 1 runs" in out


@pytest.mark.parametrize("argv,what", [
    (["bench", "--repeats", "0"], "argument --repeats/--niter/-niter/-r: must be >= 1, got 0"),
    (["bench", "--repeats", "-2"], "argument --repeats/--niter/-niter/-r: must be >= 1, got -2"),
    (["bench", "--repeats", "many"], "argument --repeats/--niter/-niter/-r: expected an integer >= 1, got 'many'"),
    (["bench", "--warmup", "-1"], "argument --warmup: must be >= 0, got -1"),
    (["bench", "--threads", "0"], "argument --threads/-nthreads/-x: must be >= 1, got 0"),
    (["run", "--threads", "1.5"], "argument --threads/-nthreads/-x: expected an integer >= 1, got '1.5'"),
    (["run", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["batch", "IN", "-o", "OUT", "--workers", "0"], "argument --workers: must be >= 1, got 0"),
    (["batch", "IN", "-o", "OUT", "--batch-size", "-1"], "argument --batch-size: must be >= 1, got -1"),
])
def test_bad_flag_values_are_argparse_errors(capsys, argv, what):
    """`--repeats 0` ended in a traceback (min() of an empty sequence): every such value is argparse's error."""
    rc, _, err = _cli(capsys, argv[0], str(model_dir(CLS)), *argv[1:])
    assert rc == 2
    assert _one_line_error(err, f"pdlite {argv[0]}").endswith(what)


@pytest.mark.parametrize("argv,what", [
    (["run", "--input", "x=NOWHERE.npy"], "--input x: cannot read 'NOWHERE.npy'"),
    (["run", "--input", "NOWHERE.npy"], "--input x: cannot read 'NOWHERE.npy'"),
    (["run", "--check", "NOWHERE.npz"], "--check: cannot read 'NOWHERE.npz'"),
    (["run", "--random", "--shape", "x=1,3,a,b"], "--shape x='1,3,a,b': expected comma-separated integers"),
    (["run", "--random", "--shape", "x=1,3,8,8", "--context", "NOEQUALS"], "--context 'NOEQUALS': expected NAME=VALUE"),
    (["bench", "--input", "q=NOWHERE.npy"], "--input q: the model has no input 'q'; its inputs are ['x']"),
    (["graph", "-o", "g"], "cannot write 'g': name it .dot or .gv"),
    (["check", "--paths", "host,bogus"], "--paths 'host,bogus': expected a comma-separated subset of host,"),
    (["export-onnx", "-o", "m.onnx", "--shape", "y=1,3,48,64"], "--shape y: the model has no input 'y'"),
])
def test_bad_values_are_one_line_pdlite_errors(capsys, tmp_path, argv, what):
    os.chdir(tmp_path)
    rc, _, err = _cli(capsys, argv[0], str(model_dir(CLS)), *argv[1:])
    assert rc == 1
    assert what in _one_line_error(err, f"pdlite {argv[0]}")


def test_missing_model_is_a_one_line_error(capsys, tmp_path):
    for command in ("run", "bench", "inspect", "graph"):
        argv = [command, str(tmp_path / "no_model")] + (["-o", str(tmp_path / "g.dot")] if command == "graph" else [])
        rc, _, err = _cli(capsys, *argv)
        assert rc == 1 and "no_model" in _one_line_error(err, f"pdlite {command}")


def test_run_takes_a_plain_input_path_on_a_one_input_model(capsys, tmp_path):
    """onnxruntime's and OpenVINO's tools take `-i x.npy`; `pdlite run M --input x.npy` said "expected NAME=VALUE"."""
    x = np.random.default_rng(3).standard_normal((2, 3, 48, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    d = str(model_dir(CLS))
    rc, out, err = _cli(capsys, "run", d, "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "a.npz"),
                        "--device", "host")
    assert rc == 0, err
    assert "input  x: shape [2, 3, 48, 64] float32" in out
    rc, _, err = _cli(capsys, "run", d, "-i", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "b.npz"), "-d", "host")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["softmax_0.tmp_0"],
                                  np.load(tmp_path / "b.npz")["softmax_0.tmp_0"])


def test_unknown_device_lists_every_valid_choice(capsys):
    from pdlite.nnadapter.registry import DRIVERS

    rc, _, err = _cli(capsys, "run", str(model_dir(CLS)), "--random", "--shape", "x=1,3,48,64", "--device", "gpu")
    assert rc == 1
    line = _one_line_error(err, "pdlite run")
    choices = line.split("choose one of ")[1].split(" (installed")[0].split(", ")
    assert choices[:2] == ["host", "auto"] and sorted(choices[2:]) == sorted(DRIVERS) and DRIVERS


def test_graph_txt_does_not_claim_graphviz(capsys, tmp_path):
    rc, _, err = _cli(capsys, "graph", str(model_dir(CLS)), "-o", str(tmp_path / "g.txt"))
    assert rc == 1
    line = _one_line_error(err, "pdlite graph")
    assert "g.txt" in line and ".dot" in line and "needs graphviz" not in line and "not installed" not in line
    assert not (tmp_path / "g.txt").exists()


def test_inspect_shows_no_all_dash_column(capsys):
    """The NNAdapter target's column (its one kernel is the subgraph op) was all '-' beside the device columns."""
    rc, out, err = _cli(capsys, "inspect", str(model_dir(CLS)))
    assert rc == 0, err
    table = out.split("support (Y = a kernel or converter exists):\n")[1].split("\n\n")[0].splitlines()
    header = table[0].split()[2:]
    assert "NNAdapter" not in header and "Host" in header
    rows = [ln.split()[1:] for ln in table[1:] if not ln.strip().startswith("(")]
    assert rows and all(len(r) == len(header) for r in rows)
    for i, col in enumerate(header):
        assert any(r[i] == "Y" for r in rows), f"column {col} is all '-'"


def test_opt_warning_is_one_line(tmp_path):
    """`pdlite-opt --valid_targets=arm` printed Python's warning with the file, line and source line."""
    code = "import sys; from pdlite.tools.opt import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "--valid_targets=arm", f"--model_dir={model_dir(CLS)}",
                           f"--optimize_out={tmp_path / 'm'}"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["pdlite-opt: warning: Place(ARM, ...): pdlite has no ARM kernels for this "
                                        "model; its ops run on the host (x86) kernels"]


def _image(path, img: np.ndarray) -> None:
    import cv2

    params = [cv2.IMWRITE_WEBP_QUALITY, 101] if str(path).endswith(".webp") else []  # > 100: lossless
    assert cv2.imwrite(str(path), img, params)


def test_batch_skips_stray_files_and_reads_tif_and_webp(capsys, tmp_path):
    """A readme.txt in the folder is skipped and listed (it was refused); .tif/.tiff/.webp are read like .png
    (`pdlite ocr` read them, `pdlite batch` did not): the same pixels give the same outputs."""
    pytest.importorskip("cv2", reason="needs pip install pdlite[ocr] (OpenCV reads the images)")
    img = np.random.default_rng(5).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    d = tmp_path / "in"
    d.mkdir()
    for name in ("a.png", "b.tif", "c.tiff", "d.webp"):
        _image(d / name, img)
    (d / "readme.txt").write_text("what these images are")
    rc, out, err = _cli(capsys, "batch", str(model_dir(CLS)), str(d), "-o", str(tmp_path / "out"))
    assert rc == 0, err
    assert "4 input(s)" in out
    assert "pdlite batch: skipped 1 file(s) that are not" in err and "readme.txt" in err and "Traceback" not in err
    ref = np.load(tmp_path / "out" / "a.npz")["softmax_0.tmp_0"]
    assert ref.shape == (1, 2)
    for stem in "bcd":
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{stem}.npz")["softmax_0.tmp_0"], ref)


def test_image_suffixes_have_one_home():
    from pdlite.tools import batch, common, ocr

    assert batch.IMAGE_SUFFIXES is common.IMAGE_SUFFIXES and ocr.IMAGE_EXTS is common.IMAGE_SUFFIXES
    assert {".tif", ".tiff", ".webp", ".png", ".jpg"} <= set(common.IMAGE_SUFFIXES)


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_argument_has_help_and_its_default(command):
    """bench, inspect, graph and check left positionals and --warmup/--repeats/--threads/--devices without help or
    default: every argument of every command has help, and `-h` shows each non-empty default."""
    p = _commands()[command]
    assert p.description, f"pdlite {command} -h has no description"
    p.format_help()  # formats every help string
    for a in p._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        name = a.option_strings[0] if a.option_strings else a.dest
        assert a.help, f"pdlite {command} {name}: no help text"
        shown = p._get_formatter()._expand_help(a)  # the text `-h` prints for it
        if a.default is not None and a.default is not False and a.default not in ([], ""):
            assert "default" in shown, f"pdlite {command} {name}: help does not show the default {a.default!r}"


def test_opt_arguments_have_help():
    from pdlite.tools.opt import build_parser as opt_parser

    p = opt_parser()
    for a in p._actions:
        assert a.help, f"pdlite-opt {a.option_strings}: no help text"
    text = p.format_help()
    assert "(default: host)" in text and "(default: )" not in text
