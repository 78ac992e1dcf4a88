#!/usr/bin/env bash
# The test command (CI runs it): set up, then prove the CUDA path without a GPU (docs/gpu.md), then run the
# whole pytest suite (GPU-marked tests skip without a GPU).
#   1. the cuda flavour (where nvcc is present): kernels/cuda/*.cu compiled by nvcc for sm_90 and linked into
#      its own build of the extension, which must load (on the sim runtime here) and pass the device tests;
#      ptxas's resource usage of every kernel checked against the device's limits;
#   2. the CUDA kernels on the emulated build under AddressSanitizer, in the natural schedule and in a fuzzed
#      one with delayed streams, their launch shapes and traffic against the GPU performance model, torch.multiprocessing's sharing through the emulated cudaIpc* calls, and a
#      seeded sample of the robustness fuzzer; then every distributed test through the NCCL path of the process
#      group on the emulated NCCL (kernels/emu/nccl.cpp), rank processes under AddressSanitizer;
#   3. torch.compile's Triton path: Inductor's Triton kernels for mytorch graphs, run by Triton's interpreter
#      over sim memory (test/test_compile_triton.py; the path is chosen per process);
#   4. PyTorch's own suites (where a copy of their files is: MYTORCH_PYTORCH_SRC, else ../shared/pytorch-tests): a
#      seeded 1% of each device-generic suite
#      and torch_openreg's suite in full, failing on an openreg failure outside its listed exclusions or a pooled
#      pass rate under 99% (python -m mytorch.testing.suites --check; docs/conformance.md);
#   5. the style of every tracked source (scripts/lint.sh: clang-format and ruff, pinned versions);
#   6. the main suite on the installed build.
# Extra arguments go to the main pytest run only (e.g. -k allocator), and then parts 1 and 2 run only when
# asked. MYTORCH_TEST_CUDA=0 skips part 1, MYTORCH_TEST_EMU=0 part 2, MYTORCH_TEST_TRITON=0 part 3, MYTORCH_TEST_SUITES=0 part 4 (README,
# "How long things take").
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache lets the three builds share what compiles the same in each (all of csrc/ and kernels/sim/: Note [One glue
# for every flavour]); without it the cuda and emulated builds each compile the glue again (measured once on this
# 2-core machine on a slow day: 1,156 s for the glue's compiles alone).
if ! command -v ccache >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "mytorch tests: installing ccache (apt-get)"
  (apt-get install -y -qq ccache >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq ccache >/dev/null 2>&1; }) ||
    echo "mytorch tests: ccache could not be installed; every build compiles all its files"
fi
setup_start=$(date +%s)
bash scripts/setup.sh
PY=${PYTHON:-python3}
cuda=${MYTORCH_TEST_CUDA:-1}
emu=${MYTORCH_TEST_EMU:-1}
triton=${MYTORCH_TEST_TRITON:-1}
suites=${MYTORCH_TEST_SUITES:-1}
if [ $# -gt 0 ]; then
  cuda=${MYTORCH_TEST_CUDA:-0}; emu=${MYTORCH_TEST_EMU:-0}; triton=${MYTORCH_TEST_TRITON:-0}; suites=${MYTORCH_TEST_SUITES:-0}
fi
# The pytest stages run on every core, up to 4 (pytest-xdist; each worker is a process with its own device, and
# work stealing keeps the long emulated tests from leaving a core idle at the end).
workers=$("$PY" -c 'import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))')
par=(-n "$workers" --dist worksteal)
start=$(date +%s)
# Each stage's time, printed at the end of the run (and when a stage fails): where the command's time goes.
stage_names=()
stage_starts=()
stage() {
  echo "== [$(( $(date +%s) - start )) s] $*"
  stage_names+=("$*")
  stage_starts+=("$(date +%s)")
}
stage_times() {
  local rc=$? now i n
  now=$(date +%s)
  n=${#stage_names[@]}
  [ "$n" -gt 0 ] || return 0
  echo "== stage times (exit status $rc):"
  for ((i = 0; i < n; i++)); do
    local end=$now
    if [ $((i + 1)) -lt "$n" ]; then end=${stage_starts[$((i + 1))]}; fi
    printf '   %5d s  %s\n' "$((end - stage_starts[i]))" "${stage_names[i]}"
  done
  printf '   %5d s  in all (the set-up before the first stage: %d s)\n' "$((now - setup_start))" "$((start - setup_start))"
}
trap stage_times EXIT
if [ "$cuda" = "1" ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    stage "the cuda flavour: nvcc build of kernels/cuda for sm_90, linked and loaded"
    bash scripts/cuda_headers.sh
    ext=$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" scripts/build.py flavour cuda | tail -n 1)
    MYTORCH_EXTENSION="$ext" "$PY" -m pytest -q -p no:cacheprovider test/test_device.py
    stage "ptxas: resource usage of the sm_90 kernels"
    "$PY" scripts/ptxas_check.py --build-dir "$(dirname "$ext")" --regs-table build/ptxas_regs_sm90.tsv
    export MYTORCH_EMU_PTXAS=$PWD/build/ptxas_regs_sm90.tsv   # occupancy of the GPU performance model (docs/gpu.md)
  else
    stage "no nvcc: the CUDA compile check is skipped (it runs where the CUDA toolkit is installed, as in CI)"
  fi
fi
if [ "$emu" = "1" ]; then
  stage "the CUDA kernels on the emulated build, AddressSanitizer, natural schedule"
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh -m "gpu or every_runtime" "${par[@]}" --ignore=test/test_nccl_path.py test
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh test/test_ipc.py   # cudaIpc* over the emulated runtime
  MYTORCH_FUZZ_CASES=600 MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh test/test_fuzz.py   # the fuzzer's sample
  stage "the same batteries, fuzzed schedule and delayed streams"
  # The kernels again; the emulator's own checks (`emulator`: its self-test and negative controls, which do not
  # depend on the schedule) ran in the natural schedule above.
  MYTORCH_EMU_SANITIZE=address MYTORCH_EMU_FUZZ=20261123 MYTORCH_EMU_STREAM_DELAY_US=50 \
    bash scripts/emu.sh -m "gpu and not emulator" "${par[@]}" test/test_gpu.py test/test_gpu_nn.py test/test_emu.py
  # a send while the sender's kernel is still queued (an IPC export must wait for it: Ipc.cpp)
  MYTORCH_EMU_SANITIZE=address MYTORCH_EMU_STREAM_DELAY_US=2000 bash scripts/emu.sh test/test_ipc.py
  stage "every distributed test through the NCCL path (the emulated NCCL), symmetric memory's and expert parallelism's CUDA kernels, AddressSanitizer"
  # One process at a time: each test runs 2-4 rank processes of its own, and the timeouts they check need the cores.
  # The process group's own tests in the natural schedule; the NCCL path's in the fuzzed one with delayed streams.
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh test/test_distributed.py
  # symmetric memory's CUDA kernels (the process group's own path there is the emulated NCCL, tested above)
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh test/test_symm_mem.py -k "not intra_host"
  # expert parallelism's CUDA kernels (all_to_all_vdev, moe_combine, the grouped GEMM) across 2 processes; the
  # process-group transport, 4 ranks and the transformers models run on sim in the main suite
  MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh test/test_ep.py -k "(dispatch_combine and 2-symmetric) or \
    (sync and symmetric) or (fp8 and symmetric) or (bad_input and symmetric) or (deepseek and 2-symmetric)"
  MYTORCH_EMU_SANITIZE=address MYTORCH_EMU_FUZZ=20261129 MYTORCH_EMU_STREAM_DELAY_US=50 \
    bash scripts/emu.sh test/test_nccl_path.py
fi
if [ "$triton" = "1" ]; then
  stage "torch.compile's Triton path, in Triton's interpreter over sim memory"
  MYTORCH_INDUCTOR=triton TRITON_INTERPRET=1 TRITON_DEFAULT_FP_FUSION=1 \
    "$PY" -m pytest -q -p no:cacheprovider test/test_compile_triton.py
fi
if [ "$suites" = "1" ]; then
  # PyTorch's test files (not in the wheel): MYTORCH_PYTORCH_SRC, else the copy CI keeps beside the checkout.
  tests_src=${MYTORCH_PYTORCH_SRC:-../shared/pytorch-tests}
  if [ -d "$tests_src" ]; then
    stage "PyTorch's own suites: a seeded 1% of each device-generic suite, torch_openreg's suite in full"
    "$PY" -m mytorch.testing.suites --src "$tests_src" --sample 0.01 --seed 30 --jobs 2 --check
  else
    stage "no copy of PyTorch's test files (MYTORCH_PYTORCH_SRC): PyTorch's own suites are skipped (docs/conformance.md)"
  fi
fi
stage "style: clang-format and ruff over every tracked source (scripts/lint.sh)"
bash scripts/lint.sh
stage "the main suite"
if [ $# -eq 0 ]; then
  "$PY" -m pytest -q -ra "${par[@]}" test
else
  "$PY" -m pytest -q -ra test "$@"   # one process: arguments such as -x or --pdb need it
fi
