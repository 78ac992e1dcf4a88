#!/usr/bin/env bash
# The CUDA kernels on a machine without a GPU: builds the emulated CUDA build (kernels/emu, docs/gpu.md) in its
# own folder under build/ and runs the GPU-marked tests on it (MYTORCH_RUNTIME=emu). Needs no CUDA toolkit.
# Arguments go to pytest (default: the GPU-marked and every-runtime tests of test/); after --python they go to Python
# instead (bash scripts/emu.sh --python -m mytorch.testing.fuzz --cases 0: the fuzz campaign on this build).
#   MYTORCH_EMU_SANITIZE=address    instrument kernels/ with AddressSanitizer (preloaded into Python)
#   MYTORCH_EMU_FUZZ=<seed>         resume fibers, threads and blocks in seeded random orders
#   MYTORCH_EMU_STREAM_DELAY_US=<n> delay every stream task, so that missing synchronisation shows
# Run scripts/setup.sh first (scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
san=${MYTORCH_EMU_SANITIZE:-}
start=$(date +%s)
ext=$("$PY" scripts/build.py flavour "emu${san:+-$san}" | tail -n 1)
echo "mytorch emu: built ${ext#$PWD/} in $(( $(date +%s) - start )) s${san:+ (sanitizer: $san)}"
export MYTORCH_EXTENSION="$ext" MYTORCH_RUNTIME=emu
if [ "$san" = "address" ]; then
  # Python is not instrumented: the runtime must be loaded first, with libstdc++ (ASan's __cxa_throw
  # interceptor needs it present from the start). Leaks are the interpreter's business. An allocation too big
  # for the machine fails as malloc does (returns null, so torch raises) instead of aborting the process.
  LD_PRELOAD="$(${CXX:-c++} -print-file-name=libasan.so) $(${CXX:-c++} -print-file-name=libstdc++.so)"
  export LD_PRELOAD
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
fi
if [ "${1:-}" = "--python" ]; then
  shift
  exec "$PY" "$@"
fi
if [ $# -eq 0 ]; then
  set -- -m "gpu or every_runtime" test
fi
exec "$PY" -m pytest -q -ra -p no:cacheprovider "$@"
