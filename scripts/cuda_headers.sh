#!/usr/bin/env bash
# cuBLASLt's, cuDNN's and NCCL's headers for compiling the CUDA kernels (the libraries themselves are opened at
# run time): from NVIDIA's wheels when the toolkit under CUDA_HOME has no copy (torch's CUDA wheels already
# depend on all three). Used by setup.sh for a cuda build and by test.sh's CUDA compile check.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=${PIP_ROOT_USER_ACTION:-ignore}
has_header() {  # has_header FILE: in the toolkit or in an nvidia-* wheel (the build's own search)
  "$PY" scripts/build.py has-header "$1"
}
want=()
has_header cublasLt.h || want+=("nvidia-cublas==13.*")
has_header cudnn.h || want+=("nvidia-cudnn-cu13==9.*")
has_header nccl.h || want+=("nvidia-nccl-cu13==2.*")
if [ "${#want[@]}" -gt 0 ]; then
  echo "mytorch set-up: the CUDA toolkit lacks some library headers; installing ${want[*]} for them"
  "$PY" -m pip install --quiet "${want[@]}"
fi
