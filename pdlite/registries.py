"""The one registry loader: every module that registers something, then plugins.

Ops, kernels, passes, NNAdapter converters and drivers register themselves with explicit
decorators into `pdlite.core.registry.Registry` objects when their module is imported.
`load_registries()` imports all of them, in layer order, from the manifest below, then loads the
installed plugins; every entry point (CxxConfig/CxxPredictor, MobileConfig/LightPredictor, opt,
the ONNX export, the tools) calls it, so what is registered never depends on what else happened
to be imported first.

The manifest names packages and modules by string: this loader sits at the bottom of the layers
(anyone may call it) without importing upwards. A package listed here registers by importing its
modules explicitly in its `__init__`; tests/test_registries.py checks that every module holding
a registration is reached, so a new op, kernel or pass module is a one-line addition to its
package's `__init__`.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable

from pdlite.core.types import TargetType

# In layer order: ops, host kernels, passes, NNAdapter (subgraph kernel and pass, converters, drivers),
# the PIR front end's op table (PIR_OPS, filled by pir_mapping*).
BUILTIN_MODULES: tuple[str, ...] = (
    "pdlite.operators",
    "pdlite.kernels.host",
    "pdlite.optimizer.passes",
    "pdlite.optimizer.control_flow",
    "pdlite.nnadapter.subgraph_kernel",
    "pdlite.nnadapter.subgraph_pass",
    "pdlite.nnadapter.converters",
    "pdlite.nnadapter.drivers",
    "pdlite.model_parser.pir",
)

# Kernels of targets whose backend is an optional dependency (torch for CUDA, pyopencl for OpenCL):
# imported only when asked for, so that host-only use never pays for the import.
TARGET_KERNEL_MODULES: dict[TargetType, str] = {TargetType.CUDA: "pdlite.kernels.cuda",
                                                TargetType.OpenCL: "pdlite.kernels.opencl"}

PLUGIN_LOADER = "pdlite.plugins"

_builtin_loaded = False


def load_builtin() -> None:
    """Import every built-in registering module (once); no plugins, no optional targets."""
    global _builtin_loaded
    if _builtin_loaded:
        return
    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)
    _builtin_loaded = True


def load_target_kernels(targets: Iterable[TargetType]) -> None:
    """Import the kernel package of each target in `targets` that has an optional one (ImportError
    when its backend, e.g. torch, is not installed)."""
    for t in sorted(set(targets)):
        mod = TARGET_KERNEL_MODULES.get(t)
        if mod is not None:
            importlib.import_module(mod)


def load_registries(targets: Iterable[TargetType] = (), *, plugins: bool = True) -> None:
    """Fill every registry: built-in ops, kernels, passes, converters and drivers, the optional
    kernel packages of `targets`, then (unless `plugins=False`) the installed plugins."""
    load_builtin()
    load_target_kernels(targets)
    if plugins:
        importlib.import_module(PLUGIN_LOADER).load_plugins()
