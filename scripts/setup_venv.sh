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
fi
spec="."
[ -n "${1:-}" ] && spec=".[$1]"
echo "installing tinytorch${1:+ with extras [$1]} into $VENV" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# uv installs the ~160 packages of the dev extras in ~15 s where pip takes ~70 s. It reads none of pip's settings,
# so the index, extra indexes, find-links, constraints and certificates pip is configured with are passed on; every
# index is searched for the best version, as pip does. Without uv (it can't be installed, or fails), pip installs.
uv_install() {
  "$VENV/bin/python" -m pip install -q uv >"$log" 2>&1 || return 1
  local args=()
  mapfile -d '' args < <("$VENV/bin/python" - <<'PY'
import shlex, subprocess, sys
listed = subprocess.run([sys.executable, '-m', 'pip', 'config', 'list'], capture_output=True, text=True).stdout
options = {'index-url': '--index-url', 'extra-index-url': '--extra-index-url', 'find-links': '--find-links',
           'constraint': '--constraint'}
for line in listed.splitlines():        # e.g. global.extra-index-url='URL1 URL2'
    key, _, value = line.partition('=')
    key = key.rpartition('.')[2]
    if key in options:
        for item in shlex.split(value)[0].split() if value else []:
            sys.stdout.write(f"{options[key]}\0{item}\0")
PY
)
  local cert=${PIP_CERT:-${SSL_CERT_FILE:-}}
  env ${cert:+SSL_CERT_FILE="$cert"} "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" \
    --compile-bytecode --index-strategy unsafe-best-match "${args[@]}" -e "$spec" >>"$log" 2>&1
}
if ! uv_install; then
  echo "uv could not install tinytorch; installing with pip (slower)" >&2
  grep -v "^WARNING: Location" "$log" | tail -n 5 >&2 || true
  if ! "$VENV/bin/python" -m pip install -q -e "$spec" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2; echo "pip install failed" >&2; exit 1
  fi
fi
"$VENV/bin/python" -c "import tinytorch" || { echo "tinytorch does not import after install" >&2; exit 1; }
echo "$VENV"
