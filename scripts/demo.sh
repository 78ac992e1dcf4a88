#!/usr/bin/env bash
# The main job: set up, then train the small GPT on the mytorch device and check it against the CPU.
# Extra arguments go to examples/train_gpt.py (e.g. --steps 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" examples/train_gpt.py "$@"
