"""Real PaddleDetection detectors with their NMS (tests/fixtures/toolkit, tools/make_toolkit_det.py) against
Paddle Inference.

PP-YOLOE+ (CSPResNet + CustomCSPPAN + PPYOLOEHead) and PicoDet (LCNet + LCPAN + PicoHeadV2) from paddledet
2.6, random weights, exported as PaddleDetection exports them (inputs image and scale_factor; outputs
bbox [N, 6] = [label, score, x1, y1, x2, y2] and bbox_num [1] from multiclass_nms3), each in both formats
(`legacy/` inference.pdmodel, `pir/` inference.json), on the host and on intel_openvino and onnxruntime.
Reference: Paddle Inference on each format's files, for `<model>/case.npz` (one 160x160 image) and
`<model>/case_b2.npz` (a batch of two, the second from a photo of another size: bbox_num has two counts).

Tolerances:
- host: bbox max|got - ref| <= 1e-4 * max|ref|; bbox_num and the number of rows exactly.
- devices: bbox max|got - ref| <= 1e-3 * max|ref| (tests/nnadapter/_models.py's REL: the devices fuse and
  reorder fp32 arithmetic ahead of the host NMS); bbox_num, the rows' count and order and their labels exactly.
  That is sound because the generator only keeps an input whose NMS cannot flip: every candidate's score is
  >= 2e-4 from the score threshold, no two candidates of a class are within 2e-5 of each other in score, and
  no candidate pair's IoU is within 1e-3 of the NMS threshold, while the nets' fp32 outputs move by ~1e-6
  relative between implementations (Paddle with and without its IR passes, pdlite host and devices).
- fallback: a device run must not fall back to the host at run time (NNAdapterFallbackWarning is an error);
  the only op left on the host is multiclass_nms3, refused by the ONNX converters ("no converter", as
  `pdlite inspect` prints). PicoDet's anchor points (range, meshgrid, also refused) are computed from the
  static feature sizes, so the optimizer folds them to constants before partitioning.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pdlite.model_parser import load_model
from pdlite.tools.inspect_model import placement
from tests.conformance._toolkit import ROOT, folder, load_case, predictor
from tests.conftest import assert_close_rel
from tests.nnadapter._models import DEVICES, REL, NNAdapterFallbackWarning, need, subgraph_kernels

MODELS = ["ppyoloe_plus_crn", "picodet_lcnet"]
FORMATS = ["legacy", "pir"]
HOST_REL = 1e-4
ON_HOST = {"multiclass_nms3": "no converter"}  # op type left on the host -> part of the converters' refusal
FOLDED = {"ppyoloe_plus_crn": set(), "picodet_lcnet": {"meshgrid"}}  # refused, but folded to constants (range converts)
CASES = ["case.npz", "case_b2.npz"]


def _folder(model: str, fmt: str) -> Path:
    return folder(model, fmt, "tools/make_toolkit_det.py")


def _case(model: str, fmt: str, case: str = "case.npz") -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]]]:
    """The inputs and this format's reference outputs (fetch name, array) in fetch order: bbox, bbox_num."""
    ins, outs = load_case(model, fmt, case, "tools/make_toolkit_det.py")
    assert len(outs) == 2, f"{model}/{case}: {fmt} outputs {[n for n, _ in outs]}, expected bbox and bbox_num"
    return ins, outs


def _check(pred, model: str, fmt: str, rel: float, what: str) -> None:
    for case in CASES:
        _check_case(pred, model, fmt, case, rel, f"{what} {case}")


def _check_case(pred, model: str, fmt: str, case: str, rel: float, what: str) -> None:
    ins, refs = _case(model, fmt, case)
    (_, ref_box), (_, ref_num) = refs
    for run in (1, 2):  # the second run catches state kept between runs
        got = [np.asarray(g) for g in pred.predict(ins)]
        assert pred.get_output_names() == [n for n, _ in refs], what
        box, num = got
        w = f"{what} (run {run})"
        assert num.dtype == ref_num.dtype and np.array_equal(num, ref_num), f"{w}: bbox_num {num} != {ref_num}"
        assert box.dtype == ref_box.dtype and box.shape == ref_box.shape, \
            f"{w}: bbox {box.dtype}{box.shape} vs Paddle {ref_box.dtype}{ref_box.shape}"
        assert np.array_equal(box[:, 0], ref_box[:, 0]), f"{w}: labels differ (NMS kept other boxes or order)"
        assert_close_rel(box, ref_box, rel, f"{w} bbox")


def test_fixtures_are_detectors_with_nms() -> None:
    """Both formats end in multiclass_nms3 with PaddleDetection's feeds; a meaningful number of boxes; small."""
    for model in MODELS:
        for fmt in FORMATS:
            folder = _folder(model, fmt)
            m = load_model(model_dir=folder)
            types = [op.type for b in m.program.blocks for op in b.ops if op.type not in ("feed", "fetch")]
            assert types.count("multiclass_nms3") == 1, f"{model}/{fmt}: {types.count('multiclass_nms3')} NMS ops"
            assert sorted(m.program.feed_names()) == ["image", "scale_factor"], f"{model}/{fmt}"
            size = sum(f.stat().st_size for f in folder.iterdir())
            assert size < 2_000_000, f"{model}/{fmt}: {size} bytes"
            for case, batch in zip(CASES, (1, 2)):
                ins, ((_, box), (_, num)) = _case(model, fmt, case)
                assert ins["image"].shape == (batch, 3, 160, 160) and box.shape[1] == 6 and num.shape == (batch,)
                assert num.dtype == np.int32 and int(num.sum()) == len(box), f"{model}/{fmt} {case}"
                assert all(5 <= n <= 50 for n in num.tolist()), f"{model}/{fmt} {case}: {num.tolist()} boxes"
        for case in CASES:
            z = np.load(ROOT / model / case)
            legacy, pir = (z[k] for k in z.files if ".out:" in k and z[k].dtype == np.float32)
            assert_close_rel(legacy, pir, 1e-5, f"{model} {case}: Paddle's legacy and PIR references")
        one, two = (np.load(ROOT / model / c)["legacy.out:" + _case(model, "legacy")[1][0][0]] for c in CASES)
        assert np.array_equal(one[:, 0], two[:len(one), 0]), f"{model}: image 1 keeps other boxes in the batch"
        assert_close_rel(two[:len(one)], one, 1e-5, f"{model}: image 1 alone and in the batch of two")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model", MODELS)
def test_host_matches_paddle_inference(model: str, fmt: str) -> None:
    _check(predictor(_folder(model, fmt), None), model, fmt, HOST_REL, f"{model}/{fmt} on host")


@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model", MODELS)
def test_device_matches_paddle_inference(model: str, fmt: str, device: str) -> None:
    need(device)
    folder = _folder(model, fmt)
    what = f"{model}/{fmt} on {device}"
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # the device really runs its subgraphs
        pred = predictor(folder, device)
        _check(pred, model, fmt, REL, what)
    assert subgraph_kernels(pred), f"{what}: nothing ran on the device"
    on_host = [i.op.type for i in pred.runtime_program.instructions if i.op.type != "subgraph"]
    assert on_host == list(ON_HOST), f"{what}: ops left on the host {on_host}, expected {list(ON_HOST)}"
    m = load_model(model_dir=folder)
    table = placement(m.program, {k: t.array for k, t in m.params.items()})
    for op_type, why in ON_HOST.items():
        n, on_device, reasons = table[op_type]
        assert on_device == 0 and any(why in r for r in reasons), f"{what}: {op_type}: {dict(reasons)}"
    refused = {t for t, (n, k, _) in table.items() if k < n}
    assert refused == set(ON_HOST) | FOLDED[model], f"{what}: the converters refuse {sorted(refused)}"
