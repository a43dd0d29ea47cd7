"""What the CLI commands share: opening a model from a path, parsing NAME=VALUE options."""
from __future__ import annotations

from typing import Any

import numpy as np

from pdlite.api.config import CxxConfig
from pdlite.api.from_path import config_for
from pdlite.errors import ConfigError, InputError
from pdlite.nnadapter.options import format_context_properties, with_thread_counts

# printed when --context is given and the host runs
HOST_IGNORES_CONTEXT = "note: --context sets NNAdapter device properties; the host target ignores them"


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


def add_device_argument(p: Any) -> None:
    p.add_argument("--device", "--backend", dest="device", default=None,
                   help="host, an NNAdapter device (intel_openvino, onnxruntime, plugins'), or auto: measure them "
                        "on this input and keep the fastest (the default when a device package is installed)")
    p.add_argument("--context", action="append", metavar="KEY=VALUE",
                   help="an NNAdapter context property for the devices (docs/nnadapter.md), repeatable; e.g. "
                        "INTEL_OPENVINO_INFERENCE_PRECISION_HINT=bf16, ONNXRUNTIME_INTRA_OP_NUM_THREADS=2")


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
    if isinstance(cfg, CxxConfig) and (props or device != "host"):
        # --threads holds for the devices too (their runtimes otherwise take every core), unless --context says
        cfg.set_nnadapter_context_properties(format_context_properties(with_thread_counts(props, cfg.threads())))
    if device == "auto":
        choice = choose_device(cfg, feeds, create_paddle_predictor)
        print(choice.describe())
        device = choice.device
    if device != "host":
        if not isinstance(cfg, CxxConfig):
            raise ConfigError(f"--device {device}: an optimized .nb model keeps the device it was saved with")
        apply_device(cfg, device)
    elif context:
        print(HOST_IGNORES_CONTEXT)
    return device


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
    feeds: dict[str, np.ndarray] = {}
    for k, path in inputs.items():
        if k not in names:
            raise InputError(f"--input {k}: the model has no input {k!r}; inputs are {names}")
        arr = np.load(path)
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
