"""pdlite.inference: paddle.inference's API on pdlite, checked against Paddle Inference's references (case.npz)
and, where paddle is installed, against paddle.inference's own surface and enum values."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from pdlite import inference
from pdlite.api.inference_config import ESSENTIAL_PASSES, UNSUPPORTED
from pdlite.errors import ConfigError, InputError
from tests.api.clients import ppocr_predictor
from tests.conftest import assert_close_rel, load_case, model_dir

REL = 1e-4  # max|got - ref| <= 1e-4 * max|ref| (fp32 host vs Paddle Inference)
OCR_CASES = [("ppocr_cls_v2", "cls"), ("ppocr_det_v4", "det"), ("mobilenet_v3_small_pir", "cls")]


def _ocr_predictor(name: str, mode: str, threads: int = 2):
    """The PaddleOCR create_predictor calls (tests/api/clients/ppocr_predictor.py), verbatim."""
    args = ppocr_predictor.init_args().parse_args([f"--{mode}_model_dir", str(model_dir(name)),
                                                   "--enable_mkldnn", "true", "--cpu_threads", str(threads)])
    return ppocr_predictor.create_predictor(args, mode, None)


@pytest.mark.parametrize("name,mode", OCR_CASES)
def test_paddleocr_setup_matches_paddle_inference(name, mode):
    """Legacy (pdmodel) and PIR (json) models through PaddleOCR's predictor setup."""
    ins, outs = load_case(name)
    predictor, input_tensor, output_tensors, config = _ocr_predictor(name, mode)
    assert config.cpu_math_library_num_threads() == 2 and config.ir_optim() and config.mkldnn_enabled()
    assert not config.use_gpu() and not config.tensorrt_engine_enabled()
    got = ppocr_predictor.predict(predictor, input_tensor, output_tensors, next(iter(ins.values())))
    for g, (n, ref) in zip(got, outs.items()):
        assert_close_rel(g, ref, REL, f"{name}:{n}")


@pytest.mark.parametrize("name,mode", [OCR_CASES[0], OCR_CASES[2]])
def test_four_clones_on_four_threads_equal_the_serial_run(name, mode):
    """Clones share the analysed program and weights; run concurrently they give bit-identical outputs."""
    ins, _ = load_case(name)
    x = next(iter(ins.values()))
    rng = np.random.default_rng(0)
    batches = [[(x + rng.standard_normal(x.shape).astype(np.float32) * 0.1 * k).astype(np.float32)
                for k in range(3)] for _ in range(4)]
    predictor, input_tensor, output_tensors, _ = _ocr_predictor(name, mode)
    serial = [[ppocr_predictor.predict(predictor, input_tensor, output_tensors, b)[0] for b in bs] for bs in batches]
    clones = [predictor.clone() for _ in range(4)]
    assert all(c.lite._params is predictor.lite._params for c in clones)
    assert all(c.lite.runtime_program is predictor.lite.runtime_program for c in clones)
    results: list[list[np.ndarray]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        c = clones[i]
        h = c.get_input_handle(c.get_input_names()[0])
        o = c.get_output_handle(c.get_output_names()[0])
        barrier.wait()
        for _ in range(2):
            results[i] = []
            for b in batches[i]:
                h.copy_from_cpu(b)
                c.run()
                results[i].append(o.copy_to_cpu())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        for got, want in zip(results[i], serial[i]):
            assert np.array_equal(got, want), f"clone {i}: differs from the serial run"


# -- Config ------------------------------------------------------------------------------------

def _run(config: inference.Config, name: str) -> list[np.ndarray]:
    ins, _ = load_case(name)
    pred = inference.create_predictor(config)
    return pred.run([ins[n] for n in pred.get_input_names()])


def _check(got: list[np.ndarray], name: str) -> None:
    _, outs = load_case(name)
    for g, (n, ref) in zip(got, outs.items()):
        assert_close_rel(g, ref, REL, f"{name}:{n}")


def test_config_constructor_forms():
    d = model_dir("ppocr_cls_v2")
    pir = model_dir("mobilenet_v3_small_pir")
    c = inference.Config(str(d))
    assert c.model_dir() == str(d) and c.prog_file() == ""
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")
    c = inference.Config(str(d / "inference.pdmodel"), str(d / "inference.pdiparams"))
    assert c.prog_file().endswith("inference.pdmodel") and c.params_file().endswith("inference.pdiparams")
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")
    c = inference.Config(str(d), "inference")  # prefix: finds inference.pdmodel
    assert c.prog_file() == str(d / "inference.pdmodel") and c.params_file() == str(d / "inference.pdiparams")
    c = inference.Config(str(pir), "inference")  # prefix: finds inference.json
    assert c.prog_file() == str(pir / "inference.json")
    _check(_run(c, "mobilenet_v3_small_pir"), "mobilenet_v3_small_pir")
    with pytest.raises(ConfigError, match=r"neither nope\.json nor nope\.pdmodel"):
        inference.Config(str(d), "nope")
    with pytest.raises(ConfigError, match="has no model"):
        inference.create_predictor(inference.Config())
    copy = inference.Config(c)
    copy.set_cpu_math_library_num_threads(3)
    assert c.cpu_math_library_num_threads() == 1 and copy.prog_file() == c.prog_file()


def test_set_model_and_set_model_buffer():
    d = model_dir("ppocr_cls_v2")
    c = inference.Config()
    c.set_model(str(d / "inference.pdmodel"), str(d / "inference.pdiparams"))
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")
    prog, params = (d / "inference.pdmodel").read_bytes(), (d / "inference.pdiparams").read_bytes()
    c = inference.Config()
    c.set_model_buffer(prog, len(prog), params, len(params))
    assert c.model_from_memory()
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")


def test_optimized_nb_through_config(tmp_path):
    from pdlite.lite import CxxConfig, create_paddle_predictor

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    nb = create_paddle_predictor(cfg).save_optimized_model(str(tmp_path / "cls"))
    c = inference.Config(nb)
    assert c.is_optimized_model()
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")
    data = open(nb, "rb").read()
    c = inference.Config()
    c.set_model_buffer(data, len(data), b"", 0)  # a .nb from memory: the light predictor too
    assert c.is_optimized_model() and c.model_from_memory()
    _check(_run(c, "ppocr_cls_v2"), "ppocr_cls_v2")


def test_switch_ir_optim_off_runs_no_fusion_passes():
    d = model_dir("ppocr_det_v4")
    on, off = inference.Config(str(d)), inference.Config(str(d))
    off.switch_ir_optim(False)
    assert not off.ir_optim()
    assert set(off.pass_builder().all_passes()) <= set(ESSENTIAL_PASSES)
    assert "conv_bn_fuse_pass" in on.pass_builder().all_passes()
    p_on, p_off = inference.create_predictor(on), inference.create_predictor(off)
    ops = lambda p: [i.op.type for i in p.lite.runtime_program.instructions]  # noqa: E731
    assert "batch_norm" in ops(p_off) and "batch_norm" not in ops(p_on)  # unfused vs conv+bn folded
    ins, outs = load_case("ppocr_det_v4")
    _check(p_off.run([ins["x"]]), "ppocr_det_v4")


def test_delete_pass_and_pass_builder():
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    before = c.pass_builder().all_passes()
    c.delete_pass("conv_transpose_eltwiseadd_bn_fuse_pass")  # Paddle-only: no pdlite counterpart, ignored
    assert c.pass_builder().all_passes() == before
    c.delete_pass("fc_fuse_pass")
    c.delete_pass("simplify_with_basic_ops_pass")  # Paddle name for pdlite's dropout elimination
    passes = c.pass_builder().all_passes()
    assert "fc_fuse_pass" not in passes and "identity_dropout_eliminate_pass" not in passes
    pb = c.pass_builder()
    with pytest.raises(ConfigError, match="no pdlite pass named 'nope_pass'"):
        pb.append_pass("nope_pass")
    pb.set_passes([p for p in passes if p != "conv_bn_fuse_pass"])
    assert "conv_bn_fuse_pass" not in c.pass_builder().all_passes()
    pred = inference.create_predictor(c)
    assert "batch_norm" in [i.op.type for i in pred.lite.runtime_program.instructions]
    _check(pred.run([load_case("ppocr_cls_v2")[0]["x"]]), "ppocr_cls_v2")
    c.enable_memory_optim(False)
    assert "memory_optimize_pass" not in c.pass_builder().all_passes()


def test_refused_calls_name_the_call_and_the_alternative():
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    for name in UNSUPPORTED:
        assert hasattr(c, name), name  # hasattr-guarded scripts see the method, as with Paddle
        with pytest.raises(ConfigError, match=rf"Config\.{name}\(\): pdlite"):
            getattr(c, name)()
    with pytest.raises(ConfigError, match="enable_tensorrt_engine.*enable_use_gpu"):
        c.enable_tensorrt_engine(workspace_size=1 << 30, max_batch_size=1)
    with pytest.raises(AttributeError):
        c.no_such_call_anywhere()  # a typo stays an AttributeError
    with pytest.raises(ConfigError, match="convert_to_mixed_precision"):
        inference.convert_to_mixed_precision("a", "b", "c", "d")
    with pytest.raises(ConfigError, match="XPU"):
        inference.XpuConfig()
    # accepted with no effect, and the getters toolkits print
    c.set_mkldnn_cache_capacity(10)
    c.enable_mkldnn_bfloat16()
    c.enable_new_ir()
    c.enable_new_executor()
    c.set_optimization_level(3)
    assert c.lite_engine_enabled() is False and c.use_xpu() is False


def test_enable_use_gpu_without_cuda_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA (tested by the CUDA target's tests)")
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    with pytest.raises(ConfigError, match="enable_use_gpu.*no CUDA device"):
        c.enable_use_gpu(100, 0)
    assert not c.use_gpu()


@pytest.mark.parametrize("engine", ["openvino", "onnxruntime"])
def test_openvino_and_onnxruntime_engines_are_nnadapter_devices(engine):
    pytest.importorskip(engine)
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    if engine == "openvino":
        c.enable_openvino_engine(inference.PrecisionType.Float32)
        assert c.openvino_engine_enabled()
    else:
        c.enable_onnxruntime()
        assert c.onnxruntime_enabled()
    pred = inference.create_predictor(c)
    assert any(i.op.type == "subgraph" for i in pred.lite.runtime_program.instructions)
    _check(pred.run([load_case("ppocr_cls_v2")[0]["x"]]), "ppocr_cls_v2")


def test_summary_and_profile():
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    c.set_cpu_math_library_num_threads(3)
    c.enable_profile()
    text = c.summary()
    assert "cpu_math_thread" in text and "| 3 " in text and str(c) == text
    pred = inference.create_predictor(c)
    pred.run([load_case("ppocr_cls_v2")[0]["x"]])
    assert pred.profiler is not None and "conv2d" in pred.profiler.table()


# -- Predictor and Tensor -----------------------------------------------------------------------

def test_predictor_and_tensor_calls():
    ins, outs = load_case("ppocr_cls_v2")
    pred = inference.create_predictor(inference.Config(str(model_dir("ppocr_cls_v2"))))
    assert pred.get_input_tensor_shape() == {"x": [-1, 3, -1, -1]}
    h = pred.get_input_handle("x")
    assert h.name == "x" and h.name() == "x" and h.type() == inference.DataType.FLOAT32
    h.reshape(list(ins["x"].shape))
    assert h.shape() == list(ins["x"].shape)
    x = ins["x"].copy()
    h.copy_from_cpu(x)
    x[...] = 0  # copy_from_cpu copied: the run sees the original values
    h.set_lod([[0, 1]])
    assert h.lod() == [[0, 1]]
    seen: list[tuple[str, str]] = []
    pred.register_output_hook(lambda op, var, value: seen.append((op, var)))
    pred.run()
    out_name = pred.get_output_names()[0]
    o = pred.get_output_handle(out_name)
    a, b = o.copy_to_cpu(), o.copy_to_cpu()
    assert a is not b and np.array_equal(a, b)
    assert_close_rel(a, outs[out_name], REL)
    assert seen and seen[-1][1] == out_name
    assert pred.try_shrink_memory() == 0
    pred.clear_intermediate_tensor()
    with pytest.raises(InputError, match="list of arrays"):
        pred.run(ins["x"])
    with pytest.raises(InputError, match="no such input"):
        pred.get_input_handle("nope")
    with pytest.raises(ConfigError, match="share_external_data"):
        h.share_external_data_by_ptr_name(0, [1], 0)
    h.share_external_data(ins["x"])  # zero-copy opt-in
    pred.run()
    assert_close_rel(o.copy_to_cpu(), outs[out_name], REL)


def test_predictor_pool_shares_weights():
    pool = inference.PredictorPool(inference.Config(str(model_dir("ppocr_cls_v2"))), 3)
    assert len(pool) == 3
    ps = [pool.retrieve(i) for i in range(3)]
    assert ps[1].lite._params is ps[0].lite._params and ps[2].lite.runtime_program is ps[0].lite.runtime_program
    ins, _ = load_case("ppocr_cls_v2")
    assert np.array_equal(ps[2].run([ins["x"]])[0], ps[0].run([ins["x"]])[0])
    with pytest.raises(InputError):
        pool.retrieve(3)


def test_module_functions_and_enums():
    assert "pdlite" in inference.get_version()
    assert inference.get_num_bytes_of_data_type(inference.DataType.FLOAT32) == 4
    assert inference.get_num_bytes_of_data_type(inference.DataType.INT64) == 8
    assert inference.get_num_bytes_of_data_type(inference.DataType.FLOAT16) == 2
    assert inference.get_trt_compile_version() == (0, 0, 0)
    assert inference.Config.Precision is inference.PrecisionType
    assert inference.Config.Half == inference.PrecisionType.Half


def test_surface_and_enums_match_paddle_inference():
    """Every public name of paddle.inference (module, Config, Predictor, Tensor) is answered by pdlite.inference,
    and the enums have Paddle's members and values."""
    pi = pytest.importorskip("paddle.inference")
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    p = inference.create_predictor(c)
    for ours, theirs in ((inference, pi), (c, pi.Config), (p, pi.Predictor), (p.get_input_handle("x"), pi.Tensor)):
        missing = [n for n in dir(theirs) if not n.startswith("_") and n != "wrapper" and not hasattr(ours, n)]
        assert not missing, f"{theirs}: pdlite lacks {missing}"
    for ours, theirs in ((inference.PrecisionType, pi.PrecisionType), (inference.DataType, pi.DataType),
                         (inference.PlaceType, pi.PlaceType)):
        assert {k: int(v) for k, v in ours.__members__.items()} == {k: int(v) for k, v in theirs.__members__.items()}


def test_enable_use_gpu_maps_to_the_cuda_target(monkeypatch):
    """enable_use_gpu puts the CUDA places first (FP16 first for PrecisionType.Half) and names the device; here the
    CUDA kernels run on torch's CPU device (cuda_device option, as CI tests that target), with Paddle's outputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    from pdlite.core.types import PrecisionType as P
    from pdlite.core.types import TargetType

    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    c.enable_use_gpu(100, 0, inference.PrecisionType.Half)
    assert c.use_gpu() and c.gpu_device_id() == 0 and c.memory_pool_init_size_mb() == 100
    lite = c.to_lite()
    assert [(p.target, p.precision) for p in lite.valid_places()] == [
        (TargetType.CUDA, P.FP16), (TargetType.CUDA, P.FP32), (TargetType.Host, P.FP32)]
    assert lite.option("cuda_device") == "cuda:0"
    c = inference.Config(str(model_dir("ppocr_cls_v2")))
    c.enable_use_gpu(100, 0)
    c.set_option("cuda_device", "cpu")  # pdlite option: the same CUDA kernels on torch's CPU device
    pred = inference.create_predictor(c)
    assert any(i.kernel_def.key.target == TargetType.CUDA for i in pred.lite.runtime_program.instructions)
    _check(pred.run([load_case("ppocr_cls_v2")[0]["x"]]), "ppocr_cls_v2")
    c.disable_gpu()
    assert not c.use_gpu() and c.to_lite().valid_places()[0].target == TargetType.Host
