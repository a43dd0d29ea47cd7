"""Conformance-zoo cases of the detection family and the rarer tensor ops (see make_conformance_models.py).

`define(m)` registers the cases with the generator module `m` (its `model`, `_op`, `u`, `img`, `F32`):
every NMS form (3-D and 2-D + RoisNum, with and without Index, the empty results), matrix NMS
(linear and gaussian), proposals (v1 and v2) with anchor_generator, FPN distribution and
collection, grid_sampler in every mode, and unique / tril_triu / set_value / reverse /
partial_sum / partial_concat / bmm / atan2 / eye / max_pool3d_with_index / gather_nd forms.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _ops(type_: str, inputs: dict[str, Any], attrs: dict[str, Any], outs: dict[str, tuple[str, int]]) -> dict:
    """Append a raw legacy op whose output slots may hold several variables: slot -> (dtype, count)."""
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper(type_)
    ins = {k: (v if isinstance(v, list) else [v]) for k, v in inputs.items()}
    outputs = {k: [helper.create_variable_for_type_inference(dt) for _ in range(n)] for k, (dt, n) in outs.items()}
    helper.append_op(type=type_, inputs=ins, outputs=outputs, attrs=attrs)
    return outputs


def define(m: Any) -> None:  # noqa: C901 (one builder per case)
    import paddle

    model, _op, F32 = m.model, m._op, m.F32
    nms_outs = {"Out": F32, "Index": "int32", "NmsRoisNum": "int32"}

    def boxes_of(raw: Any, scale: float = 10.0) -> Any:
        """[.., 4] uniform(0, 1) -> boxes x1y1x2y2 with positive sizes."""
        return paddle.concat([raw[..., :2] * scale, raw[..., :2] * scale + raw[..., 2:] * scale * 0.6 + 0.5],
                             axis=-1)

    @model("det_nms_legacy", ("boxes", [2, 10, 4], F32, (0.0, 1.0)), ("scores", [2, 4, 10], F32, (0.0, 1.0)))
    def _(boxes, scores):
        b = boxes_of(boxes)
        base = {"background_label": 0, "score_threshold": 0.25, "nms_top_k": 8, "nms_threshold": 0.3,
                "nms_eta": 1.0, "keep_top_k": 6, "normalized": False}
        outs = [_op("multiclass_nms", {"BBoxes": b, "Scores": scores}, base, {"Out": F32})]
        outs.append(_op("multiclass_nms", {"BBoxes": boxes, "Scores": scores},
                        {**base, "score_threshold": 2.0}, {"Out": F32}))  # nothing kept: [[-1]]
        outs += _op("multiclass_nms3", {"BBoxes": b, "Scores": scores},
                    {**base, "background_label": 2, "keep_top_k": -1, "nms_eta": 0.7, "nms_threshold": 0.9},
                    nms_outs)
        outs += _op("multiclass_nms3", {"BBoxes": b, "Scores": scores},
                    {**base, "background_label": -1, "keep_top_k": 4, "nms_top_k": -1, "normalized": True},
                    nms_outs)
        return outs

    @model("det_nms_standalone", ("boxes", [12, 4], F32, (0.0, 1.0)))
    def _(boxes):
        b = boxes_of(boxes)
        return [_op("nms", {"Boxes": b}, {"iou_threshold": t}, {"KeepBoxesIdxs": "int64"}) for t in (0.2, 0.5)]

    @model("det_nms_rois_num", ("boxes", [9, 3, 4], F32, (0.0, 1.0)), ("scores", [9, 3], F32, (0.0, 1.0)))
    def _(boxes, scores):
        b = boxes_of(boxes, 6.0)
        outs = []
        for counts, attrs in (([5, 4], {"background_label": 0, "score_threshold": 0.1, "nms_top_k": -1,
                                        "nms_threshold": 0.3, "nms_eta": 1.0, "keep_top_k": -1, "normalized": False}),
                              ([2, 0, 7], {"background_label": -1, "score_threshold": 0.2, "nms_top_k": 3,
                                           "nms_threshold": 0.5, "nms_eta": 1.0, "keep_top_k": 4,
                                           "normalized": False}),
                              ([9], {"background_label": 1, "score_threshold": 0.05, "nms_top_k": -1,
                                     "nms_threshold": 0.2, "nms_eta": 0.8, "keep_top_k": 5, "normalized": True})):
            rois_num = paddle.assign(np.array(counts, np.int32))
            outs += _op("multiclass_nms3", {"BBoxes": b, "Scores": scores, "RoisNum": rois_num}, attrs, nms_outs)
        return outs

    @model("det_nms_poly", ("pts", [1, 6, 8], F32, (0.0, 1.0)), ("scores", [1, 2, 6], F32, (0.0, 1.0)))
    def _(pts, scores):
        # convex quads: a jittered axis-aligned box per row
        x0, y0 = pts[:, :, 0:1] * 6.0, pts[:, :, 1:2] * 6.0
        w, h = pts[:, :, 2:3] * 4.0 + 2.0, pts[:, :, 3:4] * 4.0 + 2.0
        j = pts[:, :, 4:8] * 0.8
        quad = paddle.concat([x0 + j[..., 0:1], y0, x0 + w, y0 + j[..., 1:2], x0 + w - j[..., 2:3], y0 + h,
                              x0, y0 + h - j[..., 3:4]], axis=2)
        return _op("multiclass_nms3", {"BBoxes": quad, "Scores": scores},
                   {"background_label": -1, "score_threshold": 0.1, "nms_top_k": -1, "nms_threshold": 0.2,
                    "nms_eta": 1.0, "keep_top_k": -1, "normalized": True}, nms_outs)

    @model("det_matrix_nms", ("boxes", [2, 12, 4], F32, (0.0, 1.0)), ("scores", [2, 3, 12], F32, (0.0, 1.0)))
    def _(boxes, scores):
        b = boxes_of(boxes, 8.0)
        outs = []
        for attrs in ({"background_label": 0, "score_threshold": 0.1, "post_threshold": 0.05, "nms_top_k": -1,
                       "keep_top_k": -1, "normalized": False, "use_gaussian": False, "gaussian_sigma": 2.0},
                      {"background_label": -1, "score_threshold": 0.2, "post_threshold": 0.3, "nms_top_k": 6,
                       "keep_top_k": 7, "normalized": True, "use_gaussian": True, "gaussian_sigma": 3.0},
                      {"background_label": 1, "score_threshold": 3.0, "post_threshold": 0.0, "nms_top_k": -1,
                       "keep_top_k": 5, "normalized": True, "use_gaussian": False, "gaussian_sigma": 2.0}):
            outs += _op("matrix_nms", {"BBoxes": b, "Scores": scores}, attrs,
                        {"Out": F32, "Index": "int32", "RoisNum": "int32"})
        return outs

    @model("det_proposals", ("scores", [2, 3, 4, 5], F32, (0.0, 1.0)), ("deltas", [2, 12, 4, 5], F32, (-0.5, 0.5)),
           ("im_shape", [2, 2], F32, (50.0, 64.0)))
    def _(scores, deltas, im_shape):
        anchors, var = _op("anchor_generator", {"Input": scores},
                           {"anchor_sizes": [16.0, 32.0, 48.0], "aspect_ratios": [1.0], "variances": [0.1, 0.1, 0.2, 0.2],
                            "stride": [12.0, 12.0], "offset": 0.5}, {"Anchors": F32, "Variances": F32})
        anchors2, var2 = _op("anchor_generator", {"Input": scores},
                             {"anchor_sizes": [20.0], "aspect_ratios": [0.5, 1.0, 2.0], "variances": [1.0, 1.0, 1.0, 1.0],
                              "stride": [8.0, 10.0], "offset": 0.3}, {"Anchors": F32, "Variances": F32})
        v2 = {"pre_nms_topN": 40, "post_nms_topN": 12, "nms_thresh": 0.5, "min_size": 2.0, "eta": 1.0}
        outs = [anchors, var, anchors2, var2]
        outs += _op("generate_proposals_v2", {"Scores": scores, "BboxDeltas": deltas, "ImShape": im_shape,
                                              "Anchors": anchors, "Variances": var}, {**v2, "pixel_offset": True},
                    {"RpnRois": F32, "RpnRoiProbs": F32, "RpnRoisNum": "int32"})
        outs += _op("generate_proposals_v2", {"Scores": scores, "BboxDeltas": deltas * 2.0, "ImShape": im_shape,
                                              "Anchors": anchors2, "Variances": var2},
                    {"pre_nms_topN": -1, "post_nms_topN": -1, "nms_thresh": 0.6, "min_size": 0.5, "eta": 0.8,
                     "pixel_offset": False}, {"RpnRois": F32, "RpnRoiProbs": F32, "RpnRoisNum": "int32"})
        im_info = paddle.concat([im_shape, paddle.full([2, 1], 1.5, F32)], axis=1)
        outs += _op("generate_proposals", {"Scores": scores, "BboxDeltas": deltas, "ImInfo": im_info,
                                           "Anchors": anchors, "Variances": var}, {**v2, "min_size": 8.0},
                    {"RpnRois": F32, "RpnRoiProbs": F32, "RpnRoisNum": "int32"})
        return outs

    @model("det_fpn", ("raw", [10, 4], F32, (0.0, 1.0)), ("sc", [10, 1], F32, (0.0, 1.0)))
    def _(raw, sc):
        rois = paddle.concat([raw[:, :2] * 50.0, raw[:, :2] * 50.0 + raw[:, 2:] ** 2 * 400.0 + 2.0], axis=1)
        rois_num = paddle.assign(np.array([6, 4], np.int32))
        d = _ops("distribute_fpn_proposals", {"FpnRois": rois, "RoisNum": rois_num},
                 {"min_level": 2, "max_level": 5, "refer_level": 4, "refer_scale": 112, "pixel_offset": True},
                 {"MultiFpnRois": (F32, 4), "RestoreIndex": ("int32", 1), "MultiLevelRoIsNum": ("int32", 4)})
        d2 = _ops("distribute_fpn_proposals", {"FpnRois": rois, "RoisNum": rois_num},
                  {"min_level": 3, "max_level": 4, "refer_level": 4, "refer_scale": 224, "pixel_offset": False},
                  {"MultiFpnRois": (F32, 2), "RestoreIndex": ("int32", 1), "MultiLevelRoIsNum": ("int32", 2)})
        lv_rois = [rois[:4], rois[4:7], rois[7:]]
        lv_scores = [sc[:4], sc[4:7], sc[7:]]
        lv_nums = [paddle.assign(np.array(c, np.int32)) for c in ([2, 2], [3, 0], [1, 2])]
        c = _ops("collect_fpn_proposals", {"MultiLevelRois": lv_rois, "MultiLevelScores": lv_scores,
                                           "MultiLevelRoIsNum": lv_nums}, {"post_nms_topN": 7},
                 {"FpnRois": (F32, 1), "RoisNum": ("int32", 1)})
        return [*d["MultiFpnRois"], *d["RestoreIndex"], *d["MultiLevelRoIsNum"], *d2["MultiFpnRois"],
                *d2["RestoreIndex"], *d2["MultiLevelRoIsNum"], *c["FpnRois"], *c["RoisNum"]]

    @model("grid_sampler_modes", m.img(c=2, h=5, w=6), ("grid", [1, 4, 7, 2], F32, (-1.3, 1.3)),
           ("x3", [1, 2, 3, 4, 5], F32, None), ("grid3", [1, 2, 3, 4, 3], F32, (-1.2, 1.2)))
    def _(x, grid, x3, grid3):
        outs = []
        for mode in ("bilinear", "nearest"):
            for pad in ("zeros", "border", "reflection"):
                for align in (True, False):
                    outs.append(_op("grid_sampler", {"X": x, "Grid": grid},
                                    {"mode": mode, "padding_mode": pad, "align_corners": align}, {"Output": F32}))
        for mode, pad, align in (("bilinear", "zeros", False), ("bilinear", "reflection", True),
                                 ("nearest", "border", False)):
            outs.append(_op("grid_sampler", {"X": x3, "Grid": grid3},
                            {"mode": mode, "padding_mode": pad, "align_corners": align}, {"Output": F32}))
        return outs

    # -- the rarer tensor ops --
    @model("unique_forms", ("ids", [14], "int64", (0, 6)), ("rows", [7, 3], "int32", (0, 2)),
           ("cube", [3, 2, 4], "int32", (0, 2)))
    def _(ids, rows, cube):
        base = {"dtype": 3, "return_index": False, "return_inverse": False, "return_counts": False, "axis": [],
                "is_sorted": False}
        outs = list(_op("unique", {"X": ids}, base, {"Out": "int64", "Index": "int64"}))
        all_out = {"Out": "int64", "Indices": "int32", "Index": "int32", "Counts": "int32"}
        outs += _op("unique", {"X": ids}, {**base, "dtype": 2, "is_sorted": True, "return_index": True,
                                           "return_inverse": True, "return_counts": True}, all_out)
        fl = paddle.cast(ids, F32) * 0.5
        outs += _op("unique", {"X": fl}, {**base, "is_sorted": True, "return_inverse": True},
                    {"Out": F32, "Index": "int64"})
        for x, axis in ((rows, 0), (rows, -1), (cube, 1), (cube, 2)):
            outs += _op("unique", {"X": x}, {**base, "is_sorted": True, "axis": [axis], "return_index": True,
                                             "return_inverse": True, "return_counts": True},
                        {"Out": "int32", "Indices": "int64", "Index": "int64", "Counts": "int64"})
        return outs

    @model("tril_reverse_partial", ("x", [-1, 4, 5], F32, None), ("a", [4, 6], F32, None), ("b", [4, 6], F32, None),
           ("c", [4, 6], F32, None), batch=2)
    def _(x, a, b, c):
        outs = [_op("tril_triu", {"X": x}, {"diagonal": d, "lower": low})
                for d, low in ((0, True), (1, False), (-1, True), (2, True), (-2, False))]
        outs += [_op("reverse", {"X": x}, {"axis": [0, 2]}), _op("reverse", {"X": x}, {"axis": [-1]})]
        for start, length in ((1, 3), (2, -1), (0, 6)):
            outs.append(_op("partial_sum", {"X": [a, b, c]}, {"start_index": start, "length": length}))
        for start, length in ((1, 3), (-4, -1), (0, 6), (-2, 1)):
            outs.append(_op("partial_concat", {"X": [a, b, c]}, {"start_index": start, "length": length}))
        return outs

    @model("math_misc_ops", ("x", [3, 4, 5], F32, None), ("y", [3, 5, 2], F32, None), ("p", [3, 4, 5], F32, None),
           ("i", [6], "int32", (-4, 5)), ("j", [6], "int32", (-4, 5)))
    def _(x, y, p, i, j):
        return [_op("bmm", {"X": x, "Y": y}), _op("atan2", {"X1": x, "X2": p}),
                _op("atan2", {"X1": i, "X2": j}, {}, {"Out": "float64"}),
                _ops("eye", {}, {"num_rows": 3, "num_columns": 5, "dtype": 5}, {"Out": (F32, 1)})["Out"][0],
                _ops("eye", {}, {"num_rows": 4, "num_columns": -1, "dtype": 3}, {"Out": ("int64", 1)})["Out"][0],
                _op("gather_nd", {"X": x, "Index": paddle.zeros([2, 0], "int64")}),
                _op("gather_nd", {"X": x, "Index": paddle.zeros([0], "int64")}),
                _op("gather_nd", {"X": x, "Index": paddle.assign(np.array([[2, 1], [0, 3]], np.int64))})]

    @model("max_pool3d_index", ("x", [-1, 2, 5, 6, 7], F32, None))
    def _(x):
        a, am = paddle.nn.functional.max_pool3d(x, 2, 2, return_mask=True)
        b, bm = paddle.nn.functional.adaptive_max_pool3d(x, [2, 3, 4], return_mask=True)
        outs = [a, am, b, bm]
        for attrs in ({"ksize": [3, 2, 3], "strides": [2, 2, 1], "paddings": [1, 0, 1], "global_pooling": False,
                       "adaptive": False, "ceil_mode": True},
                      {"ksize": [1, 1, 1], "strides": [1, 1, 1], "paddings": [0, 0, 0], "global_pooling": True,
                       "adaptive": False, "ceil_mode": False}):
            outs += _op("max_pool3d_with_index", {"X": x}, attrs, {"Out": F32, "Mask": "int32"})
        return outs

    @model("set_value_forms", ("x", [4, 5, 6], F32, None), ("v", [5, 6], F32, None), ("w", [2, 1, 3], F32, None),
           ("n", [1], "int64", (1, 3)))
    def _(x, v, w, n):
        def sv(inputs: dict, attrs: dict) -> Any:
            full = {"axes": [], "starts": [], "ends": [], "steps": [], "decrease_axes": [], "none_axes": [],
                    "shape": [], "dtype": 5}
            return _op("set_value", {"Input": x, **inputs}, {**full, **attrs}, {"Out": F32})

        return [
            sv({"ValueTensor": v}, {"axes": [0], "starts": [1], "ends": [2], "steps": [1], "decrease_axes": [0]}),
            sv({"ValueTensor": w}, {"axes": [0, 2], "starts": [0, 5], "ends": [4, -10], "steps": [2, -2]}),
            sv({"ValueTensor": w[0]}, {"axes": [1, 2], "starts": [-1, 0], "ends": [-6, 6], "steps": [-3, 2]}),
            sv({}, {"axes": [1], "starts": [1], "ends": [4], "steps": [1], "values": [2.5], "shape": [1]}),
            sv({}, {"axes": [2], "starts": [0], "ends": [2], "steps": [1], "values": [1.0, -1.0], "shape": [2]}),
            sv({"ValueTensor": v[0:1]}, {"axes": [0], "starts": [2], "ends": [3], "steps": [1],
                                             "decrease_axes": [0], "none_axes": [0, 2]}),
            sv({"ValueTensor": v[0:2], "StartsTensorList": [n], "EndsTensorList": [n + 2]},
               {"axes": [1], "starts": [0], "ends": [0], "steps": [1]}),
        ]

    # -- the rest of the legacy op surface --
    @model("unary_more", ("x", [-1, 3, 4], F32, (-0.9, 0.9)), ("p", [-1, 3, 4], F32, (0.02, 0.98)),
           ("g", [-1, 3, 4], F32, (1.1, 3.0)), batch=2)
    def _(x, p, g):
        outs = [m.u(t, x) for t in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "expm1")]
        outs += [m.u("acosh", g), m.u("trunc", x * 4.0), m.u("logit", p, eps=1e-6), m.u("logit", x, eps=0.1),
                 m.u("stanh", x, scale_a=0.8, scale_b=1.5)]
        return outs

    @model("bitwise_predicates", ("a", [-1, 5], "int32", (-9, 9)), ("b", [5], "int32", (-9, 9)),
           ("x", [-1, 5], F32, None), ("y", [-1, 1], F32, None), batch=3)
    def _(a, b, x, y):
        nanx = paddle.where(x > 0.8, paddle.full_like(x, float("nan")), x)
        infx = paddle.where(x < -0.8, paddle.full_like(x, float("inf")), nanx)
        outs = [_op(t, {"X": a, "Y": b}) for t in ("bitwise_and", "bitwise_or", "bitwise_xor")]
        outs += [_op("bitwise_not", {"X": a}), _op("bitwise_and", {"X": a > 0, "Y": b > 0}, {}, {"Out": "bool"}),
                 _op("bitwise_not", {"X": a > 0}, {}, {"Out": "bool"})]
        outs += [_op(t, {"X": infx}, {}, {"Out": "bool"}) for t in ("isnan_v2", "isinf_v2", "isfinite_v2")]
        outs += [_op(t, {"X": nanx, "Y": y}, {"axis": -1}) for t in ("elementwise_fmax", "elementwise_fmin")]
        outs.append(_op("elementwise_heaviside", {"X": m.u("round", x), "Y": y}, {"axis": -1}))
        return outs

    @model("roi_ops", m.img(c=8, h=9, w=10), ("raw", [5, 4], F32, (0.0, 1.0)), batch=2)
    def _(x, raw):
        rois = paddle.concat([raw[:, :2] * 12.0 - 1.0, raw[:, :2] * 12.0 + raw[:, 2:] * 8.0], axis=1)
        rois_num = paddle.assign(np.array([3, 2], np.int32))
        outs = list(_op("roi_pool", {"X": x, "ROIs": rois, "RoisNum": rois_num},
                        {"pooled_height": 3, "pooled_width": 2, "spatial_scale": 0.7},
                        {"Out": F32, "Argmax": "int64"}))
        outs.append(_op("psroi_pool", {"X": x, "ROIs": rois, "RoisNum": rois_num},
                        {"pooled_height": 2, "pooled_width": 2, "output_channels": 2, "spatial_scale": 0.6}))
        return outs

    @model("vision_more", ("theta", [2, 2, 3], F32, None), ("theta3", [1, 3, 4], F32, None),
           m.img(c=6, h=3, w=4), batch=4)
    def _(theta, theta3, x):
        outs = [_op("affine_grid", {"Theta": theta}, {"output_shape": [2, 1, 3, 5], "align_corners": al},
                    {"Output": F32}) for al in (True, False)]
        outs.append(_op("affine_grid", {"Theta": theta, "OutputShape": paddle.assign(np.array([2, 3, 4, 2],
                                                                                               np.int32))},
                        {"align_corners": False}, {"Output": F32}))
        outs.append(_op("affine_grid", {"Theta": theta3}, {"output_shape": [1, 1, 2, 3, 4], "align_corners": True},
                        {"Output": F32}))
        scale, bias = paddle.create_parameter([6], F32), paddle.create_parameter([6], F32)
        outs.append(_op("affine_channel", {"X": x, "Scale": scale, "Bias": bias}, {"data_layout": "NCHW"}))
        outs.append(_op("affine_channel", {"X": paddle.transpose(x, [0, 2, 3, 1]), "Scale": scale, "Bias": bias},
                        {"data_layout": "NHWC"}))
        outs.append(_op("temporal_shift", {"X": x}, {"seg_num": 2, "shift_ratio": 0.25, "data_format": "NCHW"}))
        outs.append(_op("temporal_shift", {"X": paddle.transpose(x, [0, 2, 3, 1])},
                        {"seg_num": 4, "shift_ratio": 0.2, "data_format": "NHWC"}))
        outs += _op("lrn", {"X": x}, {"n": 5, "k": 2.0, "alpha": 1e-2, "beta": 0.75}, {"Out": F32, "MidOut": F32})
        outs += _op("lrn", {"X": x}, {"n": 3, "k": 1.0, "alpha": 0.5, "beta": 0.5}, {"Out": F32, "MidOut": F32})
        return outs

    @model("linalg_more", ("a", [3, 4, 5], F32, None), ("sq", [2, 3, 3], F32, None), ("v", [4], F32, None))
    def _(a, sq, v):
        eye3 = _ops("eye", {}, {"num_rows": 3, "num_columns": 3, "dtype": 5}, {"Out": (F32, 1)})["Out"][0]
        outs = [_op("einsum", {"Operands": [a, sq[0, :, :]]}, {"equation": "ijk,il->jlk"},
                    {"Out": F32, "InnerCache": F32, "XShape": F32})[0],
                _op("einsum", {"Operands": [a]}, {"equation": "ijk->kj"}, {"Out": F32, "InnerCache": F32,
                                                                             "XShape": F32})[0],
                _op("inverse", {"Input": sq + eye3 * 3.0}, {}, {"Output": F32}),
                _op("kron", {"X": sq[0], "Y": v}),
                _op("trace", {"Input": a}, {"offset": 1, "axis1": 1, "axis2": 2}),
                _op("trace", {"Input": a}, {"offset": -1, "axis1": 0, "axis2": -1}),
                _op("diag_v2", {"X": v}, {"offset": 1, "padding_value": 0.5}),
                _op("diag_v2", {"X": a[0]}, {"offset": -1, "padding_value": 0.0}),
                _op("logsumexp", {"X": a}, {"axis": [1], "keepdim": False, "reduce_all": False}),
                _op("logsumexp", {"X": a}, {"axis": [0, 2], "keepdim": True, "reduce_all": False}),
                _op("logsumexp", {"X": a}, {"axis": [], "keepdim": False, "reduce_all": True}),
                _op("cumprod", {"X": a}, {"dim": 1}),
                _op("frobenius_norm", {"X": a}, {"dim": [1, 2], "keep_dim": False, "reduce_all": False}),
                _op("frobenius_norm", {"X": a}, {"dim": [0], "keep_dim": True, "reduce_all": False}),
                _op("squared_l2_norm", {"X": a})]
        return outs

    @model("index_mask_ops", ("x", [4, 6], F32, None), ("ids", [4, 3], "int64", (0, 6)), ("lens", [3], "int64",
                                                                                           (0, 6)),
           ("upd", [5, 6], F32, None), ("pos", [5, 1], "int64", (0, 4)), ("k", [1], "int32", (1, 4)))
    def _(x, ids, lens, upd, pos, k):
        outs = [_op("index_sample", {"X": x, "Index": ids}),
                _op("masked_select", {"X": x, "Mask": x > 0.0}, {}, {"Y": F32}),
                _op("masked_select", {"X": x, "Mask": x[:1] > 0.0}, {}, {"Y": F32}),
                _op("crop_tensor", {"X": x}, {"shape": [2, -1], "offsets": [1, 2]}),
                _op("crop_tensor", {"X": x, "Shape": paddle.assign(np.array([3, 2], np.int32)),
                                    "Offsets": paddle.assign(np.array([0, 4], np.int32))}),
                _op("sequence_mask", {"X": lens}, {"maxlen": -1, "out_dtype": 3}, {"Y": "int64"}),
                _op("sequence_mask", {"X": lens}, {"maxlen": 7, "out_dtype": 5}, {"Y": F32}),
                _op("scatter_nd_add", {"X": x, "Index": pos, "Updates": upd}),
                _op("scatter_nd_add", {"X": x, "Index": paddle.concat([pos[:3], ids[:3, :1]], axis=1),
                                       "Updates": upd[:3, 0]})]
        outs += _op("top_k", {"X": x}, {"k": 3}, {"Out": F32, "Indices": "int64"})
        outs += _op("top_k", {"X": x, "K": k}, {"k": 1}, {"Out": F32, "Indices": "int64"})
        outs += [_op("lod_reset", {"X": x}, {"target_lod": [0, 2, 4], "append": False}),
                 _op("increment", {"X": lens[:1]}, {"step": 3.0}),
                 _op("fill_any", {"X": x}, {"value_float": 2.5, "value_int": 0}),
                 _op("label_smooth", {"X": x}, {"epsilon": 0.1}),
                 _op("shard_index", {"X": ids[:, :1]}, {"index_num": 6, "nshards": 3, "shard_id": 1, "ignore_value": -1})]
        return outs
