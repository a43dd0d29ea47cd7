"""Host roi_pool, psroi_pool, box_clip, temporal_shift and lrn against Paddle's legacy executor on drawn
inputs, and box_clip (which needs LoD input in Paddle) against a literal loop of Paddle's ClipTiledBoxes.
The conformance zoo (roi_ops, vision_more) checks the saved-model path.
Tolerance: floats max|got - ref| <= 1e-5 * max(1, max|ref|); Argmax exact.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from pdlite.errors import InputError
from tests.kernels._checks import check, infer
from tests.kernels._util import paddle_legacy, run_op

F32 = np.float32


def _rois(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    xy = rng.uniform(-2, scale, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(0, scale / 2, (n, 2))], axis=1).astype(F32)


@pytest.mark.parametrize("seed", range(3))
def test_roi_pool_and_psroi_pool_against_paddle(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (2, 12, 7, 9)).astype(F32)
    rois, num = _rois(rng, 6, 10.0), np.array([4, 2], np.int32)
    attrs = {"pooled_height": 2 + seed, "pooled_width": 3, "spatial_scale": [1.0, 0.5, 0.75][seed]}
    ins = {"X": x, "ROIs": rois, "RoisNum": num}
    got = run_op("roi_pool", ins, attrs, {"Out": 1, "Argmax": 1})
    ref = paddle_legacy("roi_pool", ins, attrs, {"Out": 1, "Argmax": 1})
    check(got["Out"][0], ref["Out"][0], "roi_pool Out")
    check(got["Argmax"][0], ref["Argmax"][0].astype(np.int64), "roi_pool Argmax")
    ps = {"pooled_height": 2, "pooled_width": 2, "output_channels": 3, "spatial_scale": attrs["spatial_scale"]}
    check(run_op("psroi_pool", ins, ps)["Out"][0], paddle_legacy("psroi_pool", ins, ps)["Out"][0], "psroi_pool")


def test_box_clip_literal_loop() -> None:
    rng = np.random.default_rng(0)
    boxes = rng.uniform(-20, 80, (2, 5, 4)).astype(F32)
    info = np.array([[40.0, 60.0, 1.5], [33.0, 21.0, 1.0]], F32)
    got = run_op("box_clip", {"Input": boxes, "ImInfo": info}, {}, {"Output": 1})["Output"][0]
    ref = boxes.astype(np.float64).copy()
    for n in range(2):
        h, w = math.floor(info[n, 0] / info[n, 2] + 0.5), math.floor(info[n, 1] / info[n, 2] + 0.5)
        for i in range(5):
            for j in range(4):
                hi = (w if j % 2 == 0 else h) - 1
                ref[n, i, j] = max(min(ref[n, i, j], hi), 0)
    check(got, ref, "box_clip")
    with pytest.raises(InputError, match="box_clip.*ImInfo"):
        infer("box_clip", {"Input": boxes, "ImInfo": info[:, :2]}, {}, {"Output": 1})


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_temporal_shift_and_lrn_against_paddle(fmt: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (6, 8, 3, 4)).astype(F32)
    if fmt == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    for seg, ratio in ((3, 0.25), (2, 0.125), (6, 0.3)):
        a = {"seg_num": seg, "shift_ratio": ratio, "data_format": fmt}
        check(run_op("temporal_shift", {"X": x}, a)["Out"][0], paddle_legacy("temporal_shift", {"X": x}, a)["Out"][0])
    if fmt == "NCHW":
        for a in ({"n": 5, "k": 2.0, "alpha": 1e-2, "beta": 0.75}, {"n": 1, "k": 1.0, "alpha": 0.3, "beta": 0.5}):
            got = run_op("lrn", {"X": x}, a, {"Out": 1, "MidOut": 1})
            ref = paddle_legacy("lrn", {"X": x}, a, {"Out": 1, "MidOut": 1})
            check(got["Out"][0], ref["Out"][0], "lrn Out")
            check(got["MidOut"][0], ref["MidOut"][0], "lrn MidOut")
