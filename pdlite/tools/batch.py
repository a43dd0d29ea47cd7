"""`pdlite batch MODEL INPUTS -o OUT`: run a model over a folder of `.npy`/`.npz`/image files, one output
`.npz` per input, in a process pool (`--workers N`) or on a Ray cluster (`--ray ADDRESS`); see docs/batch.md.

Each file holds one complete feed (batch axis included, as `pdlite run --input` takes): a `.npy` for a
single-input model, a `.npz` keyed by input name (or `in:NAME`, as case.npz files), or an image made
into a 1x3xHxW float32 tensor by the documented preprocessing flags. Every file is run on its own, so
its outputs are bit-identical whatever the number of workers or the batch size.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, InputError, MissingDependencyError, PdliteError
from pdlite.tools.common import IMAGE_SUFFIXES, int_at_least
from pdlite.tools.progress import Progress

NUMPY_SUFFIXES = (".npy", ".npz")
INPUT_SUFFIXES = NUMPY_SUFFIXES + IMAGE_SUFFIXES


@dataclass(frozen=True)
class ImagePrep:
    """Image -> float32 NCHW feed: RGB (unless `bgr`), resized to `resize` (H, W) if given, then
    `(pixel * scale - mean) / std` per channel, HWC -> CHW, and a batch axis of 1."""

    resize: tuple[int, int] | None = None
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    scale: float = 1.0 / 255.0
    bgr: bool = False

    def __call__(self, path: str) -> np.ndarray:
        try:
            import cv2
        except ImportError:
            raise MissingDependencyError(f"{path}: reading images needs OpenCV: pip install opencv-python-headless "
                              "(or give .npy/.npz inputs)") from None
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise InputError(f"{path}: not a readable image")
        if not self.bgr:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if self.resize is not None:
            h, w = self.resize
            img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        x = img.astype(np.float32) * np.float32(self.scale)
        x = (x - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        return np.asarray(x.transpose(2, 0, 1)[None], order="C")


def scan_inputs(inputs: str) -> tuple[list[str], list[str]]:
    """(input files, skipped files): INPUTS itself, or the .npy/.npz/image files of the folder INPUTS (sorted,
    hidden files ignored) and the folder's other files, skipped (a readme.txt beside the data)."""
    if os.path.isfile(inputs):
        if not inputs.lower().endswith(INPUT_SUFFIXES):
            raise InputError(f"{inputs}: unknown input file type; expected one of {', '.join(INPUT_SUFFIXES)}")
        return [inputs], []
    if not os.path.isdir(inputs):
        raise InputError(f"inputs {inputs!r} not found (give a folder of .npy/.npz/image files, or one file)")
    files = [os.path.join(inputs, f) for f in sorted(os.listdir(inputs))
             if not f.startswith(".") and os.path.isfile(os.path.join(inputs, f))]
    used = [f for f in files if f.lower().endswith(INPUT_SUFFIXES)]
    if not used:
        raise InputError(f"input folder {inputs!r} holds no {', '.join(INPUT_SUFFIXES)} files"
                         + (f" ({len(files)} other file(s) skipped)" if files else ""))
    return used, [f for f in files if f not in used]


def list_inputs(inputs: str) -> list[str]:
    """The input files of INPUTS (scan_inputs; the folder's other files skipped)."""
    return scan_inputs(inputs)[0]


def output_paths(files: Sequence[str], out: str) -> dict[str, str]:
    """Input file -> OUT/<stem>.npz, refusing two inputs with one stem (a.npy and a.png) and overwriting an input."""
    paths: dict[str, str] = {}
    by_out: dict[str, str] = {}
    real_inputs = {os.path.realpath(f) for f in files}
    for f in files:
        o = os.path.join(out, os.path.splitext(os.path.basename(f))[0] + ".npz")
        if o in by_out:
            raise InputError(f"{f} and {by_out[o]} would both write {o}; rename one of them")
        if os.path.realpath(o) in real_inputs:
            raise InputError(f"{f}: its output {o} would overwrite an input; choose another -o folder")
        by_out[o] = f
        paths[f] = o
    return paths


def load_item(path: str, prep: ImagePrep | None = None) -> dict[str, np.ndarray]:
    """The columns of one input file: "data" (a .npy, an image, a .npz of one array) or the input names of a
    .npz (its `in:NAME` keys, else all but `out:` keys). PdliteModel feeds "data" to a single-input model."""
    low = path.lower()
    try:
        if low.endswith(".npy"):
            return {"data": np.load(path, allow_pickle=False)}
        if low.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                keys = [k for k in z.files if k.startswith("in:")] or [k for k in z.files if not k.startswith("out:")]
                if not keys:
                    raise InputError(f"{path}: the .npz holds no inputs (keys {z.files})")
                if len(keys) == 1:  # one array: like a .npy, whatever its key (arr_0 from np.savez)
                    return {"data": z[keys[0]]}
                return {k.removeprefix("in:"): z[k] for k in keys}
    except (OSError, ValueError) as e:
        if isinstance(e, PdliteError):
            raise
        raise InputError(f"{path}: cannot read it as {os.path.splitext(path)[1]}: {e}") from None
    if low.endswith(IMAGE_SUFFIXES):
        return {"data": (prep or ImagePrep())(path)}
    raise InputError(f"{path}: unknown input file type")


# -- one worker: a PdliteModel and where its outputs go ---------------------------------------------
_STATE: dict[str, Any] = {}  # the state of a pool process (set by its initializer)


def _worker_state(model_kwargs: dict[str, Any], outs: dict[str, str], prep: ImagePrep | None) -> dict[str, Any]:
    """A worker's model and output paths; an error building the model is kept and raised by the tasks,
    so that the parent sees the pdlite error rather than a broken pool."""
    from pdlite.integrations.ray import PdliteModel

    state: dict[str, Any] = dict(outs=outs, prep=prep)
    try:
        state["model"] = PdliteModel(**model_kwargs)
    except PdliteError as e:
        state["error"] = e
    return state


def _init_worker(model_kwargs: dict[str, Any], outs: dict[str, str], prep: ImagePrep | None) -> None:
    """Process-pool initializer: build this process's predictor once."""
    _STATE.update(_worker_state(model_kwargs, outs, prep))


def _process(paths: Sequence[str], state: dict[str, Any] | None = None) -> int:
    """Run the worker's model on each file and write its outputs; returns how many were written."""
    state = _STATE if state is None else state
    if "error" in state:
        raise state["error"]
    model = state["model"]
    for p in paths:
        item = load_item(p, state["prep"])
        res = model({"path": np.array([p]), **{k: [v] for k, v in item.items()}})
        write_outputs(state["outs"][p], {n: res[n][0] for n in model.output_names})
    return len(paths)


def write_outputs(path: str, outputs: dict[str, np.ndarray]) -> None:
    tmp = path + ".tmp.npz"
    np.savez(tmp, **outputs)
    os.replace(tmp, path)


def run_batch(model: str, inputs: str, out: str, *, params: str | None = None, workers: int = 1,
              batch_size: int = 16, threads: int = 1, ray_address: str | None = None,
              prep: ImagePrep | None = None, progress: Callable[[int], None] | None = None) -> int:
    """Run MODEL over the files of INPUTS, writing OUT/<stem>.npz per file; returns the number of files.

    workers=1 runs in this process; more use a process pool (spawned processes, one predictor each), or
    Ray actors with `ray_address` ("local" starts a local Ray instance). `batch_size` files go to a worker
    at a time. `progress(k)` is called as files are done."""
    if workers < 1 or batch_size < 1 or threads < 1:
        raise ConfigError(f"--workers, --batch-size and --threads must be >= 1, got {workers}, {batch_size}, {threads}")
    files = list_inputs(inputs)
    outs = output_paths(files, out)
    os.makedirs(out, exist_ok=True)
    model_kwargs = dict(model=model, params=params, add_batch_axis=False, key_column="path", threads=threads)
    tick = progress or (lambda k: None)
    if ray_address is not None:
        _run_ray(files, outs, model_kwargs, ray_address, workers, batch_size, prep, tick)
        return len(files)
    chunks = [files[i:i + batch_size] for i in range(0, len(files), batch_size)]
    if workers == 1:
        state = _worker_state(model_kwargs, outs, prep)
        for c in chunks:
            tick(_process(c, state))
        return len(files)
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(model_kwargs, outs, prep)) as pool:
        pending = {pool.submit(_process, c) for c in chunks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for f in done:
                if f.exception() is not None:
                    pool.shutdown(cancel_futures=True)
                    raise f.exception()
                tick(f.result())
    return len(files)


def _run_ray(files: list[str], outs: dict[str, str], model_kwargs: dict[str, Any], address: str, workers: int,
             batch_size: int, prep: ImagePrep | None, tick: Callable[[int], None]) -> None:
    """The inputs are read here and shipped through Ray's object store; the model path must be readable
    on the workers (the same machine, or a shared file system)."""
    from pdlite.integrations.ray import connect, pdlite_errors, predict_dataset

    local = address in ("", "local")
    ray = connect(address, num_cpus=max(os.cpu_count() or 1, workers * model_kwargs["threads"]) if local else None)
    items = []
    for f in files:
        cols = load_item(f, prep)
        if items and set(cols) != set(items[0]) - {"path"}:
            raise InputError(f"{f}: holds inputs {sorted(cols)}, but {items[0]['path']} holds "
                             f"{sorted(set(items[0]) - {'path'})}; every file must feed the same inputs")
        items.append({"path": f, **cols})
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ds = ray.data.from_items(items)
    kwargs = dict(model_kwargs)
    model = kwargs.pop("model")
    res = predict_dataset(ds, model, concurrency=workers, batch_size=batch_size, **kwargs)
    with pdlite_errors():
        for row in res.iter_rows():
            names = [k for k in row if k != "path"]
            write_outputs(outs[row["path"]], {n: np.asarray(row[n]) for n in names})
            tick(1)


# -- the command ----------------------------------------------------------------------------------
def _floats(text: str | None, flag: str, n: int | None = None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        vals = tuple(float(s) for s in text.replace("x", ",").split(",") if s.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated numbers") from None
    if n is not None and len(vals) != n:
        raise ConfigError(f"{flag} {text!r}: expected {n} numbers")
    return vals


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("batch", help="run a model over a folder of .npy/.npz/image files (process pool or Ray)")
    p.add_argument("model", help="model folder (legacy or PIR) or optimized .nb")
    p.add_argument("inputs", help=f"a folder of {'/'.join(INPUT_SUFFIXES)} files (or one file); each holds one "
                                  "feed; the folder's other files are skipped (and listed)")
    p.add_argument("-o", "--output", required=True, help="output folder: one <stem>.npz of outputs per input file")
    p.add_argument("--params", help="params file, when MODEL is a program file")
    p.add_argument("--ray", metavar="ADDRESS", help="run on Ray: 'local' (start one here), 'auto', 'ray://host:10001'")
    p.add_argument("--workers", type=int_at_least(1), default=1,
                   help="processes (or Ray actors), one predictor each (default 1)")
    p.add_argument("--batch-size", type=int_at_least(1), default=16,
                   help="files handed to a worker at a time (default 16)")
    p.add_argument("--threads", type=int_at_least(1), default=1, help="compute threads per worker (default 1)")
    add_image_args(p.add_argument_group(f"images ({'/'.join(IMAGE_SUFFIXES)} -> 1x3xHxW float32)"))
    p.set_defaults(func=main)


def add_image_args(g: Any) -> None:
    """The image preprocessing flags (`pdlite batch`'s, shared by `pdlite quantize`'s calibration) on parser or
    argument group `g`; `image_prep` reads them."""
    g.add_argument("--resize", metavar="H,W", help="resize to H,W (default: keep the size)")
    g.add_argument("--mean", metavar="R,G,B", help="subtract per channel after --scale (default 0,0,0)")
    g.add_argument("--std", metavar="R,G,B", help="divide per channel after --mean (default 1,1,1)")
    g.add_argument("--scale", type=float, default=1.0 / 255.0, help="multiply pixels first (default 1/255)")
    g.add_argument("--bgr", action="store_true", help="keep OpenCV's BGR channel order (default RGB)")


def image_prep(args: argparse.Namespace) -> ImagePrep:
    """The ImagePrep the `add_image_args` flags in `args` describe (flags absent from `args`: their defaults)."""
    resize = _floats(getattr(args, "resize", None), "--resize", 2)
    return ImagePrep(resize=(int(resize[0]), int(resize[1])) if resize else None,
                     mean=_floats(getattr(args, "mean", None), "--mean", 3) or (0.0, 0.0, 0.0),
                     std=_floats(getattr(args, "std", None), "--std", 3) or (1.0, 1.0, 1.0),
                     scale=getattr(args, "scale", 1.0 / 255.0), bgr=getattr(args, "bgr", False))


def main(args: argparse.Namespace) -> int:
    prep = image_prep(args)
    if 0.0 in prep.std or (prep.resize and min(prep.resize) < 1):
        raise ConfigError(f"--std {args.std!r} / --resize {args.resize!r}: std must be non-zero and sizes >= 1")
    files, skipped = scan_inputs(args.inputs)
    if skipped:
        shown = ", ".join(os.path.basename(f) for f in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        print(f"pdlite batch: skipped {len(skipped)} file(s) that are not {'/'.join(INPUT_SUFFIXES)}: {shown}",
              file=sys.stderr)
    total = len(files)
    with Progress(total, "pdlite batch") as bar:
        n = run_batch(args.model, args.inputs, args.output, params=args.params, workers=args.workers,
                      batch_size=args.batch_size, threads=args.threads, ray_address=args.ray, prep=prep,
                      progress=bar.update)
    print(f"{n} input(s) -> {args.output}")
    return 0
