"""Host kernels of the NMS family (Paddle's CPU semantics, orders and empty-result forms):
multiclass_nms, multiclass_nms2, multiclass_nms3 and matrix_nms.

multiclass NMS (Paddle's MultiClassNMS / NMSFast), per image and class c != background_label:
candidates with score > score_threshold, stably sorted by score (descending), the first nms_top_k;
greedy: keep a candidate when its IoU with every kept box is <= the adaptive threshold (which
becomes threshold * nms_eta after each keep while it is > 0.5). Then, when the image keeps more
than keep_top_k (> -1), the keep_top_k best (stable by score over (label, NMS order)). Rows
[label, score, box...] by label, in NMS order within a label (the 2-D "RoisNum" form: by box index).
Index: the kept box's row in the flattened input (3-D: n * M + i; 2-D: row * C + label).
Nothing kept: Out [0, 2 + box] with an Index output, else Out = [[-1]] (Paddle's LoD form).

Inputs: 3-D Scores [N, C, M] with BBoxes [N, M, 4|8|16|24|32] (polygon boxes: IoU of the
polygons), or 2-D Scores [M, C] with per-class BBoxes [M, C, 4] split into images by RoisNum
(without RoisNum: one image).

matrix_nms (Matrix NMS, SOLOv2): per class, candidates over score_threshold sorted by score (the
first nms_top_k); each candidate's score decays by min over higher-scored j of
(1 - iou_ij) / (1 - max_iou_j) (linear) or exp((max_iou_j^2 - iou_ij^2) * sigma) (gaussian); kept
when the decayed score > post_threshold; then the keep_top_k best over all classes.
Paddle sorts here with std::partial_sort (a heap sort): ties between equal scores are ordered
as libstdc++'s heap orders them, reproduced by `heap_partial_sort`.
"""
from __future__ import annotations

import numpy as np

from pdlite.errors import KernelError
from pdlite.kernels.host.extra import ANY, Ins, Outs, present
from pdlite.kernels.registry import Kernel, register_kernel


# --- IoU ------------------------------------------------------------------------------------------
def box_area(b: np.ndarray, normalized: bool) -> np.ndarray:
    """Paddle's BBoxArea: 0 for an inverted box, (w + 1) * (h + 1) when not normalized."""
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    if not normalized:
        w, h = w + 1, h + 1
    return np.where((b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1]), np.zeros_like(w), w * h)


def jaccard(box: np.ndarray, others: np.ndarray, normalized: bool) -> np.ndarray:
    """Paddle's JaccardOverlap of one box [4] with each of others [K, 4], in the boxes' dtype."""
    apart = (others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3]) | (others[:, 3] < box[1])
    norm = box.dtype.type(0 if normalized else 1)
    iw = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]) + norm
    ih = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]) + norm
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (box_area(box, normalized) + box_area(others, normalized) - inter)
    return np.where(apart, np.zeros_like(iou), iou)


def _poly_area(pts: np.ndarray) -> float:
    x, y = pts[:, 0], pts[:, 1]
    return abs(float(np.sum(x * np.roll(y, -1) - y * np.roll(x, -1)))) / 2.0


def _side(a: tuple[float, float], b: tuple[float, float], p: tuple[float, float]) -> float:
    """> 0 when p is left of the directed edge a -> b."""
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def _clip_convex(subject: list[tuple[float, float]], clip: np.ndarray) -> list[tuple[float, float]]:
    """Sutherland-Hodgman: `subject` clipped by the convex counter-clockwise polygon `clip`."""
    out = subject
    for k in range(len(clip)):
        if not out:
            break
        a, b = tuple(clip[k]), tuple(clip[(k + 1) % len(clip)])
        src, out = out, []
        for i, p in enumerate(src):
            q = src[(i + 1) % len(src)]
            dp, dq = _side(a, b, p), _side(a, b, q)
            if (dp >= 0) != (dq >= 0):
                t = dp / (dp - dq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
            if dq >= 0:
                out.append(q)
    return out


def _convex_ccw(pts: np.ndarray) -> np.ndarray | None:
    """The polygon counter-clockwise when it is convex, else None."""
    d = np.roll(pts, -1, axis=0) - pts
    turn = d[:, 0] * np.roll(d[:, 1], -1) - d[:, 1] * np.roll(d[:, 0], -1)
    if np.all(turn >= 0):
        return pts
    if np.all(turn <= 0):
        return pts[::-1]
    return None


def poly_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two polygons given as flat [x1, y1, x2, y2, ...] (Paddle's PolyIoU; 0 for empty areas)."""
    pa, pb = a.reshape(-1, 2).astype(np.float64), b.reshape(-1, 2).astype(np.float64)
    area_a, area_b = _poly_area(pa), _poly_area(pb)
    clip = _convex_ccw(pa)
    if clip is None:
        raise KernelError("multiclass_nms: polygon boxes must be convex for pdlite's polygon IoU "
                          f"(got the non-convex polygon {pa.tolist()})")
    inter = _clip_convex([tuple(p) for p in pb], clip)
    inter_area = _poly_area(np.array(inter)) if len(inter) >= 3 else 0.0
    if area_a == 0 or area_b == 0 or inter_area == 0:
        return 0.0
    return inter_area / (area_a + area_b - inter_area)


# --- multiclass NMS ------------------------------------------------------------------------------
def nms_fast(boxes: np.ndarray, scores: np.ndarray, attrs: dict) -> list[int]:
    """Paddle's NMSFast over one class: kept box indices in keep (score) order."""
    dt = scores.dtype.type
    cand = np.flatnonzero(scores > dt(attrs["score_threshold"]))
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    top_k = int(attrs["nms_top_k"])
    if -1 < top_k < len(cand):
        cand = cand[:top_k]
    thresh, eta = dt(attrs["nms_threshold"]), dt(attrs["nms_eta"])
    normalized = bool(attrs["normalized"])
    if boxes.shape[1] == 4 and not (eta < 1 and thresh > 0.5):
        return _nms_fixed_threshold(boxes, cand, thresh, normalized)
    keep: list[int] = []
    for i in cand:
        if keep:
            if boxes.shape[1] == 4:
                overlaps = jaccard(boxes[i], boxes[keep], normalized)
            else:
                overlaps = np.array([poly_iou(boxes[i], boxes[k]) for k in keep])
            if not np.all(overlaps <= thresh):
                continue
        keep.append(int(i))
        if eta < 1 and thresh > 0.5:
            thresh = dt(thresh * eta)
    return keep


def _nms_fixed_threshold(boxes: np.ndarray, cand: np.ndarray, thresh: np.floating, normalized: bool) -> list[int]:
    """NMSFast when the threshold never adapts: each kept box suppresses the later candidates it overlaps
    (IoU > thresh), one vectorised row per kept box. Same set and order as testing each candidate against
    the kept boxes, since the IoU is symmetric (a + b == b + a in IEEE arithmetic)."""
    alive = np.ones(len(cand), bool)
    keep: list[int] = []
    over = iou_matrix(boxes[cand], normalized) > thresh if len(cand) <= MATRIX_MAX else None
    for i in range(len(cand)):
        if not alive[i]:
            continue
        keep.append(int(cand[i]))
        if over is not None:
            alive[i + 1:] &= ~over[i, i + 1:]
            continue
        rest = i + 1 + np.flatnonzero(alive[i + 1:])
        if len(rest):
            alive[rest[jaccard(boxes[cand[i]], boxes[cand[rest]], normalized) > thresh]] = False
    return keep


MATRIX_MAX = 2048  # candidates up to which one class's IoU matrix is computed at once


def iou_matrix(b: np.ndarray, normalized: bool) -> np.ndarray:
    """jaccard of every pair of boxes [K, 4] -> [K, K], elementwise the same float operations."""
    x0, y0, x1, y1 = (b[:, k] for k in range(4))
    apart = (x0[None, :] > x1[:, None]) | (x1[None, :] < x0[:, None]) | (y0[None, :] > y1[:, None]) \
        | (y1[None, :] < y0[:, None])
    norm = b.dtype.type(0 if normalized else 1)
    iw = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :]) + norm
    ih = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :]) + norm
    inter = iw * ih
    area = box_area(b, normalized)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area[:, None] + area[None, :] - inter)
    iou[apart] = 0
    return iou


def multiclass_nms_image(boxes: np.ndarray, scores: np.ndarray, attrs: dict, per_class_boxes: bool
                         ) -> dict[int, list[int]]:
    """Paddle's MultiClassNMS for one image: label -> kept box indices, in output order.

    3-D form: scores [C, M], boxes [M, box]; 2-D form (per_class_boxes): scores [M, C], boxes [M, C, 4].
    """
    n_class = scores.shape[1] if per_class_boxes else scores.shape[0]
    background = int(attrs["background_label"])

    def cls_scores(c: int) -> np.ndarray:
        return scores[:, c] if per_class_boxes else scores[c]

    kept: dict[int, list[int]] = {}
    for c in range(n_class):
        if c == background:
            continue
        idx = nms_fast(boxes[:, c] if per_class_boxes else boxes, cls_scores(c), attrs)
        kept[c] = sorted(idx) if per_class_boxes else idx
    keep_top_k = int(attrs["keep_top_k"])
    total = sum(len(v) for v in kept.values())
    if -1 < keep_top_k < total:
        pairs = [(c, i) for c in sorted(kept) for i in kept[c]]
        sc = np.array([cls_scores(c)[i] for c, i in pairs], np.float32)  # Paddle pairs the scores as float
        order = np.argsort(-sc, kind="stable")[:keep_top_k]
        kept = {}
        for j in order:
            c, i = pairs[j]
            kept.setdefault(c, []).append(i)
        if per_class_boxes:
            kept = {c: sorted(v) for c, v in kept.items()}
    return {c: kept[c] for c in sorted(kept) if kept[c]}


class MulticlassNms(Kernel):
    """multiclass_nms (Out), multiclass_nms2 (+ Index), multiclass_nms3 (+ RoisNum input, NmsRoisNum output)."""

    def run(self, ins: Ins) -> Outs:
        boxes, scores = ins["BBoxes"][0], ins["Scores"][0]
        a = self.attrs
        per_class = scores.ndim == 2
        if per_class:
            counts = (ins["RoisNum"][0].reshape(-1).astype(np.int64) if ins.get("RoisNum")
                      else np.array([scores.shape[0]], np.int64))
            if counts.sum() != scores.shape[0]:
                raise KernelError(f"{self.op.type}: RoisNum sums to {int(counts.sum())} but Scores has "
                                  f"{scores.shape[0]} rows")
            starts = np.concatenate([[0], np.cumsum(counts)])
            images = [(int(starts[i]), int(starts[i + 1])) for i in range(len(counts))]
        else:
            images = [(i, i + 1) for i in range(scores.shape[0])]
        box_dim = boxes.shape[-1]
        rows: list[np.ndarray] = []
        index: list[int] = []
        nums: list[int] = []
        for i, (lo, hi) in enumerate(images):
            if per_class:
                if lo == hi:
                    nums.append(0)
                    continue
                b, s, c = boxes[lo:hi], scores[lo:hi], scores.shape[1]
            else:
                b, s = boxes[i], scores[i]
            kept = multiclass_nms_image(b, s, a, per_class)
            n = 0
            for label, idx in kept.items():
                for k in idx:
                    box = b[k, label] if per_class else b[k]
                    score = s[k, label] if per_class else s[label, k]
                    rows.append(np.concatenate([[label, score], box]).astype(boxes.dtype))
                    index.append(lo * c + k * c + label if per_class else i * scores.shape[2] + k)
                    n += 1
            nums.append(n)
        has_index = bool(self.op.outputs.get("Index"))
        if rows:
            out = np.stack(rows)
        elif has_index:
            out = np.zeros((0, box_dim + 2), boxes.dtype)
        else:  # Paddle's "no detection" LoD form
            out = np.full((1, 1), -1, boxes.dtype)
            nums = [1] + [0] * (len(nums) - 1)
        return present(self.op, {"Out": [out], "Index": [np.array(index, np.int32).reshape(-1, 1)],
                                 "NmsRoisNum": [np.array(nums, np.int32)]})


register_kernel("multiclass_nms")(MulticlassNms)
register_kernel("multiclass_nms2", outputs={"Index": ANY})(MulticlassNms)
register_kernel("multiclass_nms3", inputs={"RoisNum": ANY}, outputs={"Index": ANY, "NmsRoisNum": ANY})(MulticlassNms)


# --- matrix NMS ----------------------------------------------------------------------------------
def _adjust_heap(a: list, hole: int, n: int, value, less) -> None:
    top, child = hole, hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if less(a[child], a[child - 1]):
            child -= 1
        a[hole] = a[child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[hole] = a[child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[parent], value):
        a[hole] = a[parent]
        hole = parent
        parent = (hole - 1) // 2
    a[hole] = value


def heap_partial_sort(items: list, middle: int, less) -> list:
    """libstdc++'s std::partial_sort(first, first + middle, last, less): the first `middle` items sorted."""
    a = list(items)
    if middle <= 0:
        return a
    if middle > 1:
        for parent in range((middle - 2) // 2, -1, -1):
            _adjust_heap(a, parent, middle, a[parent], less)
    for i in range(middle, len(a)):
        if less(a[i], a[0]):
            value, a[i] = a[i], a[0]
            _adjust_heap(a, 0, middle, value, less)
    for end in range(middle - 1, 0, -1):
        value, a[end] = a[end], a[0]
        _adjust_heap(a, 0, end, value, less)
    return a


def sort_desc_like_partial_sort(keys: np.ndarray, items: np.ndarray, middle: int) -> np.ndarray:
    """`items` ordered as std::partial_sort by descending key would order the first `middle` of them."""
    if len(np.unique(keys)) == len(keys):  # no ties: the heap's order is the plain descending order
        return items[np.argsort(-keys, kind="stable")[:middle]]
    pos = heap_partial_sort(list(range(len(items))), middle, lambda i, j: keys[i] > keys[j])
    return items[np.array(pos[:middle], np.int64)]


def matrix_nms_class(boxes: np.ndarray, scores: np.ndarray, a: dict) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's NMSMatrix for one class: (kept box indices, decayed scores)."""
    dt = scores.dtype.type
    cand = np.flatnonzero(scores > dt(a["score_threshold"]))
    if len(cand) == 0:
        return np.zeros(0, np.int64), np.zeros(0, scores.dtype)
    top_k = int(a["nms_top_k"])
    num = min(len(cand), top_k) if top_k > -1 else len(cand)
    perm = sort_desc_like_partial_sort(scores[cand], cand, num)
    normalized = bool(a["normalized"])
    iou = np.zeros((num, num), scores.dtype)
    for i in range(1, num):
        iou[i, :i] = jaccard(boxes[perm[i]], boxes[perm[:i]], normalized)
    iou_max = np.array([dt(0)] + [iou[i, :i].max() for i in range(1, num)], scores.dtype)
    s = scores[perm]
    post = dt(a["post_threshold"])
    decayed = np.empty(num, scores.dtype)
    decayed[0] = s[0]
    if num > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            if a["use_gaussian"]:
                sigma = dt(a["gaussian_sigma"])
                decay = np.exp((iou_max[None, :] * iou_max[None, :] - iou * iou) * sigma)
            else:
                decay = (dt(1) - iou) / (dt(1) - iou_max[None, :])
        lower = np.tril(np.ones((num, num), bool), -1)
        min_decay = np.minimum(np.where(lower, decay, np.inf).min(axis=1), dt(1)).astype(scores.dtype)
        decayed[1:] = (min_decay * s)[1:]
    keep = decayed > post
    return perm[keep], decayed[keep]


@register_kernel("matrix_nms", outputs={"Index": ANY, "RoisNum": ANY})
class MatrixNms(Kernel):
    """Out rows [label, decayed score, box...] by decayed score; Index n * M + i; RoisNum per image."""

    def run(self, ins: Ins) -> Outs:
        boxes, scores = ins["BBoxes"][0], ins["Scores"][0]
        a = self.attrs
        n_img, n_class, m = scores.shape
        background, keep_top_k = int(a["background_label"]), int(a["keep_top_k"])
        rows, index, nums = [], [], []
        for n in range(n_img):
            idx_l, sc_l, cls_l = [], [], []
            for c in range(n_class):
                if c == background:
                    continue
                idx, sc = matrix_nms_class(boxes[n], scores[n, c], a)
                idx_l.append(idx)
                sc_l.append(sc)
                cls_l.append(np.full(len(idx), c))
            all_idx = np.concatenate(idx_l) if idx_l else np.zeros(0, np.int64)
            all_sc = np.concatenate(sc_l) if sc_l else np.zeros(0, scores.dtype)
            all_cls = np.concatenate(cls_l) if cls_l else np.zeros(0, np.int64)
            num = len(all_idx) if keep_top_k <= -1 else min(len(all_idx), keep_top_k)
            order = sort_desc_like_partial_sort(all_sc, np.arange(len(all_idx)), num) if num else []
            for p in order:
                rows.append(np.concatenate([[all_cls[p], all_sc[p]], boxes[n, all_idx[p]]]).astype(boxes.dtype))
                index.append(n * m + int(all_idx[p]))
            nums.append(num)
        out = np.stack(rows) if rows else np.zeros((0, boxes.shape[2] + 2), boxes.dtype)
        return present(self.op, {"Out": [out], "Index": [np.array(index, np.int32).reshape(-1, 1)],
                                 "RoisNum": [np.array(nums, np.int32)]})


@register_kernel("nms", outputs={"KeepBoxesIdxs": ANY})
class Nms(Kernel):
    """Paddle's NMSKernel: box i is kept unless an earlier kept box has IoU (no +1 sizes) > iou_threshold."""

    def run(self, ins: Ins) -> Outs:
        b = ins["Boxes"][0]
        thresh = b.dtype.type(self.attrs["iou_threshold"])
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        suppressed = np.zeros(len(b), bool)
        for i in range(len(b)):
            if suppressed[i]:
                continue
            rest = np.arange(i + 1, len(b))
            iw = np.minimum(b[i, 2], b[rest, 2]) - np.maximum(b[i, 0], b[rest, 0])
            ih = np.minimum(b[i, 3], b[rest, 3]) - np.maximum(b[i, 1], b[rest, 1])
            inter = np.where(iw > 0, iw, 0) * np.where(ih > 0, ih, 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                over = inter / (area[i] + area[rest] - inter) > thresh
            suppressed[rest[over]] = True
        return {"KeepBoxesIdxs": [np.flatnonzero(~suppressed).astype(np.int64)]}
