"""What a device driver is: compile an ONNX model with the device's own runtime, run it on NumPy arrays.

A driver is one file in this folder with a `Driver` subclass registered by device name. It
declares the Python package it needs (and the pip extra that installs it) and the context
property keys it understands. `build` returns an opaque compiled model; `run` takes the input
arrays in the model's input order and returns the outputs in its output order: fresh arrays
the caller may keep, never an input and never memory a later run writes (a predictor whose
program is one device subgraph hands them to the user as they are). With a cache path, `build`
loads the device's compiled artifact from that file when it exists and writes it there otherwise.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pdlite.errors import ConfigError, PdliteError


class DriverUnavailable(PdliteError):
    """The device's Python package is not installed."""


class Driver:
    """Base of the NNAdapter device drivers."""

    name: str = ""
    packages: tuple[str, ...] = ()  # import names the driver needs
    extra: str = ""  # pip extra of pdlite that installs them
    prefix: str = ""  # context property keys of this device start with it
    properties: Mapping[str, str] = {}  # key -> meaning
    # measured by the `auto` device (pdlite/api/auto.py); False for reference evaluators meant for checking
    auto_candidate: bool = True
    # settings the fixed-shape `auto` measurement also tries, as variants of this device, where the config's context
    # properties leave them unset: variant name -> properties (pdlite/api/auto.py's choose_device)
    auto_variants: Mapping[str, Mapping[str, str]] = {}
    # whether one compiled model serves inputs of any shape its ONNX model's symbolic dims allow; False: the
    # subgraph kernel converts and builds one model per input shape (bounded LRU, nnadapter_shape_cache_size)
    dynamic_shapes: bool = True
    # whether the runtime runs a model compiled for one shape faster than its model for all shapes (OpenVINO:
    # PP-OCR cls 1.76x, MobileNetV3-small 1.17x): the subgraph kernel then gives a signature that earned it
    # (runs in a row, or as much run time as the build took) a static model of its own
    promote_hot_shapes: bool = False
    # whether its model for all shapes computes an int8 (QDQ) subgraph as its static models do; False: quantized
    # subgraphs get one model per input shape (OpenVINO 2026.4: PP-OCR det int8 with dynamic dims mean error 0.033
    # of max|ref| against Paddle's reference, 0.0006 with static ones; its int8 transformations need static shapes)
    dynamic_int8: bool = True

    @classmethod
    def available(cls) -> bool:
        return all(importlib.util.find_spec(p) is not None for p in cls.packages)

    @classmethod
    def missing_message(cls) -> str:
        return (f"NNAdapter device {cls.name!r} needs the Python package(s) {', '.join(cls.packages)}: "
                f"pip install pdlite[{cls.extra}]")

    @classmethod
    def require(cls) -> None:
        if not cls.available():
            raise DriverUnavailable(cls.missing_message())

    @classmethod
    def own_properties(cls, props: Mapping[str, str]) -> dict[str, str]:
        """This device's keys of a context-properties mapping; unknown keys of its prefix are refused."""
        mine = {k: v for k, v in props.items() if k.startswith(cls.prefix)}
        unknown = sorted(set(mine) - set(cls.properties))
        if unknown:
            known = "\n".join(f"  {k}: {doc}" for k, doc in cls.properties.items())
            raise ConfigError(f"unknown NNAdapter context propert{'y' if len(unknown) == 1 else 'ies'} "
                              f"{unknown} for device {cls.name!r}; it understands:\n{known}")
        return mine

    def cache_token(self, props: Mapping[str, str]) -> str:
        """What besides the model and the properties decides the compiled artifact (e.g. providers)."""
        return ""

    def build(self, model: bytes, props: Mapping[str, str], cache_path: str | None = None) -> Any:
        raise NotImplementedError

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


def int_property(props: Mapping[str, str], key: str) -> int | None:
    v = props.get(key)
    if v is None or v == "":
        return None
    try:
        n = int(v)
    except ValueError:
        raise ConfigError(f"NNAdapter context property {key}={v!r}: expected an integer") from None
    if n < 0:
        raise ConfigError(f"NNAdapter context property {key}={v!r}: expected a non-negative integer")
    return n


def write_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` through a temporary file (no half-written cache entries)."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
