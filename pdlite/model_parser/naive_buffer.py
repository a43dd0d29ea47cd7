"""pdlite's optimized model file, `.nb` (the role of Paddle-Lite's naive buffer).

One file holds what a light predictor needs to run without analysing again: the program
after every pass (block 0 in execution order), the kernel picked for each of its ops, the
feed and fetch names, and the params laid out for fast loading. Layout (docs/nb_format.md):

    header (128 bytes)  magic "PDLITENB", format version, header length, writer's pdlite version,
                        offset/size/crc32 of each section, file size, header crc32
    meta section        UTF-8 JSON: kernel keys (one per block-0 op), feed/fetch names, tensor table
    program section     ProgramDesc protobuf (pdlite.model_parser.serialize_program)
    data section        params, each 64-byte aligned (file offset), little-endian, C order

The loader reads the whole file with one `readinto` into a 64-byte aligned buffer (or maps
it), checks the header, sizes and checksums, then makes each param a NumPy view into it.
Any mismatch (magic, format version, size, checksum, table) raises ModelFormatError.
"""
from __future__ import annotations

import io
import json
import math
import mmap as _mmap
import os
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from pdlite.core.dtypes import var_type_of
from pdlite.core.program import BlockDesc, OpDesc, Program
from pdlite.core.types import DataLayoutType, Place, PrecisionType, TargetType
from pdlite.errors import ModelFormatError
from pdlite.kernels.registry import KernelKey
from pdlite.operators.registry import complete_program
from pdlite.registries import load_registries

if TYPE_CHECKING:
    from pdlite.optimizer.analysis import AnalysisResult

MAGIC = b"PDLITENB"
FORMAT_VERSION = 1
ALIGN = 64
MAX_RANK = 32  # a tensor of higher rank in the table is taken to be corrupt
# The first 48 bytes (magic, format version, header length, pdlite version) stay the same in
# every format version, so that a reader can always say which version and writer it found.
_PREFIX = struct.Struct("<8sII32s")
_HEADER = struct.Struct("<8sII32s6Q4IQ2I")
HEADER_SIZE = _HEADER.size  # 128
assert HEADER_SIZE == 128
# Paddle's debugging attributes: no kernel reads them, and op_callstack (Python stack traces) is
# often most of a program's bytes and of its parse time. Left out of the stored program.
DEBUG_ATTRS = frozenset({"op_callstack", "op_namescope", "op_role", "op_role_var", "op_device"})


@dataclass
class NaiveBufferModel:
    """A loaded `.nb`: the optimized program, one kernel key per block-0 op, params, names, metadata."""

    program: Program
    kernel_keys: list[KernelKey]
    params: dict[str, np.ndarray]
    feed_names: list[str]
    fetch_names: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # per block-0 op: intermediates the runtime drops after it (memory_optimize_pass's plan)
    release: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def pdlite_version(self) -> str:
        return str(self.meta.get("pdlite_version", ""))

    def valid_places(self) -> list[Place]:
        return [_place_from_json(p, self.source) for p in self.meta.get("valid_places", [])]


# -- writing ------------------------------------------------------------------------------------

def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _key_to_json(k: KernelKey) -> list[str]:
    return [k.op_type, k.target.name, k.precision.name, k.layout.name, k.alias]


def _place_to_json(p: Place) -> list[str]:
    return [p.target.name, p.precision.name, p.layout.name]


def _version_bytes() -> bytes:
    from pdlite import __version__

    return __version__.encode("utf-8")[:32]


def write_naive_buffer(
    out: str | os.PathLike | BinaryIO,
    program: Program,
    kernel_keys: Sequence[KernelKey],
    params: Mapping[str, np.ndarray],
    feed_names: Sequence[str],
    fetch_names: Sequence[str],
    extra_meta: Mapping[str, Any] | None = None,
    release: Sequence[Sequence[str]] | None = None,
) -> int:
    """Write a `.nb` (to a path or a binary file object); returns the number of bytes written.

    `kernel_keys[i]` is the kernel of `program.main.ops[i]`, `release[i]` the intermediates to
    drop after it runs. The output is deterministic: the same inputs give the same bytes (no
    time stamps; tensors in name order).
    """
    from pdlite.model_parser import serialize_program

    if len(kernel_keys) != len(program.main.ops):
        raise ModelFormatError(f"write_naive_buffer: {len(kernel_keys)} kernel keys for "
                               f"{len(program.main.ops)} ops of block 0")
    if release is not None and len(release) != len(program.main.ops):
        raise ModelFormatError(f"write_naive_buffer: {len(release)} release lists for "
                               f"{len(program.main.ops)} ops of block 0")
    arrays: list[tuple[str, np.ndarray, int]] = []
    table = []
    off = 0
    for name in sorted(params):
        arr = np.asarray(params[name])
        if arr.dtype == object:
            raise ModelFormatError(f"write_naive_buffer: param {name!r} is an object array")
        vt = int(var_type_of(arr.dtype))
        le = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
        table.append({"name": name, "dtype": le.dtype.str, "var_type": vt, "shape": list(arr.shape),
                      "offset": off, "nbytes": int(le.nbytes)})
        arrays.append((name, le, off))
        off = _align(off + le.nbytes)
    data_size = off
    meta: dict[str, Any] = dict(extra_meta or {})
    meta.update({
        "format": "pdlite.nb",
        "format_version": FORMAT_VERSION,
        "pdlite_version": _version_bytes().decode("utf-8", "replace"),
        "feed_names": list(feed_names),
        "fetch_names": list(fetch_names),
        "kernels": [_key_to_json(k) for k in kernel_keys],
        "release": [list(r) for r in release] if release is not None else [[] for _ in kernel_keys],
        "tensors": table,
    })
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode("utf-8")
    prog_bytes = serialize_program(program)

    meta_off = HEADER_SIZE
    prog_off = meta_off + len(meta_bytes)
    data_off = _align(prog_off + len(prog_bytes))
    file_size = data_off + data_size

    data_crc = 0
    pos = 0
    for _, le, o in arrays:  # the crc runs over the data section exactly as written (padding = zeros)
        if o > pos:
            data_crc = zlib.crc32(bytes(o - pos), data_crc)
        data_crc = zlib.crc32(memoryview(le.reshape(-1).view(np.uint8)), data_crc)
        pos = o + le.nbytes
    if data_size > pos:
        data_crc = zlib.crc32(bytes(data_size - pos), data_crc)

    head = _HEADER.pack(MAGIC, FORMAT_VERSION, HEADER_SIZE, _version_bytes(),
                        meta_off, len(meta_bytes), prog_off, len(prog_bytes), data_off, data_size,
                        zlib.crc32(meta_bytes), zlib.crc32(prog_bytes), data_crc, 0, file_size, 0, 0)
    head = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4]))

    own = not hasattr(out, "write")
    f: BinaryIO = open(out, "wb") if own else out  # type: ignore[arg-type,assignment]
    try:
        f.write(head)
        f.write(meta_bytes)
        f.write(prog_bytes)
        f.write(bytes(data_off - prog_off - len(prog_bytes)))
        pos = 0
        for _, le, o in arrays:
            if o > pos:
                f.write(bytes(o - pos))
            f.write(memoryview(le.reshape(-1).view(np.uint8)))
            pos = o + le.nbytes
        if data_size > pos:
            f.write(bytes(data_size - pos))
    finally:
        if own:
            f.close()
    return file_size


def naive_buffer_bytes(*args: Any, **kw: Any) -> bytes:
    """write_naive_buffer into memory (same arguments after `out`)."""
    buf = io.BytesIO()
    write_naive_buffer(buf, *args, **kw)
    return buf.getvalue()


@dataclass
class OptimizedModel:
    """What an `.nb` stores for an analysis result (see `optimized_model`)."""

    program: Program
    kernel_keys: list[KernelKey]
    params: dict[str, np.ndarray]
    release: list[tuple[str, ...]]


def optimized_model(analysis: AnalysisResult) -> OptimizedModel:
    """The program, kernel keys, params and release lists an `.nb` stores for an analysis result.

    Block 0 is the graph after all passes, ops in the order the runtime program runs them;
    other blocks are kept as loaded. Params are the persistable values every stored op reads,
    taken from `analysis.ctx.params` (folding passes update it). Ops lose DEBUG_ATTRS.
    """
    graph = analysis.graph
    order = graph.topological_order()
    keys: list[KernelKey] = []
    for n in order:
        kd = n.info.get("kernel")
        if kd is None:
            raise ModelFormatError(f"op {n.name} has no picked kernel: cannot save an optimized model "
                                   "from a graph whose kernels were not picked")
        if n.info.get("kernel_instance") is not None and n.name != "subgraph":  # subgraphs are re-bound on load
            raise ModelFormatError(f"op {n.name}: its kernel was built by a pass (kernel_instance) and cannot be "
                                   "stored in an optimized model; save it without that pass")
        keys.append(kd.key)
    release = [tuple(n.info.get("release", ())) for n in order]
    ops = [_without_debug_attrs(n.op) for n in order if n.op is not None]
    feed, fetch = list(analysis.feed_names), list(analysis.fetch_names)
    src = analysis.program
    used = {v.name for n in order for v in n.inputs + n.outputs} | set(feed) | set(fetch)
    for b in src.blocks[1:]:  # sub-blocks may read block-0 variables that no block-0 op uses any more
        used.update(n for op in b.ops for n in op.input_names() + op.output_names())
    vars_ = {k: v for k, v in graph.vars.items() if k in used}
    b0 = src.main
    block = BlockDesc(b0.idx, b0.parent_idx, vars_, ops, b0.forward_block_idx)
    program = Program([block, *src.blocks[1:]], src.version, list(src.op_version_map), dict(src.extra))
    read = {n for b in program.blocks for op in b.ops for n in op.input_names()} | set(fetch)
    params = {n: analysis.ctx.params[n] for n in sorted(read) if n in analysis.ctx.params and n not in feed}
    return OptimizedModel(program, keys, params, release)


def _without_debug_attrs(op: OpDesc) -> OpDesc:
    if not DEBUG_ATTRS.intersection(op.attrs):
        return op
    op = op.copy()
    for k in DEBUG_ATTRS:
        op.attrs.pop(k, None)
        op.attr_types.pop(k, None)
    return op


def save_optimized_model(analysis: AnalysisResult, path: str | os.PathLike,
                         extra_meta: Mapping[str, Any] | None = None) -> int:
    """Write the `.nb` of an analysis result to `path` (exactly; callers add the suffix)."""
    m = optimized_model(analysis)
    meta = {"valid_places": [_place_to_json(p) for p in analysis.ctx.valid_places]}
    meta.update(extra_meta or {})
    return write_naive_buffer(path, m.program, m.kernel_keys, m.params, analysis.feed_names,
                              analysis.fetch_names, meta, m.release)


# -- reading ------------------------------------------------------------------------------------

def _aligned_buffer(nbytes: int) -> np.ndarray:
    """A writable uint8 array of `nbytes` whose first byte is 64-byte aligned."""
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    shift = (-raw.ctypes.data) % ALIGN
    return raw[shift:shift + nbytes]


def load_naive_buffer(path: str | os.PathLike, *, use_mmap: bool = False, verify: bool = True) -> NaiveBufferModel:
    """Load a `.nb` file: one read into an aligned buffer (or a copy-on-write memory map)."""
    source = os.fspath(path)
    try:
        f = open(source, "rb")
    except OSError as e:
        raise ModelFormatError(f"{source}: cannot open the optimized model: {e.strerror or e}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if use_mmap and size > 0:
            buf: Any = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)
            return parse_naive_buffer(buf, source, verify=verify, copy=False)
        arr = _aligned_buffer(size)
        got = f.readinto(memoryview(arr))
    if got != size:
        raise ModelFormatError(f"{source}: read {got} of {size} bytes (file changed while reading?)")
    return parse_naive_buffer(arr, source, verify=verify, copy=False)


def load_naive_buffer_bytes(data: bytes | bytearray | memoryview, source: str = "<buffer>",
                            *, verify: bool = True) -> NaiveBufferModel:
    """Load a `.nb` held in memory (params are copied once into an aligned buffer)."""
    return parse_naive_buffer(data, source, verify=verify, copy=True)


def _fail(source: str, msg: str) -> ModelFormatError:
    return ModelFormatError(f"{source}: {msg}")


def read_header(buf: Any, source: str) -> dict[str, int | str]:
    """Check magic, format version, header checksum and file size; return the header fields."""
    n = len(buf)
    magic = bytes(buf[:8])
    if magic != MAGIC:
        if n < 8 and MAGIC.startswith(magic):
            raise _fail(source, f"truncated: {n} bytes, too short for a pdlite optimized model header")
        raise _fail(source, f"not a pdlite optimized model (.nb): magic bytes {magic!r}, expected {MAGIC!r} "
                            "(convert a Paddle model with pdlite-opt first)")
    if n < _PREFIX.size:
        raise _fail(source, f"truncated: {n} bytes, the header alone needs {HEADER_SIZE}")
    _, version, header_len, writer = _PREFIX.unpack_from(buf, 0)
    writer_s = writer.rstrip(b"\0").decode("utf-8", "replace")
    if version != FORMAT_VERSION:
        from pdlite import __version__

        raise _fail(source, f"optimized model format version {version} (written by pdlite {writer_s or '?'}), "
                            f"but this pdlite {__version__} reads format version {FORMAT_VERSION}; "
                            "re-create the .nb from the original model with this pdlite's pdlite-opt")
    if n < HEADER_SIZE:
        raise _fail(source, f"truncated: {n} bytes, the header alone needs {HEADER_SIZE}")
    fields = _HEADER.unpack_from(buf, 0)
    (_, _, header_len, _, meta_off, meta_size, prog_off, prog_size, data_off, data_size,
     meta_crc, prog_crc, data_crc, flags, file_size, _, header_crc) = fields
    if zlib.crc32(bytes(buf[:HEADER_SIZE - 4])) != header_crc:
        raise _fail(source, "corrupt header (checksum mismatch)")
    if header_len != HEADER_SIZE:
        raise _fail(source, f"header length {header_len}, expected {HEADER_SIZE} for format {FORMAT_VERSION}")
    if n < file_size:
        raise _fail(source, f"truncated: {n} bytes, the header says the file has {file_size}")
    if n > file_size:
        raise _fail(source, f"{n - file_size} unexpected trailing bytes after the {file_size} the header declares")
    if data_off % ALIGN:
        raise _fail(source, f"data section offset {data_off} is not {ALIGN}-byte aligned")
    if meta_off != HEADER_SIZE or prog_off != meta_off + meta_size or data_off != _align(prog_off + prog_size) \
            or data_off + data_size != file_size:
        raise _fail(source, f"sections out of order: meta at {meta_off} (+{meta_size}), program at {prog_off} "
                            f"(+{prog_size}), data at {data_off} (+{data_size}), file size {file_size}")
    if any(bytes(buf[prog_off + prog_size:data_off])):
        raise _fail(source, f"corrupt: non-zero padding before the data section (offset {prog_off + prog_size})")
    return dict(version=version, writer=writer_s, meta_off=meta_off, meta_size=meta_size, prog_off=prog_off,
                prog_size=prog_size, data_off=data_off, data_size=data_size, meta_crc=meta_crc,
                prog_crc=prog_crc, data_crc=data_crc, flags=flags, file_size=file_size)


def _crc(buf: Any, off: int, size: int) -> int:
    return zlib.crc32(memoryview(buf)[off:off + size])


def parse_naive_buffer(buf: Any, source: str = "<buffer>", *, verify: bool = True,
                       copy: bool = False) -> NaiveBufferModel:
    """Parse a whole `.nb` held in `buf` (bytes-like, mmap or uint8 array).

    Params are views into `buf` unless `copy` (then they are views into one aligned copy of
    the data section). `verify=False` skips the data section's checksum (meta and program
    are always checked).
    """
    if isinstance(buf, np.ndarray):
        mv = memoryview(buf)
    else:
        mv = memoryview(buf).cast("B")
    h = read_header(mv, source)
    for name, o, s, c in (("meta", h["meta_off"], h["meta_size"], h["meta_crc"]),
                          ("program", h["prog_off"], h["prog_size"], h["prog_crc"])) + (
            (("data", h["data_off"], h["data_size"], h["data_crc"]),) if verify else ()):
        got = _crc(mv, int(o), int(s))
        if got != c:
            raise _fail(source, f"{name} section is corrupt (crc32 {got:08x}, expected {int(c):08x})")
    try:
        meta = json.loads(bytes(mv[h["meta_off"]:h["meta_off"] + h["meta_size"]]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise _fail(source, f"meta section is not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise _fail(source, "meta section is not a JSON object")

    from pdlite.model_parser import parse_program

    program = parse_program(bytes(mv[h["prog_off"]:h["prog_off"] + h["prog_size"]]), f"{source} (program section)")
    keys = [_key_from_json(k, source) for k in _get(meta, "kernels", list, source)]
    if len(keys) != len(program.main.ops):
        raise _fail(source, f"{len(keys)} kernel keys for {len(program.main.ops)} ops in block 0")
    for i, (k, op) in enumerate(zip(keys, program.main.ops)):
        if k.op_type != op.type:
            raise _fail(source, f"kernel key #{i} is for op {k.op_type!r} but op #{i} is {op.type!r}")

    for p in meta.get("valid_places", []) if isinstance(meta.get("valid_places", []), list) else [None]:
        _place_from_json(p, source)  # refused now rather than when a tool asks for them
    release = _get(meta, "release", list, source)
    if len(release) != len(keys) or not all(isinstance(r, list) and all(isinstance(x, str) for x in r)
                                            for r in release):
        raise _fail(source, f"meta section: 'release' must be {len(keys)} lists of variable names")

    data_off, data_size = int(h["data_off"]), int(h["data_size"])
    if copy:
        data = _aligned_buffer(data_size)
        data[:] = np.frombuffer(mv, np.uint8, data_size, data_off)
        base, base_off = memoryview(data), 0
    else:
        base, base_off = mv, data_off
    params = {}
    for t in _get(meta, "tensors", list, source):
        name, arr = _tensor_view(t, base, base_off, data_size, source)
        params[name] = arr
    feeds, fetches = _get(meta, "feed_names", list, source), _get(meta, "fetch_names", list, source)
    _check_against_program(program, params, feeds, fetches, source)
    load_registries()
    complete_program(program)  # the ops come back attached (files written before a default was added too)
    return NaiveBufferModel(program, keys, params, list(feeds), list(fetches), meta, source,
                            [tuple(r) for r in release])


def _check_against_program(program: Program, params: dict[str, np.ndarray], feeds: list, fetches: list,
                           source: str) -> None:
    """Feed and fetch names are variables of block 0; each param has the shape its variable declares."""
    for kind, names in (("feed", feeds), ("fetch", fetches)):
        for n in names:
            if not isinstance(n, str) or n not in program.main.vars:
                raise _fail(source, f"meta section: {kind} name {n!r:.80} is not a variable of block 0")
    declared = {}
    for b in program.blocks:
        for v in b.vars.values():
            declared.setdefault(v.name, v)
    for name, arr in params.items():
        v = declared.get(name)
        if v is None or not v.shape:
            continue
        want, got = list(v.shape), list(arr.shape)
        if len(want) == len(got) and all(w < 0 or w == g for w, g in zip(want, got)):
            continue
        if arr.size == 1 and len(got) <= 1 and want in ([], [1]):
            continue  # a 0-D param stored as [1] or the other way round
        raise _fail(source, f"param {name!r} has shape {got} in the tensor table, but the program declares {want}")


def _get(meta: dict, key: str, typ: type, source: str) -> Any:
    v = meta.get(key)
    if not isinstance(v, typ):
        raise _fail(source, f"meta section: {key!r} is missing or not a {typ.__name__}")
    return v


def _tensor_view(t: Any, base: memoryview, base_off: int, data_size: int, source: str) -> tuple[str, np.ndarray]:
    try:
        name, shape, off, nbytes = t["name"], t["shape"], t["offset"], t["nbytes"]
        dt = np.dtype(t["dtype"])
    except (KeyError, TypeError, ValueError) as e:
        raise _fail(source, f"tensor table entry {t!r:.200} is invalid: {e}") from None
    if not (isinstance(name, str) and isinstance(shape, list) and all(type(x) is int for x in [*shape, off, nbytes])):
        raise _fail(source, f"tensor table entry {t!r:.200} is invalid: expected a string name, a list of integer "
                            "dims and integer offset and nbytes")
    if dt.kind not in "biufc" or len(shape) > MAX_RANK or any(not 0 <= d < 2**62 for d in shape):
        raise _fail(source, f"tensor {name!r}: invalid dtype {dt} or shape {shape}")
    if math.prod(shape) * dt.itemsize != nbytes:
        raise _fail(source, f"tensor {name!r}: shape {shape} x {dt.itemsize} bytes != {nbytes} bytes in the table")
    if off < 0 or off % ALIGN or off + nbytes > data_size:
        raise _fail(source, f"tensor {name!r}: bytes [{off}, {off + nbytes}) are outside the data section "
                            f"(size {data_size}) or not {ALIGN}-byte aligned")
    arr = np.frombuffer(base, dtype=dt, count=math.prod(shape), offset=base_off + off).reshape(shape)
    if not dt.isnative:
        arr = arr.astype(dt.newbyteorder("="))
    return name, arr


def _enum(enum_cls: Any, name: Any, what: str, source: str) -> Any:
    try:
        return enum_cls[name]
    except (KeyError, TypeError):
        raise _fail(source, f"{what}: unknown {enum_cls.__name__} {name!r}") from None


def _key_from_json(k: Any, source: str) -> KernelKey:
    if not (isinstance(k, list) and len(k) == 5 and all(isinstance(x, str) for x in k)):
        raise _fail(source, f"kernel key {k!r} is not [op_type, target, precision, layout, alias]")
    what = f"kernel key {k!r}"
    return KernelKey(k[0], _enum(TargetType, k[1], what, source), _enum(PrecisionType, k[2], what, source),
                     _enum(DataLayoutType, k[3], what, source), k[4])


def _place_from_json(p: Any, source: str) -> Place:
    if not (isinstance(p, list) and len(p) == 3 and all(isinstance(x, str) for x in p)):
        raise _fail(source, f"meta section: place {p!r:.80} is not [target, precision, layout]")
    t, pr, la = p
    return Place(_enum(TargetType, t, "place", source), _enum(PrecisionType, pr, "place", source),
                 _enum(DataLayoutType, la, "place", source))
