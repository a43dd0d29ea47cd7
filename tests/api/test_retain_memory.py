"""The `host_retain_memory` option (pdlite/runtime/memory.py): glibc malloc's thresholds are raised once per
process when a host program is built, and left alone when the option is off. Each case runs in a fresh process
(the setting is process-wide)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

SCRIPT = r"""
import sys
import numpy as np
from pdlite.lite import CxxConfig, create_paddle_predictor
from pdlite.runtime import memory
from tests.conftest import model_dir
cfg = CxxConfig()
cfg.set_model_dir(str(model_dir("mobilenet_v3_small")))
if sys.argv[1] == "off":
    cfg.set_option("host_retain_memory", False)
pred = create_paddle_predictor(cfg)
pred.predict([np.zeros((1, 3, 224, 224), np.float32)])
print(memory._done)
"""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(mode: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def test_thresholds_set_by_default_on_glibc():
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt thresholds are glibc's")
    assert _run("on") == "True"


def test_option_off_leaves_malloc_alone():
    assert _run("off") == "None"
