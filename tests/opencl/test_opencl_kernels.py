"""OpenCL kernels against the host kernels, on the shared case lists (tests/kernels/_device_cases.py).

Every case whose op has an OpenCL kernel runs through it (on the first OpenCL device: PoCL's CPU device
in CI) and is compared with the host kernel of the same op: |got - ref| <= 1e-5 * |ref| + 1e-5 * max|ref|
(fp32, float accumulation in another order than the host's BLAS); the FP16 variants (half storage,
float arithmetic) on float16 activations within 3e-3 of max|ref| (FP16_REL). Cases the target leaves to
the host (NHWC, training-mode batch_norm) must be refused by the kernel's `supports`.
"""
from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, DataLayoutType, PrecisionType, TargetType
from pdlite.kernels.registry import KERNELS, KernelContext, KernelDef, KernelKey
from pdlite.operators.registry import OPS
from tests.conftest import assert_close_rel
from tests.kernels._device_cases import (
    ACTIVATION_CASES,
    CASES,
    ELEMENTWISE,
    ELEMENTWISE_SHAPES,
    FUSED_ELEMENTWISE,
    MORE_CASES,
    check_int_shape_arithmetic,
    rand,
)
from tests.kernels._util import make_op, run_op
from tests.opencl.conftest import opencl_ready

if opencl_ready():
    import pdlite.kernels.opencl  # noqa: F401  (registers the OpenCL kernels)
    from pdlite.kernels.opencl.device import cla, get_device

OPENCL, HOST = TargetType.OpenCL, TargetType.Host
FP32, FP16 = PrecisionType.FP32, PrecisionType.FP16
CTX = KernelContext({})
RTOL = 1e-5
FP16_REL = 3e-3  # fp16 storage vs the fp32 host kernel, of max|ref|
FP16_REL_BY_OP = {"elementwise_pow": 1e-2, "elementwise_floordiv": None, "elementwise_mod": None}


def ocl_def(op_type: str, precision: PrecisionType = FP32) -> KernelDef | None:
    for layout in (DataLayoutType.NCHW, ANY_LAYOUT):
        for p in (precision, ANY_PRECISION):
            kd = KERNELS.get(KernelKey(op_type, OPENCL, p, layout))
            if kd is not None:
                return kd
    return None


def run_ocl(op_type: str, ins: dict[str, Any], attrs: dict | None, params: tuple[str, ...] = (),
            outs: dict[str, int] | None = None, precision: PrecisionType = FP32) -> dict[str, list[np.ndarray]] | None:
    """Run the OpenCL kernel; slots in `params` arrive as parameters (prepare). None when `supports` refuses."""
    op = make_op(op_type, ins, attrs, outs)
    kd = ocl_def(op_type, precision)
    assert kd is not None, f"no OpenCL kernel for {op_type}"
    if not kd.cls.supports(OPS[op_type].attach(op)):
        return None
    kernel = kd.create(op, CTX)
    lists = {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in ins.items() if v is not None}
    kernel.prepare({op.inputs[s][i]: a for s in params for i, a in enumerate(lists[s])})
    feed = {}
    for slot, arrs in lists.items():
        host = kd.input_type(slot).target == HOST
        feed[slot] = list(arrs) if slot in params or host else [get_device().upload(a) for a in arrs]
    got = kernel.run(feed)
    return {s: [v.get() if isinstance(v, cla.Array) else np.asarray(v) for v in vals] for s, vals in got.items()}


def check(op_type: str, ins: dict[str, Any], attrs: dict | None = None, params: tuple[str, ...] = (),
          slot: str = "Out", precision: PrecisionType = FP32) -> None:
    """OpenCL kernel == host kernel (fp32: within RTOL; fp16: within FP16_REL of max|ref|)."""
    ref = run_op(op_type, ins, attrs, outs={slot: 1})[slot][0]
    if precision == FP16:
        ins = {k: v if k in params else _half(v) for k, v in ins.items()}
    res = run_ocl(op_type, ins, attrs, params, outs={slot: 1}, precision=precision)
    if res is None:
        assert _refusal_expected(attrs), f"{op_type} {attrs} refused"
        return
    got = res[slot][0]
    assert got.shape == ref.shape, f"{op_type}: {got.shape} vs {ref.shape}"
    if precision == FP16 and ref.dtype == np.float32:
        assert got.dtype == np.float16
        assert_close_rel(got, ref, FP16_REL_BY_OP.get(op_type, FP16_REL), f"{op_type} fp16")
        return
    assert got.dtype == ref.dtype, f"{op_type}: {got.dtype} vs {ref.dtype}"
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=RTOL, atol=RTOL * scale,
                               err_msg=f"{op_type} {attrs}")


def _half(v: Any) -> Any:
    """float32 activations (one array or a list of them) as float16."""
    if isinstance(v, list):
        return [_half(a) for a in v]
    return v.astype(np.float16) if isinstance(v, np.ndarray) and v.dtype == np.float32 else v


def _refusal_expected(attrs: dict | None) -> bool:
    """The forms left to the host (docs/opencl.md): NHWC layouts and training-mode batch_norm."""
    a = attrs or {}
    return a.get("data_format") == "NHWC" or a.get("data_layout") == "NHWC" or a.get("is_test") is False


def seeded(key: str) -> np.random.Generator:
    """A generator seeded by `key`: a test's values do not depend on which tests ran before it."""
    return np.random.default_rng(zlib.crc32(key.encode()))


def _has(op_type: str) -> bool:
    return ocl_def(op_type) is not None


# without OpenCL every case is listed (and skipped by tests/opencl/conftest.py with the reason)
ALL_CASES = [c for c in CASES + MORE_CASES if not opencl_ready() or _has(c[0])]
ELEMENTWISE_ALL = ELEMENTWISE + FUSED_ELEMENTWISE


def _has_fp16(op_type: str) -> bool:
    if not opencl_ready():
        return False
    kd = ocl_def(op_type, FP16)
    return kd is not None and kd.key.precision == FP16


# (case, precision): every case in fp32, those whose op has an FP16 variant in fp16 too
PRECISION_CASES = [(c, p, f"{c[0]}-{i}-{p.name.lower()}") for i, c in enumerate(ALL_CASES) for p in (FP32, FP16)
                   if p == FP32 or _has_fp16(c[0])]


@pytest.mark.parametrize("case,precision", [c[:2] for c in PRECISION_CASES], ids=[c[2] for c in PRECISION_CASES])
def test_kernel_matches_host(case, precision):
    op_type, ins, attrs, params, slot = case
    check(op_type, ins, attrs, params, slot, precision)


@pytest.mark.parametrize("precision", [FP32, FP16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("op_type,attrs", ACTIVATION_CASES)
def test_activation_matches_host(op_type, attrs, precision):
    check(op_type, {"X": seeded(op_type).uniform(-8, 8, (4, 33)).astype(np.float32)}, attrs, precision=precision)


@pytest.mark.parametrize("op_type", ELEMENTWISE_ALL)
@pytest.mark.parametrize("shapes,axis", [*ELEMENTWISE_SHAPES, (((4, 5), (2, 3, 4, 5)), -1)])
def test_elementwise_matches_host(op_type, shapes, axis):
    rng = seeded(f"{op_type}{shapes}")  # the same values whichever tests run
    x, y = (rng.uniform(0.5, 3.0, s).astype(np.float32) for s in shapes)
    attrs: dict[str, Any] = {"axis": axis}
    if op_type.startswith("fusion_"):
        attrs.update(act_type="leaky_relu", act_alpha=0.1)
    check(op_type, {"X": x, "Y": y}, attrs)
    if FP16_REL_BY_OP.get(op_type, FP16_REL) is not None:
        check(op_type, {"X": x, "Y": y}, attrs, precision=FP16)


@pytest.mark.parametrize("ins,attrs,parts", [
    ({"X": rand(2, 3, 6)}, {"axis": -1, "num": 0, "sections": [3, 1, 2]}, 3),
    ({"X": rand(2, 4, 5), "AxisTensor": np.array([2], np.int32)}, {"axis": 0, "num": 0, "sections": [2, -1]}, 2),
])
def test_split_matches_host(ins, attrs, parts):
    """split (several outputs): every part equal to the host kernel's (a copy: exact), fp32 and fp16."""
    ref = run_op("split", ins, attrs, outs={"Out": parts})["Out"]
    got = run_ocl("split", ins, attrs, (), outs={"Out": parts})["Out"]
    half = run_ocl("split", {**ins, "X": ins["X"].astype(np.float16)}, attrs, (), outs={"Out": parts},
                   precision=FP16)["Out"]
    assert len(got) == len(ref) == len(half) == parts
    for g, h, r in zip(got, half, ref):
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(h, r.astype(np.float16))


def test_integer_shape_arithmetic_runs_on_the_host():
    """int32/int64 slice, concat, elementwise, scale: the OpenCL target's host-side kernels (host kernel results)."""
    check_int_shape_arithmetic(OPENCL, CTX)


def test_io_copy_and_calib_round_trip():
    """Host -> OpenCL -> FP16 -> FP32 -> Host: float16 rounding to nearest even, as NumPy's astype."""
    x = rand(3, 50, lo=-100, hi=100)
    up = ocl_kernel("io_copy", "host_to_opencl").run({"Input": [x]})["Out"][0]
    half = ocl_kernel("calib", "fp32_to_fp16", FP16).run({"Input": [up]})["Out"][0]
    back = ocl_kernel("calib", "fp16_to_fp32", FP32).run({"Input": [half]})["Out"][0]
    host = ocl_kernel("io_copy", "opencl_to_host").run({"Input": [back]})["Out"][0]
    assert isinstance(up, cla.Array) and half.dtype == np.float16 and isinstance(host, np.ndarray)
    np.testing.assert_array_equal(half.get(), x.astype(np.float16))
    np.testing.assert_array_equal(host, x.astype(np.float16).astype(np.float32))


def ocl_kernel(op_type: str, alias: str, precision: PrecisionType = ANY_PRECISION) -> Any:
    kd = KERNELS.get(KernelKey(op_type, OPENCL, precision, ANY_LAYOUT, alias))
    assert kd is not None
    op = make_op(op_type, {"Input": np.zeros(1, np.float32)}, {})
    return kd.create(op, CTX)


def test_every_opencl_kernel_is_tested():
    tested = {c[0] for c in ALL_CASES} | {a for a, _ in ACTIVATION_CASES} | set(ELEMENTWISE_ALL)
    tested |= {"io_copy", "calib", "split"}
    registered = {k.op_type for k, _ in KERNELS.items() if k.target == OPENCL}
    assert registered - tested == set(), "OpenCL kernels without a test here"


@pytest.mark.parametrize("op_type,ins,attrs", [
    ("transpose2", {"X": np.arange(24, dtype=np.int64).reshape(2, 3, 4)}, {"axis": [2, 0, 1]}),
    ("slice", {"Input": np.arange(30, dtype=np.int32).reshape(5, 6)}, {"axes": [1], "starts": [1], "ends": [4]}),
    ("concat", {"X": [np.ones((2, 3), np.int64), np.zeros((2, 1), np.int64)]}, {"axis": 1}),
    ("unsqueeze2", {"X": np.arange(6, dtype=np.int64)}, {"axes": [0]}),
])
def test_data_movement_keeps_any_dtype(op_type, ins, attrs):
    """Views and copies (copy_nd per element size) move int tensors bit for bit; arithmetic kernels refuse them."""
    got = run_ocl(op_type, ins, attrs)["Out"][0]
    ref = run_op(op_type, ins, attrs)["Out"][0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


def test_arithmetic_kernel_refuses_int_input():
    from pdlite.errors import KernelError

    with pytest.raises(KernelError, match=r"relu: input X is int64; the OpenCL kernel computes on float"):
        run_ocl("relu", {"X": np.arange(4, dtype=np.int64)}, {})
