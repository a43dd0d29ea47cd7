"""Devices never fail where the host succeeds.

- A group that only computes shapes (PP-LiteSeg's `shape -> slice` whose output is an int32 size
  tensor) is not formed: OpenVINO built such a model and then failed inside the runtime. Checked on
  a synthetic graph (no device needed) and on the toolkit-like nets of tests/fixtures/pir_nets in
  both formats on intel_openvino and onnxruntime: no KernelError, no fallback warning needed, every
  output equal to the host's (floats to 1e-3 * max|host|, the NNAdapter tests' bar; integers exactly;
  the NMS boxes [M, 6] as a set of rows, since two boxes whose scores tie to ~1e-6 may swap places
  when the device reorders fp32 arithmetic before the host NMS).
- A device that builds a model but fails its first run, or whose first run gives outputs of other
  shapes or dtypes than the host kernels, falls back to the host with a warning
  (NNAdapterFallbackWarning) for that input signature, and the outputs are the host's.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from pdlite import CxxConfig, create_paddle_predictor
from pdlite.core.graph import Graph
from pdlite.core.program import BlockDesc, OpDesc, VarDesc
from pdlite.nnadapter.partition import partition, shape_only
from tests.conftest import assert_close_rel
from tests.nnadapter._models import DEVICES, NNAdapterFallbackWarning, need, subgraph_kernels

NETS = Path(__file__).resolve().parents[1] / "fixtures" / "pir_nets"
FOLDERS = sorted(f"{d.parent.name}/{d.name}" for d in NETS.glob("*/*") if (d / "case.npz").is_file()) \
    if NETS.is_dir() else []
REL = 1e-3


def _predictor(folder: Path, device: str | None):
    cfg = CxxConfig()
    cfg.set_model_dir(folder)
    if device:
        cfg.set_nnadapter_device_names([device])
    return create_paddle_predictor(cfg)


def _inputs(folder: Path) -> dict[str, np.ndarray]:
    z = np.load(folder / "case.npz")
    return {k[3:]: z[k] for k in z.files if k.startswith("in:")}


def _same_rows(g: np.ndarray, h: np.ndarray, what: str) -> None:
    """Every host row has its own device row within 1e-3 * max|host| (rows may come in another order)."""
    tol = REL * float(np.max(np.abs(h))) if h.size else 0.0
    free = list(range(len(g)))
    for r, row in enumerate(h):
        match = next((j for j in free if np.max(np.abs(g[j] - row)) <= tol), None)
        assert match is not None, f"{what}: host row {r} {row} has no device row within {tol:.3g}"
        free.remove(match)


def _same(got: list[np.ndarray], host: list[np.ndarray], what: str, nms: int | None = None) -> None:
    assert len(got) == len(host), what
    for i, (g, h) in enumerate(zip(got, host)):
        assert g.dtype == h.dtype and g.shape == h.shape, f"{what} output {i}: {g.dtype}{g.shape} vs {h.dtype}{h.shape}"
        if i == nms:
            _same_rows(g, h, f"{what} output {i}")
        elif h.dtype.kind in "biu":
            assert np.array_equal(g, h), f"{what} output {i}: integer outputs differ"
        else:
            assert_close_rel(g, h, REL, f"{what} output {i}")


def _shape_graph() -> Graph:
    """x -> conv2d -> relu -> y, and x -> shape -> slice -> hw (int32), hw -> bilinear_interp_v2(y)."""
    f32 = {n: VarDesc(n, dtype=5, shape=[1, 3, 8, 8]) for n in ("x", "c", "r", "out")}
    i32 = {n: VarDesc(n, dtype=2, shape=[4 if n == "s" else 2]) for n in ("s", "hw")}
    ops = [OpDesc("conv2d", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["c"]}),
           OpDesc("relu", {"X": ["c"]}, {"Out": ["r"]}),
           OpDesc("shape", {"Input": ["x"]}, {"Out": ["s"]}),
           OpDesc("slice", {"Input": ["s"]}, {"Out": ["hw"]}, {"axes": [0], "starts": [2], "ends": [4]}),
           OpDesc("bilinear_interp_v2", {"X": ["r"], "OutSize": ["hw"]}, {"Out": ["out"]})]
    w = {"w": VarDesc("w", dtype=5, shape=[3, 3, 1, 1], persistable=True)}
    return Graph(BlockDesc(0, -1, {**f32, **i32, **w}, ops))


def test_shape_only_groups_are_not_formed() -> None:
    g = _shape_graph()
    by_type = {n.op.type: n for n in g.op_nodes()}
    assert shape_only([by_type["shape"], by_type["slice"]])
    assert not shape_only([by_type["conv2d"], by_type["relu"]])
    assert not shape_only([by_type["shape"], by_type["slice"], by_type["bilinear_interp_v2"]])
    # the shape ops alone are supported: no group at all
    assert partition(g, {by_type["shape"].id, by_type["slice"].id}) == []
    # conv + relu are grouped, the shape subgraph beside them is not
    groups = partition(g, {n.id for t, n in by_type.items() if t != "bilinear_interp_v2"})
    assert [[n.op.type for n in grp] for grp in groups] == [["conv2d", "relu"]]


@pytest.mark.skipif(not FOLDERS, reason=f"no nets in {NETS} (tools/make_pir_nets.py)")
@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("folder", FOLDERS)
def test_device_runs_what_the_host_runs(folder: str, device: str) -> None:
    need(device)
    ins = _inputs(NETS / folder)
    host = [np.array(o, copy=True) for o in _predictor(NETS / folder, None).predict(dict(ins))]
    pred = _predictor(NETS / folder, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # the device really runs its subgraphs
        for _ in range(2):
            _same([np.array(o, copy=True) for o in pred.predict(dict(ins))], host, f"{folder} on {device}",
                  nms=0 if folder.startswith("picodet_like") else None)
    for k in subgraph_kernels(pred):
        assert not shape_only_block(k.block.ops), f"{folder}: a shape-only subgraph was formed on {device}"
    if folder.startswith("liteseg_like"):
        assert subgraph_kernels(pred), f"{folder}: the convolutions should run on {device}"


def shape_only_block(ops: list[OpDesc]) -> bool:
    return all(op.type in ("shape", "shape64", "slice", "cast", "concat", "scale", "elementwise_mul") for op in ops)


def _lcnet_on_host() -> tuple[Path, dict[str, np.ndarray], list[np.ndarray]]:
    """The PP-LCNet-like PIR net, its inputs, and its outputs on the host kernels."""
    folder = NETS / "lcnet_like" / "pir"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing (tools/make_pir_nets.py)")
    ins = _inputs(folder)
    return folder, ins, [np.array(o, copy=True) for o in _predictor(folder, None).predict(dict(ins))]


@pytest.mark.parametrize("device", list(DEVICES))
def test_first_run_failure_falls_back_to_host(device: str, monkeypatch) -> None:
    need(device)
    from pdlite.nnadapter.registry import get_driver

    folder, ins, host = _lcnet_on_host()

    def broken(self, compiled, inputs):
        raise RuntimeError("the device built the model but cannot run it")

    monkeypatch.setattr(get_driver(device), "run", broken)
    pred = _predictor(folder, device)
    with pytest.warns(NNAdapterFallbackWarning, match=f"{device}.*cannot run it"):
        _same([np.array(o, copy=True) for o in pred.predict(dict(ins))], host, f"fallback on {device}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNAdapterFallbackWarning)  # warned once; later runs stay on the host
        _same([np.array(o, copy=True) for o in pred.predict(dict(ins))], host, f"fallback on {device}, run 2")
    assert subgraph_kernels(pred)


@pytest.mark.parametrize("device", list(DEVICES))
def test_first_run_with_wrong_dtypes_falls_back_to_host(device: str, monkeypatch) -> None:
    need(device)
    from pdlite.nnadapter.registry import get_driver

    folder, ins, host = _lcnet_on_host()
    real_run = get_driver(device).run

    def float64_outputs(self, compiled, inputs):
        return [np.asarray(o, dtype=np.float64) for o in real_run(self, compiled, inputs)]

    monkeypatch.setattr(get_driver(device), "run", float64_outputs)
    pred = _predictor(folder, device)
    with pytest.warns(NNAdapterFallbackWarning, match=f"{device}.*float64.*float32.*with host kernels"):
        _same([np.array(o, copy=True) for o in pred.predict(dict(ins))], host, f"dtype fallback on {device}")
