"""Helpers of the host-kernel tests: run one op through its definition and host kernel, and
(optionally) through Paddle's own legacy executor as a reference.

`run_op` builds an OpDesc, fills defaults with `OPS[type].attach`, picks the host kernel,
runs it, and checks that the op's shape inference agrees with the kernel's output shapes
(for ops that are not value-dependent, shape inference is fed zero-valued stand-ins, which
also checks that the `value_dependent` flag is honest).

`paddle_legacy` runs the same op in a separate process that imports paddle with PIR
disabled (FLAGS_enable_pir_api=0), builds a one-op legacy ProgramDesc and runs it on the old
executor: the same path that produced the model zoo's references. It skips when paddle is
not installed. A subprocess keeps paddle's global static/PIR mode out of this test process.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import pdlite.kernels.host  # noqa: F401  (registers the host kernels)
import pdlite.operators  # noqa: F401  (registers the ops)
from pdlite.core.program import OpDesc
from pdlite.core.types import ANY_PRECISION, FP32, HOST
from pdlite.kernels.registry import KERNELS, Kernel
from pdlite.operators.registry import OPS, ShapeContext

Ins = dict[str, Any]


def _as_lists(ins: Ins) -> dict[str, list[np.ndarray]]:
    return {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in ins.items() if v is not None}


def make_op(op_type: str, ins: Ins, attrs: dict | None = None, outs: dict[str, int] | None = None) -> OpDesc:
    """The OpDesc (defaults filled in) of one op whose input slots hold `ins`."""
    ins = _as_lists(ins)
    outs = outs or {"Out": 1}
    desc = OpDesc(
        op_type,
        {k: [f"{k}_{i}" for i in range(len(v))] for k, v in ins.items()},
        {k: [f"{k}_out_{i}" for i in range(n)] for k, n in outs.items()},
        dict(attrs or {}),
    )
    return OPS[op_type].attach(desc)


def kernel_class(op_type: str, precision=None) -> type[Kernel]:
    """The host kernel class of `op_type` (FP32 when there is one, unless `precision` says otherwise)."""
    defs = {k.precision: d for k, d in KERNELS.items() if k.op_type == op_type and k.target == HOST}
    assert defs, f"no host kernel registered for {op_type}"
    if precision is not None:
        return defs[precision].cls
    return (defs.get(FP32) or defs.get(ANY_PRECISION) or next(iter(defs.values()))).cls


def run_op(
    op_type: str,
    ins: Ins,
    attrs: dict | None = None,
    outs: dict[str, int] | None = None,
    precision=None,
    check_shapes: bool = True,
) -> dict[str, list[np.ndarray]]:
    """Run one op on the host kernel; returns every output slot (as lists of arrays)."""
    op = make_op(op_type, ins, attrs, outs)
    values = _as_lists(ins)
    kernel = kernel_class(op_type, precision)(op)
    got = kernel.run({k: list(v) for k, v in values.items()})
    for slot, arrs in got.items():
        assert slot in op.outputs, f"{op_type}: kernel returned slot {slot!r} the op does not have"
        for a in arrs:
            assert isinstance(a, np.ndarray), f"{op_type}.{slot}: kernel returned {type(a).__name__}, not ndarray"
    if check_shapes:
        check_infer_shape(op, values, got)
    return got


def check_infer_shape(op: OpDesc, values: dict[str, list[np.ndarray]], got: dict[str, list[np.ndarray]]) -> None:
    """Shape inference must predict the kernel's output shapes exactly."""
    opdef = OPS[op.type]
    if not opdef.value_dependent:
        values = {k: [np.zeros_like(v) for v in vs] for k, vs in values.items()}
    inferred = opdef.infer_shape(ShapeContext(op, values))
    for slot, arrs in got.items():
        assert slot in inferred, f"{op.type}: shape inference gives no {slot!r}"
        assert [tuple(s) for s in inferred[slot]] == [a.shape for a in arrs], (
            f"{op.type}.{slot}: inferred {inferred[slot]} but kernel produced {[a.shape for a in arrs]}"
        )


@contextmanager
def native_threads(n: int) -> Iterator[None]:
    """The native kernels run on `n` threads inside the block; the count before is put back after."""
    from pdlite.kernels.host import native

    old = native.get_num_threads()
    native.set_num_threads(n)
    try:
        yield
    finally:
        native.set_num_threads(old or 1)


@contextmanager
def shuffles16(on: bool) -> Iterator[None]:
    """The native kernels' forms built on 16x16 in-register transposes (the depthwise kernel's channel-blocked form
    on small maps, packed_conv's vector write-out) on (or off: the planar depthwise forms, the scalar write-out)
    inside the block, whatever this CPU's default; the setting before is put back after."""
    from pdlite.kernels.host import native

    before = native._ext._set_shuffles16(on)
    try:
        yield
    finally:
        native._ext._set_shuffles16(before)


@contextmanager
def depthwise_rows(on: bool) -> Iterator[None]:
    """The native depthwise kernel's row-vector form (maps 9 to 64 wide; AVX-512, and its 3x3 forms on AVX2) on
    or off inside the block; the setting before is put back after."""
    from pdlite.kernels.host import native

    before = native._ext._set_depthwise_rows(on)
    try:
        yield
    finally:
        native._ext._set_depthwise_rows(before)


def run1(op_type: str, ins: Ins, attrs: dict | None = None, **kw: Any) -> np.ndarray:
    """The single `Out` of an op."""
    return run_op(op_type, ins, attrs, **kw)["Out"][0]


def assert_ulp(got: np.ndarray, ref: np.ndarray, ulps: float, what: str = "") -> None:
    """|got - ref| <= ulps * ulp(ref) elementwise (in got's float dtype), NaNs matching."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    ref64 = ref.astype(np.float64)
    spacing = np.spacing(np.abs(ref.astype(got.dtype))).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref64)
    nan = np.isnan(ref64)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    same_inf = np.isinf(ref64) & (got.astype(np.float64) == ref64)
    bad = ~nan & ~same_inf & (err > ulps * spacing)
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} elements beyond {ulps} ulp; worst at x-index "
        f"{np.unravel_index(np.argmax(np.where(bad, err / spacing, 0)), bad.shape)}: "
        f"got {got[bad][:3]}, ref {ref[bad][:3]}"
    )


def assert_close(got: np.ndarray, ref: np.ndarray, rtol: float = 1e-6, atol_rel: float = 1e-6, what: str = "") -> None:
    """|got - ref| <= rtol * |ref| + atol_rel * max|ref|, shapes and dtypes checked by the caller."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    scale = float(np.max(np.abs(ref64))) if ref.size else 0.0
    np.testing.assert_allclose(got64, ref64, rtol=rtol, atol=atol_rel * scale, err_msg=what)


# --- Paddle's legacy executor as a reference (separate process) ----------------------------------
_SERVER = r"""
import os, pickle, struct, sys
proto = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # anything paddle prints goes to stderr, not into the protocol
import numpy as np
import paddle

def read():
    head = sys.stdin.buffer.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(sys.stdin.buffer.read(n))

def write(obj):
    data = pickle.dumps(obj)
    proto.write(struct.pack("<Q", len(data)) + data)
    proto.flush()

def run(op_type, inputs, attrs, outputs):
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            block = main.global_block()
            ins, feed = {}, {}
            for slot, arrs in inputs.items():
                vs = []
                for i, a in enumerate(arrs):
                    name = f"{slot}_{i}"
                    vs.append(paddle.static.data(name, list(a.shape), str(a.dtype)))
                    feed[name] = a
                ins[slot] = vs
            outs, fetch = {}, []
            for slot, n in outputs.items():
                vs = [block.create_var(name=f"out_{slot}_{i}", dtype="float32") for i in range(n)]
                outs[slot] = vs
                if slot not in ("XShape", "Mask"):  # shape carriers / training masks: not compared
                    fetch += vs
            block.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs)
        exe = paddle.static.Executor(paddle.CPUPlace())
        res = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)  # LoD outputs too
        it = iter(res)
        return {slot: [np.asarray(next(it)) for _ in range(n)] for slot, n in outputs.items() if slot not in ("XShape", "Mask")}
    finally:
        paddle.disable_static()

while True:
    req = read()
    if req is None:
        break
    try:
        write(("ok", run(*req)))
    except Exception as e:
        write(("error", f"{type(e).__name__}: {e}"[:4000]))
"""


class _PaddleServer:
    def __init__(self) -> None:
        env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_minloglevel="2", OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        atexit.register(self.close)

    def call(self, req: tuple) -> tuple[str, Any]:
        data = pickle.dumps(req)
        self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
        self.proc.stdin.flush()
        head = self.proc.stdout.read(8)
        if len(head) < 8:
            raise RuntimeError("the paddle reference process died (see stderr)")
        (n,) = struct.unpack("<Q", head)
        return pickle.loads(self.proc.stdout.read(n))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_server: _PaddleServer | None = None


def paddle_legacy(
    op_type: str, ins: Ins, attrs: dict | None = None, outs: dict[str, int] | None = None
) -> dict[str, list[np.ndarray]]:
    """Run one legacy op on Paddle's CPU executor (skips the test when paddle is not installed)."""
    global _server
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("paddle is not installed")
    if _server is None or _server.proc.poll() is not None:
        _server = _PaddleServer()
    status, res = _server.call((op_type, _as_lists(ins), dict(attrs or {}), outs or {"Out": 1}))
    if status != "ok":
        raise AssertionError(f"paddle failed on {op_type}: {res}")
    return res


XSHAPE_OPS = ("reshape2", "flatten2", "flatten_contiguous_range", "transpose2", "squeeze2", "unsqueeze2")


def paddle1(op_type: str, ins: Ins, attrs: dict | None = None) -> np.ndarray:
    """The single `Out` of a legacy op run by Paddle (ops that need an XShape or Mask output get one)."""
    outs = {"Out": 1, "XShape": 1} if op_type in XSHAPE_OPS else {"Out": 1}
    if op_type == "dropout":
        outs["Mask"] = 1
    return paddle_legacy(op_type, ins, attrs, outs)["Out"][0]
