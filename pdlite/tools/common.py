"""What the CLI commands share: opening a model from a path, parsing NAME=VALUE options, the help format, flag
value types, and the image file types the commands read."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pdlite.api.config import CxxConfig
from pdlite.api.from_path import config_for
from pdlite.errors import ConfigError, InputError
from pdlite.nnadapter.options import format_context_properties, with_thread_counts

# printed when --context is given and the host runs
HOST_IGNORES_CONTEXT = "note: --context sets NNAdapter device properties; the host target ignores them"

# the image files the commands read (OpenCV's readers): `pdlite ocr`, `pdlite batch`
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Each flag's help ends with "(default: ...)" (argparse's ArgumentDefaultsHelpFormatter), except where there
    is no default to show (None, a store_true flag's False, '' or []) or the help already says it; descriptions
    keep their line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        empty = default is None or default is False or (isinstance(default, (str, list)) and not default)
        if empty or "default" in text:
            return text
        return super()._get_help_string(action) or text


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse `type`: an integer >= low; anything else is argparse's one-line usage error (exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


@contextlib.contextmanager
def one_line_warnings(prog: str) -> Iterator[None]:
    """Warnings printed as one line `prog: warning: message` (not Python's file:line and source line)."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr if file is None else file)

    old = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = old


def source_config(model: str, params: str | None, command: str) -> CxxConfig:
    """The CxxConfig of a source model (folder or program file); optimized `.nb` files are refused."""
    cfg = config_for(model, params)
    if not isinstance(cfg, CxxConfig):
        raise ConfigError(f"{command} needs a Paddle model (folder or program file), not an optimized .nb model")
    return cfg


def default_device() -> str:
    """`auto` when a device package is installed (pdlite measures and keeps the fastest), else `host`."""
    from pdlite.api.auto import installed_devices

    return "auto" if installed_devices() else "host"


MAX_DEFAULT_THREADS = 8  # PaddleX's default cpu_threads; small ops gain little from more


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's limit), at most
    MAX_DEFAULT_THREADS: what `pdlite ocr` uses unless told (PaddleOCR, PaddleX and RapidOCR also use several
    cores by default)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no affinity mask
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_THREADS))


def add_device_argument(p: Any) -> None:
    p.add_argument("--device", "--backend", "-d", dest="device", default=None,
                   help="host, an NNAdapter device (intel_openvino, onnxruntime, plugins'), or auto: measure them "
                        "on this input and keep the fastest (default: auto when a device package is installed, "
                        "else host; -d as OpenVINO's benchmark_app, --backend as Paddle-Lite's benchmark_bin)")
    p.add_argument("--context", action="append", metavar="KEY=VALUE",
                   help="an NNAdapter context property for the devices (docs/nnadapter.md), repeatable; e.g. "
                        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16, ONNXRUNTIME_INTRA_OP_NUM_THREADS=2")


def add_feed_arguments(p: argparse.ArgumentParser, shape_help: str) -> None:
    """MODEL, --params, --input, --shape and --threads, as `run` and `bench` take them (the spellings of
    Paddle-Lite's benchmark_bin, OpenVINO's benchmark_app and onnxruntime_perf_test as aliases)."""
    p.add_argument("model", help="model folder, program file (.pdmodel / __model__ / .json) or optimized .nb")
    p.add_argument("--params", "--param_file", help="params file (default: found beside the program file)")
    p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy",
                   help="input data: NAME=FILE.npy or .npz (key in:NAME or NAME), or just FILE for a one-input model; "
                        "repeatable")
    p.add_argument("--shape", "--input_shape", "-shape", action="append", metavar="NAME=1,3,224,224",
                   help=shape_help + "; NAME=1,3,224,224 or NAME[1,3,224,224], or just 1,3,224,224 for a one-input "
                        "model; repeatable")
    p.add_argument("--threads", "-nthreads", "-x", type=int_at_least(1), default=1,
                   help="CPU threads (-nthreads as benchmark_app, -x as onnxruntime_perf_test)")


def set_device(cfg: Any, device: str | None, feeds: dict[str, np.ndarray], context: list[str] | None = None) -> str:
    """Point `cfg` at `device` (auto: measured on `feeds`, choice printed) with the NNAdapter context properties
    `context` (KEY=VALUE items); returns the device used."""
    from pdlite.api.auto import apply_device, choose_device
    from pdlite.api.predictor import create_paddle_predictor

    if context and not isinstance(cfg, CxxConfig):
        raise ConfigError("--context: an optimized .nb model keeps the device settings it was saved with")
    props = parse_kv(context, "--context")
    if device is None:
        device = default_device() if isinstance(cfg, CxxConfig) else "host"
    check_device(device)
    if isinstance(cfg, CxxConfig) and (props or device != "host"):
        # --threads holds for the devices too (their runtimes otherwise take every core), unless --context says
        cfg.set_nnadapter_context_properties(format_context_properties(with_thread_counts(props, cfg.threads())))
    if device == "auto":
        choice = choose_device(cfg, feeds, create_paddle_predictor)
        print(choice.describe())
        device = choice.key  # the device, or a variant of it (`device[variant]`: apply_device adds its properties)
    if device != "host":
        if not isinstance(cfg, CxxConfig):
            raise ConfigError(f"--device {device}: an optimized .nb model keeps the device it was saved with")
        apply_device(cfg, device)
    elif context:
        print(HOST_IGNORES_CONTEXT)
    return device


def check_device(device: str) -> None:
    """Refuse a --device no one registered, listing every valid choice (host, auto and the known devices)."""
    from pdlite.api.auto import installed_devices
    from pdlite.nnadapter.registry import DRIVERS

    if device in ("host", "x86", "auto") or device in DRIVERS:
        return
    installed = installed_devices()
    raise ConfigError(f"--device {device!r}: unknown device; choose one of host, auto, {', '.join(sorted(DRIVERS))} "
                      f"(installed: {', '.join(installed) or 'none'}; `pdlite doctor` and `pdlite plugins` say more)")


def parse_named(items: list[str] | None, names: list[str], flag: str) -> dict[str, str]:
    """--input / --shape items -> {input name: value}: NAME=VALUE, NAME[VALUE] (OpenVINO benchmark_app's -shape),
    or a bare VALUE on a model with one input (onnxruntime's and OpenVINO's tools take a plain path). A name the
    model does not have is an InputError naming the model's inputs."""
    out: dict[str, str] = {}
    for item in items or []:
        bracket = re.fullmatch(r"\s*([^=\[\]]+)\[([^\]]*)\]\s*", item) if flag == "--shape" else None
        if bracket:
            name, value = bracket.group(1), bracket.group(2)
        elif "=" in item and not (flag == "--input" and os.path.isfile(item)):
            name, value = item.split("=", 1)
        elif len(names) == 1:
            name, value = names[0], item
        else:
            raise InputError(f"{flag} {item!r}: the model has {len(names)} inputs {names}: give NAME=... for each")
        name = name.strip()
        if name not in names:
            raise InputError(f"{flag} {name}: the model has no input {name!r}; its inputs are {names}")
        out[name] = value.strip()
    return out


def parse_kv(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        if "=" not in it:
            raise ConfigError(f"{what} {it!r}: expected NAME=VALUE")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def parse_shape(text: str, name: str) -> list[int]:
    try:
        return [int(s) for s in text.replace("x", ",").split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--shape {name}={text!r}: expected comma-separated integers like 1,3,224,224") from None


def make_feeds(predictor: Any, inputs: dict[str, str], shapes: dict[str, str], random: bool,
               seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds from .npy/.npz files and/or random data of the given (or model) shapes."""
    names = predictor.get_input_names()
    for flag, given in (("--input", inputs), ("--shape", shapes)):
        for k in given:
            if k not in names:
                raise InputError(f"{flag} {k}: the model has no input {k!r}; its inputs are {names}")
    feeds: dict[str, np.ndarray] = {}
    for k, path in inputs.items():
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InputError(f"--input {k}: cannot read {path!r} as .npy/.npz: {e}") from None
        if isinstance(arr, np.lib.npyio.NpzFile):
            key = f"in:{k}" if f"in:{k}" in arr else (k if k in arr else arr.files[0])
            arr = arr[key]
        feeds[k] = arr
    rng = np.random.default_rng(seed)
    for n in names:
        if n in feeds:
            continue
        spec_shape, dtype = predictor._feed_specs[n]
        shape = parse_shape(shapes[n], n) if n in shapes else list(spec_shape)
        if not random and n not in shapes:
            raise InputError(f"input {n!r} has no data: give --input {n}=FILE.npy, or --random "
                             f"(with --shape {n}=... for dynamic dims {spec_shape})")
        if n not in shapes and shape and shape[0] < 0 and all(d >= 0 for d in shape[1:]):
            shape[0] = 1  # only the batch is dynamic: one sample, as Paddle's tools do
            print(f"input {n}: batch 1 (the model's shape {spec_shape}; --shape {n}=... for another)")
        if any(d < 0 for d in shape):
            example = ",".join(str(d) if d >= 0 else ("1" if i == 0 else "N") for i, d in enumerate(shape))
            raise InputError(f"input {n!r} has dynamic dims {spec_shape}: give --shape {n}={example} "
                             f"(N: the size to use)")
        dtype = dtype or np.dtype(np.float32)
        if np.issubdtype(dtype, np.integer):
            feeds[n] = rng.integers(0, 100, size=shape).astype(dtype)
        else:
            feeds[n] = rng.standard_normal(shape).astype(dtype)
    return feeds


def summary(arr: np.ndarray) -> str:
    if arr.size == 0:
        return "empty"
    a = arr.astype(np.float64) if arr.dtype != np.bool_ else arr.astype(np.float64)
    return f"min {a.min():.6g}  max {a.max():.6g}  mean {a.mean():.6g}  std {a.std():.6g}"
