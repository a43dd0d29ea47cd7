"""CUDA kernels (written on torch) tested on torch's CPU device, against the host kernels.

Every CUDA kernel runs on `cuda_device="cpu"` (the same code as on a GPU, minus cuDNN/cuBLAS)
and is compared with the host kernel of the same op on random inputs:
|got - ref| <= 1e-5 * |ref| + 1e-5 * max|ref| (fp32); fp16 variants 3e-3 of max|ref|.
End to end, every legacy model with places [CUDA FP32, Host FP32] matches its case.npz within
1e-4 * max|ref| (the project's model tolerance), with io_copy ops at the feeds and fetches.
The CUDA-graph runner's plan and replay logic is exercised with a recorder that re-runs the
region eagerly (real capture needs a GPU; see docs/cuda.md for the GPU checks).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pdlite.kernels.cuda  # noqa: E402,F401  (registers the CUDA kernels)
from pdlite.core.types import ANY_LAYOUT, ANY_PRECISION, DataLayoutType, PrecisionType, TargetType  # noqa: E402
from pdlite.kernels.registry import KERNELS, KernelContext, KernelDef, KernelKey  # noqa: E402
from pdlite.lite import CxxConfig, Place, create_paddle_predictor  # noqa: E402
from pdlite.runtime import cuda_graph as gr  # noqa: E402
from pdlite.runtime.threads import run_threads  # noqa: E402
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir  # noqa: E402
from tests.kernels._util import make_op, run_op  # noqa: E402

CUDA, HOST = TargetType.CUDA, TargetType.Host
FP32, FP16 = PrecisionType.FP32, PrecisionType.FP16
CPU = KernelContext({"cuda_device": "cpu"})
RTOL = 1e-5
RNG = np.random.default_rng(0)


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def cuda_def(op_type: str, precision: PrecisionType = FP32, alias: str = "def") -> KernelDef:
    for layout in (DataLayoutType.NCHW, ANY_LAYOUT):
        for p in (precision, ANY_PRECISION):
            kd = KERNELS.get(KernelKey(op_type, CUDA, p, layout, alias))
            if kd is not None:
                return kd
    raise AssertionError(f"no CUDA kernel for {op_type}")


def run_cuda(op_type: str, ins: dict[str, Any], attrs: dict | None = None, params: tuple[str, ...] = (),
             outs: dict[str, int] | None = None, precision: PrecisionType = FP32) -> dict[str, list[np.ndarray]]:
    """Run the CUDA kernel on torch's CPU device; slots in `params` arrive as parameters (prepare)."""
    op = make_op(op_type, ins, attrs, outs)
    kd = cuda_def(op_type, precision)
    kernel = kd.create(op, CPU)
    lists = {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in ins.items() if v is not None}
    kernel.prepare({op.inputs[s][i]: a for s in params for i, a in enumerate(lists[s])})
    feed = {}
    for slot, arrs in lists.items():
        t = kd.input_type(slot).target
        if slot in params or t == HOST:
            feed[slot] = list(arrs)
        else:
            feed[slot] = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrs]
    got = kernel.run(feed)
    res = {}
    for slot, vals in got.items():
        res[slot] = [v.detach().numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for v in vals]
    return res


def check(op_type: str, ins: dict[str, Any], attrs: dict | None = None, params: tuple[str, ...] = (),
          slot: str = "Out") -> None:
    """CUDA kernel (torch CPU) == host kernel within RTOL (and the same shape and dtype)."""
    ref = run_op(op_type, ins, attrs, outs={slot: 1})[slot][0]
    got = run_cuda(op_type, ins, attrs, params, outs={slot: 1})[slot][0]
    assert got.shape == ref.shape and got.dtype == ref.dtype, f"{op_type}: {got.shape} {got.dtype} vs {ref.shape} {ref.dtype}"
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=RTOL, atol=RTOL * scale,
                               err_msg=f"{op_type} {attrs}")


from tests.kernels._device_cases import (  # noqa: E402  (the case lists shared by every device target)
    ACTIVATION_CASES,
    CASES,
    ELEMENTWISE,
    ELEMENTWISE_SHAPES,
    FUSED_ELEMENTWISE,
    check_int_shape_arithmetic,
    host_in_the_middle_program,
)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_kernel_matches_host(case):
    op_type, ins, attrs, params, slot = case
    check(op_type, ins, attrs, params, slot)


@pytest.mark.parametrize("op_type,attrs", ACTIVATION_CASES)
def test_activation_matches_host(op_type, attrs):
    check(op_type, {"X": rand(4, 33, lo=-8, hi=8)}, attrs)


@pytest.mark.parametrize("op_type", ELEMENTWISE + FUSED_ELEMENTWISE)
@pytest.mark.parametrize("shapes,axis", ELEMENTWISE_SHAPES)
def test_elementwise_matches_host(op_type, shapes, axis):
    x, y = rand(*shapes[0], lo=0.5, hi=3.0), rand(*shapes[1], lo=0.5, hi=3.0)
    attrs: dict[str, Any] = {"axis": axis}
    if op_type.startswith("fusion_"):
        attrs.update(act_type="leaky_relu", act_alpha=0.1)
    check(op_type, {"X": x, "Y": y}, attrs)


@pytest.mark.parametrize("ins,attrs,parts", [
    ({"X": rand(2, 3, 6)}, {"axis": -1, "num": 0, "sections": [3, 1, 2]}, 3),
    ({"X": rand(2, 4, 5)}, {"axis": 1, "num": 2, "sections": []}, 2),
    ({"X": rand(2, 4, 5), "AxisTensor": np.array([2], np.int32)}, {"axis": 0, "num": 0, "sections": [2, -1]}, 2),
])
def test_split_matches_host(ins, attrs, parts):
    """split (several outputs): every part equal to the host kernel's (views of X: exact), and the FP16 variant's
    on float16 X to the host's parts in float16."""
    ref = run_op("split", ins, attrs, outs={"Out": parts})["Out"]
    got = run_cuda("split", ins, attrs, (), outs={"Out": parts})["Out"]
    half = run_cuda("split", {**ins, "X": ins["X"].astype(np.float16)}, attrs, (), outs={"Out": parts},
                    precision=FP16)["Out"]
    assert len(got) == len(ref) == len(half) == parts
    for g, h, r in zip(got, half, ref):
        assert g.shape == r.shape and g.dtype == r.dtype and h.dtype == np.float16
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(h, r.astype(np.float16))


def test_every_cuda_kernel_is_tested():
    tested = {c[0] for c in CASES} | {a for a, _ in ACTIVATION_CASES} | set(ELEMENTWISE) | set(FUSED_ELEMENTWISE)
    tested |= {"io_copy", "calib", "split"}  # test_io_copy_and_calib, test_split_matches_host
    registered = {k.op_type for k, _ in KERNELS.items() if k.target == CUDA}
    assert registered - tested == set(), "CUDA kernels without a test here"


def test_integer_shape_arithmetic_runs_on_the_host():
    """int32/int64 slice, concat, elementwise, scale: the CUDA target's host-side kernels (host kernel results)."""
    check_int_shape_arithmetic(CUDA, CPU)


def _fp16_supported() -> bool:
    try:
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3, dtype=torch.float16), torch.ones(1, 1, 1, 1, dtype=torch.float16))
        torch.matmul(torch.ones(2, 2, dtype=torch.float16), torch.ones(2, 2, dtype=torch.float16))
        return True
    except RuntimeError:
        return False


FP16_REL = 3e-3  # fp16 variants vs the fp32 host kernel, of max|ref|
# fp16's 10-bit mantissa on values up to ~8: ops whose outputs are large or steep need a looser bound
FP16_REL_BY_OP = {"elementwise_pow": 1e-2, "elementwise_floordiv": None, "elementwise_mod": None}


def _fp16_types() -> set[str]:
    return {k.op_type for k, _ in KERNELS.items() if k.target == CUDA and k.precision == FP16}


def _fp16_check(op_type: str, ins: dict, attrs: dict, params: tuple[str, ...] = (), slot: str = "Out") -> None:
    """Run the FP16 variant on float16 activations (weights converted in prepare) against the fp32 host kernel."""
    assert op_type in _fp16_types(), f"{op_type} has no FP16 CUDA kernel"
    ref = run_op(op_type, ins, attrs, outs={slot: 1})[slot][0]
    half = {k: (v.astype(np.float16) if isinstance(v, np.ndarray) and v.dtype == np.float32 and k not in params else v)
            for k, v in ins.items()}
    got = run_cuda(op_type, half, attrs, params, outs={slot: 1}, precision=FP16)[slot][0]
    if ref.dtype == np.float32:
        assert got.dtype == np.float16, f"{op_type}: FP16 variant returned {got.dtype}"
        assert_close_rel(got, ref, FP16_REL_BY_OP.get(op_type, FP16_REL), f"{op_type} fp16")
    else:  # integer outputs (e.g. index-like results) stay exact
        np.testing.assert_array_equal(got, ref)


FP16_CASES = [c for c in CASES if c[0] in _fp16_types()]
FP16_ELEMENTWISE = [t for t in ELEMENTWISE + FUSED_ELEMENTWISE
                    if t in _fp16_types() and FP16_REL_BY_OP.get(t, FP16_REL) is not None]


@pytest.mark.skipif(not _fp16_supported(), reason="this torch has no float16 conv/matmul on CPU")
@pytest.mark.parametrize("case", FP16_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FP16_CASES)])
def test_fp16_variants(case):
    """Every CASES entry whose op has an FP16 variant: float16 activations, 3e-3 of max|ref|."""
    op_type, ins, attrs, params, slot = case
    _fp16_check(op_type, ins, attrs, params, slot)


@pytest.mark.skipif(not _fp16_supported(), reason="this torch has no float16 conv/matmul on CPU")
@pytest.mark.parametrize("op_type,attrs", [c for c in ACTIVATION_CASES if c[0] in _fp16_types()])
def test_fp16_activation_variants(op_type, attrs):
    _fp16_check(op_type, {"X": rand(4, 33, lo=-8, hi=8)}, attrs)


@pytest.mark.skipif(not _fp16_supported(), reason="this torch has no float16 conv/matmul on CPU")
@pytest.mark.parametrize("op_type", FP16_ELEMENTWISE)
def test_fp16_elementwise_variants(op_type):
    attrs: dict[str, Any] = {"axis": 1}
    if op_type.startswith("fusion_"):
        attrs.update(act_type="leaky_relu", act_alpha=0.1)
    _fp16_check(op_type, {"X": rand(2, 3, 4, 5, lo=0.5, hi=3.0), "Y": rand(3, lo=0.5, hi=3.0)}, attrs)


def test_every_fp16_variant_is_value_checked():
    """Each op with an FP16 CUDA kernel is compared with the fp32 host kernel above (calib in its own test);
    integer-only elementwise ops (floordiv, mod) are value-checked in fp32 only, fp16 being meaningless for them."""
    checked = {c[0] for c in FP16_CASES} | {a for a, _ in ACTIVATION_CASES} | set(FP16_ELEMENTWISE) | {"calib", "split"}
    exempt = {t for t, rel in FP16_REL_BY_OP.items() if rel is None}
    missing = _fp16_types() - checked - exempt
    assert not missing, f"FP16 CUDA variants with no value check: {sorted(missing)}"
    for must in ("batch_norm", "layer_norm", "matmul_v2", "fc"):
        assert must in {c[0] for c in FP16_CASES}, must


def test_io_copy_and_calib():
    x = rand(2, 3)
    h2d = cuda_def("io_copy", alias="host_to_cuda").create(make_op("io_copy", {"Input": x}), CPU)
    h2d.prepare({})
    t = h2d.run({"Input": [x]})["Out"][0]
    assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), x)
    assert h2d.run({"Input": [t]})["Out"][0] is t, "a device tensor passes through (zero-copy feed)"
    w = rand(4)  # a parameter: uploaded once, the same tensor every run
    op = make_op("io_copy", {"Input": w})
    const = cuda_def("io_copy", alias="host_to_cuda").create(op, CPU)
    const.prepare({op.inputs["Input"][0]: w})
    assert const.run({"Input": [w]})["Out"][0] is const.run({"Input": [w]})["Out"][0]
    d2h_op = make_op("io_copy", {"Input": x}, {"fetch_copy": True})
    assert isinstance(cuda_def("io_copy", alias="cuda_to_host").create(d2h_op, CPU).run({"Input": [t]})["Out"][0],
                      np.ndarray)
    keep = cuda_def("io_copy", alias="cuda_to_host").create(d2h_op, KernelContext({"cuda_device": "cpu",
                                                                                    "cuda_device_outputs": True}))
    kept = keep.run({"Input": [t]})["Out"][0]
    assert isinstance(kept, torch.Tensor) and kept.data_ptr() != t.data_ptr() and torch.equal(kept, t)
    to16 = cuda_def("calib", FP16, "fp32_to_fp16").create(make_op("calib", {"Input": x}), CPU)
    h = to16.run({"Input": [t]})["Out"][0]
    assert h.dtype == torch.float16 and to16.run({"Input": [t]})["Out"][0] is h, "same input: converted once"
    t.add_(1.0)  # an in-place change is seen (version counter)
    assert torch.equal(to16.run({"Input": [t]})["Out"][0], t.half())
    to32 = cuda_def("calib", FP32, "fp16_to_fp32").create(make_op("calib", {"Input": x}), CPU)
    assert to32.run({"Input": [h]})["Out"][0].dtype == torch.float32


# --- end to end ---------------------------------------------------------------------------------------
def _predictor(name: str, **options: Any):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    cfg.set_valid_places([Place(CUDA, FP32), Place(HOST, FP32)])
    cfg.set_cuda_device("cpu")
    for k, v in options.items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


@pytest.mark.parametrize("name", LEGACY_MODELS)
def test_model_on_cuda_kernels_matches_reference(name):
    pred = _predictor(name)
    ins, outs = load_case(name)
    got = pred.predict(ins)
    for g, (k, ref) in zip(got, outs.items()):
        assert isinstance(g, np.ndarray)
        assert_close_rel(g, ref, 1e-4, f"{name}:{k}")
    insts = pred.runtime_program.instructions
    copies = [i for i in insts if i.op.type == "io_copy"]
    fed = {i.op.inputs["Input"][0] for i in copies if i.kernel_def.key.alias == "host_to_cuda"}
    back = {i.op.outputs["Out"][0] for i in copies if i.kernel_def.key.alias == "cuda_to_host"}
    assert set(ins) <= fed and set(outs) == back, "io_copy at every feed and fetch"
    assert all(i.kernel_def.key.target == CUDA for i in insts), "every op has a CUDA kernel"


def test_shape_tensors_stay_on_the_host():
    pred = _predictor("ppocr_cls_v2")
    keys = {i.op.type: i.kernel_def.key for i in pred.runtime_program.instructions}
    assert keys["shape"].target == CUDA and keys["slice"].alias == "host_int32"
    assert sum(i.op.type == "io_copy" for i in pred.runtime_program.instructions) == 2


def test_zero_copy_feed_and_device_outputs():
    pred = _predictor("mobilenet_v3_small", cuda_device_outputs=True)
    ins, outs = load_case("mobilenet_v3_small")
    (name, x), = ins.items()
    pred.get_input_by_name(name).from_numpy(torch.from_numpy(x))
    pred.run()
    out = pred.get_output(0)
    assert isinstance(out.raw(), torch.Tensor)
    assert_close_rel(out.numpy(), next(iter(outs.values())), 1e-4, "device output")


def test_fp16_places_insert_calib():
    pred = _predictor_fp16("mobilenet_v3_small")
    types = [(i.op.type, i.kernel_def.key.precision) for i in pred.runtime_program.instructions]
    assert ("calib", FP16) in types and ("calib", FP32) in types, "FP32 feed -> FP16 kernels -> FP32 fetch"
    assert any(t == "fused_conv2d" and p == FP16 for t, p in types)
    assert pred.runtime_program.instructions[-1].op.type == "calib"  # the fetched fp16 result, on the host


def _predictor_fp16(name: str):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    cfg.set_valid_places([Place(CUDA, FP16), Place(CUDA, FP32), Place(HOST, FP32)])
    cfg.set_cuda_device("cpu")
    return create_paddle_predictor(cfg)


# --- CUDA graphs (logic on the CPU device) ------------------------------------------------------------
def _eager_recorder(fn):
    """Stands in for a CUDA graph: records nothing, and a replay re-runs the region."""
    fn()

    class Rerun:
        def replay(self) -> None:
            fn()

    return Rerun()


def test_graph_plan_and_replay_logic():
    pred = _predictor("ppocr_cls_v2")
    prog = pred.runtime_program
    ins, outs = load_case("ppocr_cls_v2")
    (name, x), = ins.items()
    scope = dict(pred._params, **{name: x})
    for inst in prog.instructions:
        inst.run(scope)
    plan = gr.plan_graph(prog.instructions, scope, {name}, prog.release, on_device=lambda v: isinstance(v, torch.Tensor))
    assert [st.src for st in plan.stages] == [name] and plan.stages[0].dynamic
    assert [i.op.type for i in plan.post] == ["io_copy"] and plan.pre == []
    assert "shape_0.tmp_0" in plan.static  # shape arithmetic is static for a signature
    cap = gr.capture(plan, scope, _eager_recorder)
    x2 = (x[:, :, :, ::-1] * 0.5).copy()
    for feed in (x2, x):
        s = dict(pred._params, **{name: feed})
        with run_threads(pred._threads):  # the thread count predict() runs torch with: the same sums, bit for bit
            cap.replay(s)
        ref = pred.predict({name: feed})[0]
        np.testing.assert_array_equal(s[pred.get_output_names()[0]], ref)


def test_graph_plan_with_device_outputs_copies_results_after_the_replay():
    pred = _predictor("transformer_encoder", cuda_device_outputs=True)
    prog = pred.runtime_program
    ins, outs = load_case("transformer_encoder")
    (name, x), = ins.items()
    scope = dict(pred._params, **{name: torch.from_numpy(x)})  # zero-copy feed
    for inst in prog.instructions:
        inst.run(scope)
    plan = gr.plan_graph(prog.instructions, scope, {name}, prog.release, on_device=lambda v: isinstance(v, torch.Tensor))
    assert [i.kernel_def.key.alias for i in plan.post] == ["cuda_to_host"], "the kept result is cloned after the graph"
    assert [st.src for st in plan.stages] == [name]
    cap = gr.capture(plan, scope, _eager_recorder)
    s = dict(pred._params, **{name: torch.from_numpy(x)})
    cap.replay(s)
    (out_name, ref), = outs.items()
    assert isinstance(s[out_name], torch.Tensor)
    assert_close_rel(s[out_name].numpy(), ref, 1e-4, "replayed, kept on the device")


def test_graph_replay_refuses_a_changed_input_shape():
    pred = _predictor("mobilenet_v1")
    prog = pred.runtime_program
    ins, _ = load_case("mobilenet_v1")
    (name, x), = ins.items()
    scope = dict(pred._params, **{name: x})
    for inst in prog.instructions:
        inst.run(scope)
    plan = gr.plan_graph(prog.instructions, scope, {name}, prog.release, on_device=lambda v: isinstance(v, torch.Tensor))
    cap = gr.capture(plan, scope, _eager_recorder)
    with pytest.raises(gr._Stale):
        cap.replay(dict(pred._params, **{name: np.concatenate([x, x])}))


def test_host_work_between_device_kernels_is_not_capturable():
    from pdlite.optimizer.analysis import analyse
    from pdlite.optimizer.pipeline import default_passes

    res = analyse(host_in_the_middle_program(), {}, [Place(CUDA, FP32), Place(HOST, FP32)], default_passes(), {"cuda_device": "cpu"})
    scope = {"x": rand(2, 4)}
    for inst in res.runtime.instructions:
        inst.run(scope)
    np.testing.assert_allclose(scope["c"], np.exp(np.maximum(scope["x"], 0)), rtol=1e-6)
    with pytest.raises(gr.NotCapturable, match=r"after exp\(b\)"):
        gr.plan_graph(res.runtime.instructions, scope, {"x"}, on_device=lambda v: isinstance(v, torch.Tensor))


def test_cuda_graph_option_off_the_gpu_warns_and_runs_eagerly():
    pred = _predictor("mobilenet_v1", cuda_graph=True)
    assert isinstance(pred.runtime_program, gr.CudaGraphProgram)
    ins, outs = load_case("mobilenet_v1")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = pred.predict(ins)
    assert any("CUDA graphs are off" in str(m.message) for m in w)
    assert_close_rel(got[0], next(iter(outs.values())), 1e-4, "eager fallback")
