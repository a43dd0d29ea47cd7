"""The optional packages of the `ocr` extra, imported on first use with a pdlite error naming the extra."""
from __future__ import annotations

import importlib
from types import ModuleType

from pdlite.errors import MissingDependencyError

_PIP = {"cv2": "opencv-python-headless", "pyclipper": "pyclipper", "PIL": "pillow", "yaml": "pyyaml"}


def require(module: str) -> ModuleType:
    """Import `module` (cv2, pyclipper, PIL.*, yaml) or raise MissingDependencyError naming `pip install pdlite[ocr]`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"pdlite ocr needs the package {_PIP.get(module.split('.')[0], module)!r} ({e}): "
            "pip install pdlite[ocr]") from None
