"""Corrupt model and params files: truncations and random byte changes (seeded). The parsers may accept
a change that still makes a valid file, but must otherwise raise ModelFormatError, never anything else."""
from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pdlite.errors import ModelFormatError
from pdlite.model_parser import load_params_combined, parse_program, read_lod_tensor, serialize_program
from tests.model_parser.conftest import legacy_model


def _mutations(data: bytes, rng: random.Random, n_truncate: int, n_flip: int):
    """Truncations (always including the first and last few bytes) and 1-3 random byte overwrites."""
    cuts = {0, 1, 2, len(data) - 1, len(data) - 2} | {rng.randrange(len(data)) for _ in range(n_truncate)}
    for cut in sorted(c for c in cuts if 0 <= c < len(data)):
        yield f"truncated at {cut}", data[:cut]
    for _ in range(n_flip):
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            # favour the start: headers, block/var/op structure live there
            pos = rng.randrange(min(len(b), 4096)) if rng.random() < 0.5 else rng.randrange(len(b))
            b[pos] = rng.randrange(256)
        yield "bytes changed", bytes(b)


@pytest.fixture(scope="module")
def model():
    d = legacy_model("transformer_encoder")
    return (d / "inference.pdmodel").read_bytes(), (d / "inference.pdiparams").read_bytes()


def test_fuzz_program(model):
    data, _ = model
    rng = random.Random(1234)
    outcomes = {"ok": 0, "error": 0}
    for what, mutated in _mutations(data, rng, n_truncate=60, n_flip=90):
        try:
            prog = parse_program(mutated, "fuzz.pdmodel")
        except ModelFormatError as e:
            assert "fuzz.pdmodel" in str(e), (what, e)
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        try:
            out = serialize_program(prog)
        except ModelFormatError:
            continue
        assert parse_program(out).blocks[0].idx == 0, what
    assert outcomes["error"] > 50  # truncations almost always break the protobuf


def test_fuzz_params(model):
    data, params = model
    prog = parse_program(data)
    rng = random.Random(4321)
    n_ok = 0
    for what, mutated in _mutations(params, rng, n_truncate=60, n_flip=90):
        try:
            load_params_combined(prog, mutated, "fuzz.pdiparams")
        except ModelFormatError as e:
            assert "fuzz.pdiparams" in str(e), (what, e)
            continue
        assert what == "bytes changed", f"a params file {what} was accepted"
        n_ok += 1
    assert n_ok > 10  # most changes land in the data and leave a valid file


def test_fuzz_single_tensor_headers():
    """Every one of the first 80 bytes of a tensor, set to interesting values."""
    import numpy as np

    from pdlite.model_parser import LoDTensor, write_lod_tensor

    blob = write_lod_tensor(LoDTensor(np.ones((3, 4), np.float32), [[0, 2, 3]]))
    for pos in range(min(80, len(blob))):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            b = bytearray(blob)
            b[pos] = value
            try:
                t, end = read_lod_tensor(bytes(b), 0, "t.bin", "w")
            except ModelFormatError as e:
                assert "t.bin" in str(e) and "'w'" in str(e)
            else:
                assert end <= len(b) and t.array.size * t.array.itemsize <= len(b)


# -- the loader fuzz campaign (tools/fuzz_loaders.py) over every format ----------------------------

REPO = Path(__file__).resolve().parents[2]
FUZZ_SEED = int(os.environ.get("PDLITE_FUZZ_SEED", "15"))
FUZZ_N = int(os.environ.get("PDLITE_FUZZ_N", "2500"))


def _fuzz_tool():
    spec = importlib.util.spec_from_file_location("fuzz_loaders", REPO / "tools" / "fuzz_loaders.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """The fuzz tool as a module, with its seed models built once."""
    mod = _fuzz_tool()
    seeds = tmp_path_factory.mktemp("fuzz_seeds")
    mod.build_seeds(seeds)
    return mod, seeds


@pytest.mark.skipif(sys.platform == "win32", reason="the fuzz workers use POSIX signals and rlimits")
@pytest.mark.parametrize("stage,n", [("load", FUZZ_N), ("predictor", FUZZ_N // 10)])
def test_fuzz_campaign_every_format(fuzz, tmp_path, stage, n):
    """`n` seeded mutations over .pdmodel, .pdiparams, __model__/__params__, non-combined files, PIR
    inference.json and .nb, in worker subprocesses with a memory limit and a timeout: each one loads
    or raises a pdlite error naming the file; no other exception, crash, hang, MemoryError, or
    corrupted .nb accepted. Stage "predictor" also makes a predictor of each loaded model (analysis,
    or the .nb's rebuild) and runs it once: again pdlite errors only."""
    mod, seeds = fuzz
    out = tmp_path / "results.jsonl"
    cmd = [sys.executable, str(REPO / "tools" / "fuzz_loaders.py"), "-n", str(n), "--seed", str(FUZZ_SEED),
           "--jobs", "2", "--seeds-dir", str(seeds), "--json", str(out), "--stage", stage]
    if stage == "predictor":
        cmd += ["--mem-mb", "1024"]  # kernels' and passes' imports and work buffers
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.is_file(), p.stdout[-2000:] + p.stderr[-2000:]
    results = [json.loads(line) for line in out.read_text().splitlines()]
    bad = [r for r in results if r["out"] not in ("ok", "error")]
    assert not bad, p.stdout[-4000:]
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(results) == n
    for fmt in mod.FORMATS:  # every format fuzzed, and both outcomes reached (not all rejected up front)
        outs = Counter(r["out"] for r in results if r["fmt"] == fmt)
        assert sum(outs.values()) >= n // len(mod.FORMATS), (fmt, outs)
        assert outs["error"] > 0 and outs["ok"] > 0, (fmt, outs)
    if stage == "load":
        hows = Counter(r["how"] for r in results)
        for how in ("flip", "replace", "truncate", "extend", "dup", "proto", "tensor", "json", "nb-meta",
                    "nb-header", "nb-program"):
            assert hows[how] > 0, hows


@pytest.mark.skipif(sys.platform == "win32", reason="the fuzz harness uses POSIX signals")
def test_fuzz_harness_reports_escapes_and_silent_corruption(fuzz, monkeypatch, tmp_path):
    """The harness itself: a non-pdlite exception, a ModelFormatError not naming the file and a
    corrupted .nb that loads are each reported as failures."""
    mod, seeds = fuzz
    mut = mod.make_mutation(0, "pdmodel", 0, seeds)

    def boom(*a, **k):
        raise KeyError("deep inside")

    monkeypatch.setattr(mod, "_load", boom)
    assert mod.run_one(mut, seeds, tmp_path, 5.0)["out"] == "escape"

    def unnamed(*a, **k):
        raise ModelFormatError("bad bytes")

    monkeypatch.setattr(mod, "_load", unnamed)
    assert mod.run_one(mut, seeds, tmp_path, 5.0)["out"] == "unnamed"

    nb = next(m for i in range(50) if (m := mod.make_mutation(0, "nb", i, seeds))["how"] == "flip")
    monkeypatch.setattr(mod, "_load", lambda *a, **k: ([], None))
    assert mod.run_one(nb, seeds, tmp_path, 5.0)["out"] == "silent"


def _flip_param_byte(path: Path) -> Path:
    """A copy of the .nb with one byte of its first param changed (checksums left as they were)."""
    from pdlite.model_parser import naive_buffer as nbf

    data = bytearray(path.read_bytes())
    h = nbf.read_header(memoryview(bytes(data)), str(path))
    meta = json.loads(bytes(data[h["meta_off"]:h["meta_off"] + h["meta_size"]]))
    t = meta["tensors"][0]
    data[h["data_off"] + t["offset"] + 1] ^= 0x10
    out = path.with_name("corrupt.nb")
    out.write_bytes(bytes(data))
    return out


def test_corrupted_nb_params_are_an_error_by_default(fuzz):
    """One changed byte in a param of a real .nb: an error by default (file, mmap and buffer loads,
    and MobileConfig); `verify_checksum=False` (trusted files) skips that check and loads it."""
    from pdlite.api import MobileConfig, create_paddle_predictor
    from pdlite.model_parser.naive_buffer import load_naive_buffer, load_naive_buffer_bytes

    _, seeds = fuzz
    good = seeds / "nb" / "fc_linear" / "model.nb"
    bad = _flip_param_byte(good)
    for load in (lambda: load_naive_buffer(bad), lambda: load_naive_buffer(bad, use_mmap=True),
                 lambda: load_naive_buffer_bytes(bad.read_bytes(), str(bad))):
        with pytest.raises(ModelFormatError, match=r"corrupt\.nb: data section is corrupt"):
            load()
    cfg = MobileConfig()
    cfg.set_model_from_file(str(bad))
    with pytest.raises(ModelFormatError, match="data section is corrupt"):
        create_paddle_predictor(cfg)
    cfg.set_option("verify_checksum", False)
    create_paddle_predictor(cfg)  # the opt-out: no check, the changed value is used
    a, b = load_naive_buffer(good), load_naive_buffer(bad, verify=False)
    assert any(not np.array_equal(a.params[k], b.params[k]) for k in a.params)


def test_nb_meta_edits_behind_the_checksums(fuzz, tmp_path):
    """Meta sections with valid checksums but nonsense inside: deep nesting, malformed places,
    absurd tensor shapes. Each is a ModelFormatError naming the file."""
    from pdlite.model_parser import naive_buffer as nbf

    mod, seeds = fuzz
    data = (seeds / "nb" / "fc_linear" / "model.nb").read_bytes()
    h = nbf.read_header(memoryview(data), "seed")
    meta = json.loads(data[h["meta_off"]:h["meta_off"] + h["meta_size"]])
    prog = data[h["prog_off"]:h["prog_off"] + h["prog_size"]]
    body = data[h["data_off"]:]
    deep = b"[" * 100000 + b"]" * 100000
    huge = dict(meta["tensors"][0], shape=[0, 2**62, 2**62], nbytes=0)
    cases = {
        "deep": deep,
        "places": json.dumps(dict(meta, valid_places=[1.5])).encode(),
        "places3": json.dumps(dict(meta, valid_places=[["Host", "FP32"]])).encode(),
        "huge": json.dumps(dict(meta, tensors=[huge] + meta["tensors"][1:])).encode(),
        "rank": json.dumps(dict(meta, tensors=[dict(huge, shape=[1] * 70)] + meta["tensors"][1:])).encode(),
    }
    for name, new_meta in cases.items():
        p = tmp_path / f"{name}.nb"
        p.write_bytes(mod.nb_build(new_meta, prog, body))
        with pytest.raises(ModelFormatError, match=f"{name}.nb"):
            nbf.load_naive_buffer(p)


def test_lod_tensor_with_a_zero_dim_and_huge_dims():
    """dims [0, 2**62, 4]: zero elements but an impossible shape; an error, not a NumPy ValueError."""
    from pdlite.model_parser import framework_proto as fp
    from pdlite.model_parser.lod_tensor import _I32, _U32, _U64

    desc = fp.TensorDesc(data_type=5, dims=[0, 2**62, 4]).SerializeToString()
    blob = _U32.pack(0) + _U64.pack(0) + _U32.pack(0) + _I32.pack(len(desc)) + desc
    with pytest.raises(ModelFormatError, match=r"t\.bin: variable 'w': invalid dims"):
        read_lod_tensor(blob, 0, "t.bin", "w")


def _edited_model(tmp_path: Path, name: str, edit) -> Path:
    """A copy of a conformance model with its program changed by `edit(program)`."""
    from pdlite.model_parser import load_model, save_model

    m = load_model(REPO / "tests" / "fixtures" / "conformance" / name)
    edit(m.program)
    save_model(m.program, m.params, tmp_path / "inference.pdmodel", tmp_path / "inference.pdiparams")
    return tmp_path


def test_fetch_of_a_variable_no_op_computes(tmp_path):
    """Found by `fuzz_loaders --stage predictor`: a fetch op reading a declared variable that no op
    writes was a KeyError after the run; now a ModelFormatError naming it."""
    from pdlite.api import CxxConfig, create_paddle_predictor
    from pdlite.core.program import VarDesc

    def edit(program):
        b = program.main
        fetch = next(op for op in b.ops if op.type == "fetch")
        src = b.vars[fetch.inputs["X"][0]]
        b.vars["ghost"] = VarDesc("ghost", src.type, src.dtype, list(src.shape))
        fetch.inputs["X"] = ["ghost"]

    cfg = CxxConfig()
    cfg.set_model_dir(str(_edited_model(tmp_path, "fc_linear", edit)))
    pred = create_paddle_predictor(cfg)
    with pytest.raises(ModelFormatError, match=r"the program fetches \['ghost'\], but none of its ops computes"):
        pred.predict({"x": np.ones((2, 5, 8), np.float32)})


def test_kernel_prepare_failure_is_a_kernel_error(tmp_path):
    """Found by `fuzz_loaders --stage predictor`: conv2d with groups=128 for a [4, 4, 3, 2] filter made
    the kernel's weight re-layout raise a bare ValueError; now a KernelError naming op and weights."""
    from pdlite.api import CxxConfig, create_paddle_predictor
    from pdlite.errors import KernelError

    def edit(program):
        conv = [op for op in program.main.ops if op.type == "conv2d"][2]
        conv.attrs["groups"] = 128

    cfg = CxxConfig()
    cfg.set_model_dir(str(_edited_model(tmp_path, "conv_variants", edit)))
    with pytest.raises(KernelError, match=r"op conv2d: its kernel could not prepare the weights "
                                          r"conv2d_2\.w_0=float32\[4, 4, 3, 2\]: ValueError"):
        create_paddle_predictor(cfg)


def test_variable_of_absurd_rank(tmp_path):
    """Found by `fuzz_loaders --stage predictor`: a feed declaring 303 dims loaded; now refused at load
    (at most lod_tensor.MAX_RANK dims), for ProgramDesc and PIR programs alike."""
    from pdlite.model_parser import load_model
    from pdlite.model_parser.lod_tensor import MAX_RANK

    def edit(program):
        program.main.vars["x"].shape = [-1] + [1] * MAX_RANK

    d = _edited_model(tmp_path, "fc_linear", edit)
    with pytest.raises(ModelFormatError, match=rf"inference\.pdmodel: block 0: variable 'x' declares {MAX_RANK + 1} "
                                               rf"dims \(at most {MAX_RANK}\)"):
        load_model(d)
    doc = json.loads((REPO / "tests" / "fixtures" / "pir" / "conv" / "inference.json").read_text())
    data = next(o for o in doc["program"]["regions"][0]["blocks"][0]["ops"] if o["#"] == "1.data")
    data["O"][0]["TT"]["D"][1] = [1] * 40
    (tmp_path / "inference.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"inference\.json: block 0: variable '.+' declares 40 dims"):
        load_model(model_file=tmp_path / "inference.json", param_file=REPO / "tests" / "fixtures" / "pir" / "conv" /
                   "inference.pdiparams")
