"""Imports point down the layers of ../shared/STYLE.md, and no two modules import each other.

Every module of pdlite is parsed (ast) and every import of a pdlite module is collected: module
level, inside functions, and under `if TYPE_CHECKING:` alike (a type-only import is still a
dependency a reader has to follow). Layers, lowest first:

    core, errors, registries < operators < kernels < runtime < optimizer < nnadapter, delegate
    < model_parser < plugins < api (pdlite.lite, pdlite.inference, the package root)
    < tools, apps, integrations

`pdlite.registries` names the registering packages as strings (its manifest) and imports them
with importlib, so it sits at the bottom and any layer may call it.
An import of a module's own parent package (its `__init__`) is not an edge: a package's `__init__`
only re-exports or registers its own modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pdlite"

# (prefix, layer), longest prefix wins
LAYERS: dict[str, int] = {
    "pdlite.errors": 0, "pdlite.core": 0, "pdlite.registries": 0,
    "pdlite.operators": 1,
    "pdlite.kernels": 2,
    "pdlite.runtime": 3,
    "pdlite.optimizer": 4,
    "pdlite.nnadapter": 5, "pdlite.delegate": 5,
    "pdlite.model_parser": 6,
    "pdlite.plugins": 7,
    "pdlite.api": 8, "pdlite.lite": 8, "pdlite.inference": 8, "pdlite": 8,
    "pdlite.tools": 9, "pdlite.apps": 9, "pdlite.integrations": 9, "pdlite.__main__": 9,
}

# Cycles owned by work in progress elsewhere, each with its issue; remove an entry when it is fixed
# (the test fails on an entry that no longer is a cycle, so the list cannot go stale).
KNOWN_CYCLES: dict[frozenset[str], str] = {
}

KNOWN_UPWARD: dict[tuple[str, str], str] = {
}


def layer_of(mod: str) -> int:
    best = ""
    for prefix in LAYERS:
        if (mod == prefix or mod.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    if not best:
        raise AssertionError(f"{mod}: no layer for this module; add its package to LAYERS (and STYLE.md)")
    return LAYERS[best]


def _modules() -> dict[str, Path]:
    mods = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


MODULES = _modules()


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(mod: str) -> set[tuple[str, int]]:
    """(imported pdlite module, line) for every import statement anywhere in `mod`."""
    path = MODULES[mod]
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {(_resolve(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "pdlite"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pdlite":
                continue
            for a in node.names:  # `from pkg import module` imports the module
                full = f"{target}.{a.name}"
                found.add((full if full in MODULES else _resolve(target), node.lineno))
    # a module importing its own package (or itself) is no edge
    return {(m, ln) for m, ln in found if m and m != mod and not mod.startswith(m + ".")}


EDGES = {m: imports_of(m) for m in MODULES}


def _cycles() -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {m: sorted({d for d, _ in e}) for m, e in EDGES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            recurse = False
            for j in range(i, len(graph[v])):
                w = graph[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        layer_of(m)


def test_no_upward_import() -> None:
    bad = []
    for m, edges in EDGES.items():
        for d, line in sorted(edges):
            if layer_of(d) > layer_of(m) and (m, d) not in KNOWN_UPWARD:
                bad.append(f"{MODULES[m].relative_to(ROOT.parent)}:{line}: {m} (layer {layer_of(m)}) imports "
                           f"{d} (layer {layer_of(d)})")
    assert not bad, "imports pointing up the layers:\n" + "\n".join(bad)
    stale = [k for k in KNOWN_UPWARD if k[1] not in {d for d, _ in EDGES.get(k[0], ())}]
    assert not stale, f"KNOWN_UPWARD entries that are fixed now, remove them: {stale}"


def test_no_import_cycle() -> None:
    cycles = _cycles()
    new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not new, "modules importing each other (directly or round a cycle):\n" + "\n".join(map(str, new))
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not stale, f"KNOWN_CYCLES entries that are no longer cycles, remove them: {stale}"


@pytest.mark.parametrize("src, dst, expect", [
    ("pdlite.kernels.host.conv", "pdlite.runtime.instruction", "up"),
    ("pdlite.optimizer.analysis", "pdlite.kernels.registry", "down"),
])
def test_layer_order_is_the_documented_one(src: str, dst: str, expect: str) -> None:
    assert (layer_of(dst) > layer_of(src)) == (expect == "up")


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path, monkeypatch) -> None:
    """The parser must catch an import hidden in a function body (the checker can fail)."""
    src = "def f():\n    from pdlite.api.config import CxxConfig\n    return CxxConfig\nfrom . import registry\n"
    fake = ROOT / "kernels" / "_layering_probe.py"
    monkeypatch.setitem(MODULES, "pdlite.kernels._layering_probe", tmp_path / "_layering_probe.py")
    (tmp_path / "_layering_probe.py").write_text(src)
    assert not fake.exists()
    found = {d for d, _ in imports_of("pdlite.kernels._layering_probe")}
    assert "pdlite.api.config" in found
    assert "pdlite.kernels.registry" in found
