"""Channel-last <-> channel-first moves for host kernels of any rank (NWC, NHWC, NDHWC)."""
from __future__ import annotations

import numpy as np


def to_channels_first(x: np.ndarray, channel_last: bool) -> np.ndarray:
    """N C ... from N ... C (contiguous); x itself when already channel-first."""
    return np.asarray(np.moveaxis(x, -1, 1), order="C") if channel_last else x


def from_channels_first(y: np.ndarray, channel_last: bool) -> np.ndarray:
    """N ... C from N C ... (contiguous); y itself when channel-first is wanted."""
    return np.asarray(np.moveaxis(y, 1, -1), order="C") if channel_last else y
