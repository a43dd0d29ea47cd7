#!/usr/bin/env bash
# Build once, install on many machines: `pip wheel . --no-deps -w DIR` builds pdlite's wheel (the native kernels
# compiled in), a fresh venv installs it (and its runtime dependencies, no extras), and, away from the source tree,
# pdlite imports from the venv, uses the wheel's native kernels, ships py.typed and the OCR models, and runs a model.
# Usage: .ci/wheel_check.sh [python]   (about 1-2 minutes on 2 idle cores, most of it compiling the kernels)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; esac  # absolute: the script changes folders
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
# from a clone of the committed tree: the build leaves nothing in the checkout (build/, *.egg-info), and edits
# under way in it cannot slip into the wheel
git clone -q "$repo" "$tmp/src"
"$py" -m pip wheel "$tmp/src" --no-deps -q -w "$tmp/dist"
wheel=$(ls "$tmp"/dist/pdlite-*.whl)
built=$(date +%s)
echo "wheel check: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) in $((built - start)) s"

"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q "$wheel"
cp -r "$tmp/src/tests/fixtures/models/ppocr_cls_v2" "$tmp/model"
cd "$tmp"  # not the source tree: `import pdlite` must find the installed wheel
"$tmp/venv/bin/python" - "$tmp/model" <<'EOF'
import importlib.resources
import sys

import numpy as np

import pdlite
from pdlite.kernels.host import native

assert "site-packages" in pdlite.__file__, f"pdlite imported from {pdlite.__file__}, not the installed wheel"
assert native.available(), f"the wheel's native kernels are not in use: {native.load_note}"
files = importlib.resources.files(pdlite)
assert (files / "py.typed").is_file(), "py.typed is not in the wheel"
assert (files / "apps" / "ocr" / "models").is_dir(), "the OCR models are not in the wheel"
cfg = pdlite.CxxConfig()
cfg.set_model_dir(sys.argv[1])
pred = pdlite.create_paddle_predictor(cfg)
case = np.load(f"{sys.argv[1]}/case.npz")
(got,) = pred.predict([case["in:x"]])
ref = case["out:softmax_0.tmp_0"]
err = float(np.abs(got - ref).max())
assert err <= 1e-4 * float(np.abs(ref).max()), f"output differs from Paddle's reference by {err}"
print(f"wheel check: pdlite {pdlite.__version__} from {pdlite.__file__}; native kernels {native.isa()}; "
      f"ppocr_cls_v2 within {err:.2g} of Paddle's reference")
EOF
echo "wheel check: OK in $(($(date +%s) - start)) s"
