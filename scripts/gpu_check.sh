#!/usr/bin/env bash
# The first run on a GPU machine (see scripts/gpu_check.py for what it checks); under 8 minutes.
# Usage: scripts/gpu_check.sh [--device cpu] [--out gpu_check.json]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec timeout 480 "$PY" scripts/gpu_check.py "$@"
