#!/usr/bin/env bash
# Everything a run on a GPU must check, offline, in one 10-minute call of a borrowed GPU machine (docs/gpu.md):
#   bash scripts/gpu_verify.sh OUT_DIR [STAGE ...]
# The stages, their limits, the deadline and the <= 8 files written to OUT_DIR: scripts/gpu_verify.py.
set -uo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/gpu_verify.py "$@"
