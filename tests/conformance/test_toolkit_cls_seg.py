"""Real toolkit architectures (tests/fixtures/toolkit, tools/make_toolkit_cls_seg.py) against Paddle Inference.

PP-LCNet, PP-HGNet, SwinTransformer and ViT from paddleclas, PP-LiteSeg and SegFormer from paddleseg, random
weights, each in both formats
(`legacy/` inference.pdmodel, `pir/` inference.json), on the host and on the NNAdapter devices
intel_openvino and onnxruntime. Reference: `<model>/case*.npz`, Paddle Inference on each format's files
(PP-LiteSeg and SegFormer, exported with a dynamic input size, have a second case at 72x100, a size their
strides do not divide: uneven adaptive-pool bins in PP-LiteSeg's context module, odd upsampling ratios,
SegFormer's overlapping patch embeds and spatial-reduction convs on odd sizes).

Tolerances:
- host: max|got - ref| <= 1e-4 * max|ref| for floats; the int32 label map of PP-LiteSeg (argmax) exactly.
- devices: max|got - ref| <= 1e-3 * max|ref| for floats (tests/nnadapter/_models.py's REL, the bar every
  device fp32 model test in the repo uses: the devices fuse and reorder fp32 arithmetic); the label map
  exactly as well (OpenVINO runs at f32, pdlite's default precision hint; at every pixel of this input the
  two best logits are at least 0.068 * max|logit| apart, checked by the generator, which refuses a gap under
  1e-2: 68x the devices' bar, so no reordering of fp32 arithmetic flips a label and any difference is a bug).
- the converter form PP-LiteSeg needs on a device (bilinear_interp_v2 to a size known only at run time,
  converted to ONNX Resize(sizes=...)) against the host kernels, on both devices' runtimes:
  max|d| <= 1e-5 * max|host| (one two-tap interpolation; only the float32 weights' rounding differs).
- fallback: a device run must not fall back to the host at run time (NNAdapterFallbackWarning is an error),
  and the ops the partitioner leaves on the host are exactly the expected ones, each for the reason
  `pdlite inspect` prints (the ONNX converters' refusal) or, for the ops the converters accept, because
  they only compute a shape (`pdlite.nnadapter.partition.shape_only`: no device group is formed for them).
  `pdlite inspect` reads the unoptimised program; an op it refuses only because an input is not yet a
  constant there (Swin's integer floor division by a fill_constant window size, folded by the predictor
  before partitioning) is listed apart, with that reason, and must run on the device.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pdlite.core.program import VarDesc
from pdlite.model_parser import load_model
from pdlite.nnadapter.convert import GraphInput, TensorInfo, convert_ops, refusal
from pdlite.tools.inspect_model import placement
from tests.conformance._toolkit import ROOT, folder, load_case, predictor
from tests.conftest import assert_close_rel
from tests.nnadapter._models import DEVICES, REL, NNAdapterFallbackWarning, need, subgraph_kernels
from tests.nnadapter._util import Case, host_run, op

MODELS = ["pplcnet_x0_25", "pphgnet_tiny_narrow", "ppliteseg_stdc1_b8", "swin_tiny_narrow", "vit_tiny_narrow",
          "segformer_narrow"]
FORMATS = ["legacy", "pir"]
# (model, case file): every case*.npz a model folder holds
CASES = [(m, f.name) for m in MODELS for f in sorted((ROOT / m).glob("case*.npz"))] or [(m, "case.npz") for m in MODELS]
HOST_REL = 1e-4
SHAPE_ONLY = "shape-only"  # the converters accept it; the partitioner forms no group that only computes shapes

# per model and format: the op types left on the host on a device, and why (a part of the converter's refusal)
# PP-LiteSeg runs whole on the devices: its run-time-size interpolations as Resize(sizes=...), its context
# module's AdaptiveAvgPool2D(2) / (4) on a feature map of run-time size as Paddle's bins (Slice + ReduceMean)
_LITESEG: dict[str, str] = {}
EXPECTED_ON_HOST: dict[tuple[str, str], dict[str, str]] = {
    ("pplcnet_x0_25", "legacy"): {}, ("pplcnet_x0_25", "pir"): {},
    ("pphgnet_tiny_narrow", "legacy"): {}, ("pphgnet_tiny_narrow", "pir"): {},
    ("ppliteseg_stdc1_b8", "legacy"): _LITESEG, ("ppliteseg_stdc1_b8", "pir"): _LITESEG,
    # Swin runs whole on the devices: the shifted windows' roll, the attention mask's set_value, the window
    # counts' integer floor division by the (folded) window size
    ("swin_tiny_narrow", "legacy"): {}, ("swin_tiny_narrow", "pir"): {},
    # ViT runs whole on the devices: the class token expanded to the run-time batch (expand_v2 to a shape built
    # from shape(x)[0]) as Expand(x, Where(shape == -1, 1, shape))
    ("vit_tiny_narrow", "legacy"): {}, ("vit_tiny_narrow", "pir"): {},
    ("segformer_narrow", "legacy"): {}, ("segformer_narrow", "pir"): {},
}
# per model: ops `pdlite inspect` refuses on the unoptimised program (reason) that run on the device once folded
INSPECT_ONLY: dict[str, dict[str, str]] = {"swin_tiny_narrow": {"elementwise_floordiv": "constant nonzero Y"}}


def _folder(model: str, fmt: str) -> Path:
    return folder(model, fmt, "tools/make_toolkit_cls_seg.py")


def _case(model: str, fmt: str, case: str) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]]]:
    """The inputs and this format's reference outputs (fetch name, array) in fetch order."""
    ins, outs = load_case(model, fmt, case, "tools/make_toolkit_cls_seg.py")
    assert outs, f"{model}/{case} has no {fmt} outputs"
    return ins, outs


def _check(pred, model: str, fmt: str, case: str, rel: float, what: str) -> None:
    ins, refs = _case(model, fmt, case)
    got = pred.predict(ins)
    assert pred.get_output_names() == [n for n, _ in refs], what
    for (name, ref), g in zip(refs, got):
        g = np.asarray(g)
        assert g.dtype == ref.dtype and g.shape == ref.shape, f"{what} {name}: {g.dtype}{g.shape} vs {ref.dtype}{ref.shape}"
        if ref.dtype.kind in "biu":
            bad = int(np.sum(g != ref))
            assert bad == 0, f"{what} {name}: {bad} of {ref.size} labels differ from Paddle Inference"
        else:
            assert_close_rel(g, ref, rel, f"{what} {name}")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model, case", CASES)
def test_host_matches_paddle_inference(model: str, case: str, fmt: str) -> None:
    _check(predictor(_folder(model, fmt), None), model, fmt, case, HOST_REL, f"{model}/{fmt} {case} on host")


@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model, case", CASES)
def test_device_matches_paddle_inference(model: str, case: str, fmt: str, device: str) -> None:
    need(device)
    folder = _folder(model, fmt)
    what = f"{model}/{fmt} {case} on {device}"
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # the device really runs its subgraphs
        pred = predictor(folder, device)
        _check(pred, model, fmt, case, REL, what)
    assert subgraph_kernels(pred), f"{what}: nothing ran on the device"
    on_host = {i.op.type for i in pred.runtime_program.instructions if i.op.type != "subgraph"}
    expected = EXPECTED_ON_HOST[(model, fmt)]
    assert on_host == set(expected), f"{what}: ops left on the host {sorted(on_host)}, expected {sorted(expected)}"
    m = load_model(model_dir=folder)
    table = placement(m.program, {k: t.array for k, t in m.params.items()})
    for op_type, why in expected.items():
        n, on_device, reasons = table[op_type]
        if why == SHAPE_ONLY:
            assert on_device == n, f"{what}: {op_type} is refused ({dict(reasons)}), expected a shape-only host op"
        else:
            assert any(why in r for r in reasons), f"{what}: {op_type} refused for {dict(reasons)}, expected {why!r}"
    refused = {t for t, (n, k, _) in table.items() if k < n}
    late = INSPECT_ONLY.get(model, {})
    for op_type, why in late.items():
        assert op_type not in on_host, f"{what}: {op_type} stayed on the host"
        assert any(why in r for r in table[op_type][2]), f"{what}: {op_type} refused for {table[op_type][2]}"
    refused -= set(late)
    assert refused <= set(expected), f"{what}: converters refuse {sorted(refused - set(expected))} unexpectedly"


# -- bilinear_interp_v2 to a run-time size on the devices ---------------------------------------------------
_ALIGN = {"half_pixel": {"align_corners": False, "align_mode": 0},
          "asymmetric": {"align_corners": False, "align_mode": 1},
          "align_corners": {"align_corners": True, "align_mode": 0}}


def _interp_case(form: str, align: str, in_hw: tuple[int, int], out_hw: tuple[int, int]) -> Case:
    """x [2, 3, H, W] resized to out_hw given as an OutSize tensor, two SizeTensor tensors or out_h / out_w."""
    rng = np.random.default_rng(in_hw[0] * 100 + out_hw[1])
    feeds = {"x": rng.normal(0, 1, (2, 3, *in_hw)).astype(np.float32)}
    ins: dict[str, object] = {"X": "x"}
    attrs: dict[str, object] = {**_ALIGN[align], "out_h": -1, "out_w": -1, "scale": []}
    if form == "OutSize":
        feeds["sz"] = np.asarray(out_hw, np.int32)
        ins["OutSize"] = "sz"
    elif form == "SizeTensor":
        feeds["h"], feeds["w"] = np.asarray([out_hw[0]], np.int32), np.asarray([out_hw[1]], np.int32)
        ins["SizeTensor"] = ["h", "w"]
    else:
        attrs["out_h"], attrs["out_w"] = out_hw
    return Case(f"{form}-{align}", [op("bilinear_interp_v2", ins, {"Out": "y"}, **attrs)], feeds)


def _dynamic_onnx(case: Case):
    """The case's ONNX model with H and W of x unknown and the size tensors' values unknown."""
    vars_ = {n: VarDesc(n, dtype=5 if n == "x" else 2, shape=[2, 3, -1, -1] if n == "x" else list(a.shape))
             for n, a in case.feeds.items()}
    vars_["y"] = VarDesc("y", dtype=5, shape=[2, 3, -1, -1])
    info = TensorInfo.from_vars(vars_, {})
    assert refusal(case.ops[0], info) is None
    inputs = [GraphInput(n, (2, 3, -1, -1) if n == "x" else a.shape, a.dtype) for n, a in case.feeds.items()]
    return convert_ops(case.ops, inputs, ["y"], info, vars_)


@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("form", ["OutSize", "SizeTensor", "attrs"])
@pytest.mark.parametrize("align", list(_ALIGN))
def test_run_time_size_bilinear_on_device(align: str, form: str, device: str) -> None:
    need(device)
    from pdlite.nnadapter.registry import get_driver

    driver = get_driver(device)()
    for in_hw, out_hw in [((7, 9), (12, 5)), ((8, 8), (3, 17)), ((5, 6), (5, 6)), ((4, 4), (1, 1))]:
        case = _interp_case(form, align, in_hw, out_hw)
        host = host_run(case)["y"]
        model = _dynamic_onnx(case)
        assert [n.op_type for n in model.graph.node].count("Resize") == 1, "the run-time-size form was not used"
        got = driver.run(driver.build(model.SerializeToString(), {}), [case.feeds[i.name] for i in model.graph.input])
        what = f"{case.id} {in_hw}->{out_hw} on {device}"
        assert got[0].shape == host.shape, what
        assert_close_rel(got[0], host, 1e-5, what)


def test_run_time_size_bilinear_refusals() -> None:
    """A positive scale is Paddle's source ratio even when a size tensor sets the output size, and nearest
    has no exact Resize form for every ratio: both stay on the host when the sizes are unknown."""
    info = TensorInfo({"x": (1, 3, -1, -1), "sz": (2,)}, {"sz": np.dtype(np.int32)})
    scaled = op("bilinear_interp_v2", {"X": "x", "OutSize": "sz"}, {"Out": "y"}, scale=[2.0, 2.0])
    assert "needs the input size" in (refusal(scaled, info) or "")
    nearest = op("nearest_interp_v2", {"X": "x", "OutSize": "sz"}, {"Out": "y"})
    assert "needs the input size" in (refusal(nearest, info) or "")
    assert refusal(op("bilinear_interp_v2", {"X": "x", "OutSize": "sz"}, {"Out": "y"}), info) is None
