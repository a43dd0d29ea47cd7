"""`pdlite inspect` prints, per op type, whether a host kernel exists, how many of its ops an NNAdapter
device takes, and the converters' reasons for the others."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"


def _inspect(model: Path) -> str:
    res = subprocess.run([sys.executable, "-m", "pdlite", "inspect", str(model)], capture_output=True, text=True,
                         check=True)
    return res.stdout


def _row(text: str, op: str) -> str:
    section = text.split("placement (", 1)[1]
    return next(line for line in section.splitlines() if line.split()[:1] == [op])


@pytest.mark.skipif(not (ZOO / "math_misc_ops").is_dir(), reason="conformance zoo missing")
def test_inspect_says_where_each_op_type_runs_and_why_not_on_a_device() -> None:
    out = _inspect(ZOO / "math_misc_ops")
    gather = _row(out, "gather_nd")  # 3 gather_nd ops: 2 with an empty index stay on the host
    assert gather.split()[1:3] == ["yes", "1/3"], gather
    assert "non-empty last dim of Index (x2)" in gather
    eye = _row(out, "eye")
    assert eye.split()[1:3] == ["yes", "0/2"] and "no converter" in eye
    fill = _row(out, "fill_constant")
    assert fill.split()[1:3] == ["yes", "2/2"]


def test_ops_inside_control_flow_blocks_are_host_only() -> None:
    """A while / conditional_block runs its block on the host: inspect says so for every op inside it."""
    from pdlite.model_parser import load_model
    from pdlite.tools.inspect_model import placement

    folder = Path(__file__).resolve().parents[1] / "fixtures" / "conformance" / "cf_cond_in_loop"
    m = load_model(folder)
    table = placement(m.program, {k: t.array for k, t in m.params.items()})
    n, k, why = table["elementwise_sub"]
    assert (n, k) == (1, 0) and "inside a conditional_block block" in next(iter(why))
    n, k, why = table["increment"]
    assert (n, k) == (1, 0) and "inside a while block" in next(iter(why))
