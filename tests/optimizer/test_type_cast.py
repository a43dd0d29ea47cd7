"""type_target_cast_pass with a second target defined here: a fake FPGA with a relu kernel.

FPGA tensors are wrapped (`FpgaTensor`) so that a host kernel fed one, or an FPGA kernel fed a
host array, fails: outputs can only match the host run if io_copy ops sit exactly where the
targets change.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pdlite.core.types import DataLayoutType, Place, PrecisionType, TargetType
from pdlite.errors import UnsupportedOpError
from pdlite.kernels.registry import KERNELS, Kernel, KernelKey, TensorType, register_kernel
from pdlite.registries import load_registries
from tests.optimizer.util import BASE, Builder, optimize, run_result

FPGA, HOST, FP32, NCHW = TargetType.FPGA, TargetType.Host, PrecisionType.FP32, DataLayoutType.NCHW
RNG = np.random.default_rng(6)


class FpgaTensor:
    """Device memory stand-in: has a shape and dtype, but is no NumPy array."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.shape = data.shape
        self.dtype = data.dtype


class FpgaRelu(Kernel):
    def run(self, ins):
        x = ins["X"][0]
        assert isinstance(x, FpgaTensor), f"FPGA relu got {type(x).__name__}"
        return {"Out": [FpgaTensor(np.maximum(x.data, 0))]}


class HostToFpga(Kernel):
    def run(self, ins):
        x = ins["Input"][0]
        assert isinstance(x, np.ndarray)
        return {"Out": [FpgaTensor(x.copy())]}


class FpgaToHost(Kernel):
    def run(self, ins):
        x = ins["Input"][0]
        assert isinstance(x, FpgaTensor)
        return {"Out": [x.data.copy()]}


@pytest.fixture
def fpga() -> Iterator[None]:
    load_registries()
    keys = [KernelKey("relu", FPGA, FP32, NCHW), KernelKey("io_copy", FPGA, FP32, NCHW, "host_to_fpga"),
            KernelKey("io_copy", HOST, FP32, NCHW, "fpga_to_host")]
    register_kernel("relu", target=FPGA)(FpgaRelu)
    register_kernel("io_copy", target=FPGA, alias="host_to_fpga", inputs={"Input": TensorType(HOST, FP32, NCHW)},
                    outputs={"Out": TensorType(FPGA, FP32, NCHW)})(HostToFpga)
    register_kernel("io_copy", target=HOST, alias="fpga_to_host", inputs={"Input": TensorType(FPGA, FP32, NCHW)},
                    outputs={"Out": TensorType(HOST, FP32, NCHW)})(FpgaToHost)
    try:
        yield
    finally:
        for k in keys:
            KERNELS.remove(k)


def _program() -> Builder:
    """x -> relu a (FPGA) -> sigmoid (host) -> add(., relu b) ; x -> relu b (FPGA); relu c (FPGA) fetched."""
    b = Builder()
    x = b.feed("x", [2, 5])
    b.op("relu", {"X": x}, {"Out": "ra"})
    b.op("relu", {"X": x}, {"Out": "rb"})
    b.op("sigmoid", {"X": "ra"}, {"Out": "s"})
    b.op("elementwise_add", {"X": "s", "Y": "rb"}, {"Out": "sum"})
    b.op("relu", {"X": "sum"}, {"Out": "out"})
    b.fetch("out", "sum")
    return b


def _places() -> list[Place]:
    return [Place(FPGA, FP32, NCHW), Place(HOST, FP32, NCHW)]


def test_io_copies_inserted_exactly_where_targets_change(fpga):
    b = _program()
    res = optimize(b, BASE, _places())
    nodes = res.graph.topological_order()
    kernels = {n.op.outputs[next(iter(n.op.outputs))][0]: n.info["kernel"].key for n in nodes}
    assert all(kernels[n].target == FPGA for n in ("ra", "rb"))
    copies = [n for n in nodes if n.op.type == "io_copy"]
    # x -> FPGA once (shared by both relus), ra and rb back to the host, sum to the FPGA, out back (fetched)
    assert len(copies) == 5
    src = sorted(c.op.input("Input") for c in copies)
    assert src == ["out/FPGA", "ra", "rb", "sum", "x"]
    feeds = {"x": RNG.standard_normal((2, 5)).astype(np.float32)}
    got = run_result(res, feeds)
    ref = run_result(optimize(b, BASE), feeds)
    assert all(isinstance(g, np.ndarray) for g in got)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_host_only_places_insert_no_copies(fpga):
    res = optimize(_program(), BASE)
    assert not any(n.op.type == "io_copy" for n in res.graph.op_nodes())


def test_missing_copy_kernel_is_reported(fpga):
    KERNELS.remove(KernelKey("io_copy", HOST, FP32, NCHW, "fpga_to_host"))
    with pytest.raises(UnsupportedOpError, match="io_copy"):
        optimize(_program(), BASE, _places())
