"""Calibration observers: the activation scale (the float mapped to 127) from calibration batches.

- abs_max: max |x| over all batches.
- hist: the |x| value below which `percent` (default 0.99999) of all |x| fall, from a 2048-bin histogram
  over [0, max|x|] (Paddle's `hist`).
- KL: TensorRT's entropy calibration: the threshold t (a histogram bin edge, 2048 bins) minimising
  KL(P || Q), P the clipped reference distribution of |x| below t (outliers folded into its last bin),
  Q the same quantized to 128 levels and expanded back (Paddle's `KL`).
hist and KL need two passes: `update` during the first (max|x|), `update_hist` during the second.

Outputs of BOUNDED_OPS (sigmoid, hard_sigmoid: squeeze-excitation gates, in [0, 1] by construction) are always
calibrated abs_max: a hist / KL threshold below their maximum clips the gates near 1, the channels the block
passes through (the MobileNetV3-small fixture with KL: max |int8 - float| 0.120 of max|float| with its 9 gates
clipped, 0.096 with them abs_max; 0.100 with the gates and pools left float).
"""
from __future__ import annotations

import numpy as np

from pdlite.errors import ConfigError

ALGOS = ("abs_max", "hist", "KL")
BINS = 2048
BOUNDED_OPS = ("sigmoid", "hard_sigmoid")  # their outputs: abs_max whatever the algorithm (module doc)


class Observer:
    """Collects |x| statistics of one tensor; `scale()` gives its quantization scale."""

    two_pass = False

    def __init__(self) -> None:
        self.max = 0.0

    def update(self, x: np.ndarray) -> None:
        if x.size:
            self.max = max(self.max, float(np.abs(x).max()))

    def update_hist(self, x: np.ndarray) -> None:  # noqa: B027 - only the two-pass observers use it
        """Second pass (two-pass observers only)."""

    def scale(self) -> float:
        return self.max


class HistObserver(Observer):
    two_pass = True

    def __init__(self, percent: float = 0.99999) -> None:
        super().__init__()
        self.percent = percent
        self.hist = np.zeros(BINS, np.float64)

    def update_hist(self, x: np.ndarray) -> None:
        if self.max > 0 and x.size:
            self.hist += np.histogram(np.abs(x), bins=BINS, range=(0.0, self.max))[0]

    def _width(self) -> float:
        return self.max / BINS

    def scale(self) -> float:
        total = self.hist.sum()
        if total == 0:
            return self.max
        idx = int(np.searchsorted(np.cumsum(self.hist) / total, self.percent))
        return float(min(idx + 1, BINS) * self._width())


class KLObserver(HistObserver):
    def __init__(self, levels: int = 128, stride: int = 8) -> None:
        super().__init__()
        self.levels, self.stride = levels, stride

    def scale(self) -> float:
        hist = self.hist
        if hist.sum() == 0:
            return self.max
        best, best_i = np.inf, BINS
        for i in range(self.levels, BINS + 1, self.stride):
            p = hist[:i].copy()
            p[-1] += hist[i:].sum()
            nonzero = hist[:i] != 0
            # quantize the first i bins into `levels` groups and spread each group's mass over its nonzero bins
            groups = np.minimum((np.arange(i) * self.levels) // i, self.levels - 1)
            mass = np.bincount(groups, weights=hist[:i], minlength=self.levels)
            count = np.bincount(groups, weights=nonzero.astype(np.float64), minlength=self.levels)
            q = np.where(nonzero, mass[groups] / np.maximum(count[groups], 1), 0.0)
            ps, qs = p.sum(), q.sum()
            if ps == 0 or qs == 0:
                continue
            p, q = p / ps, q / qs
            m = p > 0
            if np.any(m & (q == 0)):
                kl = np.inf
            else:
                kl = float(np.sum(p[m] * np.log(p[m] / q[m])))
            if kl < best:
                best, best_i = kl, i
        return float((best_i + 0.5) * self._width()) if best_i < BINS else self.max


def make_observer(algo: str, writer: str | None = None) -> Observer:
    """The observer of `algo` for a value written by an op of type `writer` (abs_max for BOUNDED_OPS)."""
    if algo == "abs_max" or (writer in BOUNDED_OPS and algo in ALGOS):
        return Observer()
    if algo == "hist":
        return HistObserver()
    if algo == "KL":
        return KLObserver()
    raise ConfigError(f"unknown calibration algorithm {algo!r}; expected one of {', '.join(ALGOS)}")
