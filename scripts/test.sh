#!/usr/bin/env bash
# The test command: set up, run the whole pytest suite (GPU-marked tests skip without a GPU), then prove the
# CUDA path without one (docs/gpu.md): the CUDA kernels on the emulated build under AddressSanitizer, in the
# natural schedule and in a fuzzed one with delayed streams, and the sm_90 build's resource usage.
# Extra arguments go to the main pytest run only (e.g. -k allocator); MYTORCH_TEST_EMU=0 skips the emu part.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
emu=${MYTORCH_TEST_EMU:-1}
if [ $# -gt 0 ]; then emu=${MYTORCH_TEST_EMU:-0}; fi   # a selection of tests: the emu part only when asked
if [ "$emu" = "1" ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    echo "== ptxas: resource usage of the sm_90 kernels"
    "$PY" scripts/ptxas_check.py
  fi
  echo "== the CUDA kernels on the emulated build, AddressSanitizer, natural schedule"
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh -m gpu test
  echo "== the same batteries, fuzzed schedule and delayed streams"
  MYTORCH_EMU_SANITIZE=address MYTORCH_EMU_FUZZ=20261123 MYTORCH_EMU_STREAM_DELAY_US=50 \
    bash scripts/emu.sh -m gpu test/test_gpu.py test/test_gpu_nn.py test/test_emu.py
  echo "== the main suite"
fi
exec "$PY" -m pytest -q -ra test "$@"
