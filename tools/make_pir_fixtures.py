"""Generate the PIR test models under tests/fixtures/pir/<name>/ (dev tool; needs paddlepaddle 3.x).

Each model is a small paddle.nn.Layer with seeded random weights, exported with
`paddle.jit.save` (Paddle 3's default PIR export: inference.json + inference.pdiparams) with a
dynamic batch. References come from Paddle Inference on the saved files, as for
../shared/models: `switch_ir_optim(False)`, MKLDNN off, 1 thread. `case.npz` holds batch 1,
`case_b2.npz` batch 2, keys `in:<feed name>` and `out:<fetch name>`.

Usage: python tools/make_pir_fixtures.py [--out tests/fixtures/pir] [names...]
       python tools/make_pir_fixtures.py --from-legacy SRC_MODEL_DIR DST_DIR [SRC DST ...]
       python tools/make_pir_fixtures.py --conformance [names...]
       python tools/make_pir_fixtures.py --docs        (rewrite the mapping table in docs/pir.md)

`--from-legacy` re-saves legacy (ProgramDesc) models as PIR JSON (Paddle's program translator +
save_inference_model), e.g. the ../shared/models zoo, to check pdlite on PIR programs that were
not written by jit.save (pd_op.feed, shape + slice + combine dynamic reshapes, ...).

`--conformance` makes the PIR twin of every conformance model (tests/fixtures/conformance/<name>,
legacy programs) in tests/fixtures/pir_conformance/<name>: Paddle's translator
(`paddle.pir.translate_to_pir`) + save_inference_model, and case.npz with the legacy case's inputs
and Paddle Inference's outputs on the PIR twin (Paddle's translator is not always faithful: it can
drop reduce_all or round an int64 constant through float32, so the twin's reference is Paddle's own
run of the twin). meta.json lists the outputs where that run differs from the legacy reference
(`differs_from_legacy`); models the translator refuses (or whose translation Paddle itself cannot run)
are listed in UNTRANSLATABLE.json with Paddle's message.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _models() -> dict[str, tuple[Callable[[], object], list[tuple[str, list[int], str]]]]:
    import paddle
    import paddle.nn as nn
    import paddle.nn.functional as F

    class Conv(nn.Layer):
        """conv2d (SAME + groups, asymmetric padding + stride + dilation), depthwise, transpose, BN."""

        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2D(4, 8, 3, padding="SAME", groups=2)
            self.c2 = nn.Conv2D(8, 8, 3, padding=[1, 2, 0, 1], stride=2, dilation=2, bias_attr=False)
            self.dw = nn.Conv2D(8, 8, 3, padding=1, groups=8)
            self.c3 = nn.Conv2D(8, 6, 1, padding="VALID")
            self.ct = nn.Conv2DTranspose(6, 4, 3, stride=2, padding=1, output_padding=1)
            self.ct2 = nn.Conv2DTranspose(4, 4, 4, stride=2, padding=1, groups=2)
            self.bn = nn.BatchNorm2D(8)
            self.bn2 = nn.BatchNorm2D(4)

        def forward(self, x):
            y = F.relu(self.c1(x))
            y = F.relu6(self.bn(self.c2(y)))
            y = F.hardswish(self.dw(y))
            y = self.ct(self.c3(y))
            return self.ct2(F.relu(self.bn2(y)))

    class Pool(nn.Layer):
        """pool2d max (ceil_mode) / avg (padding, exclusive=False) / adaptive avg / adaptive max / global."""

        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2D(3, 4, 3, padding=1)

        def forward(self, x):
            y = self.c(x)
            return (F.max_pool2d(y, 3, 2, ceil_mode=True), F.avg_pool2d(y, 3, 2, padding=1, exclusive=False),
                    F.adaptive_avg_pool2d(y, [3, 5]), F.adaptive_max_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1),
                    F.avg_pool2d(y, 2))

    class ResizeAct(nn.Layer):
        """interpolate nearest / bilinear, activations, concat, flatten, softmax."""

        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2D(3, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 6 * 10 * 3, 10)

        def forward(self, x):
            y = self.c(x)
            a = F.interpolate(y, size=[6, 10], mode="nearest")
            b = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            c = F.interpolate(y, size=[6, 10], mode="bilinear", align_corners=True)
            z = paddle.concat([F.sigmoid(a), F.hardsigmoid(c), F.gelu(a)], axis=1)
            f = paddle.flatten(z, 1)
            return F.softmax(self.fc(f), -1), F.gelu(b, approximate=True), F.leaky_relu(c, 0.1), F.tanh(a)

    class Tensor(nn.Layer):
        """reshape, transpose, slice, matmul, layer_norm, embedding, elementwise ops, two inputs."""

        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.ln = nn.LayerNorm(8)
            self.fc = nn.Linear(8, 8)

        def forward(self, x, ids):
            e = self.ln(self.emb(ids))                                    # [N, 5, 8]
            t = paddle.transpose(paddle.reshape(x, [-1, 3, 2, 8]), [0, 2, 1, 3])  # [N, 2, 3, 8]
            s = t[:, 1, 1:3, 2:]                                          # [N, 2, 6]
            m = paddle.matmul(e, self.fc(e), transpose_y=True)            # [N, 5, 5]
            u = paddle.unsqueeze(paddle.mean(x, axis=1), 1) - x * 0.5 + x / (paddle.abs(x) + 1.0)
            return m, s, F.relu(u), paddle.squeeze(t[:, :, :1], axis=2)

    class Transformer(nn.Layer):
        """embedding + 2-layer TransformerEncoder (post-norm, gelu FFN) + final LayerNorm + head."""

        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 32)
            self.pos = paddle.create_parameter([1, 8, 32], "float32")
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32))
            self.head = nn.Linear(32, 10)

        def forward(self, ids):
            h = self.enc(self.emb(ids) + self.pos)
            return F.softmax(self.head(h[:, 0]), -1), h

    class Dynamic(nn.Layer):
        """shapes computed at run time: shape64 + slice + stack -> reshape, size tensor -> interpolate,
        split_with_num (vector result + builtin.split), clip, concat of three."""

        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2D(4, 6, 1)

        def forward(self, x):
            y = self.c(x)
            flat = paddle.reshape(y, [paddle.shape(y)[0], -1])
            up = F.interpolate(y, size=paddle.shape(x)[2:] * 2, mode="nearest")
            a, b, c = paddle.split(y, 3, axis=1)
            return flat, up, paddle.concat([paddle.clip(a, -0.5, 0.5), b * c, a - c], axis=1)

    class ArraySlice(nn.Layer):
        """a tensor array written element by element, then read back by index, the last one as arr[-1]:
        pd_op.slice_array_dense (Paddle 3 exports PaddleDetection's RPN reading its per-image rois so)."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            arr = paddle.tensor.create_array("float32")
            for k, v in enumerate((self.fc(x), x + 1.0, x * x)):
                paddle.tensor.array_write(v, paddle.full([1], k, "int64"), array=arr)
            return arr[0], arr[1], arr[-1]

    img = [("x", [-1, 3, 12, 20], "float32")]
    return {
        "conv": (Conv, [("x", [-1, 4, 16, 16], "float32")]),
        "pool": (Pool, img),
        "resize_act": (ResizeAct, img),
        "tensor_ops": (Tensor, [("x", [-1, 6, 8], "float32"), ("ids", [-1, 5], "int64")]),
        "transformer": (Transformer, [("ids", [-1, 8], "int64")]),
        "dynamic_shape": (Dynamic, [("x", [-1, 4, -1, -1], "float32")]),
        "array_slice": (ArraySlice, [("x", [-1, 3, 4], "float32")]),
    }


def _randomize(layer, rng: np.random.Generator) -> None:
    """Seeded weights with O(1) activations; BN gets random gamma/beta and running stats."""
    import paddle

    for name, p in layer.named_parameters():
        shape = p.shape
        if name.endswith("_mean"):
            v = rng.normal(0, 0.2, shape)
        elif name.endswith("_variance"):
            v = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2 and "emb" not in name and "pos" not in name:
            fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[0]
            v = rng.normal(0, 1.0 / np.sqrt(max(fan_in, 1)), shape)
        else:
            v = rng.normal(0, 0.5, shape)
        p.set_value(paddle.to_tensor(v.astype(np.float32)))
    for name, b in layer.named_buffers():
        if b.dtype != paddle.float32:  # e.g. an LSTM's uint8 dropout state
            continue
        shape = b.shape
        v = rng.uniform(0.5, 1.5, shape) if "variance" in name else rng.normal(0, 0.2, shape)
        b.set_value(paddle.to_tensor(v.astype(np.float32)))


def _inputs(specs, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for name, shape, dtype in specs:
        shape = [batch if i == 0 else 5 + 2 * batch + i if d < 0 else d for i, d in enumerate(shape)]
        if dtype == "int64":
            feeds[name] = rng.integers(0, 20, size=shape).astype(np.int64)
        else:
            feeds[name] = rng.normal(0, 1, size=shape).astype(np.float32)
    return feeds


def _reference(model_dir: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from paddle_reference import paddle_reference

    return paddle_reference(model_dir / "inference.json", model_dir / "inference.pdiparams", feeds)


def _check_eager(layer, specs, feeds: dict[str, np.ndarray], outs: dict[str, np.ndarray], what: str) -> None:
    """The Paddle Inference reference must agree with the eager (dygraph) layer."""
    import paddle

    eager = layer(*[paddle.to_tensor(feeds[n]) for n, _, _ in specs])
    eager = eager if isinstance(eager, (list, tuple)) else [eager]
    for i, e in enumerate(eager):
        ref = outs[f"fetch_name_{i}"]
        err = float(np.max(np.abs(e.numpy() - ref)))
        if err > 1e-5 * max(1.0, float(np.max(np.abs(ref)))):
            raise SystemExit(f"{what}: fetch_name_{i} differs from eager by {err}")


def jit_save_to(layer, spec, out: Path, fmt: str, what: str) -> None:
    """paddle.jit.save `layer` into the folder `out` (replaced): inference.json (PIR) or inference.pdmodel (legacy,
    as FLAGS_enable_pir_api of this process says) + inference.pdiparams; `fmt` says which program must be there."""
    import paddle

    with tempfile.TemporaryDirectory() as tmp:
        paddle.jit.save(layer, str(Path(tmp) / "inference"), input_spec=spec)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for f in ("inference.json", "inference.pdmodel", "inference.pdiparams"):
            if (Path(tmp) / f).is_file():
                shutil.copy(Path(tmp) / f, out / f)
    want = "inference.json" if fmt == "pir" else "inference.pdmodel"
    if not (out / want).is_file():
        raise SystemExit(f"{what}: jit.save did not write {want}")


def make(name: str, out_root: Path) -> Path:
    import paddle

    cls, specs = _models()[name]
    seed = sum(map(ord, name))
    paddle.seed(seed)
    rng = np.random.default_rng(seed)
    with paddle.utils.unique_name.guard():  # parameter names independent of what was built before
        layer = cls()
    _randomize(layer, rng)
    layer.eval()
    spec = [paddle.static.InputSpec(shape, dtype, n) for n, shape, dtype in specs]
    out = out_root / name
    jit_save_to(layer, spec, out, "pir", name)
    for case, batch in (("case.npz", 1), ("case_b2.npz", 2)):
        feeds = _inputs(specs, batch, rng)
        outs = _reference(out, feeds)
        _check_eager(layer, specs, feeds, outs, f"{name}/{case}")
        np.savez_compressed(out / case, **{f"in:{k}": v for k, v in feeds.items()},
                            **{f"out:{k}": v for k, v in outs.items()})
    import json

    ops = json.loads((out / "inference.json").read_text())["program"]["regions"][0]["blocks"][0]["ops"]
    counts = Counter(o["#"] for o in ops if o["#"] not in ("p", "1.data", "1.fetch"))
    (out / "README.txt").write_text(
        f"{name}: {' '.join(cls.__doc__.split())}\n"
        f"made by tools/make_pir_fixtures.py with paddle {paddle.__version__} (jit.save, PIR JSON), seed {seed}\n"
        f"inputs: {', '.join(f'{n} {dt} {s}' for n, s, dt in specs)} (-1: dynamic batch)\n"
        "references: Paddle Inference, switch_ir_optim(False), mkldnn off, 1 thread; case.npz batch 1, "
        "case_b2.npz batch 2\n"
        f"ops: {', '.join(f'{k} x{v}' for k, v in sorted(counts.items()))}\n"
    )
    return out


def _legacy_files(src: Path) -> tuple[str, str | None, str | None]:
    """(path prefix or folder, model file name, params file name) for load_inference_model."""
    if (src / "inference.pdmodel").is_file():
        return str(src / "inference"), None, None
    params = "__params__" if (src / "__params__").is_file() else None
    return str(src), "__model__", params


def from_legacy(src: Path, dst: Path) -> Path:
    """Translate a legacy inference model to a PIR program and save it as dst/inference.json + .pdiparams."""
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    prefix, model_name, params_name = _legacy_files(src)
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        with paddle.pir_utils.OldIrGuard():
            kw = {"model_filename": model_name, "params_filename": params_name} if model_name else {}
            prog, _, _ = paddle.static.load_inference_model(prefix, exe, **kw)
        pir_prog = paddle.pir.translate_to_pir(prog.desc)
        block = pir_prog.global_block()
        feeds = [op.result(0) for op in block.ops if op.name() in ("pd_op.data", "pd_op.feed")]
        fetch_ops = [op for op in block.ops if op.name() == "pd_op.fetch"]
        fetches = [op.operand_source(0) for op in fetch_ops]
        for op in fetch_ops:  # save_inference_model adds its own fetch ops
            block.remove_op(op)
        dst.mkdir(parents=True, exist_ok=True)
        paddle.static.save_inference_model(str(dst / "inference"), feeds, fetches, exe, program=pir_prog)
    paddle.disable_static()
    return dst


CONFORMANCE = REPO / "tests" / "fixtures" / "conformance"
TWINS = REPO / "tests" / "fixtures" / "pir_conformance"


def _run_inference(model_dir: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Paddle Inference's outputs (in fetch order) for a PIR or legacy model folder."""
    from paddle_reference import paddle_reference

    model = model_dir / "inference.json"
    if not model.is_file():
        model = model_dir / "inference.pdmodel"
    return list(paddle_reference(model, model_dir / "inference.pdiparams", feeds).values())


def _run_executor(model_dir: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of paddle.static.Executor on a PIR model folder (when Paddle Inference refuses it)."""
    import paddle

    paddle.enable_static()
    try:
        exe = paddle.static.Executor(paddle.CPUPlace())
        with paddle.static.scope_guard(paddle.static.Scope()):
            prog, names, fetches = paddle.static.load_inference_model(str(model_dir / "inference"), exe)
            return [np.asarray(o) for o in exe.run(prog, feed={n: feeds[n] for n in names}, fetch_list=fetches)]
    finally:
        paddle.disable_static()


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return bool(np.all(np.abs(a.astype(np.float64) - b) <= 1e-5 * max(scale, 1e-30)) or np.array_equal(a, b))


def conformance_twin(name: str, out_root: Path = TWINS) -> tuple[Path | None, str]:
    """The PIR twin of conformance model `name` (None and Paddle's message when it cannot translate)."""
    import json

    src = CONFORMANCE / name
    dst = out_root / name
    z = np.load(src / "case.npz")
    feeds = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    legacy = [(k[4:], z[k]) for k in z.files if k.startswith("out:")]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            from_legacy(src, Path(tmp))
        except Exception as e:  # noqa: BLE001 (Paddle raises ValueError / SystemError / RuntimeError)
            return None, " ".join(str(e).split())[:300]
        reference = "paddle.inference"
        try:
            outs = _run_inference(Path(tmp), feeds)
        except RuntimeError as e:  # e.g. "fetch_name_1 is not found in the scope" on some twins
            print(f"{name}: Paddle Inference refuses the twin ({' '.join(str(e).split())[:120]}); "
                  "reference from paddle.static.Executor")
            reference = "paddle.static.Executor"
            try:
                outs = _run_executor(Path(tmp), feeds)
            except RuntimeError as e2:  # e.g. Paddle cannot read back the JSON it wrote
                return None, f"Paddle cannot run its own translation ({' '.join(str(e2).split())[:200]})"
            if any(not isinstance(o, np.ndarray) or o.dtype == object for o in outs):
                return None, f"Paddle cannot run its own translation ({' '.join(str(e).split())[:200]})"
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        for f in ("inference.json", "inference.pdiparams"):
            if (Path(tmp) / f).is_file():
                shutil.copy(Path(tmp) / f, dst / f)
    if len(outs) != len(legacy):
        raise SystemExit(f"{name}: the PIR twin has {len(outs)} outputs, the legacy model {len(legacy)}")
    differs = [n for (n, ref), o in zip(legacy, outs) if not _same(o, ref)]
    np.savez_compressed(dst / "case.npz", **{f"in:{k}": v for k, v in feeds.items()},
                        **{f"out:{n}": o for (n, _), o in zip(legacy, outs)})
    (dst / "meta.json").write_text(json.dumps({"legacy": f"tests/fixtures/conformance/{name}", "reference": reference,
                                               "differs_from_legacy": differs}, indent=1) + "\n")
    return dst, ""


def make_conformance_twins(names: list[str]) -> int:
    import json

    import paddle

    all_names = sorted(p.name for p in CONFORMANCE.iterdir() if (p / "case.npz").is_file())
    refused_file = TWINS / "UNTRANSLATABLE.json"
    refused = json.loads(refused_file.read_text()) if refused_file.is_file() and names else {}
    for name in names or all_names:
        path, why = conformance_twin(name)
        refused.pop(name, None)
        if path is None:
            refused[name] = why
            if (TWINS / name).exists():
                shutil.rmtree(TWINS / name)
            print(f"{name}: not translatable: {why}")
        else:
            meta = json.loads((path / "meta.json").read_text())
            note = f" (Paddle's PIR run differs from legacy on {meta['differs_from_legacy']})" \
                if meta["differs_from_legacy"] else ""
            print(f"{path}: {sum(f.stat().st_size for f in path.iterdir()) / 1e3:.1f} kB{note}")
    TWINS.mkdir(parents=True, exist_ok=True)
    refused = {k: v for k, v in sorted(refused.items()) if k in all_names}
    refused_file.write_text(json.dumps(refused, indent=1) + "\n")
    (TWINS / "README.txt").write_text(
        "PIR twins of tests/fixtures/conformance (legacy programs), made by tools/make_pir_fixtures.py "
        f"--conformance with paddle {paddle.__version__}: paddle.pir.translate_to_pir + save_inference_model.\n"
        "case.npz: the legacy case's inputs, Paddle Inference's outputs on the twin (switch_ir_optim(False), "
        "mkldnn off, 1 thread; meta.json reference: paddle.static.Executor where Paddle Inference refuses the "
        "twin), keyed by the legacy fetch names in fetch order.\n"
        "meta.json differs_from_legacy: outputs where Paddle's run of the twin differs from the legacy reference "
        "(Paddle's translator drops reduce_all on reductions over every axis and rounds int64 constants through "
        "float32).\nUNTRANSLATABLE.json: models Paddle's translator refuses, or whose translation Paddle cannot "
        "run, with its message.\n")
    return 0


DOC = REPO / "docs" / "pir.md"
TABLE_START, TABLE_END = "<!-- pir-table: generated by tools/make_pir_fixtures.py --docs -->", "<!-- /pir-table -->"


def write_docs_table() -> int:
    """Replace the mapping table between the markers of docs/pir.md with the registry's."""
    from pdlite.model_parser import pir  # noqa: F401 (fills the registry)
    from pdlite.model_parser.pir_mapping import mapping_markdown

    text = DOC.read_text()
    head, _, rest = text.partition(TABLE_START)
    _, _, tail = rest.partition(TABLE_END)
    DOC.write_text(f"{head}{TABLE_START}\n{mapping_markdown()}{TABLE_END}{tail}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "pir")
    ap.add_argument("--from-legacy", action="store_true", help="names are SRC DST pairs of legacy models to re-save")
    ap.add_argument("--conformance", action="store_true", help="make the PIR twins of the conformance zoo")
    ap.add_argument("--docs", action="store_true", help="rewrite the mapping table in docs/pir.md")
    ap.add_argument("names", nargs="*", help="models to make (default: all)")
    args = ap.parse_args(argv)
    if args.conformance:
        return make_conformance_twins(args.names)
    if args.docs:
        return write_docs_table()
    if args.from_legacy:
        if len(args.names) % 2:
            ap.error("--from-legacy takes SRC DST pairs")
        for src, dst in zip(args.names[::2], args.names[1::2]):
            print(from_legacy(Path(src), Path(dst)))
        return 0
    names = args.names or list(_models())
    for n in names:
        path = make(n, args.out)
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"{path}: {size / 1e3:.1f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
