"""Host NMS kernels (multiclass_nms, multiclass_nms2, multiclass_nms3, matrix_nms) against Paddle's own
legacy executor on drawn inputs, including tied scores (rounded to one decimal) where Paddle's sort
orders decide the output; the conformance zoo (det_nms_*, det_matrix_nms) checks the saved-model path.
Tolerance: float outputs max|got - ref| <= 1e-5 * max(1, max|ref|); Index, counts and labels exact.
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.errors import InputError, KernelError
from pdlite.kernels.host.nms import heap_partial_sort, poly_iou
from tests.kernels._checks import check, infer
from tests.kernels._util import paddle_legacy
from tests.kernels._util import run_op as _run_op


def run_op(op_type: str, ins: dict, attrs: dict, outs: dict | None = None) -> dict:
    """The host kernel's outputs (row counts depend on the values: no static shape to compare)."""
    return _run_op(op_type, ins, attrs, outs, check_shapes=False)


NMS_OUTS = {"Out": 1, "Index": 1, "NmsRoisNum": 1}


def _boxes(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 10.0) -> np.ndarray:
    xy = rng.uniform(0, 1, shape + (2,)) * scale
    wh = rng.uniform(0.1, 1, shape + (2,)) * scale * 0.6
    return np.concatenate([xy, xy + wh], axis=-1).astype(np.float32)


def _scores(rng: np.random.Generator, shape: tuple[int, ...], ties: bool) -> np.ndarray:
    s = rng.uniform(0, 1, shape).astype(np.float32)
    return np.round(s, 1).astype(np.float32) if ties else s


def _compare(got: dict, ref: dict, slots: tuple[str, ...]) -> None:
    for slot in slots:
        g, r = got[slot][0], ref[slot][0]
        assert g.shape == r.shape, f"{slot}: shape {g.shape} != Paddle's {r.shape}"
        if g.dtype.kind in "iu":
            assert np.array_equal(g, r), f"{slot}: {g.ravel().tolist()} != Paddle's {r.ravel().tolist()}"
        else:
            check(g, r, slot, tol=1e-5)


NMS_ATTRS = [
    {"background_label": 0, "score_threshold": 0.2, "nms_top_k": 6, "nms_threshold": 0.3, "nms_eta": 1.0,
     "keep_top_k": 5, "normalized": False},
    {"background_label": -1, "score_threshold": 0.05, "nms_top_k": -1, "nms_threshold": 0.7, "nms_eta": 0.8,
     "keep_top_k": -1, "normalized": True},
    {"background_label": 2, "score_threshold": 0.35, "nms_top_k": 3, "nms_threshold": 0.5, "nms_eta": 1.0,
     "keep_top_k": 4, "normalized": False},
]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("attrs", NMS_ATTRS)
def test_multiclass_nms3_3d_against_paddle(attrs: dict, ties: bool) -> None:
    rng = np.random.default_rng(len(str(attrs)) + ties)
    ins = {"BBoxes": _boxes(rng, (2, 12)), "Scores": _scores(rng, (2, 4, 12), ties)}
    got = run_op("multiclass_nms3", ins, attrs, NMS_OUTS)
    _compare(got, paddle_legacy("multiclass_nms3", ins, attrs, NMS_OUTS), ("Out", "Index", "NmsRoisNum"))


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("counts", [[5, 7], [0, 12], [4, 0, 8]])
def test_multiclass_nms3_rois_num_against_paddle(counts: list[int], ties: bool) -> None:
    rng = np.random.default_rng(sum(counts) * 7 + len(counts) + ties)
    m = sum(counts)
    for attrs in NMS_ATTRS:
        ins = {"BBoxes": _boxes(rng, (m, 3)), "Scores": _scores(rng, (m, 3), ties),
               "RoisNum": np.array(counts, np.int32)}
        got = run_op("multiclass_nms3", ins, attrs, NMS_OUTS)
        _compare(got, paddle_legacy("multiclass_nms3", ins, attrs, NMS_OUTS), ("Out", "Index", "NmsRoisNum"))


def test_multiclass_nms_v1_and_empty_forms_against_paddle() -> None:
    rng = np.random.default_rng(3)
    ins = {"BBoxes": _boxes(rng, (2, 9)), "Scores": _scores(rng, (2, 3, 9), True)}
    for attrs in NMS_ATTRS:
        _compare(run_op("multiclass_nms", ins, attrs), paddle_legacy("multiclass_nms", ins, attrs), ("Out",))
    none = {**NMS_ATTRS[0], "score_threshold": 5.0}
    got = run_op("multiclass_nms", ins, none)["Out"][0]
    check(got, np.array([[-1.0]], np.float32), "no detection, LoD form")
    check(got, paddle_legacy("multiclass_nms", ins, none)["Out"][0], "no detection vs Paddle")
    got3 = run_op("multiclass_nms3", ins, none, NMS_OUTS)
    assert got3["Out"][0].shape == (0, 6) and got3["Index"][0].shape == (0, 1)
    assert got3["NmsRoisNum"][0].tolist() == [0, 0]


def test_multiclass_nms2_is_nms3_without_rois_num() -> None:
    """Paddle 3 has no multiclass_nms2 kernel any more: its definition (v1 + Index) equals nms3's 3-D form."""
    rng = np.random.default_rng(4)
    ins = {"BBoxes": _boxes(rng, (2, 10)), "Scores": _scores(rng, (2, 3, 10), True)}
    for attrs in NMS_ATTRS:
        v2 = run_op("multiclass_nms2", ins, attrs, {"Out": 1, "Index": 1})
        _compare(v2, paddle_legacy("multiclass_nms3", ins, attrs, NMS_OUTS), ("Out", "Index"))


def test_polygon_nms_against_paddle_and_non_convex_refused() -> None:
    rng = np.random.default_rng(5)
    b = _boxes(rng, (1, 7))
    quad = np.stack([b[..., 0], b[..., 1], b[..., 2], b[..., 1] + 0.3, b[..., 2] - 0.2, b[..., 3], b[..., 0],
                     b[..., 3]], axis=-1).astype(np.float32)
    attrs = {**NMS_ATTRS[1], "nms_threshold": 0.2}
    ins = {"BBoxes": quad, "Scores": _scores(rng, (1, 2, 7), False)}
    _compare(run_op("multiclass_nms3", ins, attrs, NMS_OUTS), paddle_legacy("multiclass_nms3", ins, attrs, NMS_OUTS),
             ("Out", "Index", "NmsRoisNum"))
    square = np.array([0, 0, 2, 0, 2, 2, 0, 2], np.float32)
    assert poly_iou(square, square + 1) == pytest.approx(1 / 7)
    dart = np.array([0, 0, 4, 0, 1, 1, 0, 4], np.float32)
    with pytest.raises(KernelError, match="convex"):
        poly_iou(dart, square)


MATRIX_ATTRS = [
    {"background_label": 0, "score_threshold": 0.1, "post_threshold": 0.05, "nms_top_k": -1, "keep_top_k": -1,
     "normalized": False, "use_gaussian": False, "gaussian_sigma": 2.0},
    {"background_label": -1, "score_threshold": 0.15, "post_threshold": 0.2, "nms_top_k": 5, "keep_top_k": 6,
     "normalized": True, "use_gaussian": True, "gaussian_sigma": 3.0},
    {"background_label": 1, "score_threshold": 0.0, "post_threshold": 0.1, "nms_top_k": 9, "keep_top_k": 10,
     "normalized": True, "use_gaussian": False, "gaussian_sigma": 2.0},
]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("attrs", MATRIX_ATTRS)
def test_matrix_nms_against_paddle(attrs: dict, ties: bool) -> None:
    rng = np.random.default_rng(11 + ties + len(str(attrs)))
    ins = {"BBoxes": _boxes(rng, (2, 14)), "Scores": _scores(rng, (2, 3, 14), ties)}
    outs = {"Out": 1, "Index": 1, "RoisNum": 1}
    _compare(run_op("matrix_nms", ins, attrs, outs), paddle_legacy("matrix_nms", ins, attrs, outs),
             ("Out", "Index", "RoisNum"))


def test_heap_partial_sort_orders_the_best_first() -> None:
    rng = np.random.default_rng(0)
    for n in range(1, 30):
        keys = rng.integers(0, 4, n)
        for middle in (0, 1, n // 2, n):
            got = heap_partial_sort(list(range(n)), middle, lambda i, j, k=keys: k[i] > k[j])
            assert sorted(got) == list(range(n))
            head = keys[got[:middle]]
            assert list(head) == sorted(head, reverse=True)
            assert sorted(head, reverse=True) == sorted(keys, reverse=True)[:middle]


def test_nms_shape_errors_name_the_op() -> None:
    with pytest.raises(InputError, match="multiclass_nms3.*BBoxes"):
        infer("multiclass_nms3", {"BBoxes": np.zeros((2, 5, 4), np.float32),
                                  "Scores": np.zeros((2, 3, 6), np.float32)}, {}, NMS_OUTS)
    with pytest.raises(InputError, match="matrix_nms"):
        infer("matrix_nms", {"BBoxes": np.zeros((5, 3, 4), np.float32), "Scores": np.zeros((5, 3), np.float32)},
              {}, {"Out": 1, "Index": 1})


@pytest.mark.parametrize("thresh", [0.1, 0.4, 0.8])
def test_standalone_nms_against_paddle(thresh: float) -> None:
    rng = np.random.default_rng(int(thresh * 10))
    boxes = _boxes(rng, (20,))
    got = run_op("nms", {"Boxes": boxes}, {"iou_threshold": thresh}, {"KeepBoxesIdxs": 1})["KeepBoxesIdxs"][0]
    ref = paddle_legacy("nms", {"Boxes": boxes}, {"iou_threshold": thresh}, {"KeepBoxesIdxs": 1})["KeepBoxesIdxs"][0]
    assert got.dtype == np.int64 and got.tolist() == np.asarray(ref).astype(np.int64).tolist()
