"""Fuzz pdlite's model loaders: seeded mutations of every model format, run in subprocesses.

    python tools/fuzz_loaders.py -n 10000 --seed 1 --jobs 2             # a campaign, summary table
    python tools/fuzz_loaders.py --seed 1 --format pir --only 1234 --save /tmp/m   # replay one mutation

Formats (seed models are built from the committed fixtures in tests/fixtures): `pdmodel`
(inference.pdmodel + .pdiparams), `combined` (__model__ + __params__), `noncombined` (__model__ +
one LoDTensor file per parameter), `pir` (inference.json + .pdiparams) and `nb` (pdlite's optimized
model). Mutation `i` of format `f` under seed `s` is a pure function of (s, f, i), so any finding is
replayed with `--only i`. Mutations: bit flips, byte replacement, truncation, extension, duplicated or
deleted chunks, inserted bytes; protobuf-aware edits of ProgramDesc / TensorDesc fields (dims, data
types, huge varints, lengths, duplicated or dropped fields); LoDTensor header edits (versions, lod
levels, sizes); JSON-aware edits of PIR programs (changed types, shapes, attributes, value ids, op
names, missing keys, deep nesting); `.nb` header / meta / program edits with the checksums fixed up
(to reach the parser behind them) and plain corruptions (which the checksums must catch).

Each worker subprocess runs a batch of mutations under an address-space limit (RLIMIT_AS, its size
after imports + --mem-mb) and a per-mutation alarm; the parent kills a silent worker after --timeout
seconds and restarts the batch after the culprit. Outcomes per mutation: `ok` (loaded), `error`
(a pdlite error naming the file), and the failures: `escape` (another exception type), `unnamed`
(a ModelFormatError not naming the file), `silent` (a corrupted `.nb` accepted), `memory`
(MemoryError under the limit), `hang`, `crash` (the worker died). Exit status 1 if any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
FORMATS = ("pdmodel", "combined", "noncombined", "pir", "nb")
LEGACY_SEEDS = ("fc_linear", "conv_variants", "lstm_crnn", "embedding", "bert_mask_attention")
PIR_SEEDS = ("conv", "tensor_ops", "transformer")
NB_SEEDS = ("fc_linear", "conv_variants", "bert_mask_attention")
FAILURES = ("escape", "unnamed", "silent", "memory", "hang", "crash")
INTERESTING = [0, 1, 2, 7, 8, 64, 127, 128, 255, 256, 2**15, 2**16, 2**31 - 1, 2**31, 2**32, 2**40, 2**53,
               2**62, 2**63 - 1, 2**64 - 1, -1, -2, -(2**31), -(2**63)]


# ----------------------------------------------------------------------------------- seeds


def build_seeds(out: Path) -> None:
    """Write the seed models of every format under `out/<format>/<name>/`."""
    from pdlite.model_parser import load_model, save_model

    for name in LEGACY_SEEDS:
        src = FIXTURES / "conformance" / name
        model, params = (src / "inference.pdmodel").read_bytes(), (src / "inference.pdiparams").read_bytes()
        for fmt, files in (("pdmodel", ("inference.pdmodel", "inference.pdiparams")),
                           ("combined", ("__model__", "__params__"))):
            d = out / fmt / name
            d.mkdir(parents=True, exist_ok=True)
            (d / files[0]).write_bytes(model)
            (d / files[1]).write_bytes(params)
        m = load_model(src)
        d = out / "noncombined" / name
        d.mkdir(parents=True, exist_ok=True)
        save_model(m.program, m.params, d / "__model__")
    for name in PIR_SEEDS:
        d = out / "pir" / name
        d.mkdir(parents=True, exist_ok=True)
        for f in ("inference.json", "inference.pdiparams"):
            shutil.copyfile(FIXTURES / "pir" / name / f, d / f)
    from pdlite.api import CxxConfig, create_paddle_predictor

    for name in NB_SEEDS:
        d = out / "nb" / name
        d.mkdir(parents=True, exist_ok=True)
        cfg = CxxConfig()
        cfg.set_model_dir(str(FIXTURES / "conformance" / name))
        create_paddle_predictor(cfg).save_optimized_model(str(d / "model"))


def seed_models(seeds: Path, fmt: str) -> list[Path]:
    return sorted(p for p in (seeds / fmt).iterdir() if p.is_dir())


# ------------------------------------------------------------------------- protobuf wire trees
# A message is a list of [field number, wire type, value]: an int (varint, fixed32/64), bytes, or
# (wire type 2) a nested list when the bytes parse as a message. Encoding recomputes every length.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    val, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return val, pos


def wire_parse(buf: bytes, depth: int = 0) -> list[list]:
    fields, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field 0")
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            v, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wt == 5:
            v, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        elif wt == 2:
            n, pos = _varint(buf, pos)
            raw = bytes(buf[pos:pos + n])
            if len(raw) != n:
                raise ValueError("short")
            pos += n
            v = raw
            if raw and depth < 12:
                try:
                    v = wire_parse(raw, depth + 1)
                except ValueError:
                    v = raw
        else:
            raise ValueError(f"wire type {wt}")
        if pos > len(buf):
            raise ValueError("short")
        fields.append([num, wt, v])
    return fields


def _enc_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def wire_encode(fields: list[list]) -> bytes:
    out = bytearray()
    for num, wt, v in fields:
        out += _enc_varint(num << 3 | wt)
        if wt == 0:
            out += _enc_varint(v)
        elif wt == 1:
            out += (v & (2**64 - 1)).to_bytes(8, "little")
        elif wt == 5:
            out += (v & (2**32 - 1)).to_bytes(4, "little")
        else:
            body = wire_encode(v) if isinstance(v, list) else v
            out += _enc_varint(len(body)) + body
    return bytes(out)


def _walk(fields: list[list], path: tuple = ()):
    """(path of field numbers, the field, its parent list) for every field of the tree."""
    for f in fields:
        p = path + (f[0],)
        yield p, f, fields
        if isinstance(f[2], list):
            yield from _walk(f[2], p)


# ProgramDesc paths (field numbers): blocks=1 > vars=3 > type=2 > lod_tensor=3 > tensor=1 > data_type=1 / dims=2
_DIMS, _DTYPE = (1, 3, 2, 3, 1, 2), (1, 3, 2, 3, 1, 1)


def mutate_proto(data: bytes, rng: random.Random, dims_path: tuple = _DIMS, dtype_path: tuple = _DTYPE) -> bytes:
    """A protobuf-aware edit: field values, dims, data types, duplicated / dropped / moved fields."""
    tree = wire_parse(data)
    nodes = list(_walk(tree))
    if not nodes:
        return data
    kind = rng.choice(["varint", "varint", "dims", "dims", "dtype", "dup", "drop", "bytes", "swap", "wiretype"])
    if kind in ("dims", "dtype"):
        want = dims_path if kind == "dims" else dtype_path
        cands = [(p, f, par) for p, f, par in nodes if p[-len(want):] == want]
        if cands:
            p, f, par = rng.choice(cands)
            if kind == "dtype":
                f[2] = rng.choice([0, 2, 3, 4, 5, 6, 7, 17, 19, 22, 25, 32, 99, 2**31, 2**63])
            elif rng.random() < 0.2:  # many dims
                i = par.index(f)
                par[i:i] = [[f[0], 0, rng.choice(INTERESTING)] for _ in range(rng.choice([3, 40, 300]))]
            else:
                f[2] = rng.choice(INTERESTING + [3, 1000, 65536, 10**9])
            return wire_encode(tree)
        kind = "varint"
    p, f, par = rng.choice(nodes)
    if kind == "varint":
        ints = [n for n in nodes if n[1][1] == 0]
        if ints:
            p, f, par = rng.choice(ints)
            f[2] = rng.choice(INTERESTING) if rng.random() < 0.7 else f[2] + rng.choice([-1, 1])
    elif kind == "dup":
        par.insert(par.index(f), [f[0], f[1], f[2]])
    elif kind == "drop":
        par.remove(f)
    elif kind == "bytes":
        strs = [n for n in nodes if n[1][1] == 2 and isinstance(n[1][2], bytes)]
        if strs:
            p, f, par = rng.choice(strs)
            f[2] = rng.choice([b"", b"\xff\xfe", f[2] * 2, f[2][:-1], b"x" * 1000, b"fetch", b"feed", b"@EMPTY@",
                               b"../../etc/passwd", b"/abs"])
    elif kind == "swap":
        i, j = rng.randrange(len(par)), rng.randrange(len(par))
        par[i], par[j] = par[j], par[i]
    else:  # same field number, other wire type
        f[1] = rng.choice([w for w in (0, 1, 2, 5) if w != f[1]])
        f[2] = {0: 1, 1: 2**63, 5: 7, 2: b"\x08\x01"}[f[1]]
    return wire_encode(tree)


# -------------------------------------------------------------------------------- byte-level


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    b = bytearray(data)
    n = len(b)
    kind = rng.choice(["flip", "flip", "replace", "replace", "truncate", "extend", "dup", "delete", "insert"])
    # favour the start: headers and program structure live there
    pick = (lambda: rng.randrange(min(n, 512)) if rng.random() < 0.5 else rng.randrange(n)) if n else (lambda: 0)
    if not n:
        return "extend", bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            b[pick()] ^= 1 << rng.randrange(8)
    elif kind == "replace":
        for _ in range(rng.randint(1, 8)):
            b[pick()] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
    elif kind == "truncate":
        del b[rng.randrange(n):]
    elif kind == "extend":
        b += bytes(rng.randint(1, 4096)) if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(64))
    elif kind == "dup":
        a = rng.randrange(n)
        chunk = b[a:a + rng.randint(1, 256)]
        at = rng.randrange(n + 1)
        b[at:at] = chunk
    elif kind == "delete":
        a = pick()
        del b[a:a + rng.randint(1, 64)]
    else:
        at = pick()
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return kind, bytes(b)


# --------------------------------------------------------------------------------- LoDTensors


def _tensor_spans(data: bytes) -> list[tuple[int, int]]:
    from pdlite.model_parser import read_lod_tensor

    spans, pos = [], 0
    while pos < len(data):
        _, end = read_lod_tensor(data, pos, "seed", "seed", copy=False)
        spans.append((pos, end))
        pos = end
    return spans


def mutate_tensor(data: bytes, rng: random.Random) -> bytes:
    """Rewrite one tensor's header: version, lod level and sizes, TensorDesc (dims, type, size)."""
    spans = _tensor_spans(data)
    if not spans:
        return data
    a, e = rng.choice(spans)
    t = data[a:e]
    lod_level = int.from_bytes(t[4:12], "little")
    pos = 12
    lods = []
    for _ in range(lod_level):
        size = int.from_bytes(t[pos:pos + 8], "little")
        lods.append(t[pos + 8:pos + 8 + size])
        pos += 8 + size
    desc_size = int.from_bytes(t[pos + 4:pos + 8], "little")
    desc = t[pos + 8:pos + 8 + desc_size]
    payload = t[pos + 8 + desc_size:]
    version, tversion = 0, 0
    kind = rng.choice(["desc", "desc", "desc", "lod", "lodsize", "version", "descsize"])
    lod_sizes = [len(x) for x in lods]
    desc_len = None
    if kind == "desc":
        desc = mutate_proto(desc, rng, dims_path=(2,), dtype_path=(1,))
    elif kind == "lod":
        n = rng.choice([1, 2, 3, 65, 2**40, 2**63])
        lods = [bytes(8 * rng.randint(0, 4)) for _ in range(min(n, 3))]
        lod_sizes = [len(x) for x in lods]
        lod_level = n
    elif kind == "lodsize":
        lods = lods or [struct.pack("<2Q", 0, 1)]
        lod_level = len(lods)
        lod_sizes = [len(x) for x in lods]
        lod_sizes[rng.randrange(len(lods))] = rng.choice([7, 2**40, 2**63, 2**64 - 8, 16])
    elif kind == "version":
        version, tversion = rng.choice([(1, 0), (0, 1), (2**32 - 1, 0)])
    else:
        desc_len = rng.choice([-1, 0, 2**31 - 1, len(desc) + 1, len(desc) - 1])
    out = bytearray(struct.pack("<IQ", version, lod_level & (2**64 - 1)))
    for size, lv in zip(lod_sizes, lods):
        out += struct.pack("<Q", size) + lv
    out += struct.pack("<Ii", tversion, len(desc) if desc_len is None else desc_len) + desc + payload
    return data[:a] + bytes(out) + data[e:]


# ------------------------------------------------------------------------------------- JSON


def _json_nodes(x: Any, path: tuple = ()):
    yield path, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _json_nodes(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _json_nodes(v, path + (i,))


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return doc


def _other_value(rng: random.Random) -> Any:
    return rng.choice([0, -1, 2**63, -(2**63), 2**70, 1.5, 1e308, "", "x", "0.t_f32", [], {}, None, True, [1, 2],
                       {"#": "0.t_dtensor"}, [[[[]]]]])


def mutate_json(doc: Any, rng: random.Random) -> Any:
    """A JSON-aware edit of a (PIR or .nb meta) document, in place where possible; returns the document."""
    nodes = list(_json_nodes(doc))
    kind = rng.choice(["retype", "delkey", "dims", "dims", "dtype", "attr", "opname", "valueid", "listedit",
                       "deep", "number"])
    if kind == "dims":
        cands = [(p, x) for p, x in nodes if isinstance(x, list) and x and all(type(d) is int for d in x)
                 and p and p[-1] in (1, "shape")]
        if cands:
            p, x = rng.choice(cands)
            if rng.random() < 0.2:
                return _set(doc, p, [rng.choice(INTERESTING) for _ in range(rng.choice([0, 9, 70, 500]))])
            x[rng.randrange(len(x))] = rng.choice(INTERESTING + [10**9, 3])
            return doc
    if kind == "dtype":
        cands = [p for p, x in nodes if isinstance(x, str) and (x.startswith(("0.t_", "1.t_")) or x in
                                                                 ("float32", "int64", "<f4", "<i8"))]
        if cands:
            new = rng.choice(["0.t_f16", "0.t_i64", "0.t_bool", "0.t_vec", "0.t_unknown", "1.t_x", "int8",
                              "bfloat16", "complex128", "float99", "<c16", "|O", "V8", "<U4", "", "M8"])
            return _set(doc, rng.choice(cands), new)
    if kind == "attr":
        cands = [(p, x) for p, x in nodes if isinstance(x, dict) and "#" in x and "D" in x]
        if cands:
            p, x = rng.choice(cands)
            if rng.random() < 0.5:
                x["D"] = _other_value(rng)
            else:
                x["#"] = rng.choice(["0.a_i32", "0.a_array", "1.a_intarray", "1.a_scalar", "0.a_str", "0.a_bool",
                                     "0.a_f32", "1.a_dtype", "0.a_type", "0.a_zzz", "0.t_dtensor", "0.t_vec"])
            return doc
    if kind == "opname":
        cands = [(p, x) for p, x in nodes if isinstance(x, dict) and isinstance(x.get("#"), str) and "I" in x]
        if cands:
            names = [x["#"] for _, x in cands]
            p, x = rng.choice(cands)
            x["#"] = rng.choice(names + ["1.nope", "p", "0.combine", "0.split", "1.data", "1.fetch", "x"])
            return doc
    if kind == "valueid":
        cands = [(p, x) for p, x in nodes if isinstance(x, dict) and "%" in x]
        if cands:
            ids = [x["%"] for _, x in cands]
            p, x = rng.choice(cands)
            x["%"] = rng.choice(ids + [0, -1, 2**63, 10**6])
            return doc
    if kind == "listedit":
        cands = [(p, x) for p, x in nodes if isinstance(x, list) and x]
        if cands:
            p, x = rng.choice(cands)
            i = rng.randrange(len(x))
            op = rng.choice(["dup", "del", "swap", "append"])
            if op == "dup":
                x.insert(i, json.loads(json.dumps(x[i])))
            elif op == "del":
                del x[i]
            elif op == "swap":
                j = rng.randrange(len(x))
                x[i], x[j] = x[j], x[i]
            else:
                x.append(_other_value(rng))
            return doc
    if kind == "deep":
        p, _ = rng.choice(nodes)  # filled in by _dump_json (json.dumps itself would recurse)
        return _set(doc, p, f"__DEEP_{rng.choice(['list', 'vec'])}_{rng.choice([50, 900, 5000, 100000])}__")
    if kind == "number":
        cands = [p for p, x in nodes if type(x) in (int, float)]
        if cands:
            return _set(doc, rng.choice(cands), rng.choice(INTERESTING + [1e308, -0.0, 0.5]))
    if kind == "delkey":
        cands = [x for _, x in nodes if isinstance(x, dict) and x]
        if cands:
            x = rng.choice(cands)
            del x[rng.choice(list(x))]
            return doc
    p, _ = rng.choice(nodes)
    return _set(doc, p, _other_value(rng))


def _dump_json(doc: Any) -> bytes:
    def deep(m: re.Match) -> str:
        n = int(m.group(2))
        if m.group(1) == "list":
            return "[" * n + "1" + "]" * n
        return '{"#":"0.t_vec","D":[' * n + '{"#":"0.t_f32"}' + "]}" * n

    return re.sub(r'"__DEEP_(list|vec)_(\d+)__"', deep, json.dumps(doc)).encode()


# ----------------------------------------------------------------------------------------- .nb


def _nb_build(meta: bytes, prog: bytes, data: bytes, head_over: dict[int, int] | None = None) -> bytes:
    """A `.nb` with these sections and consistent header/checksums (header fields then overridden)."""
    from pdlite.model_parser import naive_buffer as nbf

    meta_off = nbf.HEADER_SIZE
    prog_off = meta_off + len(meta)
    data_off = nbf._align(prog_off + len(prog))
    fields = [nbf.MAGIC, nbf.FORMAT_VERSION, nbf.HEADER_SIZE, b"fuzz", meta_off, len(meta), prog_off, len(prog),
              data_off, len(data), zlib.crc32(meta), zlib.crc32(prog), zlib.crc32(data), 0, data_off + len(data), 0, 0]
    for k, v in (head_over or {}).items():
        fields[k] = v & ((1 << (64 if 4 <= k <= 9 or k == 14 else 32)) - 1)
    head = nbf._HEADER.pack(*fields)
    head = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4]))
    return head + meta + prog + bytes(data_off - prog_off - len(prog)) + data


def mutate_nb(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Edits that fix the checksums up afterwards, so they reach the parser behind them."""
    from pdlite.model_parser import naive_buffer as nbf

    h = nbf._HEADER.unpack_from(data, 0)
    meta = data[h[4]:h[4] + h[5]]
    prog = data[h[6]:h[6] + h[7]]
    body = data[h[8]:h[8] + h[9]]
    kind = rng.choice(["nb-header", "nb-meta", "nb-meta", "nb-meta", "nb-program"])
    if kind == "nb-header":
        k = rng.choice([1, 2, 4, 5, 6, 7, 8, 9, 13, 14, 15])
        return kind, _nb_build(meta, prog, body, {k: rng.choice(INTERESTING)})
    if kind == "nb-meta":
        doc = json.loads(meta)
        if rng.random() < 0.6:  # aim at the tensor table and the kernel keys
            key = rng.choice(["tensors", "kernels", "release", "feed_names", "fetch_names", "valid_places"])
            doc[key] = mutate_json(doc.get(key), rng)
        else:
            doc = mutate_json(doc, rng)
        return kind, _nb_build(_dump_json(doc), prog, body)
    return kind, _nb_build(meta, mutate_proto(prog, rng), body)


# --------------------------------------------------------------------------------- mutations


def _files(fmt: str, d: Path) -> list[tuple[str, float]]:
    """(file, weight) of the files a mutation of `fmt` may change."""
    if fmt == "nb":
        return [("model.nb", 1.0)]
    if fmt == "pir":
        return [("inference.json", 0.65), ("inference.pdiparams", 0.35)]
    if fmt == "noncombined":
        params = sorted(p.name for p in d.iterdir() if p.name != "__model__")
        return [("__model__", 0.45)] + [(p, 0.55 / len(params)) for p in params]
    names = ("inference.pdmodel", "inference.pdiparams") if fmt == "pdmodel" else ("__model__", "__params__")
    return [(names[0], 0.5), (names[1], 0.5)]


def make_mutation(seed: int, fmt: str, i: int, seeds: Path) -> dict[str, Any]:
    """Mutation `i` of format `fmt`: which seed model, which file, how, and the new bytes."""
    rng = random.Random(f"{seed}/{fmt}/{i}")
    model = rng.choice(seed_models(seeds, fmt))
    files = _files(fmt, model)
    fname = rng.choices([f for f, _ in files], [w for _, w in files])[0]
    data = (model / fname).read_bytes()
    aware = rng.random() < 0.5
    how = "bytes"
    new = data
    try:
        if aware and fmt == "nb":
            how, new = mutate_nb(data, rng)
        elif aware and fname.endswith(".json"):
            how, new = "json", _dump_json(mutate_json(json.loads(data), rng))
        elif aware and fname in ("inference.pdmodel", "__model__"):
            how, new = "proto", mutate_proto(data, rng)
        elif aware:
            how, new = "tensor", mutate_tensor(data, rng)
        else:
            how, new = mutate_bytes(data, rng)
    except (ValueError, KeyError, IndexError, TypeError, struct.error):  # the seed did not fit the mutator
        how, new = mutate_bytes(data, rng)
    if new == data:  # never test the seed itself
        how, new = "truncate", data[: rng.randrange(len(data))]
    return {"i": i, "fmt": fmt, "model": model.name, "file": fname, "how": how, "data": new,
            "variant": rng.randrange(3)}


# ----------------------------------------------------------------------------------- loading


class _Hang(BaseException):
    pass


def _load(fmt: str, d: Path, variant: int) -> None:
    """Load the model in `d` the way `variant` says (folder, files, buffers; .nb: read, mmap, buffer)."""
    from pdlite.model_parser import load_model, serialize_program
    from pdlite.model_parser.naive_buffer import load_naive_buffer, load_naive_buffer_bytes

    if fmt == "nb":
        p = d / "model.nb"
        if variant == 2:
            m = load_naive_buffer_bytes(p.read_bytes(), "<nb buffer>")
        else:
            m = load_naive_buffer(p, use_mmap=variant == 1)
        for a in m.params.values():
            a.tobytes()
        m.valid_places()
        return
    model, params = {"pdmodel": ("inference.pdmodel", "inference.pdiparams"), "combined": ("__model__", "__params__"),
                     "pir": ("inference.json", "inference.pdiparams")}.get(fmt, ("__model__", None))
    if variant == 0 or fmt == "noncombined":
        m = load_model(model_dir=d)
    elif variant == 1:
        m = load_model(model_file=d / model, param_file=d / params)
    else:
        m = load_model(model_buffer=(d / model).read_bytes(), param_buffer=(d / params).read_bytes())
    for t in m.params.values():
        t.array.tobytes()
    if fmt != "pir":
        serialize_program(m.program)


def _predict(fmt: str, d: Path) -> None:
    """Stage "predictor": make the predictor a user would (analysis or .nb rebuild) and run it once."""
    import numpy as np

    from pdlite.api import CxxConfig, MobileConfig, create_paddle_predictor

    if fmt == "nb":
        cfg: Any = MobileConfig()
        cfg.set_model_from_file(str(d / "model.nb"))
    else:
        cfg = CxxConfig()
        cfg.set_model_dir(str(d))
    pred = create_paddle_predictor(cfg)
    for n in pred.get_input_names():
        shape, dtype = pred._feed_specs[n]
        shape = [s if 0 < s < 64 else 2 for s in shape]
        if dtype is None or dtype.kind not in "biuf":
            dtype = np.dtype(np.float32)
        pred.get_input_by_name(n).from_numpy(np.ones(shape, dtype))
    pred.run()


def run_one(mut: dict[str, Any], seeds: Path, scratch: Path, per_timeout: float,
            stage: str = "load") -> dict[str, Any]:
    """Write the mutated file into a copy of its seed model, load it (stage "predictor": also make a
    predictor and run it), classify the outcome."""
    from pdlite.errors import ModelFormatError, PdliteError

    d = scratch / mut["fmt"] / mut["model"]
    if not d.is_dir():
        shutil.copytree(seeds / mut["fmt"] / mut["model"], d)
    target = d / mut["file"]
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(mut["data"])
    os.replace(tmp, target)  # a new file: an earlier mmap of the old one stays valid
    rec = {k: mut[k] for k in ("i", "fmt", "model", "file", "how", "variant")}
    signal.setitimer(signal.ITIMER_REAL, per_timeout)
    loaded = False
    try:
        _load(mut["fmt"], d, mut["variant"])
        loaded = True
        if mut["fmt"] == "nb" and not mut["how"].startswith("nb-"):
            rec["out"] = "silent"  # a corrupted .nb must never load
        elif stage == "predictor":
            _predict(mut["fmt"], d)
        rec.setdefault("out", "ok")
    except _Hang:
        rec.update(out="hang", msg=f"no result after {per_timeout} s", where=_where())
    except PdliteError as e:
        rec.update(out="error", cls=type(e).__name__, msg=str(e)[:300], stage="predictor" if loaded else "load")
        if not loaded and isinstance(e, ModelFormatError) and not any(n in str(e) for n in _names(mut, d)):
            rec["out"] = "unnamed"
    except MemoryError:
        rec.update(out="memory", cls="MemoryError", where=_where())
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
        rec.update(out="escape", cls=type(e).__name__, msg=str(e)[:300], where=_where(),
                   stage="predictor" if loaded else "load")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    orig = seeds / mut["fmt"] / mut["model"] / mut["file"]
    tmp.write_bytes(orig.read_bytes())
    os.replace(tmp, target)
    return rec


def _names(mut: dict[str, Any], d: Path) -> list[str]:
    if mut["variant"] == 2 and mut["fmt"] not in ("noncombined",):
        return ["<model buffer>", "<params buffer>", "<PIR model buffer>", "<nb buffer>"]
    return [str(d / mut["file"]), str(d)]


def _where() -> str:
    tb = traceback.extract_tb(sys.exc_info()[2])
    frames = [f for f in tb if "pdlite" in f.filename] or tb
    f = frames[-1]
    return f"{os.path.relpath(f.filename, REPO)}:{f.lineno} ({f.name})"


def _limit_memory(mem_mb: int) -> None:
    import resource

    with open("/proc/self/statm") as f:
        vsize = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vsize + mem_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def worker(seed: int, fmt: str, start: int, stop: int, seeds: Path, mem_mb: int, per_timeout: float,
           stage: str = "load") -> None:
    """Run mutations [start, stop) of `fmt`, one JSON line each on stdout."""
    import pdlite.api  # noqa: F401 - imports before the memory limit
    import pdlite.model_parser.pir  # noqa: F401

    if stage == "predictor":
        import pdlite.optimizer.analysis  # noqa: F401
        from pdlite.registries import load_registries

        load_registries()

    def alarm(*_: Any) -> None:
        raise _Hang

    signal.signal(signal.SIGALRM, alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    with tempfile.TemporaryDirectory(prefix="pdlite-fuzz-") as scratch:
        _limit_memory(mem_mb)
        sys.stdout.write('{"ready": true}\n')
        for i in range(start, stop):
            mut = make_mutation(seed, fmt, i, seeds)
            rec = run_one(mut, seeds, Path(scratch), per_timeout, stage)
            rec["bytes"] = len(mut["data"])
            sys.stdout.write(json.dumps(rec) + "\n")
            sys.stdout.flush()


# ------------------------------------------------------------------------------------ parent


def _run_batch(seed: int, fmt: str, start: int, stop: int, a: argparse.Namespace, out: list, lock) -> None:
    """Run a batch in worker subprocesses, restarting after a crash or hang (the culprit is recorded)."""
    nxt = start
    while nxt < stop:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(seed), "--format", fmt,
               "--start", str(nxt), "--stop", str(stop), "--seeds-dir", str(a.seeds_dir), "--mem-mb",
               str(a.mem_mb), "--per-timeout", str(a.per_timeout), "--stage", a.stage]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                             preexec_fn=(lambda: os.nice(a.nice)) if a.nice else None)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = b""
        killed = ready = False
        while True:
            if not sel.select(timeout=a.timeout):
                p.kill()
                killed = True
                break
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                rec = json.loads(line)
                if rec.get("ready"):
                    ready = True
                    continue
                with lock:
                    out.append(rec)
                nxt = rec["i"] + 1
        p.wait()
        err = p.stderr.read().decode(errors="replace")[-500:]
        sel.close()
        p.stdout.close()
        p.stderr.close()
        if not ready:
            raise SystemExit(f"a fuzz worker failed to start (exit {p.returncode}): {err}")
        if nxt < stop:  # the worker died or hung on mutation `nxt`
            mut = make_mutation(seed, fmt, nxt, a.seeds_dir)
            rec = {k: mut[k] for k in ("i", "fmt", "model", "file", "how", "variant")}
            rec.update(out="hang" if killed else "crash", bytes=len(mut["data"]),
                       msg=f"worker {'killed after ' + str(a.timeout) + ' s' if killed else 'exit ' + str(p.returncode)}"
                           f": {err.strip()[-300:]}")
            with lock:
                out.append(rec)
            nxt += 1


def campaign(a: argparse.Namespace) -> list[dict[str, Any]]:
    formats = a.format or list(FORMATS)
    per = {f: a.n // len(formats) + (1 if k < a.n % len(formats) else 0) for k, f in enumerate(formats)}
    batches = [(f, s, min(s + a.batch, per[f])) for f in formats for s in range(0, per[f], a.batch)]
    out: list[dict[str, Any]] = []
    lock = threading.Lock()

    def run() -> None:
        while True:
            with lock:
                if not batches:
                    return
                f, s, e = batches.pop(0)
            _run_batch(a.seed, f, s, e, a, out, lock)

    threads = [threading.Thread(target=run) for _ in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out, key=lambda r: (r["fmt"], r["i"]))


def summary(results: list[dict[str, Any]], seconds: float, a: argparse.Namespace) -> str:
    rows = ["| format | mutations | loaded | pdlite error | " + " | ".join(FAILURES) + " |",
            "|---|---|---|---|" + "---|" * len(FAILURES)]
    by = {f: Counter(r["out"] for r in results if r["fmt"] == f) for f in FORMATS}
    total: Counter[str] = Counter(r["out"] for r in results)
    for f in [*FORMATS, "total"]:
        c = total if f == "total" else by[f]
        n = sum(c.values())
        if n:
            rows.append(f"| {f} | {n} | {c['ok']} | {c['error']} | " + " | ".join(str(c[x]) for x in FAILURES) + " |")
    classes = Counter(r.get("cls") for r in results if r["out"] == "error")
    hows = Counter(r["how"] for r in results)
    lines = [f"seed {a.seed}, stage {a.stage}, {len(results)} mutations in {seconds:.1f} s ({a.jobs} workers, "
             f"memory limit +{a.mem_mb} MiB, timeout {a.per_timeout} s per mutation)", "", *rows, "",
             "pdlite errors by class: " + ", ".join(f"{k} {v}" for k, v in classes.most_common()),
             "mutations by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(hows.items()))]
    bad = [r for r in results if r["out"] in FAILURES]
    for r in bad[:40]:
        lines.append(f"FAIL {r['out']} ({r.get('stage', 'load')}): --format {r['fmt']} --only {r['i']} ({r['model']}/{r['file']}, {r['how']}, "
                     f"variant {r['variant']}): {r.get('cls', '')} {r.get('msg', '')[:200]} at {r.get('where', '?')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="mutations in all, split evenly over the formats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", action="append", choices=FORMATS, help="only these formats (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="worker subprocesses at a time")
    ap.add_argument("--batch", type=int, default=250, help="mutations per worker subprocess")
    ap.add_argument("--mem-mb", type=int, default=256, help="address space a worker may add after its imports")
    ap.add_argument("--per-timeout", type=float, default=10.0, help="seconds one mutation may take")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds without output before a worker is killed")
    ap.add_argument("--stage", choices=("load", "predictor"), default="load",
                    help="load: the model loaders; predictor: also make the predictor (analysis) and run it once")
    ap.add_argument("--nice", type=int, default=0, help="run the workers at this niceness")
    ap.add_argument("--seeds-dir", type=Path, help="seed models (built from the fixtures if absent)")
    ap.add_argument("--json", type=Path, help="write every result (one JSON object a line) here")
    ap.add_argument("--only", type=int, help="replay one mutation in this process, with its traceback")
    ap.add_argument("--save", type=Path, help="with --only: also write the mutated model folder here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.seed, a.format[0], a.start, a.stop, a.seeds_dir, a.mem_mb, a.per_timeout, a.stage)
        return 0
    with tempfile.TemporaryDirectory(prefix="pdlite-fuzz-seeds-") as tmp:
        if a.seeds_dir is None or not a.seeds_dir.is_dir():
            a.seeds_dir = a.seeds_dir or Path(tmp)
            build_seeds(a.seeds_dir)
        if a.only is not None:
            return _replay(a)
        t0 = time.time()
        results = campaign(a)
        text = summary(results, time.time() - t0, a)
    print(text)
    if a.json:
        a.json.write_text("".join(json.dumps(r) + "\n" for r in results))
    return 1 if any(r["out"] in FAILURES for r in results) else 0


def _replay(a: argparse.Namespace) -> int:
    fmt = (a.format or ["pdmodel"])[0]
    mut = make_mutation(a.seed, fmt, a.only, a.seeds_dir)
    print(f"mutation {a.only} of {fmt}: {mut['model']}/{mut['file']}, {mut['how']}, variant {mut['variant']}, "
          f"{len(mut['data'])} bytes")
    if a.save:
        shutil.copytree(a.seeds_dir / fmt / mut["model"], a.save, dirs_exist_ok=True)
        (a.save / mut["file"]).write_bytes(mut["data"])
        print(f"written to {a.save}")
    with tempfile.TemporaryDirectory() as scratch:
        d = Path(scratch) / "m"
        shutil.copytree(a.seeds_dir / fmt / mut["model"], d)
        (d / mut["file"]).write_bytes(mut["data"])
        try:
            _load(fmt, d, mut["variant"])
            print("loaded")
            if a.stage == "predictor":
                _predict(fmt, d)
                print("predictor made and run")
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
