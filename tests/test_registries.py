"""One registry loader: `load_registries()` alone fills every registry, in a fresh process.

A fresh interpreter calls `load_registries()` (every optional target whose backend is installed
included) and lists what each registry holds; a second one does the same and then imports every
module of pdlite. Any entry the second process has more means a module registers something that
the loader does not reach (add it to its package's `__init__`, or the package to
`pdlite.registries.BUILTIN_MODULES`): what is registered must never depend on what else happened
to be imported.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pdlite.core.registry import Registry

ROOT = Path(__file__).resolve().parents[1]

SNAPSHOT = """
import importlib, json, pkgutil, sys
import pdlite
from pdlite.registries import TARGET_KERNEL_MODULES, load_registries

targets = []
for t, mod in TARGET_KERNEL_MODULES.items():
    try:
        load_registries([t])
        targets.append(t.name)
    except ImportError:
        pass
load_registries()

from pdlite.kernels.registry import KERNELS
from pdlite.model_parser.pir_convert import PIR_OPS
from pdlite.nnadapter.registry import CONVERTERS, DRIVERS
from pdlite.operators.registry import OPS
from pdlite.optimizer.pass_registry import PASSES

def snap():
    return {"ops": sorted(OPS), "kernels": sorted(map(str, KERNELS)), "passes": sorted(PASSES),
            "converters": sorted(CONVERTERS), "drivers": sorted(DRIVERS), "pir_ops": sorted(PIR_OPS)}

before = snap()
added = {}
if sys.argv[1] == "all":
    for info in pkgutil.walk_packages(pdlite.__path__, "pdlite."):
        if info.name.endswith("__main__") or (info.name.startswith("pdlite.kernels.cuda") and "CUDA" not in targets):
            continue
        prev = snap()
        try:
            importlib.import_module(info.name)
        except Exception:
            continue  # optional dependencies of tools/apps: not a registering module
        now = snap()
        new = {k: sorted(set(now[k]) - set(prev[k])) for k in now if set(now[k]) - set(prev[k])}
        if new:
            added[info.name] = new
print(json.dumps({"before": before, "added": added, "targets": targets}))
"""


def _snapshot(mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SNAPSHOT, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_load_registries_alone_registers_everything() -> None:
    only = _snapshot("loader")
    assert all(only["before"][k] for k in ("ops", "kernels", "passes", "converters", "drivers", "pir_ops"))
    assert "subgraph" in only["before"]["ops"], "the subgraph op is registered with the other ops"
    assert "subgraph_detect_pass" in only["before"]["passes"]
    assert any(k.startswith("subgraph/NNAdapter") for k in only["before"]["kernels"])
    everything = _snapshot("all")
    assert everything["before"] == only["before"], "load_registries() is not deterministic across processes"
    assert not everything["added"], (
        "modules that register something load_registries() does not import (list them in their package's "
        f"__init__ or in pdlite.registries.BUILTIN_MODULES): {json.dumps(everything['added'], indent=1)}")


def test_registries_are_registry_objects() -> None:
    from pdlite.kernels.registry import KERNELS
    from pdlite.model_parser.pir_convert import PIR_OPS
    from pdlite.nnadapter.registry import CONVERTERS, DRIVERS
    from pdlite.operators.registry import OPS
    from pdlite.optimizer.pass_registry import PASSES

    for reg in (OPS, KERNELS, PASSES, CONVERTERS, DRIVERS, PIR_OPS):
        assert isinstance(reg, Registry)
