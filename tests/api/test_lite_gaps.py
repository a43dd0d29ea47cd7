"""paddlelite binding calls (lite/api/python/pybind/pybind.cc) that pdlite answers: every method name of the
binding exists, and the ones added for issue 13 do what paddlelite's do (or refuse, naming the reason)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from pdlite.errors import ConfigError
from pdlite.lite import (
    CLPrecisionType,
    CLTuneMode,
    CxxConfig,
    DataLayoutType,
    MobileConfig,
    Opt,
    Place,
    PrecisionType,
    TargetType,
    create_paddle_predictor,
)
from tests.conftest import assert_close_rel, load_case, model_dir

NAME = "ppocr_cls_v2"
REL = 1e-4

# method names of paddlelite's Python binding (pybind.cc), per class
BINDING = {
    CxxConfig: ["set_model_dir", "model_dir", "set_model_file", "model_file", "set_param_file", "param_file",
                "set_valid_places", "set_model_buffer", "set_passes_internal", "is_model_from_memory",
                "add_discarded_pass", "set_threads", "threads", "set_power_mode", "power_mode",
                "set_opencl_binary_path_name", "set_opencl_tune", "set_opencl_precision", "set_metal_use_mps",
                "set_metal_use_memory_reuse", "set_metal_lib_path", "set_nnadapter_device_names",
                "set_nnadapter_context_properties", "set_nnadapter_model_cache_dir",
                "set_nnadapter_subgraph_partition_config_path",
                "set_nnadapter_mixed_precision_quantization_config_path", "nnadapter_device_names",
                "nnadapter_context_properties", "nnadapter_model_cache_dir",
                "nnadapter_subgraph_partition_config_path", "nnadapter_mixed_precision_quantization_config_path"],
    MobileConfig: ["set_model_from_file", "set_model_from_buffer", "set_model_dir", "model_dir", "set_model_buffer",
                   "is_model_from_memory", "set_threads", "threads", "set_power_mode", "power_mode",
                   "set_opencl_binary_path_name", "set_opencl_tune", "set_opencl_precision", "set_metal_use_mps",
                   "set_metal_use_memory_reuse", "set_metal_lib_path", "set_nnadapter_device_names",
                   "set_nnadapter_context_properties", "set_nnadapter_model_cache_dir",
                   "set_nnadapter_dynamic_shape_info", "set_nnadapter_model_cache_buffers"],
    Opt: ["set_model_dir", "set_model_file", "set_param_file", "set_valid_places", "enable_fp16",
          "set_optimize_out", "set_model_type", "set_quant_model", "set_quant_type", "set_sparse_model",
          "set_sparse_threshold", "record_model_info", "set_passes_internal", "run", "run_optimize", "version",
          "help", "executablebin_help", "print_supported_ops", "display_kernels_info", "print_all_ops",
          "check_if_model_supported", "set_modelset_dir", "print_all_ops_in_md_dormat",
          "visualize_optimized_nb_model"],
}
TENSOR = ["resize", "numpy", "shape", "target", "precision", "lod", "set_lod", "from_numpy", "set_int8_data",
          "int8_data", "set_uint8_data", "uint8_data", "set_int32_data", "int32_data", "set_float_data", "float_data"]
PREDICTOR = ["get_input", "get_output", "get_output_names", "get_input_names", "get_input_by_name",
             "get_output_by_name", "run", "get_version"]


def _cxx() -> CxxConfig:
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(NAME)))
    return cfg


def test_every_binding_method_exists():
    for cls, names in BINDING.items():
        missing = [n for n in names if not hasattr(cls, n)]
        assert not missing, f"{cls.__name__} lacks {missing}"
    pred = create_paddle_predictor(_cxx())
    cxx_only = ["save_optimized_model", "save_optimized_pb_model", "Synchronize", "clone"]
    assert not [n for n in PREDICTOR + cxx_only if not hasattr(pred, n)]
    assert not [n for n in TENSOR if not hasattr(pred.get_input(0), n)]
    assert {m.name for m in CLTuneMode} == {"CL_TUNE_NONE", "CL_TUNE_RAPID", "CL_TUNE_NORMAL", "CL_TUNE_EXHAUSTIVE"}
    assert {m.name for m in CLPrecisionType} == {"CL_PRECISION_AUTO", "CL_PRECISION_FP32", "CL_PRECISION_FP16"}


def test_place_as_paddlelite_builds_it():
    p = Place(TargetType.X86, PrecisionType.FP32, DataLayoutType.NCHW, 0)
    assert p == Place(TargetType.X86) and p.is_valid() and p.device == 0
    k = Place(target=TargetType.ARM, percision=PrecisionType.FP16, layout=DataLayoutType.NHWC, device=1)
    assert (k.target, k.precision, k.layout, k.device) == (TargetType.ARM, PrecisionType.FP16, DataLayoutType.NHWC, 1)
    assert not Place(TargetType.Unk).is_valid()


def test_nnadapter_setters(tmp_path):
    cfg = _cxx()
    cfg.set_nnadapter_mixed_precision_quantization_config_path("")
    with pytest.raises(ConfigError, match="does not exist"):
        cfg.set_nnadapter_mixed_precision_quantization_config_path(str(tmp_path / "missing.txt"))
    rules = tmp_path / "mp.txt"
    rules.write_text("conv2d\n")
    cfg.set_nnadapter_mixed_precision_quantization_config_path(str(rules))
    assert cfg.nnadapter_mixed_precision_quantization_config_path() == str(rules)
    cfg.set_nnadapter_mixed_precision_quantization_config_buffer(b"conv2d\n")
    assert cfg.nnadapter_mixed_precision_quantization_config_buffer() == "conv2d\n"
    m = MobileConfig()
    m.set_nnadapter_dynamic_shape_info({"x": [[1, 3, 48, 192], [4, 3, 48, 192]]})
    assert m.nnadapter_dynamic_shape_info() == {"x": [[1, 3, 48, 192], [4, 3, 48, 192]]}
    with pytest.raises(ConfigError, match="input 'x'"):
        m.set_nnadapter_dynamic_shape_info({"x": [["a"]]})
    m.set_nnadapter_model_cache_buffers("token", b"\x01\x02")
    assert m.nnadapter_model_cache_buffers() == {"token": b"\x01\x02"}
    cfg.set_nnadapter_model_cache_dir(str(tmp_path))
    assert cfg.nnadapter_model_cache_dir() == str(tmp_path)


def test_opencl_setters_configure_the_opencl_target_and_metal_ones_refuse(tmp_path):
    for cfg in (_cxx(), MobileConfig()):
        cfg.set_opencl_binary_path_name(str(tmp_path), "lite_opencl_kernel.bin")
        cfg.set_opencl_tune(CLTuneMode.CL_TUNE_NORMAL, "./", "tuned.bin", 4)
        cfg.set_opencl_precision(CLPrecisionType.CL_PRECISION_AUTO)
        assert cfg.option("opencl_cache_dir") == str(tmp_path)
        with pytest.raises(ConfigError, match="CLTuneMode"):
            cfg.set_opencl_tune(7)
        with pytest.raises(ConfigError, match="no Metal target"):
            cfg.set_metal_use_mps(True)
    cxx = _cxx()
    cxx.set_valid_places([Place(TargetType.OpenCL), Place(TargetType.Host)])
    assert cxx.analysis_places() == cxx.valid_places()
    cxx.set_opencl_precision(CLPrecisionType.CL_PRECISION_FP16)
    assert cxx.analysis_places() == [Place(TargetType.OpenCL, PrecisionType.FP16), Place(TargetType.OpenCL),
                                     Place(TargetType.Host)]


def test_model_buffers_four_arguments(tmp_path):
    d = model_dir(NAME)
    ins, outs = load_case(NAME)
    prog, params = (d / "inference.pdmodel").read_bytes(), (d / "inference.pdiparams").read_bytes()
    cfg = CxxConfig()
    cfg.set_model_buffer(prog, len(prog), params, len(params))
    assert cfg.is_model_from_memory()
    assert_close_rel(create_paddle_predictor(cfg).predict(ins)[0], next(iter(outs.values())), REL)
    # MobileConfig.set_model_buffer: a Paddle program + params (optimized here) or an optimized .nb
    m = MobileConfig()
    m.set_model_buffer(prog, len(prog), params, len(params))
    assert m.is_model_from_memory()
    assert_close_rel(create_paddle_predictor(m).predict(ins)[0], next(iter(outs.values())), REL)
    nb = create_paddle_predictor(_cxx()).save_optimized_model(str(tmp_path / "m"))
    data = open(nb, "rb").read()
    m2 = MobileConfig()
    m2.set_model_buffer(data, len(data), b"", 0)
    assert_close_rel(create_paddle_predictor(m2).predict(ins)[0], next(iter(outs.values())), REL)


def test_passes_internal_and_discarded_pass():
    cfg = _cxx()
    cfg.add_discarded_pass("conv_bn_fuse_pass")
    assert "conv_bn_fuse_pass" not in cfg.passes()
    cfg.set_passes_internal([])
    assert "conv_bn_fuse_pass" in cfg.passes()


def test_arm_place_on_host_kernels_warns_once():
    from pdlite.api import config as config_mod

    config_mod._warned_targets.discard(TargetType.XPU)
    ins, outs = load_case(NAME)
    for expect in (1, 0):
        cfg = _cxx()
        cfg.set_valid_places([Place(TargetType.XPU, PrecisionType.FP32)])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            pred = create_paddle_predictor(cfg)
        assert sum("no XPU kernels" in str(x.message) for x in w) == expect
        assert_close_rel(pred.predict(ins)[0], next(iter(outs.values())), REL)


def test_opt_additions(tmp_path, capsys):
    opt = Opt()
    opt.set_model_dir(str(model_dir(NAME)))
    opt.set_valid_places("x86,host")
    assert opt.check_if_model_supported(True) is True
    assert "supported" in capsys.readouterr().out
    assert "conv2d" in opt.display_kernels_info()
    assert opt.version()
    opt.set_quant_model(True)
    opt.set_quant_type("QUANT_INT8")
    assert opt.quant_model is True and opt.quant_type == "QUANT_INT8"
    with pytest.raises(ConfigError, match="QUANT_INT8"):
        opt.set_quant_type("QUANT_INT4")
    opt.set_quant_model(False)
    opt.record_model_info(True)
    opt.enable_fp16()
    with pytest.warns(RuntimeWarning, match="fp16 kernels only on the CUDA and OpenCL targets"):
        assert opt.places_for_run() == opt.valid_places()
    opt.set_optimize_out(str(tmp_path / "out"))
    with pytest.warns(RuntimeWarning):
        path = opt.run()
    ops = (tmp_path / ".tailored_ops_list").read_text().split()
    assert "conv2d" in ops and (tmp_path / ".tailored_kernels_list").read_text().strip()
    m = MobileConfig()
    m.set_model_from_file(path)
    ins, outs = load_case(NAME)
    assert_close_rel(create_paddle_predictor(m).predict(ins)[0], next(iter(outs.values())), REL)
    cuda = Opt()
    cuda.set_valid_places([Place(TargetType.CUDA), Place(TargetType.Host)])
    cuda.enable_fp16()
    assert cuda.places_for_run()[0] == Place(TargetType.CUDA, PrecisionType.FP16)
    opencl = Opt()
    opencl.set_valid_places([Place(TargetType.OpenCL), Place(TargetType.Host)])
    opencl.enable_fp16()
    assert opencl.places_for_run()[:2] == [Place(TargetType.OpenCL, PrecisionType.FP16), Place(TargetType.OpenCL)]


def test_tensor_from_numpy_takes_a_place():
    pred = create_paddle_predictor(_cxx())
    ins, outs = load_case(NAME)
    pred.get_input(0).from_numpy(ins["x"], TargetType.Host)
    pred.run()
    assert_close_rel(pred.get_output(0).numpy(), next(iter(outs.values())), REL)
    assert np.array_equal(np.asarray(pred.get_output(0).float_data()), pred.get_output(0).numpy().reshape(-1))


def test_protobuf_save_model_set_and_markdown(tmp_path, capsys):
    ins, outs = load_case(NAME)
    pred = create_paddle_predictor(_cxx())
    pred.Synchronize()
    pdmodel = pred.save_optimized_pb_model(str(tmp_path / "pb"))
    cfg = CxxConfig()
    cfg.set_model_file(pdmodel)
    cfg.set_param_file(str(tmp_path / "pb" / "inference.pdiparams"))
    assert_close_rel(create_paddle_predictor(cfg).predict(ins)[0], next(iter(outs.values())), REL)
    # a model set: every model folder inside one folder, each written as <out>/<name>.nb
    models = tmp_path / "set"
    models.mkdir()
    (models / "cls").symlink_to(model_dir(NAME), target_is_directory=True)
    opt = Opt()
    opt.set_modelset_dir(str(models))
    opt.set_optimize_out(str(tmp_path / "set_opt"))
    assert opt.run() == str(tmp_path / "set_opt")
    assert (tmp_path / "set_opt" / "cls.nb").is_file()
    md = opt.print_all_ops_in_md_dormat()
    assert md.startswith("| OP_name |") and "| conv2d |" in md
    with pytest.raises(ConfigError, match="pdlite graph"):
        opt.visualize_optimized_nb_model(str(tmp_path / "set_opt" / "cls.nb"), str(tmp_path))
