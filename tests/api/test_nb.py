"""The optimized model format (.nb): round trips, fast-load layout, corruption refused, the light predictor."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from pdlite.core.dtypes import VarType
from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
from pdlite.core.types import DataLayoutType, PrecisionType, TargetType
from pdlite.errors import ModelFormatError, UnsupportedOpError
from pdlite.kernels.registry import KernelKey
from pdlite.lite import CxxConfig, LightPredictor, MobileConfig, PowerMode, create_paddle_predictor
from pdlite.model_parser import LoDTensor, serialize_program, write_lod_tensor
from pdlite.model_parser.naive_buffer import (
    ALIGN,
    FORMAT_VERSION,
    HEADER_SIZE,
    MAGIC,
    load_naive_buffer,
    load_naive_buffer_bytes,
    naive_buffer_bytes,
    write_naive_buffer,
)
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir

REL = 1e-4


# -- a tiny model: out = relu(x + b) * w -----------------------------------------------------------

def tiny_program(op3: str = "elementwise_mul") -> Program:
    v = {
        "feed": VarDesc("feed", VarType.FEED_MINIBATCH, None, persistable=True),
        "fetch": VarDesc("fetch", VarType.FETCH_LIST, None, persistable=True),
        "x": VarDesc("x", shape=[-1, 4], need_check_feed=True),
        "b": VarDesc("b", shape=[4], persistable=True),
        "w": VarDesc("w", shape=[4], persistable=True),
        "t1": VarDesc("t1", shape=[-1, 4]),
        "t2": VarDesc("t2", shape=[-1, 4]),
        "out": VarDesc("out", shape=[-1, 4]),
    }
    ops = [
        OpDesc("feed", {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0}),
        OpDesc("elementwise_add", {"X": ["x"], "Y": ["b"]}, {"Out": ["t1"]}, {"axis": -1}),
        OpDesc("relu", {"X": ["t1"]}, {"Out": ["t2"]}, {}),
        OpDesc(op3, {"X": ["t2"], "Y": ["w"]}, {"Out": ["out"]}, {"axis": -1}),
        OpDesc("fetch", {"X": ["out"]}, {"Out": ["fetch"]}, {"col": 0}),
    ]
    return Program([BlockDesc(0, -1, v, ops)])


TINY_PARAMS = {"b": np.array([0.5, -1.0, 2.0, -3.0], np.float32), "w": np.array([1.0, 2.0, -0.5, 4.0], np.float32)}
TINY_X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
TINY_REF = np.maximum(TINY_X + TINY_PARAMS["b"], 0) * TINY_PARAMS["w"]


def tiny_model_bytes(op3: str = "elementwise_mul") -> tuple[bytes, bytes]:
    """(program bytes, combined params bytes) of the tiny model."""
    params = b"".join(write_lod_tensor(LoDTensor(TINY_PARAMS[n])) for n in sorted(TINY_PARAMS))
    return serialize_program(tiny_program(op3)), params


def write_tiny_model(folder: Path, op3: str = "elementwise_mul") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    prog, params = tiny_model_bytes(op3)
    (folder / "inference.pdmodel").write_bytes(prog)
    (folder / "inference.pdiparams").write_bytes(params)
    return folder


def tiny_cxx() -> object:
    cfg = CxxConfig()
    cfg.set_model_buffer(*tiny_model_bytes())
    return create_paddle_predictor(cfg)


@pytest.fixture(scope="module")
def tiny_saved(tmp_path_factory) -> tuple[Path, object]:
    """(the .nb of the tiny model, the CxxPredictor that wrote it)."""
    d = tmp_path_factory.mktemp("nb")
    cxx = tiny_cxx()
    return Path(cxx.save_optimized_model(str(d / "tiny"))), cxx


@pytest.fixture(scope="module")
def tiny_nb(tiny_saved) -> Path:
    return tiny_saved[0]


def _plan(pred) -> list[tuple]:
    """(op type, kernel key, release) of each instruction of a predictor's runtime program."""
    rt = pred.runtime_program
    return [(i.op.type, i.kernel_def.key, tuple(r)) for i, r in zip(rt.instructions, rt.release)]


def _light(path: Path | bytes, **options) -> LightPredictor:
    cfg = MobileConfig()
    if isinstance(path, bytes):
        cfg.set_model_from_buffer(path)
    else:
        cfg.set_model_from_file(str(path))
    for k, v in options.items():
        cfg.set_option(k, v)
    pred = create_paddle_predictor(cfg)
    assert isinstance(pred, LightPredictor)
    return pred


# -- the light predictor on the tiny model -----------------------------------------------------------

def test_save_optimized_model_appends_nb_and_runs(tiny_saved):
    tiny_nb, cxx = tiny_saved
    assert tiny_nb.name == "tiny.nb" and tiny_nb.read_bytes()[:8] == MAGIC
    for opts in ({}, {"mmap": True}, {"verify_checksum": False}):
        pred = _light(tiny_nb, **opts)
        assert pred.get_input_names() == ["x"] and pred.get_output_names() == ["out"]
        np.testing.assert_allclose(pred.predict([TINY_X])[0], TINY_REF, rtol=1e-6)
        # the same instructions as the full predictor: op, kernel, memory-plan release points
        assert _plan(pred) == _plan(cxx)


def test_from_buffer_and_config_api(tiny_nb):
    pred = _light(tiny_nb.read_bytes())
    pred.get_input(0).from_numpy(TINY_X)
    pred.run()
    np.testing.assert_allclose(pred.get_output(0).numpy(), TINY_REF, rtol=1e-6)
    cfg = MobileConfig()
    cfg.set_threads(3)
    cfg.set_power_mode(PowerMode.LITE_POWER_HIGH)
    assert cfg.threads() == 3 and cfg.power_mode() == PowerMode.LITE_POWER_HIGH
    assert not cfg.is_model_from_memory()
    cfg.set_model_from_buffer(tiny_nb.read_bytes())
    assert cfg.is_model_from_memory()


def test_light_predictor_runs_no_pass(tiny_nb, monkeypatch):
    import pdlite.optimizer.optimizer as optimizer

    def boom(*a, **k):
        raise AssertionError("the light predictor must not run the analysis")

    monkeypatch.setattr(optimizer.Optimizer, "run", boom)
    np.testing.assert_allclose(_light(tiny_nb).predict([TINY_X])[0], TINY_REF, rtol=1e-6)


def test_kernel_keys_and_feed_fetch_stored(tiny_saved):
    tiny_nb, cxx = tiny_saved
    m = load_naive_buffer(tiny_nb)
    assert m.kernel_keys == [i.kernel_def.key for i in cxx.runtime_program.instructions]
    assert [op.type for op in m.program.main.ops] == [k.op_type for k in m.kernel_keys]
    assert all(k.target == TargetType.Host for k in m.kernel_keys)
    assert m.feed_names == ["x"] and m.fetch_names == ["out"]
    assert sorted(m.params) == ["b", "w"]
    assert all(op.type not in ("feed", "fetch") for op in m.program.main.ops)
    assert m.meta["format_version"] == FORMAT_VERSION and m.pdlite_version
    # memory_optimize_pass's release points travel with the ops: every intermediate is dropped once
    assert m.release == [tuple(r) for r in cxx.runtime_program.release]
    inter = {n for op in m.program.main.ops for n in op.output_names()} - {"out"}
    assert sorted(n for r in m.release for n in r) == sorted(inter) and inter


def test_params_come_from_pass_context(tmp_path):
    """A folding pass that replaces a param: the .nb holds the folded value (ctx.params), not the original."""
    from pdlite.optimizer.pass_registry import Pass, register_pass
    from pdlite.optimizer.pipeline import default_passes

    @register_pass("test_nb_refold_pass", override=True)
    class Refold(Pass):
        def apply(self, graph, ctx):
            node = next(n for n in graph.op_nodes() if n.op.type == "elementwise_add")
            old = next(v for v in node.inputs if v.name == "b")
            new = graph.add_var(VarDesc("b_folded", shape=[4], persistable=True))
            graph.replace_input(node, old, new)
            graph.remove_var(old)
            ctx.params["b_folded"] = ctx.params.pop("b") - 1.0
            return True

    cfg = CxxConfig()
    cfg.set_model_buffer(*tiny_model_bytes())
    cfg.set_passes(["test_nb_refold_pass", *default_passes()])
    cxx = create_paddle_predictor(cfg)
    ref = np.maximum(TINY_X + TINY_PARAMS["b"] - 1.0, 0) * TINY_PARAMS["w"]
    np.testing.assert_allclose(cxx.predict([TINY_X])[0], ref, rtol=1e-6)
    path = cxx.save_optimized_model(str(tmp_path / "refold"))
    m = load_naive_buffer(path)
    assert sorted(m.params) == ["b_folded", "w"]
    np.testing.assert_allclose(_light(Path(path)).predict([TINY_X])[0], ref, rtol=1e-6)


# -- the format itself ------------------------------------------------------------------------------

SYNTH = {
    "f32": np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7,
    "f16": np.linspace(-2, 2, 9, dtype=np.float16).reshape(3, 3),
    "f64": np.array([np.pi, -np.e]),
    "i8": np.array([-128, 0, 127], np.int8),
    "u8": np.array([[1, 2, 255]], np.uint8),
    "i32": np.arange(5, dtype=np.int32),
    "i64": np.array([2**40, -1], np.int64),
    "bool": np.array([True, False, True]),
    "bf16": np.array([0x3F80, 0xC000], np.uint16),  # bfloat16 bit patterns
    "scalar": np.array(3.5, np.float32),
    "empty": np.zeros((0, 3), np.float32),
    "big": np.random.default_rng(1).standard_normal((33, 65)).astype(np.float32),
}


def synth_bytes(**kw) -> bytes:
    prog = tiny_program()
    prog.main.ops = prog.main.ops[1:-1]
    keys = [KernelKey(op.type, TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW) for op in prog.main.ops]
    return naive_buffer_bytes(prog, keys, kw.pop("params", SYNTH), ["x"], ["out"], kw)


def test_roundtrip_every_dtype_aligned(tmp_path):
    data = synth_bytes(note="hello")
    path = tmp_path / "s.nb"
    path.write_bytes(data)
    for m in (load_naive_buffer(path), load_naive_buffer(path, use_mmap=True), load_naive_buffer_bytes(data)):
        assert sorted(m.params) == sorted(SYNTH) and m.meta["note"] == "hello"
        for name, ref in SYNTH.items():
            got = m.params[name]
            assert got.dtype == ref.dtype and got.shape == ref.shape, name
            np.testing.assert_array_equal(got, ref)
            if got.size:
                assert got.ctypes.data % ALIGN == 0, f"{name} is not {ALIGN}-byte aligned in memory"
        assert [op.type for op in m.program.main.ops] == ["elementwise_add", "relu", "elementwise_mul"]


def test_layout_offsets_and_determinism():
    data = synth_bytes()
    assert data == synth_bytes()  # deterministic
    hdr = struct.unpack_from("<8sII32s6Q4IQ2I", data)
    assert hdr[0] == MAGIC and hdr[1] == FORMAT_VERSION and hdr[2] == HEADER_SIZE
    meta_off, meta_size, prog_off, prog_size, data_off, data_size = hdr[4:10]
    assert meta_off == HEADER_SIZE and prog_off == meta_off + meta_size and data_off % ALIGN == 0
    assert hdr[14] == len(data) == data_off + data_size
    assert zlib.crc32(data[data_off:]) == hdr[12]
    m = load_naive_buffer_bytes(data)
    for t in m.meta["tensors"]:
        assert (data_off + t["offset"]) % ALIGN == 0
        raw = data[data_off + t["offset"]:data_off + t["offset"] + t["nbytes"]]
        assert raw == np.ascontiguousarray(SYNTH[t["name"]]).tobytes()


def test_writer_refuses_mismatched_keys():
    prog = tiny_program()
    with pytest.raises(ModelFormatError, match="kernel keys"):
        naive_buffer_bytes(prog, [], {}, ["x"], ["out"])


# -- corrupt and foreign files ------------------------------------------------------------------------

def _write(tmp_path: Path, data: bytes, name: str = "bad.nb") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_wrong_magic(tmp_path):
    data = synth_bytes()
    for bad in (b"PDLITENC" + data[8:], b"\x08\x00\x00\x00" + data[4:], tiny_model_bytes()[0]):
        p = _write(tmp_path, bad)
        with pytest.raises(ModelFormatError, match=r"bad\.nb: not a pdlite optimized model .*magic"):
            load_naive_buffer(p)


def test_other_format_version(tmp_path):
    data = bytearray(synth_bytes())
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    struct.pack_into("32s", data, 16, b"9.9.9")
    p = _write(tmp_path, bytes(data), "future.nb")
    with pytest.raises(ModelFormatError) as e:
        load_naive_buffer(p)
    msg = str(e.value)
    assert "future.nb" in msg and f"format version {FORMAT_VERSION + 1}" in msg and "9.9.9" in msg
    assert f"reads format version {FORMAT_VERSION}" in msg


@pytest.mark.parametrize("cut", [0, 5, 8, 20, 47, 100, 127, 128, 200, -200, -64, -1])
def test_truncated(tmp_path, cut):
    data = synth_bytes()
    p = _write(tmp_path, data[:cut])
    with pytest.raises(ModelFormatError, match="truncated|too short|not a pdlite"):
        load_naive_buffer(p)


def test_trailing_bytes_and_missing_file(tmp_path):
    with pytest.raises(ModelFormatError, match="trailing"):
        load_naive_buffer_bytes(synth_bytes() + b"\0")
    with pytest.raises(ModelFormatError, match="nope.nb"):
        load_naive_buffer(tmp_path / "nope.nb")


def test_every_flipped_byte_is_detected():
    """Flip each byte of a small file in turn (and a few random bit flips): every one is refused."""
    small = {"a": np.arange(10, dtype=np.float32), "b": np.array([1, 2], np.int64)}
    data = synth_bytes(params=small)
    rng = np.random.default_rng(3)
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 1 << int(rng.integers(8)) if i % 2 else 0xFF
        with pytest.raises(ModelFormatError):
            load_naive_buffer_bytes(bytes(bad), f"flip@{i}")


def test_unknown_kernel_key_refused(tmp_path):
    prog = tiny_program()
    prog.main.ops = prog.main.ops[1:-1]
    keys = [KernelKey(op.type, TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW) for op in prog.main.ops]
    keys[1] = KernelKey("relu", TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW, "no_such_alias")
    p = tmp_path / "k.nb"
    write_naive_buffer(p, prog, keys, TINY_PARAMS, ["x"], ["out"])
    with pytest.raises(UnsupportedOpError, match=r"(?s)k\.nb.*relu.*no_such_alias"):
        _light(p)


def test_mobile_config_without_model():
    from pdlite.errors import ConfigError

    with pytest.raises(ConfigError, match="set_model_from_file"):
        create_paddle_predictor(MobileConfig())
    with pytest.raises(ConfigError):
        MobileConfig().set_model_from_buffer("not bytes")  # type: ignore[arg-type]


# -- real models: CxxPredictor.save_optimized_model -> MobileConfig -------------------------------------

@pytest.mark.parametrize("name", ["mobilenet_v3_small", "transformer_encoder"])
def test_save_optimized_model_real(name, tmp_path):
    ins, outs = load_case(name)
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    cxx = create_paddle_predictor(cfg)
    ref = cxx.predict(ins)
    path = cxx.save_optimized_model(str(tmp_path / name))
    stored = load_naive_buffer(path).program.main.ops
    assert not any("op_callstack" in op.attrs for op in stored)  # debugging attributes left out
    light = _light(Path(path).read_bytes())
    got = light.predict(ins)
    assert light.get_output_names() == list(outs)
    for g, r, (n, case) in zip(got, ref, outs.items()):
        np.testing.assert_array_equal(g, r)  # same kernels, same params: bit-identical
        assert_close_rel(g, case, REL, f"{name}:{n}")


def test_real_models_listed():
    assert "resnet18" in LEGACY_MODELS  # the opt end-to-end test in test_opt.py covers every legacy model
