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
    """NMSFast when the threshold never adapts: candidate j (in score order) is kept unless an earlier kept
    candidate i suppresses it (not IoU(i, j) <= thresh: a NaN IoU suppresses). Same set and order as testing
    each candidate against the kept boxes one by one (the IoU is symmetric: a + b == b + a in IEEE
    arithmetic), found without the K x K matrix: `suppressing_pairs` lists the suppressing pairs and
    `greedy_keep` decides the candidates."""
    first, later = suppressing_pairs(boxes[cand], thresh, normalized)
    return cand[greedy_keep(len(cand), first, later)].tolist()


def greedy_keep(k: int, first: np.ndarray, later: np.ndarray, rounds: int = 8) -> np.ndarray:
    """Greedy NMS over candidates 0..k-1 in order, given the pairs (first < later) where `first` would
    suppress `later`: a candidate is kept unless a kept candidate before it suppresses it.

    Decided in rounds first (a candidate with a kept suppressor is out; one whose suppressors are all out
    is kept), which settles short chains with a few vectorised passes; what is left is decided in order."""
    keep = np.ones(k, bool)
    if not len(later):
        return keep
    state = np.zeros(k, np.int8)  # 0 undecided, 1 kept, 2 suppressed
    degree = np.bincount(later, minlength=k)
    state[degree == 0] = 1
    for _ in range(rounds):
        s_first = state[first]
        out = np.bincount(later[s_first == 1], minlength=k) > 0
        gone = np.bincount(later[s_first == 2], minlength=k) == degree
        undecided = state == 0
        state[undecided & out] = 2
        state[undecided & ~out & gone] = 1
        if not (state == 0).any():
            return state == 1
    left = state[later] == 0
    first, later = first[left], later[left]
    order = np.argsort(later, kind="stable")
    first, later = first[order], later[order]
    js, starts = np.unique(later, return_index=True)
    ends = np.append(starts[1:], len(later))
    keep = state != 2
    for j, a, b in zip(js.tolist(), starts.tolist(), ends.tolist()):
        # every earlier candidate is final here: decided in the rounds, or earlier in this ascending pass
        keep[j] = not keep[first[a:b]].any()
    return keep


BLOCK = 256  # boxes per block of the pairwise overlap test (bounds the temporaries at BLOCK x K)


def suppressing_pairs(b: np.ndarray, thresh: np.floating, normalized: bool) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) with i < j where b[i] suppresses b[j]: not IoU(b[i], b[j]) <= thresh (Paddle's keep test, so a
    NaN IoU suppresses), the IoU as Paddle's JaccardOverlap computes it (boxes [K, 4]).

    With thresh >= 0 only boxes that are not apart can be over it (an apart pair's IoU is 0), so the exact
    IoU (`pair_iou`, the same float operations as `jaccard`) is computed only for the pairs that
    `overlap_candidates` lets through."""
    k = len(b)
    area = box_area(b, normalized)
    if not thresh >= 0:  # a negative threshold: every pair can be over it
        i, j = np.triu_indices(k, 1)
        over = ~(pair_iou(b[i], b[j], normalized, area[i], area[j]) <= thresh)
        return i[over], j[over]
    firsts, laters = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i, j in overlap_candidates(b, strict=False):
        over = ~(pair_iou(b[i], b[j], normalized, area[i], area[j]) <= thresh)  # NaN suppresses
        firsts.append(i[over])
        laters.append(j[over])
    return np.concatenate(firsts), np.concatenate(laters)


def overlap_candidates(b: np.ndarray, strict: bool):
    """Blocks (i, j), i < j, of the pairs of boxes [K, 4] that may overlap; every other pair is apart.

    strict False: not apart by Paddle's JaccardOverlap test (touching boxes count; a NaN coordinate is never
    apart). strict True: a positive overlap in both axes (x0_j < x1_i and x1_j > x0_i, the same in y).
    Found on the boxes sorted by x0, block by block: box q after box p in that order with x0_q > x1_p
    (>= when strict) is apart from p, so a block's columns end where x0 passes its largest x1."""
    k = len(b)
    if k < 2:
        return
    order = np.argsort(b[:, 0], kind="stable")
    x0, y0, x1, y1 = (np.asarray(b[order, c], order="C") for c in range(4))
    stop = np.searchsorted(x0, x1, side="left" if strict else "right")  # sorted rows >= stop[p]: apart
    if not strict and np.isnan(x0[-1]):  # a NaN x0 sorts last but is never apart (NaN comparisons are false)
        stop[:] = k
    for s in range(0, k - 1, BLOCK):
        e = min(s + BLOCK, k - 1)
        hi = max(int(stop[s:e].max()), e + 1)
        rows, cols = slice(s, e), slice(s + 1, hi)
        if strict:
            near = (x0[None, cols] < x1[rows, None]) & (x1[None, cols] > x0[rows, None])
            near &= (y0[None, cols] < y1[rows, None]) & (y1[None, cols] > y0[rows, None])
        else:  # Paddle's apart test, negated
            near = (x0[None, cols] > x1[rows, None]) | (x1[None, cols] < x0[rows, None])
            near |= (y0[None, cols] > y1[rows, None]) | (y1[None, cols] < y0[rows, None])
            np.logical_not(near, out=near)
        r, c = np.nonzero(near)
        upper = r < c + 1  # sorted row p = s + r before column q = s + 1 + c
        i, j = order[r[upper] + s], order[c[upper] + s + 1]
        if len(i):
            yield np.minimum(i, j), np.maximum(i, j)  # back to input (score) order: the earlier one first


def pair_iou(a: np.ndarray, o: np.ndarray, normalized: bool, area_a: np.ndarray, area_o: np.ndarray
             ) -> np.ndarray:
    """Paddle's JaccardOverlap of the pairs (a[p], o[p]) of boxes [P, 4] with their `box_area`s, in the
    boxes' dtype (elementwise the same float operations as `jaccard`)."""
    apart = (o[:, 0] > a[:, 2]) | (o[:, 2] < a[:, 0]) | (o[:, 1] > a[:, 3]) | (o[:, 3] < a[:, 1])
    norm = a.dtype.type(0 if normalized else 1)
    iw = np.minimum(a[:, 2], o[:, 2]) - np.maximum(a[:, 0], o[:, 0]) + norm
    ih = np.minimum(a[:, 3], o[:, 3]) - np.maximum(a[:, 1], o[:, 1]) + norm
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iou = inter / (area_a + area_o - inter)
    return np.where(apart, np.zeros_like(iou), iou)


def multiclass_nms_image(boxes: np.ndarray, scores: np.ndarray, attrs: dict, per_class_boxes: bool
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's MultiClassNMS for one image: (labels, box indices) of the kept boxes, in output order
    (by label; within a label in NMS order, or by box index in the 2-D form).

    3-D form: scores [C, M], boxes [M, box]; 2-D form (per_class_boxes): scores [M, C], boxes [M, C, 4].
    """
    n_class = scores.shape[1] if per_class_boxes else scores.shape[0]
    background = int(attrs["background_label"])
    labels, idx = [], []
    for c in range(n_class):
        if c == background:
            continue
        kept = nms_fast(boxes[:, c] if per_class_boxes else boxes, scores[:, c] if per_class_boxes else scores[c],
                        attrs)
        labels.append(np.full(len(kept), c, np.int64))
        idx.append(np.sort(kept) if per_class_boxes else np.asarray(kept, np.int64))
    lab = np.concatenate(labels) if labels else np.zeros(0, np.int64)
    ind = np.concatenate(idx).astype(np.int64) if idx else np.zeros(0, np.int64)
    keep_top_k = int(attrs["keep_top_k"])
    if -1 < keep_top_k < len(ind):
        # Paddle pairs (score as float, (label, index)) and stable-sorts them by score, then regroups by label
        sc = (scores[ind, lab] if per_class_boxes else scores[lab, ind]).astype(np.float32)
        top = np.argsort(-sc, kind="stable")[:keep_top_k]
        top = top[np.lexsort((ind[top], lab[top]))] if per_class_boxes \
            else top[np.argsort(lab[top], kind="stable")]
        lab, ind = lab[top], ind[top]
    return lab, ind


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
        index: list[np.ndarray] = []
        nums: list[int] = []
        for i, (lo, hi) in enumerate(images):
            if per_class and lo == hi:
                nums.append(0)
                continue
            b, s = (boxes[lo:hi], scores[lo:hi]) if per_class else (boxes[i], scores[i])
            lab, ind = multiclass_nms_image(b, s, a, per_class)
            if len(ind):
                box = b[ind, lab] if per_class else b[ind]
                score = s[ind, lab] if per_class else s[lab, ind]
                rows.append(np.concatenate([lab[:, None].astype(boxes.dtype), score[:, None].astype(boxes.dtype),
                                            box.astype(boxes.dtype)], axis=1))
                c = scores.shape[1] if per_class else 0
                index.append(lo * c + ind * c + lab if per_class else i * scores.shape[2] + ind)
            nums.append(len(ind))
        has_index = bool(self.op.outputs.get("Index"))
        if rows:
            out = np.concatenate(rows)
        elif has_index:
            out = np.zeros((0, box_dim + 2), boxes.dtype)
        else:  # Paddle's "no detection" LoD form
            out = np.full((1, 1), -1, boxes.dtype)
            nums = [1] + [0] * (len(nums) - 1)
        idx = np.concatenate(index) if index else np.zeros(0, np.int64)
        return present(self.op, {"Out": [out], "Index": [idx.astype(np.int32).reshape(-1, 1)],
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
    order = np.argsort(-keys, kind="stable")
    top = keys[order[:middle]]
    # the best `middle` keys distinct, and the last of them above the next one: the result is unique,
    # whatever order the heap met the items in
    if len(np.unique(top)) == len(top) and (middle >= len(keys) or keys[order[middle - 1]] > keys[order[middle]]):
        return items[order[:middle]]
    kl = keys.tolist()  # Python floats compare as the float32 keys do, ~10x faster than NumPy scalars
    pos = heap_partial_sort(list(range(len(items))), middle, lambda i, j: kl[i] > kl[j])
    return items[np.array(pos[:middle], np.int64)]


def dense_iou(b: np.ndarray, normalized: bool) -> np.ndarray:
    """[i, j] = jaccard(b[i], b[[j]]) for every pair of boxes [K, 4] (elementwise the same float operations)."""
    x0, y0, x1, y1 = (np.asarray(b[:, c], order="C") for c in range(4))
    apart = x0[None, :] > x1[:, None]
    apart |= x1[None, :] < x0[:, None]
    apart |= y0[None, :] > y1[:, None]
    apart |= y1[None, :] < y0[:, None]
    norm = b.dtype.type(0 if normalized else 1)
    inter = np.minimum(x1[:, None], x1[None, :])
    inter -= np.maximum(x0[:, None], x0[None, :])
    inter += norm
    ih = np.minimum(y1[:, None], y1[None, :])
    ih -= np.maximum(y0[:, None], y0[None, :])
    ih += norm
    inter *= ih
    area = box_area(b, normalized)
    union = np.add(area[:, None], area[None, :], out=ih)
    union -= inter
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iou = np.divide(inter, union, out=inter)
    iou[apart] = 0
    return iou


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
    lower = np.tril(np.ones((num, num), bool), -1)  # [i, j]: j scores higher than i
    iou = np.where(lower, dense_iou(boxes[perm], normalized), 0).astype(scores.dtype)
    iou_max = np.where(lower, iou, -np.inf).max(axis=1).astype(scores.dtype)
    iou_max[0] = 0
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
    """Paddle's NMSKernel: box i is kept unless an earlier kept box has IoU (no +1 sizes, overlap clamped at
    0) > iou_threshold. With a threshold >= 0 only pairs overlapping in both axes can be over it."""

    def run(self, ins: Ins) -> Outs:
        b = ins["Boxes"][0]
        thresh = b.dtype.type(self.attrs["iou_threshold"])
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        if not thresh >= 0:
            return {"KeepBoxesIdxs": [self._loop(b, area, thresh)]}
        firsts, laters = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for i, j in overlap_candidates(b, strict=True):
            over = self._iou(b[i], b[j], area[i], area[j]) > thresh
            firsts.append(i[over])
            laters.append(j[over])
        keep = greedy_keep(len(b), np.concatenate(firsts), np.concatenate(laters))
        return {"KeepBoxesIdxs": [np.flatnonzero(keep).astype(np.int64)]}

    @staticmethod
    def _iou(a: np.ndarray, o: np.ndarray, area_a: np.ndarray, area_o: np.ndarray) -> np.ndarray:
        iw = np.minimum(a[:, 2], o[:, 2]) - np.maximum(a[:, 0], o[:, 0])
        ih = np.minimum(a[:, 3], o[:, 3]) - np.maximum(a[:, 1], o[:, 1])
        inter = np.where(iw > 0, iw, 0) * np.where(ih > 0, ih, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return inter / (area_a + area_o - inter)

    def _loop(self, b: np.ndarray, area: np.ndarray, thresh: np.floating) -> np.ndarray:
        """The kernel box by box (a negative threshold: any pair can be over it)."""
        suppressed = np.zeros(len(b), bool)
        for i in range(len(b)):
            if suppressed[i]:
                continue
            rest = np.arange(i + 1, len(b))
            over = self._iou(b[[i] * len(rest)], b[rest], area[i], area[rest]) > thresh
            suppressed[rest[over]] = True
        return np.flatnonzero(~suppressed).astype(np.int64)
