#!/usr/bin/env bash
# The main job on a fresh machine: install tinytorch into .venv and run `tinytorch demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(scripts/setup_venv.sh)
exec "$VENV/bin/tinytorch" demo "$@"
