"""Conformance-zoo cases for op forms an outside single-op suite tripped on (see make_conformance_models.py).

`define(m)` registers the cases with the generator module `m` (its `model`, `_op`, `F32`). Each case is
written from Paddle's op definitions (paddle/phi/ops/yaml/ops.yaml, the legacy op makers), not copied from
the suite; the PIR twin (tools/make_pir_fixtures.py --conformance) is what exercises the PIR front end:
- matrix_nms fetched without Index / RoisNum: PIR's pd_op.matrix_nms always has the three results, and
  the unused `index` must still land in the legacy op's required Index slot.
- set_value whose bounds are one 1-D tensor (PIR's IntArray operand from a stacked tensor) rather than a
  list of one-value tensors (the legacy StartsTensorList form).
- sum (add_n) of int32 / int64 tensors and elementwise add / mul of bool tensors: ONNX Sum takes float
  types only and ONNX Add / Mul no bool, so a device must build Add chains or leave them on the host.
- grid_sampler nearest at coordinates that unnormalize to exactly k + 0.5 (Paddle rounds halves to even,
  and -0.5 -> 0 stays in bounds), 4-D and 5-D, with and without align_corners.
- broadcast_tensors of three ranks / shapes (Paddle 3 exports PaddleDetection's Mask R-CNN mask paste with
  it): the legacy op and PIR's pd_op.broadcast_tensors between a combine and a split.
"""
from __future__ import annotations

from typing import Any


def define(m: Any) -> None:
    import paddle

    model, _op, F32 = m.model, m._op, m.F32

    @model("matrix_nms_out_only", ("boxes", [2, 10, 4], F32, (0.0, 1.0)), ("scores", [2, 3, 10], F32, (0.0, 1.0)))
    def _(boxes, scores):
        xy = boxes[:, :, 0:2] * 6.0
        b = paddle.concat([xy, xy + 1.0 + boxes[:, :, 2:4] * 4.0], axis=2)
        out, _index, _rois = _op("matrix_nms", {"BBoxes": b, "Scores": scores},
                                 {"background_label": -1, "score_threshold": 0.1, "post_threshold": 0.2,
                                  "nms_top_k": 5, "keep_top_k": 8, "normalized": False, "use_gaussian": True,
                                  "gaussian_sigma": 2.0},
                                 {"Out": F32, "Index": "int32", "RoisNum": "int32"})
        return [out]

    @model("set_value_tensor_bounds", ("x", [6, 4, 5], F32, None), ("v", [2, 1, 1], F32, None),
           ("lo", [2], "int64", (0, 2)))
    def _(x, v, lo):
        # starts / ends / steps as one 1-D tensor each: slices [lo0 : lo0+3 : 2, lo1 : lo1+1 : 1] of axes 0, 1
        hi = lo + paddle.to_tensor([3, 1], dtype="int64")
        st = paddle.full([2], 1, "int64") + paddle.to_tensor([1, 0], dtype="int64")
        return [_op("set_value", {"Input": x, "ValueTensor": v, "StartsTensorList": [lo[0:1], lo[1:2]],
                                  "EndsTensorList": [hi[0:1], hi[1:2]], "StepsTensorList": [st[0:1], st[1:2]]},
                    {"axes": [0, 1], "starts": [], "ends": [], "steps": [], "decrease_axes": [], "none_axes": [],
                     "shape": [], "dtype": 5}, {"Out": F32})]

    @model("grid_sampler_nearest_halves", ("x", [1, 2, 4, 8], F32, None), ("v", [1, 2, 2, 4, 5], F32, None))
    def _(x, v):
        import numpy as np

        def grid(gx: np.ndarray, gy: np.ndarray, gz: np.ndarray | None = None) -> Any:
            g = np.stack([gx, gy] + ([gz] if gz is not None else []), -1).astype(np.float32)
            return paddle.assign(g[None, None] if gz is None else g[None, None, None])

        def sample(t: Any, g: Any, padding: str, align: bool) -> Any:
            return _op("grid_sampler", {"X": t, "Grid": g}, {"mode": "nearest", "padding_mode": padding,
                                                             "align_corners": align}, {"Output": F32})

        k = np.arange(-1, 8, dtype=np.float64)  # k + 0.5 for k = -1 .. 7
        # align_corners=False: u = (g + 1) * S / 2 - 0.5 = k + 0.5  <=>  g = 2 (k + 1) / S - 1 (exact for S = 4, 8)
        gx, gy = 2 * (k + 1) / 8 - 1, 2 * (np.minimum(k, 3) + 1) / 4 - 1
        # align_corners=True on the 5-wide axes: u = (g + 1) * (S - 1) / 2 = k + 0.5  <=>  g = (2k + 1) / 4 - 1
        ka = np.arange(-1, 5, dtype=np.float64)
        ga = (2 * ka + 1) / 4 - 1
        return [sample(x, grid(gx, gy), "zeros", False), sample(x, grid(gx, gy), "border", False),
                sample(x, grid(gx[::-1], gy), "reflection", False),
                sample(v, grid(ga, ga[::-1], np.zeros_like(ga)), "zeros", True),
                sample(v, grid(ga, ga, np.full_like(ga, -1.0)), "border", True)]

    @model("int_bool_arith", ("a", [3, 4], "int32", (-50, 50)), ("b", [3, 4], "int32", (-50, 50)),
           ("c", [3, 4], "int64", (-1000, 1000)), ("d", [3, 4], "int64", (-1000, 1000)), ("x", [3, 4], F32, None))
    def _(a, b, c, d, x):
        p, q = paddle.cast(a, "bool"), x > 0.0
        outs = [_op("sum", {"X": [a, b, a]}, {}, {"Out": "int32"}), _op("sum", {"X": [c, d]}, {}, {"Out": "int64"})]
        for t in ("elementwise_add", "elementwise_mul"):
            outs.append(_op(t, {"X": p, "Y": q}, {"axis": -1}, {"Out": "bool"}))
        return outs

    @model("broadcast_tensors_ranks", ("x", [2, 1, 4], F32, None), ("y", [3, 1], F32, None), ("z", [1, 3, 4], F32, None))
    def _(x, y, z):
        # every input broadcast to the common shape [2, 3, 4] (the rank-2 y aligned from the right); one
        # op with a three-tensor X and Out (PIR: pd_op.broadcast_tensors on a combine, a split after)
        from paddle.base.layer_helper import LayerHelper

        helper = LayerHelper("broadcast_tensors")
        outs = [helper.create_variable_for_type_inference(F32) for _ in range(3)]
        helper.append_op(type="broadcast_tensors", inputs={"X": [x, y, z]}, outputs={"Out": outs})
        return [o * 1.0 for o in outs]
