"""docs/ops.md is the op support table generated from the registries, and it is current."""
from __future__ import annotations

from pathlib import Path

import pytest

from pdlite.tools import ops

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_docs_ops_md_is_current():
    import importlib.util

    pytest.importorskip("torch")  # the CUDA column needs the CUDA kernels registered
    if importlib.util.find_spec("pyopencl") is None:  # the OpenCL column, the OpenCL kernels
        pytest.skip("the OpenCL column needs pip install pdlite[opencl]")
    want = ops.markdown(ops.rows())
    assert DOC.read_text() == want, "docs/ops.md is stale: run `pdlite ops --markdown docs/ops.md`"


def test_table_content():
    table = {r["op"]: r for r in ops.rows()}
    assert table["conv2d"]["host"] == "yes" and "pd_op.conv2d" in table["conv2d"]["pir"]
    assert table["conv2d"]["devices"] in ("yes", "cond.")
    assert table["softmax"]["host"] == "yes"
    assert set(table["conv2d"]) == {"op", "host", "cuda", "opencl", "devices", "pir"}
