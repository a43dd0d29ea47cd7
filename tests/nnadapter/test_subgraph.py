"""Subgraph features on both devices: one model for a changing batch, partition config, host fallback, model cache,
configuration errors. Reference checks as in the model tests (1e-3 of max|ref|).
"""
from __future__ import annotations

import os
import warnings

import pytest

from pdlite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor
from tests.conftest import model_dir
from tests.nnadapter._models import DEVICES, NNAdapterFallbackWarning, check, need, predictor, subgraph_kernels


@pytest.mark.parametrize("device", list(DEVICES))
def test_batch_change_compiles_once(device: str) -> None:
    model = "mobilenet_v2"  # has case_b4.npz
    need(device)
    pred = predictor(model, device)
    check(pred, "case.npz", model)
    check(pred, "case_b4.npz", model)
    check(pred, "case.npz", model)
    (k,) = subgraph_kernels(pred)
    assert k.builds == 1 and k.shape_mode == "dynamic"  # the program's batch is -1: one model serves 1 and 4


@pytest.mark.parametrize("device", list(DEVICES))
def test_excluded_op_type_splits_the_model(device: str, tmp_path) -> None:
    need(device)
    cfg_file = tmp_path / "partition.txt"
    cfg_file.write_text("# keep pooling on the host\npool2d\n")
    pred = predictor("mobilenet_v3_small", device, nnadapter_subgraph_partition_config_path=str(cfg_file))
    check(pred, model="mobilenet_v3_small")
    types = [i.op.type for i in pred.runtime_program.instructions]
    assert types.count("subgraph") > 1 and "pool2d" in types
    assert all(op.type != "pool2d" for k in subgraph_kernels(pred) for op in k.block.ops)
    # host ops sit between subgraphs
    first, last = types.index("subgraph"), len(types) - 1 - types[::-1].index("subgraph")
    assert "pool2d" in types[first:last]


def test_partition_config_by_var_names() -> None:
    need("onnxruntime")
    full = predictor("ppocr_cls_v2", "onnxruntime")
    (pool,) = [op for k in subgraph_kernels(full) for op in k.block.ops
               if op.type == "pool2d" and op.attrs.get("pooling_type") == "max"]
    line = f"pool2d:{pool.input('X')}:{pool.output('Out')}"
    pred = predictor("ppocr_cls_v2", "onnxruntime", nnadapter_subgraph_partition_config_buffer=line)
    check(pred, model="ppocr_cls_v2")
    types = [i.op.type for i in pred.runtime_program.instructions]
    assert types == ["subgraph", "pool2d", "subgraph"]


@pytest.mark.parametrize("device", list(DEVICES))
def test_failing_driver_falls_back_to_host(device: str, monkeypatch) -> None:
    need(device)
    from pdlite.nnadapter.registry import get_driver

    def broken(self, *a, **k):
        raise RuntimeError("device refused the model")

    monkeypatch.setattr(get_driver(device), "build", broken)
    pred = predictor("ppocr_cls_v2", device)
    with pytest.warns(NNAdapterFallbackWarning, match=f"{device}.*device refused the model"):
        check(pred, model="ppocr_cls_v2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # warned once only
        check(pred, model="ppocr_cls_v2")


@pytest.mark.parametrize("device", list(DEVICES))
def test_model_cache_dir_is_reused(device: str, tmp_path) -> None:
    need(device)
    cache = tmp_path / "cache"
    pred = predictor("mobilenet_v3_small", device, nnadapter_model_cache_dir=str(cache))
    check(pred, model="mobilenet_v3_small")
    files = sorted(os.listdir(cache))
    assert files and all(f.endswith("." + device) for f in files)
    assert [k.cache_hits for k in subgraph_kernels(pred)] == [0]
    stamps = {f: os.stat(cache / f).st_mtime_ns for f in files}
    again = predictor("mobilenet_v3_small", device, nnadapter_model_cache_dir=str(cache))
    check(again, model="mobilenet_v3_small")
    assert [k.cache_hits for k in subgraph_kernels(again)] == [1]
    assert {f: os.stat(cache / f).st_mtime_ns for f in os.listdir(cache)} == stamps


def test_config_errors_are_clear() -> None:
    from pdlite.errors import ConfigError

    cfg = CxxConfig()
    with pytest.raises(ConfigError, match="list of device names"):
        cfg.set_nnadapter_device_names("intel_openvino")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        cfg.set_nnadapter_context_properties("INTEL_OPENVINO_INFERENCE_NUM_THREADS")
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
    with pytest.raises(ConfigError, match="set_nnadapter_device_names"):
        create_paddle_predictor(cfg)
    cfg.set_nnadapter_device_names(["no_such_device"])
    with pytest.raises(ConfigError, match="known devices"):
        create_paddle_predictor(cfg)
    cfg.set_nnadapter_device_names(["onnxruntime"])
    cfg.set_nnadapter_context_properties("ONNXRUNTIME_THREADS=2")
    with pytest.raises(ConfigError, match="ONNXRUNTIME_INTRA_OP_NUM_THREADS"):
        create_paddle_predictor(cfg)


def test_missing_package_names_the_pip_extra(monkeypatch) -> None:
    from pdlite.errors import ConfigError
    from pdlite.nnadapter.registry import get_driver

    monkeypatch.setattr(get_driver("intel_openvino"), "available", classmethod(lambda cls: False))
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    cfg.set_nnadapter_device_names(["intel_openvino"])
    with pytest.raises(ConfigError, match=r"pip install pdlite\[openvino\]"):
        create_paddle_predictor(cfg)


def test_no_devices_means_no_subgraphs() -> None:
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir("ppocr_cls_v2")))
    pred = create_paddle_predictor(cfg)
    assert "subgraph" not in [i.op.type for i in pred.runtime_program.instructions]
