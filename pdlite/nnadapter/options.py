"""NNAdapter settings, read from the config's options (set by CxxConfig.set_nnadapter_*).

Option keys (in `CxxConfig.options`):
- "nnadapter_device_names": list of device names, in preference order (the first whose package
  is installed runs the subgraphs).
- "nnadapter_context_properties": "KEY=VALUE;KEY=VALUE" (keys per device; see each driver).
- "nnadapter_model_cache_dir": folder for compiled models (else $PDLITE_NNADAPTER_MODEL_CACHE_DIR; model_cache.py).
- "nnadapter_shape_cache_size": models kept per subgraph where one model per input shape is built (a device of
  static shapes only, a subgraph that cannot convert for all shapes; least recently used dropped; default 16).
- "nnadapter_subgraph_partition_config_path" / "..._buffer": ops kept off the device.
- "subgraph_min_size": subgraphs with fewer ops stay on the host (default 1).
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdlite.core.types import Place, TargetType
from pdlite.errors import ConfigError
from pdlite.nnadapter.partition import PartitionRule, parse_partition_config

DEFAULT_MIN_SIZE = 1
DEFAULT_SHAPE_CACHE_SIZE = 16
# the built-in devices' CPU thread counts (each driver reads the keys with its own prefix); unset, each runtime
# picks its own (all cores). The CLI and the OCR app set them to their --threads / threads (with_thread_counts).
THREAD_PROPERTIES = ("INTEL_OPENVINO_INFERENCE_NUM_THREADS", "ONNXRUNTIME_INTRA_OP_NUM_THREADS")


def parse_context_properties(text: str) -> dict[str, str]:
    """`KEY=VALUE` pairs separated by ';' or newlines (empty items ignored)."""
    props: dict[str, str] = {}
    for item in str(text or "").replace("\n", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ConfigError(f"NNAdapter context property {item!r}: expected KEY=VALUE (items separated by ';')")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return props


def with_thread_counts(props: Mapping[str, object], threads: int) -> dict[str, str]:
    """`props` (as text values) with the built-in devices' THREAD_PROPERTIES set to `threads` where it gives none."""
    return {**{k: str(int(threads)) for k in THREAD_PROPERTIES}, **{k: str(v) for k, v in props.items()}}


def format_context_properties(props: Mapping[str, object]) -> str:
    """The `KEY=VALUE;KEY=VALUE` text `parse_context_properties` reads (what set_nnadapter_context_properties takes)."""
    return ";".join(f"{k}={v}" for k, v in props.items())


@dataclass(frozen=True)
class NNAdapterOptions:
    device_names: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    model_cache_dir: str | None = None
    partition_rules: tuple[PartitionRule, ...] = ()
    min_size: int = DEFAULT_MIN_SIZE
    host_places: tuple[Place, ...] = (Place(),)
    shape_cache_size: int = DEFAULT_SHAPE_CACHE_SIZE

    @classmethod
    def from_options(cls, options: Mapping[str, Any], places: Sequence[Place] = ()) -> NNAdapterOptions | None:
        """The settings, or None when no NNAdapter device is configured."""
        names = options.get("nnadapter_device_names") or ()
        if isinstance(names, str):
            raise ConfigError("nnadapter_device_names must be a list of device names, not a string "
                              f"({names!r}); e.g. ['intel_openvino']")
        names = tuple(str(n) for n in names)
        if not names:
            if any(p.target == TargetType.NNAdapter for p in places):
                raise ConfigError("the valid places include TargetType.NNAdapter but no device is named: call "
                                  "config.set_nnadapter_device_names(['intel_openvino']) (or 'onnxruntime')")
            return None
        rules: list[PartitionRule] = []
        path = options.get("nnadapter_subgraph_partition_config_path")
        if path:
            if not os.path.isfile(path):
                raise ConfigError(f"subgraph partition config {path!r} does not exist")
            with open(path, encoding="utf-8") as f:
                rules += parse_partition_config(f.read(), path)
        buf = options.get("nnadapter_subgraph_partition_config_buffer")
        if buf:
            rules += parse_partition_config(buf.decode() if isinstance(buf, bytes) else str(buf),
                                            "subgraph partition config buffer")
        try:
            min_size = int(options.get("subgraph_min_size", DEFAULT_MIN_SIZE))
        except (TypeError, ValueError):
            raise ConfigError(f"subgraph_min_size must be an integer, got {options.get('subgraph_min_size')!r}") \
                from None
        size = options.get("nnadapter_shape_cache_size", DEFAULT_SHAPE_CACHE_SIZE)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"nnadapter_shape_cache_size must be a positive integer, got {size!r}")
        host = tuple(p for p in places if p.target != TargetType.NNAdapter) or (Place(),)
        return cls(names, parse_context_properties(options.get("nnadapter_context_properties", "")),
                   options.get("nnadapter_model_cache_dir") or None, tuple(rules), max(1, min_size), host, size)

    def excluded(self, op: Any) -> bool:
        return any(r.matches(op) for r in self.partition_rules)

    def pick_device(self) -> str:
        """The first named device whose driver is installed; unknown names and no usable device are errors."""
        from pdlite.nnadapter.registry import DRIVERS
        from pdlite.registries import load_registries

        load_registries()
        unknown = [n for n in self.device_names if n not in DRIVERS]
        if unknown:
            raise ConfigError(f"unknown NNAdapter device(s) {unknown}; known devices: {sorted(DRIVERS)}")
        missing = []
        for n in self.device_names:
            drv = DRIVERS[n]
            if drv.available():
                drv.own_properties(self.properties)  # refuse misspelt keys early
                if missing:
                    warnings.warn("; ".join(missing) + f"; using {n!r}", stacklevel=3)
                return n
            missing.append(drv.missing_message())
        raise ConfigError("; ".join(missing))
