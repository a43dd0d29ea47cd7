"""Ops are described once: kernels and converters read `op.attrs[k]` and never re-state a default.

The analysis attaches every op definition's attribute defaults when it builds the graph (and the
`.nb` reader when it reads the program), so a kernel or converter that writes
`attrs.get("epsilon", 1e-5)` for an attribute its op defines a default for carries a second
copy of the op's semantics, which can drift. For every registered host and CUDA kernel class and
every NNAdapter converter, this test reads its source and fails on such a copy (the attribute is
then read as `attrs["epsilon"]`). It also checks that the analysis really attaches the defaults.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from pdlite.registries import load_registries


def _gets(obj) -> list[tuple[str, int]]:
    """(attribute name, line) of every `<something attrs-like>.get("name", default)` in obj's source."""
    try:
        src = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return []
    found = []
    for n in ast.walk(ast.parse(src)):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
                and len(n.args) == 2 and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
            recv = ast.unparse(n.func.value)
            if "attrs" in recv or recv in ("a", "at"):
                found.append((n.args[0].value, n.lineno))
    return found


def _restated(users: dict[object, set[str]]) -> list[str]:
    from pdlite.operators.registry import OPS

    bad = []
    for obj, op_types in users.items():
        if not getattr(obj, "__module__", "").startswith("pdlite."):
            continue  # plugins keep their own style
        defaults = set.intersection(*(set(OPS[t].defaults) for t in op_types if t in OPS)) if op_types else set()
        for name, line in _gets(obj):
            if name in defaults:
                where = f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1] + line - 1}"
                bad.append(f"{where}: {getattr(obj, '__qualname__', obj)} re-states the default of {name!r} "
                           f"({', '.join(sorted(op_types))} define it)")
    return bad


def test_kernels_do_not_restate_op_defaults() -> None:
    from pdlite.core.types import TargetType
    from pdlite.kernels.registry import KERNELS

    load_registries()
    for target in (TargetType.CUDA, TargetType.OpenCL):
        try:
            load_registries([target])
        except ImportError:  # torch / pyopencl not installed: that target's kernels are not there to check
            pass
    users: dict[object, set[str]] = {}
    for key, kd in KERNELS.items():
        for cls in kd.cls.__mro__:  # CUDA variants per precision are made with type(): read their bases
            if cls.__module__.startswith("pdlite.kernels.") and cls.__module__ != "pdlite.kernels.registry":
                users.setdefault(cls, set()).add(key.op_type)
    bad = _restated(users)
    assert not bad, "kernels carrying their own attribute defaults:\n" + "\n".join(sorted(bad))


def test_converters_do_not_restate_op_defaults() -> None:
    from pdlite.nnadapter.registry import CONVERTERS

    load_registries()
    users: dict[object, set[str]] = {}
    for op_type, conv in CONVERTERS.items():
        users.setdefault(conv.convert, set()).add(op_type)
        if conv.supports is not None:
            users.setdefault(conv.supports, set()).add(op_type)
    bad = _restated(users)
    assert not bad, "converters carrying their own attribute defaults:\n" + "\n".join(sorted(bad))


def test_the_analysis_attaches_defaults_to_every_op() -> None:
    from pdlite.core.program import BlockDesc, OpDesc, Program, VarDesc
    from pdlite.core.types import Place
    from pdlite.operators.registry import OPS
    from pdlite.optimizer.analysis import analyse

    block = BlockDesc(0, -1, {n: VarDesc(n, shape=[2, 3]) for n in ("x", "y", "z")},
                      [OpDesc("dropout", {"X": ["x"]}, {"Out": ["y"]}, {}),
                       OpDesc("layer_norm", {"X": ["y"]}, {"Y": ["z"]}, {})])
    program = Program([block])
    analyse(program, {}, [Place()], ["static_kernel_pick_pass"])
    for op in program.main.ops:
        for k, v in OPS[op.type].defaults.items():
            assert op.attrs[k] == v, f"{op.type}.{k} not attached"
