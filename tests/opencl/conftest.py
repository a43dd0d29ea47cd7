"""The OpenCL tests need pyopencl and an OpenCL platform (PoCL's CPU device in CI); they skip otherwise."""
from __future__ import annotations

import pytest

SKIP = "needs pip install pdlite[opencl] and an OpenCL ICD (apt install pocl-opencl-icd)"


def opencl_ready() -> bool:
    try:
        from pdlite.kernels.opencl import device
    except ImportError:
        return False
    return bool(device.platforms()) and any(device._devices(p) for p in device.platforms())  # noqa: SLF001


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if opencl_ready():
        return
    mark = pytest.mark.skip(reason=SKIP)
    for item in items:
        path = str(item.fspath).replace("\\", "/")
        if "tests/opencl/" in path and not path.endswith("test_opencl_errors.py"):  # that one checks the errors
            item.add_marker(mark)
