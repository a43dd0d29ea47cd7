#!/usr/bin/env bash
# A user's fresh clone has no ../shared beside it (the project's shared test-model zoo). The tests that read the
# shared-only models (mobilenet_v1, mobilenet_v2, resnet18) must skip there, saying the folder is absent, and the
# ones that read models the repo carries (tests/fixtures/models) must run from those copies: nothing may fail.
# Clones the committed tree into a temp folder (no ../shared beside it) and runs those tests with this Python
# (the pdlite of the clone is imported: the tests run against the source tree, as the README's test command does).
# Usage: .ci/fresh_clone_check.sh [python]   (about 1-2 minutes on 2 cores)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python}
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; esac  # absolute: the script changes folders
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/repo"
[ ! -e "$tmp/shared" ] || { echo "fresh clone check: $tmp/shared exists" >&2; exit 1; }
cd "$tmp/repo"

# every test file that reads a test model (the conftest helpers model_dir / load_case / find_model / legacy_model
# or the SHARED path): its tests of the shared-only models, and the test that once opened ../shared directly
files=$(grep -rlE "model_dir\(|load_case\(|find_model|legacy_model|SHARED" tests --include='test_*.py' | sort)
log="$tmp/pytest.log"
set +e
"$py" -m pytest -q -p no:cacheprovider -rs -k "mobilenet_v1 or mobilenet_v2 or resnet18 or fc_siblings_on_the_transformer \
    or test_fresh_clone" $files tests/tools/test_fresh_clone.py >"$log" 2>&1
rc=$?
set -e
tail -n 25 "$log"
summary=$(tail -n 1 "$log")
if [ "$rc" -ne 0 ] || echo "$summary" | grep -qE "failed|error"; then
    echo "fresh clone check: tests failed without ../shared (rc $rc)" >&2
    exit 1
fi
# the shared-only models' tests skipped, naming the absent folder; the transformer test ran from the fixture copy
n_absent=$(grep -cE "^SKIPPED .*\.\./shared/models/.* absent" "$log" || true)
[ "$n_absent" -gt 0 ] || { echo "fresh clone check: no test skipped for the absent ../shared/models" >&2; exit 1; }
echo "$summary" | grep -qE "[1-9][0-9]* passed" || { echo "fresh clone check: nothing passed" >&2; exit 1; }
echo "fresh clone check: OK ($n_absent skip lines name the absent ../shared/models; $summary)"
