"""Generate toolkit-like nets in both formats under tests/fixtures/pir_nets/<name>/ (dev tool; needs paddle 3.x).

Each net is a small paddle.nn.Layer shaped like a toolkit model (PP-LiteSeg's dynamic-size
upsampling head with argmax, PP-LCNet's depthwise + SE blocks, PicoDet's anchor-free head with
arange/meshgrid anchor points and multiclass_nms3 post-processing, RPN post-processing (generate_proposals, roi_align, matrix_nms), a net of op forms whose attributes arrive as tensors, a net of slice bounds arriving as one stacked tensor, and a net of constants with no feed), with
seeded random weights, exported natively: `pir/` by `paddle.jit.save` under PIR (inference.json)
and, where Paddle 3.3 can still trace the net in legacy static mode (it cannot for sigmoid, exp,
argmax, LSTM, ...), `legacy/` by `paddle.jit.save` with FLAGS_enable_pir_api=0 (inference.pdmodel,
run in a subprocess since the flag is read at import). Each folder's case.npz holds the inputs and
Paddle Inference's outputs on those files (switch_ir_optim(False), mkldnn off, 1 thread), keys
`in:<feed>` / `out:<fetch name>` in fetch order.

Usage: python tools/make_pir_nets.py [--out tests/fixtures/pir_nets] [names...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

Spec = list[tuple[str, list[int], str]]


def _nets() -> dict[str, tuple[Callable[[], object], Spec, Callable[[np.random.Generator], dict[str, np.ndarray]]]]:
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1) -> nn.Sequential:
        return nn.Sequential(nn.Conv2D(cin, cout, k, s, (k - 1) // 2, groups=groups, bias_attr=False),
                             nn.BatchNorm2D(cout))

    class LiteSeg(nn.Layer):
        """PP-LiteSeg-like: stem and stage, UAFM-style spatial attention fusion (hardsigmoid gate) after
        an upsample to the stem's run-time size (shape -> slice: an integer shape subgraph), logits
        upsampled to the input size."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = conv_bn(3, 8, s=2)
            self.stage = nn.Sequential(conv_bn(8, 8, s=2, groups=8), conv_bn(8, 16, k=1))
            self.head = conv_bn(16, 8, k=1)
            self.att = nn.Conv2D(4, 1, 3, padding=1)
            self.cls = nn.Conv2D(8, 3, 1)

        def forward(self, x):
            s = F.relu(self.stem(x))
            h = F.relu(self.head(F.relu(self.stage(s))))
            up = F.interpolate(h, size=paddle.shape(s)[2:], mode="bilinear", align_corners=False)
            feats = paddle.concat([paddle.mean(up, 1, keepdim=True), paddle.max(up, 1, keepdim=True),
                                   paddle.mean(s, 1, keepdim=True), paddle.max(s, 1, keepdim=True)], 1)
            a = F.hardsigmoid(self.att(feats))
            logit = self.cls(up * a + s * (1 - a))
            return F.interpolate(logit, size=paddle.shape(x)[2:], mode="bilinear", align_corners=False)

    class LCNet(nn.Layer):
        """PP-LCNet-like: hardswish depthwise-separable blocks, one with squeeze-excitation
        (hardsigmoid gate), global pool, 1x1 conv head, dropout, linear, softmax."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = conv_bn(3, 8, s=2)
            self.dw1, self.pw1 = conv_bn(8, 8, s=1, groups=8), conv_bn(8, 16, k=1)
            self.dw2, self.pw2 = conv_bn(16, 16, k=5, s=2, groups=16), conv_bn(16, 24, k=1)
            self.se1, self.se2 = nn.Conv2D(16, 4, 1), nn.Conv2D(4, 16, 1)
            self.last = nn.Conv2D(24, 32, 1)
            self.drop = nn.Dropout(0.2, mode="downscale_in_infer")
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            y = F.hardswish(self.stem(x))
            y = F.hardswish(self.pw1(F.hardswish(self.dw1(y))))
            y = F.hardswish(self.dw2(y))
            g = F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(y, 1)))))
            y = F.hardswish(self.pw2(y * g))
            y = self.drop(F.hardswish(self.last(F.adaptive_avg_pool2d(y, 1))))
            return F.softmax(self.fc(paddle.flatten(y, 1)), -1)

    class PicoDet(nn.Layer):
        """PicoDet-like anchor-free head exported with its post-processing: anchor points from
        arange + meshgrid over the run-time feature size, distance decoding, boxes rescaled by
        scale_factor, multiclass_nms3 (bbox [M, 6], bbox_num [N])."""

        def __init__(self) -> None:
            super().__init__()
            self.backbone = nn.Sequential(conv_bn(3, 8, s=2), nn.ReLU(), conv_bn(8, 16, s=2), nn.ReLU())
            self.cls = nn.Conv2D(16, 3, 3, padding=1)
            self.reg = nn.Conv2D(16, 4, 3, padding=1)

        def forward(self, image, scale_factor):
            f = self.backbone(image)
            hw = paddle.shape(f)[2:]
            scores = F.sigmoid(paddle.flatten(self.cls(f), 2))                     # [N, 3, HW]
            dist = F.relu(paddle.flatten(self.reg(f), 2).transpose([0, 2, 1])) * 2.0  # [N, HW, 4]
            ys, xs = paddle.meshgrid(paddle.arange(hw[0]), paddle.arange(hw[1]))
            pts = (paddle.stack([xs, ys], -1).reshape([-1, 2]).astype("float32") + 0.5) * 4.0
            boxes = paddle.concat([pts - dist[:, :, :2], pts + dist[:, :, 2:]], -1)
            sf = paddle.concat([scale_factor[:, 1:2], scale_factor[:, 0:1]] * 2, -1).unsqueeze(1)
            # as ppdet.modeling.ops.multiclass_nms: score_threshold, nms_top_k, keep_top_k, nms_threshold,
            # normalized, nms_eta, background_label
            out, _, num = paddle._C_ops.multiclass_nms3(boxes / sf, scores, None, 0.3, 50, 20, 0.5, False, 1.0, -1)
            return out, num

    class Proposals(nn.Layer):
        """Faster R-CNN-like RPN post-processing: generate_proposals (v2) over constant anchors, roi_align
        of the proposals, matrix_nms over per-class scores of the proposals."""

        def __init__(self) -> None:
            super().__init__()
            self.feat = nn.Sequential(conv_bn(3, 8, s=2), nn.ReLU(), conv_bn(8, 8, s=2), nn.ReLU())
            self.obj = nn.Conv2D(8, 3, 1)
            self.delta = nn.Conv2D(8, 12, 1)
            self.cls = nn.Linear(8 * 4, 2)
            ys, xs = np.meshgrid(np.arange(8) * 4.0 + 2.0, np.arange(8) * 4.0 + 2.0, indexing="ij")
            sizes = np.array([4.0, 8.0, 12.0])
            self.anchors_np = np.stack([xs[..., None] - sizes, ys[..., None] - sizes, xs[..., None] + sizes,
                                        ys[..., None] + sizes], -1).astype(np.float32)  # [8, 8, 3, 4]

        def forward(self, image, im_shape):
            f = self.feat(image)
            anchors = paddle.to_tensor(self.anchors_np)
            variances = paddle.ones_like(anchors)
            rois, probs, num = paddle.vision.ops.generate_proposals(
                F.sigmoid(self.obj(f)), self.delta(f) * 0.1, im_shape, anchors, variances, pre_nms_top_n=60,
                post_nms_top_n=12, nms_thresh=0.6, min_size=1.0, eta=1.0, pixel_offset=False, return_rois_num=True)
            pooled = paddle.vision.ops.roi_align(f, rois, num, output_size=2, spatial_scale=0.25, sampling_ratio=2,
                                                 aligned=True)
            cls = F.softmax(self.cls(paddle.flatten(pooled, 1)), -1)               # [R, 2]
            out, _, keep = paddle.vision.ops.matrix_nms(
                rois.unsqueeze(0), cls.transpose([1, 0]).unsqueeze(0), score_threshold=0.05, post_threshold=0.1,
                nms_top_k=20, keep_top_k=10, use_gaussian=True, gaussian_sigma=2.0, background_label=-1,
                normalized=False, return_index=True, return_rois_num=True)
            return rois, probs, num, pooled, out, keep

    class OpForms(nn.Layer):
        """Attributes arriving as tensors and 0-D results: one_hot depth from a tensor, linspace from
        computed start/stop, full_like with a computed value, reductions over every axis (0-D),
        add_n, p_norm (finite and infinite order), eye, expand to a computed shape, flip, cumsum."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x, ids):
            y = self.fc(x)
            depth = paddle.max(ids) + 1
            oh = F.one_hot(ids, num_classes=depth)
            ls = paddle.linspace(paddle.min(y), paddle.max(y), 5)
            fl = paddle.full_like(y, paddle.mean(y))
            total = paddle.sum(y) + paddle.mean(x)                            # 0-D
            an = paddle.add_n([y, x, fl])
            pn = paddle.linalg.norm(y, p=3, axis=-1) + paddle.linalg.norm(y, p=float("inf"), axis=-1)  # porder "VD": "INF"
            ey = paddle.eye(6) * paddle.max(x)
            ex = paddle.expand(paddle.sum(y, 0, keepdim=True), paddle.shape(x))
            return oh, ls, total, an, pn, paddle.matmul(y, ey), paddle.flip(ex, [1]), paddle.cumsum(y, 1)

    class BoundsForms(nn.Layer):
        """IntArray operands arriving as one 1-D tensor (paddle.stack of computed scalars): set_value with
        slice bounds from tensors (starts / ends / steps), and a slice with computed bounds."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x, ids):
            y = self.fc(x)
            a, b = paddle.min(ids), paddle.max(ids)                           # 0-D int64 bounds
            v = paddle.full([1, 1], 2.5) * paddle.mean(y)
            z = y * 1.0
            z[a:b + 1, a:b + 2] = v                                        # set_value_with_tensor, stacked bounds
            w = y * 1.0
            w[b - 1::-1, 1:a + 4:2] = paddle.ones([1]) * -1.0              # negative step, stacked bounds
            return z, w, y[a:b, 1:]

    class Constants(nn.Layer):
        """A model of constants only (no feed): arange, reshape, a parameter, scale, reductions."""

        def __init__(self) -> None:
            super().__init__()
            self.w = paddle.create_parameter([2, 3], "float32")

        def forward(self):
            a = paddle.arange(6, dtype="float32").reshape([2, 3])
            return F.relu(a * 0.1 - 0.2) + self.w, paddle.sum(a * self.w)

    class ControlFlow(nn.Layer):
        """Decoder-like control flow (dy2static's pd_op.while / pd_op.if): a loop whose trip count is an
        input, running a Linear (its weights read inside the loop body) on a carried state and writing
        each step into a tensor array, stacked after; then an if on the input's mean between branches
        with other ops, and the counter fetched."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, n):
            h = x
            i = paddle.zeros([1], "int64")
            arr = paddle.tensor.create_array("float32")
            while i < n:
                h = paddle.tanh(self.fc(h))
                paddle.tensor.array_write(h, i, array=arr)
                i = i + 1
            steps, _ = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=0, use_stack=True)
            if paddle.mean(x) > 0:
                y = F.relu(h) * 2.0
            else:
                y = paddle.exp(h) - 1.0
            return steps, y, i

    img = [("x", [-1, 3, -1, -1], "float32")]

    def images(h: int, w: int) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
        return lambda rng: {"x": rng.normal(0, 1, (1, 3, h, w)).astype(np.float32)}

    def det_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"image": rng.normal(0, 1, (1, 3, 32, 40)).astype(np.float32),
                "scale_factor": np.array([[0.5, 0.8]], np.float32)}

    def form_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.normal(0, 1, (4, 6)).astype(np.float32), "ids": rng.integers(0, 5, (4, 3)).astype(np.int64)}

    return {
        "liteseg_like": (LiteSeg, img, images(36, 52)),
        "lcnet_like": (LCNet, img, images(32, 32)),
        "picodet_like": (PicoDet, [("image", [-1, 3, -1, -1], "float32"), ("scale_factor", [-1, 2], "float32")],
                         det_inputs),
        "proposals_like": (Proposals, [("image", [-1, 3, 32, 32], "float32"), ("im_shape", [-1, 2], "float32")],
                           lambda rng: {"image": rng.normal(0, 1, (1, 3, 32, 32)).astype(np.float32),
                                        "im_shape": np.array([[32.0, 32.0]], np.float32)}),
        "op_forms": (OpForms, [("x", [-1, 6], "float32"), ("ids", [-1, 3], "int64")], form_inputs),
        "constants_only": (Constants, [], lambda rng: {}),
        "control_flow": (ControlFlow, [("x", [1, 4], "float32"), ("n", [1], "int64")],
                         lambda rng: {"x": rng.normal(0, 1, (1, 4)).astype(np.float32),
                                      "n": np.array([3], np.int64)}),
        "bounds_forms": (BoundsForms, [("x", [-1, 6], "float32"), ("ids", [-1, 3], "int64")],
                         lambda rng: {"x": rng.normal(0, 1, (5, 6)).astype(np.float32),
                                      "ids": rng.integers(0, 3, (5, 3)).astype(np.int64)}),
    }


def export(name: str, out: Path, fmt: str) -> None:
    """Build net `name` with its seeded weights and jit.save it to out/inference (PIR or legacy, as
    FLAGS_enable_pir_api of this process says)."""
    import paddle
    from make_pir_fixtures import _randomize, jit_save_to

    cls, specs, _ = _nets()[name]
    seed = sum(map(ord, name))
    paddle.seed(seed)
    with paddle.utils.unique_name.guard():
        layer = cls()
    _randomize(layer, np.random.default_rng(seed))
    layer.eval()
    spec = [paddle.static.InputSpec(shape, dtype, n) for n, shape, dtype in specs]
    jit_save_to(layer, spec, out, fmt, name)


def make(name: str, root: Path) -> Path:
    from make_pir_fixtures import _run_executor, _run_inference

    _, _, inputs = _nets()[name]
    feeds = inputs(np.random.default_rng(sum(map(ord, name)) + 1))
    made = []
    for fmt in ("pir", "legacy"):
        out = root / name / fmt
        env = dict(os.environ, FLAGS_enable_pir_api="1" if fmt == "pir" else "0")
        r = subprocess.run([sys.executable, __file__, "--export", name, str(out), fmt], env=env,
                           capture_output=True, text=True)
        if r.returncode:
            if fmt == "pir":
                raise SystemExit(f"{name}: PIR export failed:\n{r.stderr[-2000:]}")
            print(f"{name}: no legacy export (Paddle cannot trace it in legacy static mode)")
            shutil.rmtree(out, ignore_errors=True)
            continue
        made.append(fmt)
        try:
            outs = _run_inference(out, feeds)
        except RuntimeError as e:
            print(f"{name}/{fmt}: Paddle Inference refuses it ({' '.join(str(e).split())[:150]}); "
                  "reference from paddle.static.Executor")
            outs = _run_executor(out, feeds)
            (out / "REFERENCE.txt").write_text("reference: paddle.static.Executor (Paddle Inference refuses the model)\n")
        names = [f"fetch_{i}" for i in range(len(outs))]
        np.savez_compressed(out / "case.npz", **{f"in:{k}": v for k, v in feeds.items()},
                            **{f"out:{n}": o for n, o in zip(names, outs)})
    doc = " ".join((_nets()[name][0].__doc__ or "").split())
    (root / name / "README.txt").write_text(
        f"{name}: {doc}\nmade by tools/make_pir_nets.py: pir/ = paddle.jit.save under PIR"
        + (", legacy/ = paddle.jit.save with FLAGS_enable_pir_api=0" if "legacy" in made else " (no legacy export)")
        + "; case.npz = Paddle Inference outputs on those files, in fetch order.\n")
    return root / name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "pir_nets")
    ap.add_argument("--export", nargs=3, metavar=("NAME", "DIR", "FORMAT"), help=argparse.SUPPRESS)
    ap.add_argument("names", nargs="*", help="nets to make (default: all)")
    args = ap.parse_args(argv)
    if args.export:
        export(args.export[0], Path(args.export[1]), args.export[2])
        return 0
    for n in args.names or list(_nets()):
        path = make(n, args.out)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{path}: {size / 1e3:.1f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
