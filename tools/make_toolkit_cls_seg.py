"""Real toolkit architectures as fixtures: PP-LCNet, PP-HGNet, Swin, ViT (paddleclas), PP-LiteSeg, SegFormer (paddleseg).

Dev tool (needs paddlepaddle 3.x and the toolkits, installed aside, never into the dev venv):

    pip install --no-deps --target /work/tk/cls paddleclas==2.6.0
    pip install --no-deps --target /work/tk/seg paddleseg==2.8.0
    python tools/make_toolkit_cls_seg.py [--cls /work/tk/cls] [--seg /work/tk/seg] [names...]

The model classes are the toolkits' own (`ppcls.arch.backbone.legendary_models.pp_lcnet.PPLCNet_x0_25`,
`...pp_hgnet.PPHGNet` with PPHGNet_tiny's layout at narrow widths (PPHGNet_tiny itself is ~50 MB),
`...swin_transformer.SwinTransformer` and `...model_zoo.vision_transformer.VisionTransformer` at 64x64, narrow
and shallow, `paddleseg.models.PPLiteSeg` on `paddleseg.models.backbones.STDCNet` at base 8,
`paddleseg.models.SegFormer` on a narrow one-block-per-stage MixVisionTransformer), with seeded random
weights and small class counts, wrapped
as the toolkits export them: PaddleClas appends a softmax (`infer_add_softmax`), PaddleSeg wraps the net in
its own `paddleseg.deploy.export.WrappedModel(model, "argmax")` (int32 label map). Input specs as the
toolkits' exporters write them: PaddleClas `[None, 3, 64, 64]`, PaddleSeg `[None, 3, None, None]`.

The toolkits are old next to Paddle 3.3, so the generator shims them here and nowhere else:
- imports: the toolkits' package `__init__`s pull in training code (sklearn, cv2, yaml, visualdl, ...); the
  parent packages are put in `sys.modules` as bare packages so that only the model modules load;
  `paddleseg.utils.utils` (pretrained-weight loading) is a stub that refuses.
- legacy export: `paddle.jit.save` with FLAGS_enable_pir_api=0 (run in a subprocess, the flag is read at
  import) traces into a legacy ProgramDesc, but Paddle 3.3's `sigmoid`, `multiply`, `argmax` and
  `logical_and` (dy2static's rewrite of PaddleSeg's shape asserts) only call PIR ops; in that process they
  are replaced by functions that append the legacy ops Paddle 2.x wrote (`sigmoid` X -> Out;
  `elementwise_mul` axis -1; `arg_max` with keepdims / axis / flatten / dtype; `logical_and`), as Paddle
  2.6's Python did.
- a segmenter's label map is a stable reference only when no pixel's two best logits nearly tie: the PIR
  export also prints the smallest top-1 - top-2 gap (eager, on each case's input) and the generator
  refuses a gap under 1e-2 of max|logit| (ten times the devices' fp32 bar).

Each case, <model>/case.npz (and, for PP-LiteSeg and SegFormer, whose input size is dynamic, case_<H>x<W>.npz at a size
the network's strides do not divide), holds the input (a seeded random 8-bit image, normalised as the
toolkit does), key `in:x`, and Paddle Inference's outputs on each format's files (tools/paddle_reference.py:
unoptimised, mkldnn off, 1 thread), keys `legacy.out:<fetch>` / `pir.out:<fetch>` in fetch order; the
generator checks that the legacy and PIR references agree (floats to 1e-5 of max|ref|, integers exactly),
so a shim that changed the maths would be caught here.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "toolkit"
sys.path.insert(0, str(Path(__file__).resolve().parent))

# name: (toolkit, input shapes of its cases (case.npz, then case_<H>x<W>.npz), what it is)
MODELS: dict[str, tuple[str, list[tuple[int, ...]], str]] = {
    "pplcnet_x0_25": ("cls", [(1, 3, 64, 64)],
                      "paddleclas PPLCNet_x0_25(class_num=10, class_expand=256) + softmax"),
    "pphgnet_tiny_narrow": ("cls", [(1, 3, 64, 64)],
                            "paddleclas PPHGNet with PPHGNet_tiny's layout (3-conv stem, max pool, 4 stages of "
                            "1/1/2/1 HG blocks with downsampling in stages 2-4, layer_num 5, ESE attention) at "
                            "narrow widths (stem [6, 6, 12], stages in/mid/out 12/12/24, 24/12/32, 32/16/48, "
                            "48/16/64), class_expand 128, class_num 10, + softmax"),
    "swin_tiny_narrow": ("cls", [(1, 3, 64, 64)],
                         "paddleclas SwinTransformer (patch 4, window 4, 2 stages of 2 blocks: W-MSA then SW-MSA with "
                         "paddle.roll shifts of 2 and the shifted-window attention mask, relative position bias, "
                         "patch merging) at embed_dim 16, heads [1, 2], class_num 10, + softmax"),
    "vit_tiny_narrow": ("cls", [(1, 3, 64, 64)],
                        "paddleclas VisionTransformer (patch 16, cls token expanded to the run-time batch, learned "
                        "position embedding, 2 pre-norm blocks of 2-head attention, exact gelu) at embed_dim 32, "
                        "class_num 10, + softmax"),
    # the second PP-LiteSeg case: a size the 32x-downsampling does not divide (the context module's adaptive
    # pools see 3x4: 2x2 bins of uneven widths, 4x4 bins wider than the input), odd upsampling ratios
    "ppliteseg_stdc1_b8": ("seg", [(1, 3, 128, 128), (1, 3, 72, 100)],
                           "paddleseg PPLiteSeg(num_classes=4) on STDCNet(base=8, layers=[2, 2, 2]) (STDC1's "
                           "depth at 1/8 width), UAFM_SpAtten, cm_out_ch 16, arm_out_chs [16, 16, 16], "
                           "in paddleseg's WrappedModel(output_op='argmax')"),
    "segformer_narrow": ("seg", [(1, 3, 64, 64), (1, 3, 72, 100)],
                         "paddleseg SegFormer(num_classes=4, embedding_dim 16) on MixVisionTransformer (MiT-B0's "
                         "layout: overlapping patch embeds, efficient attention with spatial-reduction ratios "
                         "8/4/2/1, Mix-FFN depthwise 3x3 conv, 1 block per stage) at widths 8/16/24/32, "
                         "in paddleseg's WrappedModel(output_op='argmax')"),
}


def _package(name: str, path: Path) -> types.ModuleType:
    """A bare package `name` over `path`: its submodules import, its __init__ does not run."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    sys.modules[name] = mod
    return mod


def _no_pretrained(*args: object, **kwargs: object) -> None:
    raise RuntimeError("the fixture generator uses random weights, not pretrained ones")


def _import_cls(root: Path) -> types.ModuleType:
    """ppcls's model modules only (the package __init__s import sklearn and the training engine)."""
    base = root / "paddleclas" / "ppcls"
    for sub in ("", ".arch", ".arch.backbone", ".arch.backbone.base", ".arch.backbone.legendary_models",
                ".arch.backbone.model_zoo", ".utils"):
        _package("ppcls" + sub, base.joinpath(*sub.split(".")[1:]) if sub else base)
    sys.path.insert(0, str(root / "paddleclas"))
    import logging

    import ppcls.utils.logger as logger

    logger._logger = logging.getLogger("ppcls")  # set by the training engine's init_logger, never run here
    import ppcls.arch.backbone.legendary_models.pp_hgnet as hgnet
    import ppcls.arch.backbone.legendary_models.pp_lcnet as lcnet
    import ppcls.arch.backbone.legendary_models.swin_transformer as swin
    import ppcls.arch.backbone.model_zoo.vision_transformer as vit

    return types.SimpleNamespace(lcnet=lcnet, hgnet=hgnet, swin=swin, vit=vit)


def _import_seg(root: Path) -> types.ModuleType:
    """paddleseg's PP-LiteSeg, STDCNet, SegFormer, MixVisionTransformer and export wrapper (the package __init__s import cv2, yaml, datasets)."""
    base = root / "paddleseg"
    for sub in ("", ".models", ".models.backbones", ".cvlibs", ".deploy"):
        _package("paddleseg" + sub, base.joinpath(*sub.split(".")[1:]) if sub else base)
    utils = _package("paddleseg.utils", base / "utils")
    stub = types.ModuleType("paddleseg.utils.utils")
    stub.load_entire_model = stub.load_pretrained_model = _no_pretrained
    sys.modules["paddleseg.utils.utils"] = stub
    utils.utils = stub
    utils.load_entire_model = utils.load_pretrained_model = _no_pretrained
    sys.modules["paddleseg"].utils = utils
    sys.path.insert(0, str(root))
    from paddleseg.deploy.export import WrappedModel
    from paddleseg.models.backbones.mix_transformer import MixVisionTransformer
    from paddleseg.models.backbones.stdcnet import STDCNet
    from paddleseg.models.pp_liteseg import PPLiteSeg
    from paddleseg.models.segformer import SegFormer

    return types.SimpleNamespace(PPLiteSeg=PPLiteSeg, STDCNet=STDCNet, WrappedModel=WrappedModel,
                                 SegFormer=SegFormer, MixVisionTransformer=MixVisionTransformer)


def _legacy_shims() -> None:
    """Paddle 3.3 ops with no legacy static branch, appended as the legacy ops Paddle 2.x wrote."""
    import paddle
    import paddle.nn.functional as F
    from paddle import _C_ops
    from paddle.base.framework import Variable, convert_np_dtype_to_dtype_, in_dygraph_mode, in_pir_mode
    from paddle.base.layer_helper import LayerHelper

    def legacy_op(op_type: str, ins: dict, attrs: dict, dtype=None):
        helper = LayerHelper(op_type)
        out = helper.create_variable_for_type_inference(dtype if dtype is not None else ins["X"].dtype)
        helper.append_op(type=op_type, inputs={k: [v] for k, v in ins.items()}, outputs={"Out": [out]}, attrs=attrs)
        return out

    def shim(fn: Callable, legacy: Callable) -> Callable:
        @paddle.jit.not_to_static
        def wrapped(*args, **kwargs):
            if in_dygraph_mode() or in_pir_mode():
                return fn(*args, **kwargs)
            return legacy(*args, **kwargs)
        return wrapped

    def sigmoid(x, name=None):
        return legacy_op("sigmoid", {"X": x}, {})

    def multiply(x, y, name=None):
        return legacy_op("elementwise_mul", {"X": x, "Y": y}, {"axis": -1})

    def logical_and(x, y, out=None, name=None):
        return legacy_op("logical_and", {"X": x, "Y": y}, {}, paddle.bool)

    def argmax(x, axis=None, keepdim=False, dtype="int64", name=None):
        vt = convert_np_dtype_to_dtype_(dtype)
        out = legacy_op("arg_max", {"X": x}, {"keepdims": keepdim, "axis": 0 if axis is None else axis,
                                              "flatten": axis is None, "dtype": vt}, vt)
        out.stop_gradient = True
        return out

    def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
        return legacy_op("matmul_v2", {"X": x, "Y": y}, {"trans_x": transpose_x, "trans_y": transpose_y})

    # _C_ops called by Paddle 3.3's Python without a legacy branch (gelu from nn.GELU, roll, Tensor.sum)
    def c_shim(name: str, legacy: Callable) -> None:
        fn = getattr(_C_ops, name)

        def wrapped(*args, **kwargs):
            if not in_pir_mode() and any(isinstance(a, Variable) for a in args):
                return legacy(*args, **kwargs)
            return fn(*args, **kwargs)
        setattr(_C_ops, name, wrapped)

    def reduce_sum(x, axis, dtype, keepdim):
        axis = [axis] if isinstance(axis, int) else list(axis or [])
        vt = x.dtype if dtype is None else convert_np_dtype_to_dtype_(dtype)
        return legacy_op("reduce_sum", {"X": x}, {"dim": axis or [0], "keep_dim": keepdim, "reduce_all": not axis,
                                                 "in_dtype": -1, "out_dtype": -1 if dtype is None else vt}, vt)

    c_shim("gelu", lambda x, approximate=False, *_, **__: legacy_op("gelu", {"X": x}, {"approximate": bool(approximate)}))
    c_shim("roll", lambda x, shifts, axis, *_, **__: legacy_op("roll", {"X": x}, {"shifts": list(shifts),
                                                                            "axis": list(axis)}))
    c_shim("sum", lambda x, axis=None, dtype=None, keepdim=False, *_, **__: reduce_sum(x, axis, dtype, keepdim))
    F.sigmoid = paddle.nn.functional.activation.sigmoid = paddle.sigmoid = shim(F.sigmoid, sigmoid)
    paddle.matmul = paddle.tensor.matmul = paddle.tensor.linalg.matmul = Variable.matmul = shim(paddle.matmul, matmul)
    paddle.multiply = paddle.tensor.multiply = shim(paddle.multiply, multiply)
    paddle.argmax = paddle.tensor.argmax = shim(paddle.argmax, argmax)
    paddle.logical_and = paddle.tensor.logical_and = shim(paddle.logical_and, logical_and)


def build(name: str, cls_root: Path, seg_root: Path):
    """The toolkit net `name`, wrapped as its toolkit exports it (random weights not yet set)."""
    import paddle
    import paddle.nn.functional as F

    class WithSoftmax(paddle.nn.Layer):
        """PaddleClas's export with infer_add_softmax: softmax over the class logits."""

        def __init__(self, net: paddle.nn.Layer) -> None:
            super().__init__()
            self.net = net

        def forward(self, x):
            return F.softmax(self.net(x), axis=-1)

    if name == "pplcnet_x0_25":
        tk = _import_cls(cls_root)
        return WithSoftmax(tk.lcnet.PPLCNet_x0_25(class_num=10, class_expand=256))
    if name == "pphgnet_tiny_narrow":
        tk = _import_cls(cls_root)
        stages = {"stage1": [12, 12, 24, 1, False], "stage2": [24, 12, 32, 1, True],
                  "stage3": [32, 16, 48, 2, True], "stage4": [48, 16, 64, 1, True]}
        return WithSoftmax(tk.hgnet.PPHGNet(stem_channels=[6, 6, 12], stage_config=stages, layer_num=5,
                                            class_expand=128, class_num=10))
    if name == "ppliteseg_stdc1_b8":
        tk = _import_seg(seg_root)
        net = tk.PPLiteSeg(4, tk.STDCNet(base=8, layers=[2, 2, 2]), cm_out_ch=16, arm_out_chs=[16, 16, 16],
                           seg_head_inter_chs=[16, 16, 16])
        return tk.WrappedModel(net, "argmax")
    if name == "swin_tiny_narrow":
        tk = _import_cls(cls_root)
        return WithSoftmax(tk.swin.SwinTransformer(img_size=64, patch_size=4, embed_dim=16, depths=[2, 2],
                                                   num_heads=[1, 2], window_size=4, class_num=10))
    if name == "vit_tiny_narrow":
        tk = _import_cls(cls_root)
        return WithSoftmax(tk.vit.VisionTransformer(img_size=64, patch_size=16, class_num=10, embed_dim=32, depth=2,
                                                    num_heads=2, qkv_bias=True, epsilon=1e-6))
    if name == "segformer_narrow":
        tk = _import_seg(seg_root)
        mit = tk.MixVisionTransformer(embed_dims=[8, 16, 24, 32], num_heads=[1, 1, 2, 2], mlp_ratios=[2, 2, 2, 2],
                                      qkv_bias=True, depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1])
        return tk.WrappedModel(tk.SegFormer(4, mit, embedding_dim=16), "argmax")
    raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def export(name: str, out: Path, fmt: str, cls_root: Path, seg_root: Path) -> None:
    """Build `name` with its seeded weights and jit.save it to out/inference in this process's format."""
    import paddle
    from make_pir_fixtures import _randomize, jit_save_to

    if fmt == "legacy":
        _legacy_shims()
    seed = sum(map(ord, name))
    paddle.seed(seed)
    with paddle.utils.unique_name.guard():
        layer = build(name, cls_root, seg_root)
    _randomize(layer, np.random.default_rng(seed))
    layer.eval()
    hw = list(MODELS[name][1][0][2:]) if MODELS[name][0] == "cls" else [None, None]
    spec = [paddle.static.InputSpec([None, 3, *hw], "float32", "x")]
    jit_save_to(layer, spec, out, fmt, name)
    if fmt == "pir" and MODELS[name][0] == "seg":
        for i in range(len(MODELS[name][1])):
            print(f"margin {_case_file(name, i)} {_label_margin(layer.model, _image(name, i)):.6g}")


def _label_margin(net, image: np.ndarray) -> float:
    """min over pixels of (top-1 - top-2 logit) / max|logit|: how far the label map is from a tie."""
    import paddle

    logits = np.sort(net(paddle.to_tensor(image))[0].numpy(), axis=1)
    return float(np.min(logits[:, -1] - logits[:, -2]) / np.max(np.abs(logits)))


def _agree(a: dict[str, np.ndarray], b: dict[str, np.ndarray], what: str) -> None:
    """The legacy and PIR references of one model are the same numbers (the shims changed no maths)."""
    for (na, x), (nb, y) in zip(a.items(), b.items()):
        if x.shape != y.shape or x.dtype != y.dtype:
            raise SystemExit(f"{what}: {na} {x.dtype}{x.shape} vs {nb} {y.dtype}{y.shape}")
        if x.dtype.kind in "biu":
            bad = int(np.sum(x != y))
            if bad:
                raise SystemExit(f"{what}: {bad} integer outputs of {na} differ between the formats")
        elif np.max(np.abs(x.astype(np.float64) - y)) > 1e-5 * float(np.max(np.abs(y))):
            raise SystemExit(f"{what}: {na} differs between the formats by {np.max(np.abs(x - y)):.3g}")


def _case_file(name: str, i: int) -> str:
    shape = MODELS[name][1][i]
    return "case.npz" if i == 0 else f"case_{shape[2]}x{shape[3]}.npz"


def _image(name: str, i: int) -> np.ndarray:
    """Case i's input: a seeded random 8-bit image normalised as the toolkit's preprocessing does (NCHW float32)."""
    kind, shape = MODELS[name][0], MODELS[name][1][i]
    pixels = np.random.default_rng(sum(map(ord, name)) + 1 + i).integers(0, 256, shape).astype(np.float32) / 255.0
    if kind == "cls":  # PaddleClas NormalizeImage: ImageNet mean / std
        mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    else:  # PaddleSeg Normalize defaults
        mean, std = np.full(3, 0.5), np.full(3, 0.5)
    return ((pixels - mean[:, None, None]) / std[:, None, None]).astype(np.float32)


def make(name: str, root: Path, cls_root: Path, seg_root: Path) -> Path:
    """Export both formats of `name` and write its cases (<name>/case*.npz): `in:x`, then `<fmt>.out:<fetch>`
    per format."""
    from paddle_reference import paddle_reference

    cases = [{"x": _image(name, i)} for i in range(len(MODELS[name][1]))]
    refs: list[dict[str, dict[str, np.ndarray]]] = [{} for _ in cases]
    for fmt in ("legacy", "pir"):
        out = root / name / fmt
        env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
        r = subprocess.run([sys.executable, __file__, "--cls", str(cls_root), "--seg", str(seg_root),
                            "--export", name, str(out), fmt], env=env, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"{name}: {fmt} export failed:\n{r.stderr[-3000:]}")
        for line in r.stdout.splitlines():
            if line.startswith("margin "):
                _, case, gap = line.split()
                if float(gap) <= 1e-2:  # ten times the devices' fp32 bar (1e-3 of max|ref|)
                    raise SystemExit(f"{name} {case}: two logits of a pixel are within {gap} of max|logit|: "
                                     "the label map would not be a stable reference; pick another seed")
                print(f"{name} {case}: smallest top-1 - top-2 logit gap {float(gap):.3g} of max|logit|")
        model = out / ("inference.json" if fmt == "pir" else "inference.pdmodel")
        for feeds, ref in zip(cases, refs):
            ref[fmt] = paddle_reference(model, out / "inference.pdiparams", feeds)
    for i, (feeds, ref) in enumerate(zip(cases, refs)):
        _agree(ref["legacy"], ref["pir"], f"{name} {_case_file(name, i)}")
        np.savez_compressed(root / name / _case_file(name, i), **{f"in:{k}": v for k, v in feeds.items()},
                            **{f"{fmt}.out:{k}": v for fmt, r in ref.items() for k, v in r.items()})
    return root / name


README_HEAD = "## Classification and segmentation"


def write_readme(root: Path, sizes: dict[str, int]) -> None:
    """This generator's section of tests/fixtures/toolkit/README.md (other sections are left as they are)."""
    path = root / "README.md"
    text = path.read_text() if path.is_file() else "# Toolkit models (real toolkit architectures, random weights)\n"
    lines = [README_HEAD, "",
             "Made by `tools/make_toolkit_cls_seg.py` (paddleclas 2.6.0, paddleseg 2.8.0, Paddle 3.3.1): the toolkits'",
             "own model classes, seeded random weights, exported as `legacy/` (inference.pdmodel, `paddle.jit.save`",
             "with FLAGS_enable_pir_api=0, sigmoid / multiply / argmax / logical_and / matmul / gelu / roll / sum shimmed",
             "to the legacy ops Paddle 2.x wrote) and `pir/` (inference.json, `paddle.jit.save` under PIR). `<model>/case*.npz` hold an input",
             "(`in:x`, a random 8-bit image normalised as the toolkit does) and Paddle Inference's outputs on each",
             "format's files (`legacy.out:<fetch>`, `pir.out:<fetch>`; the two agree to 1e-5). Checked on host,",
             "intel_openvino and onnxruntime by `tests/conformance/test_toolkit_cls_seg.py`.", ""]
    for n, (_, shapes, what) in MODELS.items():
        if n in sizes:
            ins = ", ".join(f"{'x'.join(map(str, sh))} ({_case_file(n, i)})" for i, sh in enumerate(shapes))
            lines.append(f"- `{n}/`: {what}; inputs {ins}; {sizes[n] / 1e3:.0f} kB (both formats).")
    section = "\n".join(lines) + "\n"
    if README_HEAD in text:
        start = text.index(README_HEAD)
        nxt = text.find("\n## ", start + len(README_HEAD))
        text = text[:start] + section + ("\n" + text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cls", type=Path, default=Path("/work/tk/cls"), help="--target folder of paddleclas")
    ap.add_argument("--seg", type=Path, default=Path("/work/tk/seg"), help="--target folder of paddleseg")
    ap.add_argument("--export", nargs=3, metavar=("NAME", "DIR", "FORMAT"), help=argparse.SUPPRESS)
    ap.add_argument("names", nargs="*", help=f"models to make (default: all of {', '.join(MODELS)})")
    args = ap.parse_args(argv)
    if args.export:
        export(args.export[0], Path(args.export[1]), args.export[2], args.cls, args.seg)
        return 0
    sizes = {}
    for n in args.names or list(MODELS):
        path = make(n, args.out, args.cls, args.seg)
        sizes[n] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{path}: {sizes[n] / 1e3:.1f} kB")
    for n in MODELS:  # models not remade keep their line
        d = args.out / n
        if n not in sizes and d.is_dir():
            sizes[n] = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    write_readme(args.out, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
