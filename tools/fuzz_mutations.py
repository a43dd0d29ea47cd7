"""Mutations for tools/fuzz_loaders.py: bytes, protobuf wire trees, LoDTensor headers, JSON, `.nb` files.

Every mutator takes the original bytes (or a parsed JSON document) and a `random.Random`, and is a
pure function of them, so a mutation is replayed from its seed.
"""
from __future__ import annotations

import json
import random
import re
import struct
import zlib
from typing import Any

INTERESTING = [0, 1, 2, 7, 8, 64, 127, 128, 255, 256, 2**15, 2**16, 2**31 - 1, 2**31, 2**32, 2**40, 2**53,
               2**62, 2**63 - 1, 2**64 - 1, -1, -2, -(2**31), -(2**63)]


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
        p, _ = rng.choice(nodes)  # filled in by dump_json (json.dumps itself would recurse)
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


def dump_json(doc: Any) -> bytes:
    def deep(m: re.Match) -> str:
        n = int(m.group(2))
        if m.group(1) == "list":
            return "[" * n + "1" + "]" * n
        return '{"#":"0.t_vec","D":[' * n + '{"#":"0.t_f32"}' + "]}" * n

    return re.sub(r'"__DEEP_(list|vec)_(\d+)__"', deep, json.dumps(doc)).encode()


# ----------------------------------------------------------------------------------------- .nb


def nb_build(meta: bytes, prog: bytes, data: bytes, head_over: dict[int, int] | None = None) -> bytes:
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
        return kind, nb_build(meta, prog, body, {k: rng.choice(INTERESTING)})
    if kind == "nb-meta":
        doc = json.loads(meta)
        if rng.random() < 0.6:  # aim at the tensor table and the kernel keys
            key = rng.choice(["tensors", "kernels", "release", "feed_names", "fetch_names", "valid_places"])
            doc[key] = mutate_json(doc.get(key), rng)
        else:
            doc = mutate_json(doc, rng)
        return kind, nb_build(dump_json(doc), prog, body)
    return kind, nb_build(meta, mutate_proto(prog, rng), body)
