#!/usr/bin/env bash
# Type-check pdlite's public API with mypy (config: [tool.mypy] in pyproject.toml): the package's __init__, the
# paddlelite API (pdlite.lite, pdlite/api), paddle.inference's (pdlite.inference), the errors, pdlite.apps.ocr's
# entry and the Ray integration. The modules they import are analysed for types but not reported
# (follow_imports = "silent"). Usage: .ci/typecheck.sh [python]   (about 30-60 s on 2 cores)
set -euo pipefail
py=${1:-python}
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; esac  # absolute: the script changes folders
cd "$(dirname "$0")/.."
"$py" -m mypy --version >/dev/null 2>&1 || "$py" -m pip install -q "mypy>=1.10"
"$py" -m mypy pdlite/__init__.py pdlite/lite.py pdlite/inference.py pdlite/api pdlite/errors.py \
    pdlite/apps/ocr/__init__.py pdlite/integrations/ray.py
