"""Post-training static quantization: calibration observers and the program rewrite that writes
Paddle's QDQ format (quantize_linear / dequantize_linear, int8 per-channel weights).

`pdlite quantize` (pdlite/tools/quantize.py) runs the float model over the user's calibration inputs,
feeds the observers here and calls `insert_qdq`; this package never runs a model itself.
"""
from __future__ import annotations

from pdlite.optimizer.quantization.calibration import ALGOS, BOUNDED_OPS, Observer, make_observer
from pdlite.optimizer.quantization.qdq import (
                                               ACTIVATION_OPS,
                                               DEFAULT_OPS,
                                               QUANTIZABLE,
                                               QuantTarget,
                                               insert_qdq,
                                               quant_targets,
)

__all__ = ["ACTIVATION_OPS", "ALGOS", "BOUNDED_OPS", "DEFAULT_OPS", "QUANTIZABLE", "Observer", "QuantTarget", "insert_qdq", "make_observer", "quant_targets"]
