"""Host proposal, anchor and sampling kernels (generate_proposals(_v2), anchor_generator,
distribute_fpn_proposals, collect_fpn_proposals, density_prior_box, grid_sampler) against Paddle's
legacy executor on drawn inputs, and density_prior_box (gone from Paddle 3) against a literal loop of
Paddle 2's kernel. The conformance zoo (det_proposals, det_fpn, grid_sampler_modes) checks the
saved-model path. Tolerance: floats max|got - ref| <= 1e-5 * max(1, max|ref|); integers exact.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdlite.errors import InputError
from tests.kernels._checks import check, infer
from tests.kernels._util import paddle_legacy
from tests.kernels._util import run_op as _run_op

F32 = np.float32


def run_op(op_type: str, ins: dict, attrs: dict, outs: dict | None = None) -> dict:
    """The host kernel's outputs (row counts depend on the values: no static shape to compare)."""
    return _run_op(op_type, ins, attrs, outs, check_shapes=False)


def _compare(got: dict, ref: dict) -> None:
    for slot, refs in ref.items():
        assert len(got[slot]) == len(refs), f"{slot}: {len(got[slot])} tensors, Paddle {len(refs)}"
        for i, (g, r) in enumerate(zip(got[slot], refs)):
            r = np.asarray(r)
            assert g.shape == r.shape, f"{slot}[{i}]: shape {g.shape} != Paddle's {r.shape}"
            if r.dtype.kind in "iu":
                assert np.array_equal(g, r), f"{slot}[{i}]: {g.ravel().tolist()} != {r.ravel().tolist()}"
            else:
                check(g, r, f"{slot}[{i}]", tol=1e-5)


ANCHOR_ATTRS = [
    {"anchor_sizes": [16.0, 40.0], "aspect_ratios": [0.5, 1.0, 2.0], "variances": [0.1, 0.1, 0.2, 0.2],
     "stride": [8.0, 10.0], "offset": 0.3},
    {"anchor_sizes": [32.0], "aspect_ratios": [1.0, 3.0], "variances": [1.0, 1.0, 1.0, 1.0], "stride": [16.0, 16.0],
     "offset": 0.5},
]


@pytest.mark.parametrize("attrs", ANCHOR_ATTRS)
def test_anchor_generator_against_paddle(attrs: dict) -> None:
    ins = {"Input": np.zeros((1, 2, 3, 4), F32)}
    outs = {"Anchors": 1, "Variances": 1}
    _compare(run_op("anchor_generator", ins, attrs, outs), paddle_legacy("anchor_generator", ins, attrs, outs))


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("case", range(4))
def test_generate_proposals_against_paddle(v1: bool, case: int) -> None:
    rng = np.random.default_rng(case * 2 + v1)
    n, a, h, w = 2, 3, 4, 5
    anchors = run_op("anchor_generator", {"Input": np.zeros((1, 1, h, w), F32)},
                     {**ANCHOR_ATTRS[0], "aspect_ratios": [0.5, 1.0, 2.0][:a], "anchor_sizes": [24.0]},
                     {"Anchors": 1, "Variances": 1})
    scores = rng.uniform(0, 1, (n, a, h, w)).astype(F32)
    deltas = rng.normal(0, 0.5 + case, (n, 4 * a, h, w)).astype(F32)
    shape = rng.uniform(30, 50, (n, 2)).astype(F32)
    attrs = [{"pre_nms_topN": 30, "post_nms_topN": 10, "nms_thresh": 0.5, "min_size": 2.0, "eta": 1.0},
             {"pre_nms_topN": -1, "post_nms_topN": -1, "nms_thresh": 0.7, "min_size": 0.1, "eta": 0.6},
             {"pre_nms_topN": 60, "post_nms_topN": 5, "nms_thresh": 0.3, "min_size": 6.0, "eta": 1.0},
             {"pre_nms_topN": 8, "post_nms_topN": 20, "nms_thresh": 0.9, "min_size": 40.0, "eta": 1.0}][case]
    ins = {"Scores": scores, "BboxDeltas": deltas, "Anchors": anchors["Anchors"][0], "Variances": anchors["Variances"][0]}
    if v1:
        op_type = "generate_proposals"
        ins["ImInfo"] = np.concatenate([shape, np.full((n, 1), 1.25, F32)], axis=1)
    else:
        op_type = "generate_proposals_v2"
        ins["ImShape"] = shape
        attrs["pixel_offset"] = case % 2 == 0
    outs = {"RpnRois": 1, "RpnRoiProbs": 1, "RpnRoisNum": 1}
    _compare(run_op(op_type, ins, attrs, outs), paddle_legacy(op_type, ins, attrs, outs))


@pytest.mark.parametrize("counts", [[7, 5], [12], [0, 9, 3]])
@pytest.mark.parametrize("pixel_offset", [True, False])
def test_distribute_fpn_proposals_against_paddle(counts: list[int], pixel_offset: bool) -> None:
    rng = np.random.default_rng(len(counts) + pixel_offset)
    r = sum(counts)
    xy = rng.uniform(0, 50, (r, 2))
    rois = np.concatenate([xy, xy + rng.uniform(0, 1, (r, 2)) ** 2 * 500 + 1], axis=1).astype(F32)
    attrs = {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 224, "pixel_offset": pixel_offset}
    ins = {"FpnRois": rois, "RoisNum": np.array(counts, np.int32)}
    outs = {"MultiFpnRois": 4, "RestoreIndex": 1, "MultiLevelRoIsNum": 4}
    _compare(run_op("distribute_fpn_proposals", ins, attrs, outs),
             paddle_legacy("distribute_fpn_proposals", ins, attrs, outs))


@pytest.mark.parametrize("top", [3, 8, 50])
def test_collect_fpn_proposals_against_paddle(top: int) -> None:
    rng = np.random.default_rng(top)
    nums = [np.array(c, np.int32) for c in ([2, 3], [4, 0], [1, 2])]
    rois = [rng.uniform(0, 40, (int(c.sum()), 4)).astype(F32) for c in nums]
    scores = [rng.uniform(0, 1, (int(c.sum()), 1)).astype(F32) for c in nums]
    ins = {"MultiLevelRois": rois, "MultiLevelScores": scores, "MultiLevelRoIsNum": nums}
    outs = {"FpnRois": 1, "RoisNum": 1}
    _compare(run_op("collect_fpn_proposals", ins, {"post_nms_topN": top}, outs),
             paddle_legacy("collect_fpn_proposals", ins, {"post_nms_topN": top}, outs))


@pytest.mark.parametrize("mode,padding,align", list(itertools.product(("bilinear", "nearest"),
                                                                        ("zeros", "border", "reflection"),
                                                                        (True, False))))
@pytest.mark.parametrize("dims", [2, 3])
def test_grid_sampler_against_paddle(mode: str, padding: str, align: bool, dims: int) -> None:
    rng = np.random.default_rng(dims)
    x = rng.normal(0, 1, (2, 3, 4, 5, 6)[: 2 + dims]).astype(F32)
    grid = rng.uniform(-1.4, 1.4, (2, 3, 4, 5)[: 1 + dims] + (dims,)).astype(F32)
    grid[0, 0, 0] = 1.0  # exactly on the edge
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    ins = {"X": x, "Grid": grid}
    got = _run_op("grid_sampler", ins, attrs, {"Output": 1})
    _compare(got, paddle_legacy("grid_sampler", ins, attrs, {"Output": 1}))


def _density_prior_box_loop(fh: int, fw: int, ih: int, iw: int, a: dict) -> np.ndarray:
    """Paddle 2's DensityPriorBoxOpKernel, loop for loop (double arithmetic, float stores)."""
    sw, sh = (a["step_w"], a["step_h"]) if a["step_w"] and a["step_h"] else (iw / fw, ih / fh)
    avg = int((sw + sh) * 0.5)
    out = []
    for h, w in itertools.product(range(fh), range(fw)):
        cx, cy = (w + a["offset"]) * sw, (h + a["offset"]) * sh
        for size, dens in zip(a["fixed_sizes"], a["densities"]):
            shift = avg // dens
            for r in a["fixed_ratios"]:
                bw, bh = size * math.sqrt(r), size / math.sqrt(r)
                for di, dj in itertools.product(range(dens), range(dens)):
                    x = cx - avg / 2.0 + shift / 2.0 + dj * shift
                    y = cy - avg / 2.0 + shift / 2.0 + di * shift
                    out.append([max((x - bw / 2) / iw, 0.0), max((y - bh / 2) / ih, 0.0),
                                min((x + bw / 2) / iw, 1.0), min((y + bh / 2) / ih, 1.0)])
    return np.array(out).reshape(fh, fw, -1, 4)


@pytest.mark.parametrize("flatten", [False, True])
def test_density_prior_box_literal_loop(flatten: bool) -> None:
    a = {"fixed_sizes": [8.0, 16.0], "fixed_ratios": [1.0, 2.0], "densities": [2, 1], "step_w": 0.0, "step_h": 0.0,
         "offset": 0.5, "clip": True, "flatten_to_2d": flatten, "variances": [0.1, 0.1, 0.2, 0.2]}
    ins = {"Input": np.zeros((1, 2, 3, 4), F32), "Image": np.zeros((1, 3, 24, 32), F32)}
    got = _run_op("density_prior_box", ins, a, {"Boxes": 1, "Variances": 1})
    ref = _density_prior_box_loop(3, 4, 24, 32, a)
    ref = ref.reshape(-1, 4) if flatten else ref
    check(got["Boxes"][0], ref, "density_prior_box")
    check(got["Variances"][0], np.broadcast_to(np.array([0.1, 0.1, 0.2, 0.2]), ref.shape), "variances")


def test_proposal_shape_errors_name_the_op() -> None:
    ins = {"Scores": np.zeros((1, 3, 4, 5), F32), "BboxDeltas": np.zeros((1, 8, 4, 5), F32),
           "ImShape": np.zeros((1, 2), F32), "Anchors": np.zeros((4, 5, 3, 4), F32),
           "Variances": np.zeros((4, 5, 3, 4), F32)}
    with pytest.raises(InputError, match="generate_proposals_v2.*BboxDeltas"):
        infer("generate_proposals_v2", ins, {}, {"RpnRois": 1, "RpnRoiProbs": 1})
    with pytest.raises(InputError, match="grid_sampler.*Grid"):
        infer("grid_sampler", {"X": np.zeros((1, 2, 3, 3), F32), "Grid": np.zeros((1, 3, 3, 3), F32)}, {},
              {"Output": 1})
