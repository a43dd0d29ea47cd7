"""The fast multiclass-NMS path (pdlite/kernels/host/nms.py: `suppressing_pairs` + `greedy_keep`) keeps
exactly what Paddle's NMSFast keeps.

- Against the one-by-one definition (each candidate, in score order, tested with `jaccard` against every
  kept box), on drawn inputs the fast path must handle: more candidates than one block, clusters of heavy
  overlap, IoUs exactly at the threshold (duplicate and half-shifted boxes), inverted, zero-area and NaN
  boxes, negative thresholds, both `normalized` forms, and suppression chains longer than the vectorised
  rounds. Kept indices and their order must be equal.
- Against Paddle's own multiclass_nms3 on a PP-YOLOE-like head (2000 boxes, 3 classes, nms_top_k 1000,
  keep_top_k 300, tied scores) and with NaN boxes, and Paddle's matrix_nms on 400 boxes (dense IoU, the
  partial-sort shortcut with and without ties): Out to 1e-5 of max(1, max|ref|), Index and counts exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.kernels.host.nms import greedy_keep, jaccard, nms_fast, suppressing_pairs
from tests.kernels._checks import check
from tests.kernels._util import paddle_legacy
from tests.kernels._util import run_op as _run_op


def one_by_one(boxes: np.ndarray, scores: np.ndarray, attrs: dict) -> list[int]:
    """Paddle's NMSFast literally (fixed threshold): candidates over score_threshold, stable by score, the
    first nms_top_k; keep one when its IoU with every kept box is <= nms_threshold."""
    dt = scores.dtype.type
    cand = np.flatnonzero(scores > dt(attrs["score_threshold"]))
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    if -1 < attrs["nms_top_k"] < len(cand):
        cand = cand[:attrs["nms_top_k"]]
    keep: list[int] = []
    for i in cand:
        if not keep or np.all(jaccard(boxes[i], boxes[keep], attrs["normalized"]) <= dt(attrs["nms_threshold"])):
            keep.append(int(i))
    return keep


def _attrs(**kw) -> dict:
    return {"score_threshold": 0.05, "nms_top_k": -1, "nms_threshold": 0.5, "nms_eta": 1.0, "normalized": True,
            **kw}


def _random(rng: np.random.Generator, m: int, size: float = 100.0) -> np.ndarray:
    xy = rng.uniform(0, 640, (m, 2))
    wh = rng.uniform(4, size, (m, 2))
    return np.concatenate([xy, xy + wh], 1).astype(np.float32)


def _clustered(rng: np.random.Generator, m: int) -> np.ndarray:
    centers, size = rng.uniform(50, 590, (12, 2)), rng.uniform(20, 150, (12, 2))
    o = rng.integers(0, 12, m)
    xy = centers[o] + rng.normal(0, 0.1, (m, 2)) * size[o]
    wh = size[o] * rng.uniform(0.8, 1.2, (m, 2))
    return np.concatenate([xy - wh / 2, xy + wh / 2], 1).astype(np.float32)


def _odd(rng: np.random.Generator, m: int) -> np.ndarray:
    """Duplicates, half-shifted copies (IoU exactly 1/3 or at 0.5 on integer grids), inverted, zero-area, NaN."""
    b = np.round(_random(rng, m, 40.0))
    b[1::7] = b[0::7][: len(b[1::7])]  # duplicates: IoU 1
    b[2::7, [0, 2]] = b[0::7][: len(b[2::7]), [0, 2]] + 20  # shifted copies
    b[3::11, [0, 2]] = b[3::11, [2, 0]]  # inverted in x
    b[4::13, 2] = b[4::13, 0]  # zero width
    b[5::17, 1] = np.nan
    return b.astype(np.float32)


CASES = [
    ("random", _random, _attrs()),
    ("random_top_k", _random, _attrs(nms_top_k=300, nms_threshold=0.3)),
    ("clustered", _clustered, _attrs(nms_threshold=0.7)),
    ("clustered_unnormalized", _clustered, _attrs(nms_threshold=0.6, normalized=False)),
    ("odd_boxes", _odd, _attrs(nms_threshold=0.5)),
    ("odd_boxes_third", _odd, _attrs(nms_threshold=1 / 3, normalized=False)),
    ("negative_threshold", _random, _attrs(nms_threshold=-0.1)),
    ("zero_threshold", _clustered, _attrs(nms_threshold=0.0)),
]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("m", [7, 700])
@pytest.mark.parametrize("name,draw,attrs", CASES, ids=[c[0] for c in CASES])
def test_fast_nms_keeps_what_the_definition_keeps(name: str, draw, attrs: dict, m: int, ties: bool) -> None:
    rng = np.random.default_rng(m + 31 * ties + len(name))
    boxes = draw(rng, m)
    scores = rng.uniform(0, 1, m).astype(np.float32)
    if ties:
        scores = np.round(scores, 1).astype(np.float32)
    got = nms_fast(boxes, scores, attrs)
    assert got == one_by_one(boxes, scores, attrs), name


def test_greedy_keep_decides_long_chains_in_order() -> None:
    """Each box suppresses only the next: kept alternate, 40 links (beyond the vectorised rounds)."""
    k = 41
    first, later = np.arange(k - 1), np.arange(1, k)
    assert np.flatnonzero(greedy_keep(k, first, later)).tolist() == list(range(0, k, 2))
    # a chain of boxes sliding right by a quarter width: IoU(i, i+1) = 0.6 > 0.5, IoU(i, i+2) = 1/3
    x = np.arange(k, dtype=np.float32) * 2.5
    boxes = np.stack([x, np.zeros(k, np.float32), x + 10, np.full(k, 10, np.float32)], 1)
    scores = np.linspace(1, 0.5, k, dtype=np.float32)
    attrs = _attrs(nms_threshold=0.5)
    assert nms_fast(boxes, scores, attrs) == one_by_one(boxes, scores, attrs) == list(range(0, k, 2))
    i, j = suppressing_pairs(boxes, np.float32(0.5), True)
    assert sorted(zip(i.tolist(), j.tolist())) == [(n, n + 1) for n in range(k - 1)]


def test_pp_yoloe_sized_head_against_paddle() -> None:
    rng = np.random.default_rng(8400)
    m, c = 2000, 3
    boxes = np.concatenate([_clustered(rng, m // 2), _random(rng, m // 2)])[None]
    scores = np.round(rng.uniform(0, 1, (1, c, m)) ** 4, 3).astype(np.float32)
    attrs = {"background_label": -1, "score_threshold": 0.01, "nms_top_k": 1000, "keep_top_k": 300,
             "nms_threshold": 0.7, "nms_eta": 1.0, "normalized": True}
    outs = {"Out": 1, "Index": 1, "NmsRoisNum": 1}
    ins = {"BBoxes": boxes, "Scores": scores}
    got = _run_op("multiclass_nms3", ins, attrs, outs, check_shapes=False)
    ref = paddle_legacy("multiclass_nms3", ins, attrs, outs)
    assert got["Out"][0].shape == ref["Out"][0].shape == (300, 6)
    check(got["Out"][0], ref["Out"][0], "Out", tol=1e-5)
    assert np.array_equal(got["Index"][0], ref["Index"][0]) and np.array_equal(got["NmsRoisNum"][0],
                                                                               ref["NmsRoisNum"][0])


def test_nan_and_apart_boxes_as_in_paddle() -> None:
    """A box with a NaN coordinate is apart only by its other coordinates; otherwise its IoU is NaN, which
    fails Paddle's keep test (IoU <= threshold): it suppresses the later candidates it is not apart from
    (box 3 here, whose y range would not even touch it)."""
    boxes = np.array([[[0, 0, 10, 10], [20, np.nan, 30, 30], [0, 1, 10, 11], [22, 0, 32, 10],
                       [100, 100, 110, 110], [200, 200, 190, 210]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.1, 0.2, 0.9, 0.8, 0.7, 0.6]]], np.float32)
    attrs = {"background_label": -1, "score_threshold": 0.05, "nms_top_k": -1, "keep_top_k": -1,
             "nms_threshold": 0.5, "nms_eta": 1.0, "normalized": True}
    outs = {"Out": 1, "Index": 1, "NmsRoisNum": 1}
    ins = {"BBoxes": boxes, "Scores": scores}
    got = _run_op("multiclass_nms3", ins, attrs, outs, check_shapes=False)
    ref = paddle_legacy("multiclass_nms3", ins, attrs, outs)
    assert got["Index"][0].ravel().tolist() == ref["Index"][0].ravel().tolist()
    assert ref["Index"][0].ravel()[ref["Out"][0][:, 0] == 0].tolist() == [0, 1, 4, 5]  # 3: by the NaN box
    np.testing.assert_allclose(got["Out"][0], ref["Out"][0], rtol=0, atol=1e-5, equal_nan=True)  # the NaN box


@pytest.mark.parametrize("ties", ["none", "below_top_k", "everywhere"])
def test_matrix_nms_against_paddle(ties: str) -> None:
    """matrix_nms's dense IoU and its partial-sort shortcut (plain order when the best nms_top_k scores are
    distinct and above the rest; libstdc++'s heap order otherwise) against Paddle on 400 boxes."""
    rng = np.random.default_rng(400 + len(ties))
    m, c = 400, 3
    boxes = np.concatenate([_clustered(rng, m // 2), _random(rng, m // 2)])[None]
    scores = rng.uniform(0, 1, (1, c, m)).astype(np.float32)
    if ties != "none":
        low = scores < (0.0 if ties == "everywhere" else 0.8)  # the best 50 of 400 lie above 0.8
        scores = np.where(low | (ties == "everywhere"), np.round(scores, 2), scores).astype(np.float32)
    attrs = {"background_label": 0, "score_threshold": 0.05, "post_threshold": 0.1, "nms_top_k": 50,
             "keep_top_k": 60, "use_gaussian": ties == "none", "gaussian_sigma": 2.0, "normalized": False}
    outs = {"Out": 1, "Index": 1, "RoisNum": 1}
    ins = {"BBoxes": boxes, "Scores": scores}
    got = _run_op("matrix_nms", ins, attrs, outs, check_shapes=False)
    ref = paddle_legacy("matrix_nms", ins, attrs, outs)
    assert np.array_equal(got["Index"][0], ref["Index"][0]) and np.array_equal(got["RoisNum"][0], ref["RoisNum"][0])
    check(got["Out"][0], ref["Out"][0], "Out", tol=1e-5)


def nms_kernel_literal(b: np.ndarray, thresh: float) -> list[int]:
    """Paddle's NMSKernel box by box: kept boxes suppress later ones with IoU (no +1, clamped) > thresh."""
    t = b.dtype.type(thresh)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    suppressed = np.zeros(len(b), bool)
    for i in range(len(b)):
        if suppressed[i]:
            continue
        for j in range(i + 1, len(b)):
            iw = min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])
            ih = min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])
            inter = (iw if iw > 0 else b.dtype.type(0)) * (ih if ih > 0 else b.dtype.type(0))
            with np.errstate(divide="ignore", invalid="ignore"):
                if inter / (area[i] + area[j] - inter) > t:
                    suppressed[j] = True
    return np.flatnonzero(~suppressed).tolist()


@pytest.mark.parametrize("thresh", [-0.1, 0.0, 0.3, 0.7])
@pytest.mark.parametrize("draw", [_random, _clustered, _odd])
def test_standalone_nms_keeps_what_the_kernel_keeps(draw, thresh: float) -> None:
    """The `nms` op's pair search (overlap in both axes when the threshold is >= 0) against its definition;
    NumPy's min/max propagate NaN where C++'s std::min/max may not, so NaN boxes are left to the Paddle test."""
    rng = np.random.default_rng(int(thresh * 10) + 3)
    b = draw(rng, 600)
    b = b[~np.isnan(b).any(1)]
    got = _run_op("nms", {"Boxes": b}, {"iou_threshold": thresh}, {"KeepBoxesIdxs": 1},
                  check_shapes=False)["KeepBoxesIdxs"][0]
    assert got.tolist() == nms_kernel_literal(b, thresh)
