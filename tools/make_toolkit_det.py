"""Real PaddleDetection detectors as committed fixtures: PP-YOLOE+ and PicoDet built from the `paddledet`
package's own classes, random weights, exported with their NMS post-processing as PaddleDetection's
`tools/export_model.py` does (inputs image / im_shape / scale_factor, pruned to those the program reads;
outputs bbox [N, 6] and bbox_num from multiclass_nms3), in both formats under `<out>/<model>/`:

- `legacy/`: inference.pdmodel + .pdiparams (paddle.jit.save with FLAGS_enable_pir_api=0, a ProgramDesc),
- `pir/`: inference.json + .pdiparams (paddle.jit.save under PIR),

each export in a fresh process (the flag is read at import; the legacy programs' op_callstack attributes
dropped, so every file regenerates byte for byte), and `<model>/case.npz` (one image) and `case_b2.npz` (a
batch of two): `in:<feed>`, and `legacy.out:<fetch>` / `pir.out:<fetch>`, Paddle Inference on each format's
files in fetch order, via tools/paddle_reference.py. Run (PaddleDetection 2.6 from PyPI, never imported by
pdlite):

    pip install --no-deps --target /work/tk/det paddledet==2.6.0
    PYTHONPATH=/work/tk/det:. python tools/make_toolkit_det.py [out_dir]

ppdet 2.6 predates Paddle 3: its package `__init__`s import every model, the data pipeline and
pycocotools. The shims below (this script only) register ppdet's packages without running their
`__init__`s, so only the modules these nets need are imported; Paddle 3.3's legacy tracing and ppdet's
legacy-only NMS builder are shimmed per format (`legacy_shims`, `pir_shims`).

Random weights make NMS degenerate (ppdet zero-initialises its prediction convs: every score equal). So
that the reference keeps a meaningful and *stable* set of boxes, the weights are redrawn and calibrated
(`randomize`, `calibrate_bn`), and the score threshold is chosen per input draw (`pick_threshold`) with
margins the devices' reordered fp32 arithmetic cannot cross: every class score at least `SCORE_GAP` from the
threshold, no two candidate scores of one class within `TIE_GAP`, no candidate-pair IoU within `IOU_GAP` of
the NMS threshold; otherwise the next image is drawn.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from paddle_reference import paddle_reference  # noqa: E402

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--export" \
    else HERE.parent / "tests" / "fixtures" / "toolkit"
SIZE = 160  # input H = W (PaddleDetection's eval_size for these fixtures)
SCORE_GAP = 2e-4  # |score - score_threshold| of every candidate (fp32 reordering moves scores ~1e-6)
TIE_GAP = 2e-5  # |score_i - score_j| between candidates of one class
IOU_GAP = 1e-3  # |IoU - nms_threshold| between candidates of one class
BN_GAMMA = (0.4, 0.6)  # BN scales below 1: a random deep net that does not amplify rounding layer by layer


# --- shims: ppdet 2.6 on Paddle 3.3 -----------------------------------------------------------------
def _ppdet_root() -> Path:
    spec = importlib.util.find_spec("ppdet")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("ppdet not found: pip install --no-deps --target DIR paddledet==2.6.0 and put DIR "
                         "on PYTHONPATH")
    return Path(list(spec.submodule_search_locations)[0])


def _bare_package(name: str, path: Path) -> types.ModuleType:
    """A package whose submodules import normally but whose `__init__` (importing everything) never runs."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    mod.__package__ = name
    sys.modules[name] = mod
    return mod


def load_ppdet() -> dict[str, object]:
    """The ppdet classes the two nets are built from."""
    root = _ppdet_root()
    for pkg in ("", "core", "modeling", "modeling/backbones", "modeling/necks", "modeling/heads",
                "modeling/losses", "modeling/assigners", "modeling/architectures", "modeling/transformers",
                "data", "data/transform", "utils"):
        _bare_package("ppdet" + ("." + pkg.replace("/", ".") if pkg else ""), root / pkg)
    imp = importlib.import_module
    # names the bare packages would have re-exported from their __init__s
    sys.modules["ppdet.modeling.losses"].GIoULoss = imp("ppdet.modeling.losses.iou_loss").GIoULoss
    sys.modules["ppdet.modeling.transformers"].bbox_cxcywh_to_xyxy = \
        imp("ppdet.modeling.transformers.utils").bbox_cxcywh_to_xyxy
    return {
        "CSPResNet": imp("ppdet.modeling.backbones.cspresnet").CSPResNet,
        "CustomCSPPAN": imp("ppdet.modeling.necks.custom_pan").CustomCSPPAN,
        "PPYOLOEHead": imp("ppdet.modeling.heads.ppyoloe_head").PPYOLOEHead,
        "YOLOv3": imp("ppdet.modeling.architectures.yolo").YOLOv3,
        "LCNet": imp("ppdet.modeling.backbones.lcnet").LCNet,
        "LCPAN": imp("ppdet.modeling.necks.lc_pan").LCPAN,
        "PicoFeat": imp("ppdet.modeling.heads.pico_head").PicoFeat,
        "PicoHeadV2": imp("ppdet.modeling.heads.pico_head").PicoHeadV2,
        "PicoDet": imp("ppdet.modeling.architectures.picodet").PicoDet,
        "MultiClassNMS": imp("ppdet.modeling.layers").MultiClassNMS,
    }



# --- the two nets, as PaddleDetection's configs wire them ---------------------------------------------
# (configs/ppyoloe/_base_/ppyoloe_plus_crn.yml + ppyoloe_plus_reader.yml; configs/picodet/_base_/picodet_v2.yml
# + picodet_s_320_coco_lcnet.yml), at the narrowest multipliers and a 160x160 input.
NETS: dict[str, dict] = {
    "ppyoloe_plus_crn": {
        "nms": {"score_threshold": 0.01, "nms_top_k": 1000, "keep_top_k": 300, "nms_threshold": 0.7},
        "width_mult": 0.0625, "depth_mult": 0.33, "eval_size": [SIZE, SIZE],
    },
    "picodet_lcnet": {
        "nms": {"score_threshold": 0.025, "nms_top_k": 1000, "keep_top_k": 100, "nms_threshold": 0.6},
        "scale": 0.25, "channels": 32, "eval_size": None,
    },
}


def build(name: str, k: dict[str, object], score_threshold: float | None = None):
    """The net `name` in eval mode, its NMS (PaddleDetection's MultiClassNMS) with `score_threshold`."""
    cfg = NETS[name]
    nms = k["MultiClassNMS"](**{**cfg["nms"], **({"score_threshold": score_threshold} if score_threshold else {})})
    if name == "ppyoloe_plus_crn":
        backbone = k["CSPResNet"](layers=[3, 6, 6, 3], channels=[64, 128, 256, 512, 1024], return_idx=[1, 2, 3],
                                  use_large_stem=True, use_alpha=True, act="swish",
                                  width_mult=cfg["width_mult"], depth_mult=cfg["depth_mult"])
        neck = k["CustomCSPPAN"](**k["CustomCSPPAN"].from_config({}, backbone.out_shape), out_channels=[768, 384, 192],
                                 stage_num=1, block_num=3, act="swish", spp=True, use_alpha=True,
                                 width_mult=cfg["width_mult"], depth_mult=cfg["depth_mult"])
        head = k["PPYOLOEHead"](**k["PPYOLOEHead"].from_config({}, neck.out_shape), num_classes=80,
                                fpn_strides=[32, 16, 8], grid_cell_scale=5.0, grid_cell_offset=0.5,
                                static_assigner_epoch=30, use_varifocal_loss=True,
                                loss_weight={"class": 1.0, "iou": 2.5, "dfl": 0.5}, static_assigner=None,
                                assigner=None, nms=nms, eval_size=cfg["eval_size"])
        model = k["YOLOv3"](backbone=backbone, neck=neck, yolo_head=head, post_process=None)
    else:
        c = cfg["channels"]
        backbone = k["LCNet"](scale=cfg["scale"], feature_maps=[3, 4, 5])
        neck = k["LCPAN"](**k["LCPAN"].from_config({}, backbone.out_shape), out_channels=c, use_depthwise=True,
                          num_features=4, spatial_scales=[0.125, 0.0625, 0.03125])  # (a copy: LCPAN appends to it)
        feat = k["PicoFeat"](feat_in=c, feat_out=c, num_convs=2, num_fpn_stride=4, norm_type="bn",
                             share_cls_reg=True, use_se=True)
        head = k["PicoHeadV2"](conv_feat=feat, num_classes=80, fpn_stride=[8, 16, 32, 64], feat_in_chan=c,
                               prior_prob=0.01, reg_max=7, cell_offset=0.5, grid_cell_scale=5.0,
                               static_assigner_epoch=100, use_align_head=True, static_assigner=None,
                               assigner=None, nms=nms, eval_size=cfg["eval_size"],
                               # training-only injections; GFLHead reads loss_class.use_sigmoid at build time
                               loss_class=types.SimpleNamespace(use_sigmoid=False), loss_dfl=None, loss_bbox=None)
        model = k["PicoDet"](backbone=backbone, neck=neck, head=head)
    model.eval()
    return model


def randomize(model, seed: int) -> None:
    """Random weights the NMS can tell apart: ppdet zero-initialises its prediction convs (every score
    equal), so every float parameter is redrawn (He-normal weights, small biases, BN statistics and
    affine near identity); fixed projections (DFL's proj_conv, stop_gradient) are kept."""
    import paddle
    from paddle.nn.layer.norm import _BatchNormBase

    rng = np.random.default_rng(seed)

    def put(p, v: np.ndarray) -> None:
        p.set_value(paddle.to_tensor(v.astype(np.float32)))

    done: set[int] = set()
    for layer in model.sublayers():
        if isinstance(layer, (_BatchNormBase, paddle.nn.BatchNorm)):
            c = layer._mean.shape
            put(layer.weight, rng.uniform(*BN_GAMMA, c))
            put(layer.bias, rng.normal(0, 0.2, c))
            put(layer._mean, rng.normal(0, 0.1, c))
            put(layer._variance, rng.uniform(0.5, 1.5, c))
            done |= {id(layer.weight), id(layer.bias), id(layer._mean), id(layer._variance)}
    for _, p in model.named_parameters():
        if id(p) in done or p.stop_gradient:
            continue
        shape = list(p.shape)
        if len(shape) == 1:
            put(p, rng.normal(0, 0.2, shape))
        else:
            put(p, rng.normal(0, np.sqrt(2.0 / int(np.prod(shape[1:]))), shape))


# --- a stable reference: NMS margins ------------------------------------------------------------------
def _iou(b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of boxes [K, 4] (normalized=True, PaddleDetection's MultiClassNMS default)."""
    iw = np.maximum(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0)
    ih = np.maximum(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0)
    area = np.maximum(b[:, 2] - b[:, 0], 0) * np.maximum(b[:, 3] - b[:, 1], 0)
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(inter / (area[:, None] + area[None, :] - inter))


def pick_threshold(boxes: np.ndarray, scores: np.ndarray, nms_threshold: float, want: int = 40) -> float | None:
    """A score threshold with about `want` candidates (boxes [M, 4], scores [C, M]) whose NMS cannot flip
    under fp32 reordering (`stable`). None when this image has none."""
    flat = np.sort(scores.ravel())[::-1].astype(np.float64)
    for n in sorted(range(8, 4 * want), key=lambda n: abs(n - want)):
        lo, hi = flat[n], flat[n - 1]
        if hi - lo < 2 * SCORE_GAP:
            continue
        t = float(np.float32((lo + hi) / 2))
        if stable(boxes, scores, t, nms_threshold):
            return t
    return None


def stable(boxes: np.ndarray, scores: np.ndarray, t: float, nms_threshold: float) -> bool:
    """Every score SCORE_GAP clear of the threshold t, the candidates of a class TIE_GAP apart in score,
    and no candidate pair of a class with an IoU within IOU_GAP of the NMS threshold."""
    if np.min(np.abs(scores.astype(np.float64) - t)) < SCORE_GAP:
        return False
    for c in range(scores.shape[0]):
        idx = np.flatnonzero(scores[c] > t)
        if len(idx) < 2:
            continue
        s = np.sort(scores[c, idx].astype(np.float64))
        iou = _iou(boxes[idx].astype(np.float64))[np.triu_indices(len(idx), 1)]
        if np.min(np.diff(s)) < TIE_GAP or np.min(np.abs(iou - nms_threshold)) < IOU_GAP:
            return False
    return True


MEAN_STD = {"ppyoloe_plus_crn": ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),  # NormalizeImage norm_type none: x / 255
            "picodet_lcnet": ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])}


def sample_images(name: str, rng: np.random.Generator, n: int = 1) -> np.ndarray:
    """Random 8-bit images normalised as the net's TestReader does (NormalizeImage, is_scale), NCHW."""
    mean, std = (np.array(v, np.float32).reshape(1, 3, 1, 1) for v in MEAN_STD[name])
    return ((rng.integers(0, 256, (n, 3, SIZE, SIZE)).astype(np.float32) / 255 - mean) / std).astype(np.float32)


def calibrate_bn(model, name: str, rng: np.random.Generator) -> None:
    """BN running statistics from a batch of inputs like the test's (one training-mode pass with momentum 0),
    so the deep random net neither explodes nor saturates its sigmoid scores at 1."""
    import paddle
    from paddle.nn.layer.norm import _BatchNormBase

    bns = [la for la in model.sublayers() if isinstance(la, (_BatchNormBase, paddle.nn.BatchNorm))]
    for la in bns:
        la.train()
        la._momentum = 0.0
    image = sample_images(name, rng, 4)
    with paddle.no_grad():
        model({"image": paddle.to_tensor(image), "im_shape": paddle.full([4, 2], SIZE, "float32"),
               "scale_factor": paddle.ones([4, 2], "float32")})
    for la in bns:  # a channel that is nearly constant over the batch would amplify rounding by 1/sqrt(var)
        la.eval()
        var = la._variance.numpy()
        la._variance.set_value(paddle.to_tensor(np.maximum(var, 0.1 * float(var.mean())).astype(np.float32)))
    head = head_of(model)
    cls, reg = (head.pred_cls, head.pred_reg) if hasattr(head, "pred_cls") else (head.head_cls_list,
                                                                                  head.head_reg_list)
    for convs, mean, std in ((cls, -3.0, 0.8), (reg, 0.0, 1.0)):
        _affine_outputs(model, list(convs), image, mean, std)


def _affine_outputs(model, convs: list, image: np.ndarray, mean: float, std: float) -> None:
    """Rescale the prediction convs `convs` so that, over `image`, their outputs have this mean and std
    (classification logits: scores spread below 1; box distributions: neither uniform nor one-hot)."""
    import paddle

    seen: list[np.ndarray] = []
    hooks = [c.register_forward_post_hook(lambda la, i, o: seen.append(o.numpy().ravel())) for c in convs]
    with paddle.no_grad():
        model({"image": paddle.to_tensor(image), "im_shape": paddle.full([len(image), 2], SIZE, "float32"),
               "scale_factor": paddle.ones([len(image), 2], "float32")})
    for h in hooks:
        h.remove()
    out = np.concatenate(seen)
    a = std / float(out.std())
    for c in convs:
        c.weight.set_value(c.weight * a)
        c.bias.set_value((c.bias - float(out.mean())) * a + mean)


class _Capture:
    """Stands in for a head's MultiClassNMS and keeps its inputs (boxes [M, 4], scores [C, M] of image 0)."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, {}

    def __call__(self, bboxes, score, background_label=-1):
        self.seen = {"boxes": bboxes.numpy()[0], "scores": score.numpy()[0]}
        return self.inner(bboxes, score, background_label)


def head_of(model):
    return model.yolo_head if hasattr(model, "yolo_head") else model.head


def choose(name: str, k: dict[str, object], seed: int):
    """(model with random weights, feeds, score threshold, batch-2 feeds): the first input draw with a stable
    reference, then a second image (another photo size) stable at that threshold for a batch of two."""
    import paddle

    model = build(name, k)
    randomize(model, seed)
    rng = np.random.default_rng(seed)
    calibrate_bn(model, name, rng)
    head = head_of(model)
    cap = head.nms = _Capture(head.nms)
    nms_threshold = NETS[name]["nms"]["nms_threshold"]

    def draw(photo_hw: tuple[int, int]) -> dict[str, np.ndarray]:
        feeds = {"image": sample_images(name, rng), "im_shape": np.array([[SIZE, SIZE]], np.float32),
                 # [h, w] scale of a photo of this size resized to SIZE x SIZE (keep_ratio False)
                 "scale_factor": np.array([[SIZE / photo_hw[0], SIZE / photo_hw[1]]], np.float32)}
        with paddle.no_grad():
            model({n: paddle.to_tensor(v) for n, v in feeds.items()})
        return feeds

    try:
        for _ in range(50):
            feeds = draw((480, 640))
            t = pick_threshold(cap.seen["boxes"], cap.seen["scores"], nms_threshold)
            if t is not None:
                break
        else:
            raise SystemExit(f"{name}: no input draw with a stable NMS reference")
        for _ in range(50):
            second = draw((300, 200))
            n = int(np.sum(cap.seen["scores"] > t))
            if 12 <= n <= 160 and stable(cap.seen["boxes"], cap.seen["scores"], t, nms_threshold):
                pair = {n_: np.concatenate([feeds[n_], second[n_]]) for n_ in feeds}
                return model, feeds, t, pair
        raise SystemExit(f"{name}: no second image stable at score_threshold {t}")
    finally:
        head.nms = cap.inner


def legacy_shims() -> None:
    """Paddle 3.3's legacy (FLAGS_enable_pir_api=0) tracing: some generated functions call the PIR-only
    _C_ops entry even on a legacy Variable. Route those to the legacy op through LayerHelper."""
    import paddle
    from paddle.base.framework import Variable
    from paddle.base.layer_helper import LayerHelper

    def unary(op: str, real):
        def f(x, name=None):
            if not isinstance(x, Variable):
                return real(x, name=name)
            helper = LayerHelper(op)
            out = helper.create_variable_for_type_inference(x.dtype)
            helper.append_op(type=op, inputs={"X": [x]}, outputs={"Out": [out]}, attrs={})
            return out
        return f

    def binary(op: str, real):
        def f(x, y, name=None):
            if not isinstance(x, Variable) and not isinstance(y, Variable):
                return real(x, y, name=name)
            helper = LayerHelper(op)
            out = helper.create_variable_for_type_inference(x.dtype)
            helper.append_op(type=op, inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]}, attrs={"axis": -1})
            return out
        return f

    for mod in (paddle, paddle.nn.functional, paddle.tensor):
        for op in UNARY_LEGACY:
            if hasattr(mod, op):
                setattr(mod, op, unary(op, getattr(mod, op)))
        for fn, op in BINARY_LEGACY.items():
            if hasattr(mod, fn):
                setattr(mod, fn, binary(op, getattr(mod, fn)))
    for op in UNARY_LEGACY:  # the tensor-method forms, e.g. x.sqrt()
        setattr(Variable, op, unary(op, None))


UNARY_LEGACY = ("sigmoid", "exp", "sqrt")
BINARY_LEGACY = {"multiply": "elementwise_mul"}


def pir_shims() -> None:
    """ppdet's multiclass_nms builds its static op with LayerHelper (legacy only); under PIR emit the same
    multiclass_nms3 through _C_ops, with the attributes ppdet passes."""
    import paddle

    ops = importlib.import_module("ppdet.modeling.ops")
    real = ops.multiclass_nms

    def multiclass_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                       normalized=True, nms_eta=1., background_label=-1, return_index=False,
                       return_rois_num=True, rois_num=None, name=None):
        if not paddle.framework.in_pir_mode():
            return real(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold, normalized,
                        nms_eta, background_label, return_index, return_rois_num, rois_num, name)
        out, index, num = paddle._C_ops.multiclass_nms3(bboxes, scores, rois_num, score_threshold, nms_top_k,
                                                        keep_top_k, nms_threshold, normalized, nms_eta,
                                                        background_label)
        return out, num if return_rois_num else None, index if return_index else None

    ops.multiclass_nms = multiclass_nms


# --- export -------------------------------------------------------------------------------------------
# PaddleDetection's export feeds image, im_shape and scale_factor and prunes the ones the program does not
# read (_prune_input_spec): both nets read image and scale_factor.
FEEDS = ("image", "scale_factor")


def export(name: str, fmt: str, work: Path, out: Path) -> None:
    """(Run in a fresh process: the PIR flag is read at import.) Rebuild the net, load the chosen weights,
    trace it as PaddleDetection's export does and save it under `out`/inference.*"""
    import json

    import paddle
    from paddle.static import InputSpec

    k = load_ppdet()
    legacy_shims() if fmt == "legacy" else pir_shims()
    meta = json.loads((work / f"{name}.json").read_text())
    model = build(name, k, meta["score_threshold"])
    model.set_state_dict(paddle.load(str(work / f"{name}.pdparams")))
    model.eval()
    for layer in model.sublayers():  # as PaddleDetection's export: RepVGG blocks fused to one conv
        if hasattr(layer, "convert_to_deploy"):
            layer.convert_to_deploy()
    spec = {"image": InputSpec([None, 3, SIZE, SIZE], "float32", "image"),
            "scale_factor": InputSpec([None, 2], "float32", "scale_factor")}
    static = paddle.jit.to_static(model, input_spec=[spec], full_graph=True)
    out.mkdir(parents=True, exist_ok=True)
    paddle.jit.save(static, str(out / "inference"), input_spec=[spec])
    if fmt == "legacy":
        drop_callstacks(out / "inference.pdmodel")
    print(f"{name}/{fmt}: " + ", ".join(sorted(p.name for p in out.iterdir())))


def drop_callstacks(path: Path) -> None:
    """Remove the ops' `op_callstack` attributes (this script's line numbers and local paths) from a legacy
    program, so the committed file is reproducible byte for byte and carries no machine paths."""
    from paddle.base.proto import framework_pb2

    prog = framework_pb2.ProgramDesc()
    prog.ParseFromString(path.read_bytes())
    for block in prog.blocks:
        for op in block.ops:
            keep = [a for a in op.attrs if a.name != "op_callstack"]
            del op.attrs[:]
            op.attrs.extend(keep)
    path.write_bytes(prog.SerializeToString())


def make(name: str, k: dict[str, object], seed: int, work: Path) -> None:
    import json
    import subprocess

    import paddle

    model, feeds, t, pair = choose(name, k, seed)
    paddle.save(model.state_dict(), str(work / f"{name}.pdparams"))
    (work / f"{name}.json").write_text(json.dumps({"score_threshold": t}))
    cases: dict[str, dict[str, np.ndarray]] = {}
    for case, src in (("case.npz", feeds), ("case_b2.npz", pair)):
        cases[case] = {f"in:{n}": src[n] for n in FEEDS}
    for fmt, pir in (("legacy", "0"), ("pir", "1")):
        dst = OUT / name / fmt
        for f in dst.glob("*"):
            f.unlink()
        env = {**os.environ, "FLAGS_enable_pir_api": pir}
        subprocess.run([sys.executable, __file__, "--export", name, fmt, str(work), str(dst)], env=env, check=True)
        (dst / "inference.pdiparams.info").unlink(missing_ok=True)
        model_file = dst / ("inference.json" if fmt == "pir" else "inference.pdmodel")
        for case, data in cases.items():
            ref = paddle_reference(model_file, dst / "inference.pdiparams",
                                   {n[3:]: v for n, v in data.items() if n.startswith("in:")})
            data.update({f"{fmt}.out:{n}": v for n, v in ref.items()})
            nums = [v.tolist() for v in ref.values() if v.dtype.kind in "iu"]
            size = sum(f.stat().st_size for f in dst.iterdir()) / 1e3
            print(f"{name}/{fmt} {case}: score_threshold {t:.6g}, boxes {nums}, {size:.0f} kB")
    for case, data in cases.items():
        np.savez_compressed(OUT / name / case, **data)


if __name__ == "__main__":
    import tempfile

    if len(sys.argv) > 1 and sys.argv[1] == "--export":
        export(sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
        sys.exit(0)
    ppdet = load_ppdet()
    with tempfile.TemporaryDirectory() as tmp:
        for i, net in enumerate(NETS):
            make(net, ppdet, 11 + i, Path(tmp))
