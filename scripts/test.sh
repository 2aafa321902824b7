#!/usr/bin/env bash
# The full test suite: install tinytorch[dev] into .venv, then
#   1. notebooks are clean (nbdev-clean changes nothing),
#   2. tinytorch/ is in sync with the notebooks (nbdev-export changes nothing),
#   3. pytest (unit, property and parity tests, the notebooks' test cells against the package), on three workers
#      (PYTEST_WORKERS=1 for one). Every notebook runs top to bottom there, in a fresh Jupyter kernel as a student
#      runs it: the docs site is built from the executed notebooks (tests/test_docs_site.py), and a notebook that
#      fails stops the build, named with its error. (nbdev-test would run them all a third time.)
# Exits non-zero when a stage fails.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
VENV=$(scripts/setup_venv.sh dev)
BIN="$VENV/bin"
export MPLBACKEND=Agg
# tinytorch's cache (generated gradebooks, tried graders) for this run only, shared by pytest's workers
TINYTORCH_CACHE=$(mktemp -d -t tinytorch-test-cache-XXXXXX)
export TINYTORCH_CACHE
trap 'rm -rf "$TINYTORCH_CACHE"' EXIT
ok() { echo "ok   [$1] ($((SECONDS - start)) s)"; start=$SECONDS; }   # a stage passed, and how long it took
ok "setup: tinytorch[dev] installed in $VENV"

snapshot() { find nbs tinytorch -type f \( -name '*.ipynb' -o -name '*.py' \) -not -path '*/__pycache__/*' \
               -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 sha256sum; }
check_unchanged() {  # $1 = stage name, $2... = command
  local stage=$1; shift
  local before after
  before=$(snapshot)
  "$@" >/dev/null
  after=$(snapshot)
  if [ "$before" != "$after" ]; then
    echo "FAIL [$stage]: these files changed; run it, review, and commit the result:" >&2
    diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]*  /  /p' >&2
    exit 1
  fi
  ok "$stage"
}

check_unchanged "nbdev-clean leaves notebooks unchanged" "$BIN/nbdev-clean"
check_unchanged "nbdev-export leaves tinytorch/ unchanged" "$BIN/nbdev-export"
# Three workers (pytest-xdist), each test file on one of them, longest files first (the seconds pytest measured,
# tests/durations.json; `bash scripts/test.sh --store-durations` refreshes them): a file's module fixtures (a graded
# class, a docs build) are built once, and one worker's waits (a kernel sleeping until a time limit, a Slurm job, a
# page in the browser, a pip install) overlap the others' work. Since a new course copies its generated gradebooks
# instead of generating them, a run uses about 1.7 of two cores on two workers; on three, pytest took 407, 688 and
# 731 s, against 621 and 678 s on two (runs of the same code at different times: this machine's speed varies by
# more than the difference). Session fixtures (the student release, the graded pair) are still built once
# (tests/conftest.py).
echo "...  [pytest] on ${PYTEST_WORKERS:-3} workers (the 20 slowest steps are listed at the end)"
"$BIN/python" -m pytest -o addopts="" -q --durations=20 -n "${PYTEST_WORKERS:-3}" --dist loadfile \
  --no-loadscope-reorder "$@"
ok "pytest"
