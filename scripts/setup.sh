#!/usr/bin/env bash
# Installs what mytorch needs into one Python and builds mytorch there, in place (editable), saying what it
# does. Skipped in well under a second when nothing changed since the last build; after an edit of csrc/ or
# kernels/ only the changed files recompile (ccache too, when installed).
#   PYTHON=python3            the interpreter to install into (a venv's python, for instance; see README)
#   MYTORCH_CUDA=auto|0|1     the CUDA kernels: auto compiles them only where nvcc AND a GPU are present
#   MYTORCH_CUDA_ARCHS=90     CUDA architectures
#   MYTORCH_SETUP_FORCE=1     rebuild even when up to date
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export TORCH_DEVICE_BACKEND_AUTOLOAD=0   # never autoload a half-built mytorch while installing
export PIP_ROOT_USER_ACTION=${PIP_ROOT_USER_ACTION:-ignore}   # the README recommends a venv; no warning per call
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "mytorch set-up: no interpreter '$PY' (set PYTHON=/path/to/python)" >&2
  exit 1
fi
if [ "${MYTORCH_SETUP_FORCE:-0}" != "1" ] && "$PY" scripts/build.py status; then
  exit 0
fi
echo "mytorch set-up: into $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
# torch 2.11-2.13 already installed (e.g. a CUDA build on a GPU machine) is kept; otherwise the pinned one.
if ! "$PY" scripts/build.py torch-ok; then
  echo "mytorch set-up: installing torch==2.13.0 (CPU wheels on a machine without CUDA, about 1 GB otherwise)"
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
mapfile -t missing < <("$PY" scripts/build.py missing-deps)
if [ "${#missing[@]}" -gt 0 ] && [ -n "${missing[0]}" ]; then
  echo "mytorch set-up: installing ${missing[*]}"
  "$PY" -m pip install --quiet "${missing[@]}"
fi
IFS=$'\t' read -r flavour why < <("$PY" scripts/build.py plan)
echo "mytorch set-up: $flavour build ($why)"
if [ "$flavour" = "cuda" ]; then
  bash scripts/cuda_headers.sh
fi
if command -v ccache >/dev/null 2>&1 && [ -n "${CCACHE_DISABLE:-}" ]; then
  echo "mytorch set-up: ccache is installed but CCACHE_DISABLE is set: every file compiles from scratch"
elif command -v ccache >/dev/null 2>&1; then
  echo "mytorch set-up: ccache $(ccache --version | head -n 1 | awk '{print $3}') caches the compiles (rebuilds after a clean take seconds)"
else
  echo "mytorch set-up: ccache not found; installing it makes rebuilds after a clean fast (apt-get install ccache, brew install ccache, conda install ccache)"
fi
start=$(date +%s)
if "$PY" scripts/build.py installed-here; then
  "$PY" scripts/build.py rebuild     # already installed from here: only the extension needs rebuilding
else
  "$PY" -m pip install --quiet --no-build-isolation --no-deps -e .
  "$PY" scripts/build.py record
fi
echo "mytorch set-up: built and installed in $(( $(date +%s) - start )) s (torch $("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))'))"
