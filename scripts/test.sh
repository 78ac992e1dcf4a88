#!/usr/bin/env bash
# The test command: set up, then run the whole pytest suite (GPU-marked tests skip without a GPU).
# Extra arguments go to pytest (e.g. -k allocator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" -m pytest -q -ra test "$@"
