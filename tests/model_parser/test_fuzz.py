"""Corrupt model and params files: truncations and random byte changes (seeded). The parsers may accept
a change that still makes a valid file, but must otherwise raise ModelFormatError, never anything else."""
from __future__ import annotations

import random

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
