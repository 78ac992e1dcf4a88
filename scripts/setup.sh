#!/usr/bin/env bash
# Installs what mytorch needs and builds it in place (editable). Safe to run again: the CMake build in
# build/ is incremental and ccache is used when present.
#   PYTHON=python3            interpreter to install into
#   MYTORCH_CUDA=auto|0|1     build the CUDA runtime and kernels (auto: when nvcc is found)
#   MYTORCH_CUDA_ARCHS=90     CUDA architectures
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export TORCH_DEVICE_BACKEND_AUTOLOAD=0   # never autoload a half-built mytorch while installing

# torch 2.11-2.13 already installed (e.g. a CUDA build on a GPU machine) is kept; otherwise the pinned one.
if ! "$PY" - <<'PYCHECK' 2>/dev/null
import torch, sys
major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if (major, minor) >= (2, 11) and (major, minor) <= (2, 13) else 1)
PYCHECK
then
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
# expecttest and numpy: imported by torch.testing._internal, whose OpInfo database the alignment suite runs.
# matplotlib: the memory-snapshot plot (python -m mytorch.tools.memory_plot).
# transformers: the fused-attention test builds small Llama / GPT-2 models from configs (no download).
"$PY" -m pip install --quiet "pytest" "expecttest" "numpy" "matplotlib" "setuptools>=64" "wheel" "cmake>=3.24" "ninja" \
  "transformers==5.23.0"
# cuBLASLt's, cuDNN's and NCCL's headers, for the CUDA GEMM, convolutions and collectives (the libraries themselves are opened at
# run time): from NVIDIA's wheels when nvcc is here but the toolkit has no copy (torch's CUDA wheels already
# depend on all three).
has_header() {  # has_header FILE: in the toolkit or in an nvidia-* wheel
  [ -f "${CUDA_HOME:-/usr/local/cuda}/include/$1" ] || "$PY" - "$1" <<'PYCHECK' 2>/dev/null
import importlib.util, os, sys
spec = importlib.util.find_spec("nvidia")
roots = list(spec.submodule_search_locations) if spec else []
subs = ("cu13/include", "cublas/include", "cudnn/include", "nccl/include")
sys.exit(0 if any(os.path.isfile(os.path.join(r, s, sys.argv[1])) for r in roots for s in subs) else 1)
PYCHECK
}
if [ "${MYTORCH_CUDA:-auto}" != "0" ] && { command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; }; then
  has_header cublasLt.h || "$PY" -m pip install --quiet "nvidia-cublas==13.*"
  has_header cudnn.h || "$PY" -m pip install --quiet "nvidia-cudnn-cu13==9.*"
  has_header nccl.h || "$PY" -m pip install --quiet "nvidia-nccl-cu13==2.*"
fi
start=$(date +%s)
"$PY" -m pip install --quiet --no-build-isolation --no-deps -e .
echo "mytorch: built and installed in $(( $(date +%s) - start )) s ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
