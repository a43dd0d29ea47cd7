"""Shared helpers of the NNAdapter model tests: predictors on a device, reference checks.

Tolerance: max|got - ref| <= 1e-3 * max|ref| (the issue's bar; the devices fuse and reorder fp32
arithmetic). A device is skipped only when its Python package is absent.
"""
from __future__ import annotations

import warnings

import pytest

from pdlite import CxxConfig, Place, PrecisionType, TargetType, create_paddle_predictor
from pdlite.nnadapter.subgraph_kernel import NNAdapterFallbackWarning, SubgraphKernel
from tests.conftest import LEGACY_MODELS, assert_close_rel, load_case, model_dir

__all__ = ["DEVICES", "LEGACY_MODELS", "NNAdapterFallbackWarning", "check", "need", "predictor", "run_model_case",
           "subgraph_kernels"]

REL = 1e-3
DEVICES = {"intel_openvino": "openvino", "onnxruntime": "onnxruntime"}


def need(device: str) -> None:
    pytest.importorskip(DEVICES[device])
    pytest.importorskip("onnx")


def predictor(model: str, device: str, places: bool = True, **options: object):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(model)))
    cfg.set_nnadapter_device_names([device])
    if places:
        cfg.set_valid_places([Place(TargetType.NNAdapter, PrecisionType.FP32), Place()])
    props = {"intel_openvino": "INTEL_OPENVINO_INFERENCE_NUM_THREADS=2",
             "onnxruntime": "ONNXRUNTIME_INTRA_OP_NUM_THREADS=2"}[device]
    cfg.set_nnadapter_context_properties(props)
    for k, v in options.items():
        getattr(cfg, f"set_{k}")(v)
    return create_paddle_predictor(cfg)


def subgraph_kernels(pred) -> list[SubgraphKernel]:
    return [i.kernel for i in pred.runtime_program.instructions if i.op.type == "subgraph"]


def check(pred, case: str = "case.npz", model: str = "") -> None:
    ins, outs = load_case(model, case)
    got = pred.predict(ins)
    for name, g in zip(pred.get_output_names(), got):
        assert_close_rel(g, outs[name], REL, f"{model} {case} {name}")


def run_model_case(model: str, device: str) -> None:
    """The model on `device` alone (no fallback, no host op left) matches case.npz."""
    need(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # the device must really run it
        pred = predictor(model, device, places=device == "intel_openvino")
        check(pred, model=model)
    kernels = subgraph_kernels(pred)
    assert kernels and all(k.builds == 1 for k in kernels)
    host_ops = [i.op.type for i in pred.runtime_program.instructions if i.op.type != "subgraph"]
    assert not host_ops, f"{model}: ops left on the host: {host_ops}"
