"""NNAdapter device drivers, one file per device (importing this package registers them).

Importing a driver module never imports its runtime package; `Driver()` does, and raises a
DriverUnavailable error naming the pip extra when the package is missing.
"""
from __future__ import annotations

from pdlite.nnadapter.drivers import intel_openvino, onnxruntime  # noqa: F401
