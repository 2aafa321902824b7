#!/usr/bin/env bash
# Create (or reuse) the project venv and install the project into it.
#   scripts/setup_venv.sh [EXTRAS]      e.g. scripts/setup_venv.sh dev
# VENV (default .venv) picks the folder. Prints the venv path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# Prefer the system Python: `tinytorch grade` runs each student's kernel as an unprivileged user, who
# must be able to execute the venv's interpreter (a Python under /root, e.g. pyenv's, can't be).
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    PYTHON=/usr/bin/python3
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating virtual environment $VENV" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" >&2 || true
fi
spec="."
[ -n "${1:-}" ] && spec=".[$1]"
echo "installing tinytorch${1:+ with extras [$1]} into $VENV" >&2
log=$(mktemp)
if ! "$VENV/bin/python" -m pip install -q -e "$spec" >"$log" 2>&1; then
  grep -v "^WARNING: Location" "$log" >&2; rm -f "$log"; echo "pip install failed" >&2; exit 1
fi
rm -f "$log"
"$VENV/bin/python" -c "import tinytorch" || { echo "tinytorch does not import after install" >&2; exit 1; }
echo "$VENV"
