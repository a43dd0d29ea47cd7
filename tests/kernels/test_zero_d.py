"""0-D tensors stay 0-D through host kernels, the API tensor, and device subgraphs.

`np.ascontiguousarray` returns at least a 1-D array, so a 0-D value that passes through it comes
back as shape [1]: Paddle 3 keeps 0-D (gather_nd with a full index, einsum to a scalar, expand to
[], a slice with every dim decreased). tests/test_layering.py-style scan: no module in pdlite uses
it (np.asarray(x, order="C") keeps the rank).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tests.kernels._util import run1

ROOT = Path(__file__).resolve().parents[2]


def test_gather_nd_full_index_is_0d() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = run1("gather_nd", {"X": x, "Index": np.array([2, 1], dtype=np.int64)})
    assert out.shape == () and out == x[2, 1]


def test_einsum_to_scalar_is_0d() -> None:
    a = np.arange(4, dtype=np.float32)
    out = run1("einsum", {"Operands": [a, a]}, {"equation": "i,i->"})
    assert out.shape == () and out == np.float32(14)


def test_expand_0d_to_0d() -> None:
    out = run1("expand_v2", {"X": np.array(2.5, dtype=np.float32)}, {"shape": []})
    assert out.shape == () and out == np.float32(2.5)


def test_api_tensor_keeps_0d() -> None:
    from pdlite.api.tensor import Tensor

    t = Tensor("x")
    t.share_data(np.array(3, dtype=np.int32))
    assert t.shape() == [] and t.numpy().shape == ()


def test_no_ascontiguousarray_in_pdlite() -> None:
    """np.ascontiguousarray turns 0-D into [1]; pdlite uses np.asarray(x, order="C") instead."""
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "pdlite").rglob("*.py"))
           for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bascontiguousarray\(", line)]
    assert not bad, f"np.ascontiguousarray (0-D -> [1]) used at {bad}; use np.asarray(x, order='C')"
