"""`pdlite batch` without Ray: in-process and process-pool runs equal one plain predictor exactly (1 thread);
images are preprocessed as documented; bad inputs give pdlite errors naming the file."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.api import CxxConfig, create_paddle_predictor
from pdlite.errors import ConfigError, InputError
from pdlite.tools.batch import ImagePrep, run_batch
from pdlite.tools.cli import main
from tests.conftest import assert_close_rel, load_case, model_dir

OUT = "softmax_0.tmp_0"


def _plain(model: str):
    cfg = CxxConfig()
    cfg.set_model_dir(model)
    cfg.set_threads(1)
    return create_paddle_predictor(cfg)


@pytest.fixture
def folder(tmp_path):
    """Five .npy feeds of two widths and the model's case.npz (in:x, out:...)."""
    rng = np.random.default_rng(11)
    d = tmp_path / "in"
    d.mkdir()
    for i in range(5):
        np.save(d / f"f{i}.npy", rng.standard_normal((1, 3, 48, 192 if i % 2 else 128)).astype(np.float32))
    np.savez(d / "case.npz", **np.load(model_dir("ppocr_cls_v2") / "case.npz"))
    return d


def test_pool_and_in_process_equal_a_plain_predictor(folder, tmp_path):
    cls = str(model_dir("ppocr_cls_v2"))
    assert run_batch(cls, str(folder), str(tmp_path / "one"), workers=1) == 6
    done: list[int] = []
    assert run_batch(cls, str(folder), str(tmp_path / "two"), workers=2, batch_size=2, progress=done.append) == 6
    assert sum(done) == 6 and len(done) == 3  # one progress tick per task of 2 files
    pred = _plain(cls)
    for i in range(5):
        ref = pred.predict([np.load(folder / f"f{i}.npy")])[0]
        for run in ("one", "two"):
            got = np.load(tmp_path / run / f"f{i}.npz")
            assert got.files == [OUT] and np.array_equal(got[OUT], ref), (run, i)
    _, outs = load_case("ppocr_cls_v2")
    assert_close_rel(np.load(tmp_path / "two" / "case.npz")[OUT], outs[OUT], 1e-4, "case.npz vs Paddle Inference")


def test_cli_writes_one_npz_per_input(folder, tmp_path, capsys, monkeypatch):
    import io

    import pdlite.tools.batch as batch
    from pdlite.tools.progress import Progress

    tty = io.StringIO()
    tty.isatty = lambda: True  # the progress bar draws only on a terminal
    monkeypatch.setattr(batch, "Progress", lambda total, label: Progress(total, label, stream=tty))
    cls = str(model_dir("ppocr_cls_v2"))
    assert main(["batch", cls, str(folder), "-o", str(tmp_path / "out"), "--batch-size", "4"]) == 0
    assert "pdlite batch [" in tty.getvalue() and "6/6" in tty.getvalue()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["case.npz"] + [f"f{i}.npz" for i in range(5)]
    assert "6 input(s)" in capsys.readouterr().out


def test_images_preprocessed_as_documented(tmp_path):
    cv2 = pytest.importorskip("cv2")
    cls = str(model_dir("ppocr_cls_v2"))
    rng = np.random.default_rng(12)
    bgr = rng.integers(0, 256, (48, 192, 3), dtype=np.uint8)
    (tmp_path / "in").mkdir()
    cv2.imwrite(str(tmp_path / "in" / "line.png"), bgr)  # PNG: lossless
    prep = ImagePrep(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    run_batch(cls, str(tmp_path / "in"), str(tmp_path / "out"), prep=prep)
    x = ((bgr[:, :, ::-1].astype(np.float32) / 255 - 0.5) / 0.5).transpose(2, 0, 1)[None]
    ref = _plain(cls).predict([np.ascontiguousarray(x)])[0]
    assert_close_rel(np.load(tmp_path / "out" / "line.npz")[OUT], ref, 1e-5, "image feed")
    # --resize H,W through the CLI: a 40x100 image becomes 1x3x48x192
    cv2.imwrite(str(tmp_path / "in" / "line.png"), bgr[:40, :100])
    assert main(["batch", cls, str(tmp_path / "in"), "-o", str(tmp_path / "out2"), "--resize", "48,192",
                 "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5"]) == 0
    assert np.load(tmp_path / "out2" / "line.npz")[OUT].shape == (1, 2)


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_inputs_name_the_file(folder, tmp_path, workers):
    cls = str(model_dir("ppocr_cls_v2"))
    np.save(folder / "f3.npy", np.zeros((1, 4, 48, 192), np.float32))  # 4 channels: the model takes 3
    with pytest.raises(InputError, match=r"f3\.npy: .*'x'"):
        run_batch(cls, str(folder), str(tmp_path / "out"), workers=workers, batch_size=2)


def test_bad_folders_and_files(folder, tmp_path, capsys):
    cls = str(model_dir("ppocr_cls_v2"))
    with pytest.raises(InputError, match="nowhere.*not found"):
        run_batch(cls, str(tmp_path / "nowhere"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no \.npy, \.npz, .*\.webp files$"):
        run_batch(cls, str(tmp_path / "empty"), str(tmp_path / "out"))
    (tmp_path / "empty" / "readme.txt").write_text("hello")
    with pytest.raises(InputError, match=r"holds no \.npy, .* files \(1 other file\(s\) skipped\)"):
        run_batch(cls, str(tmp_path / "empty"), str(tmp_path / "out"))
    (folder / "notes.txt").write_text("hello")  # given as the one input file: refused
    with pytest.raises(InputError, match=r"notes\.txt: unknown input file type"):
        run_batch(cls, str(folder / "notes.txt"), str(tmp_path / "out"))
    (folder / "notes.txt").unlink()
    (folder / "f1.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"f1\.npz and .*f1\.npy would both write"):
        run_batch(cls, str(folder), str(tmp_path / "out"))
    (folder / "f1.npz").unlink()
    (folder / "g.npy").write_bytes(b"garbage")
    with pytest.raises(InputError, match=r"g\.npy: cannot read it"):
        run_batch(cls, str(folder), str(tmp_path / "out"), workers=2)
    with pytest.raises(InputError, match="would overwrite an input"):
        run_batch(cls, str(folder / "case.npz"), str(folder))
    with pytest.raises(ConfigError, match="not found"):
        run_batch(str(tmp_path / "no_model"), str(folder), str(tmp_path / "out"), workers=2)
