#!/usr/bin/env bash
# Style checks (docs/contributing.md, "Style and habits"): clang-format (.clang-format) on the C++ and CUDA sources
# of csrc/, kernels/ and test/, and ruff (pyproject.toml: its formatter and its checks) on the Python. Installs the
# pinned tools into the interpreter when they are missing. scripts/test.sh runs it on every tracked source.
#   bash scripts/lint.sh                  check every tracked source
#   bash scripts/lint.sh --changed [REV]  only the files changed since REV (default: HEAD, i.e. uncommitted)
#   bash scripts/lint.sh --fix [...]      rewrite instead of checking
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CLANG_FORMAT_VERSION=23.1.5
RUFF_VERSION=0.17.6
fix=0
changed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --fix) fix=1 ;;
    --changed) changed=HEAD; if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then changed=$2; shift; fi ;;
    *) echo "lint.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if ! "$bin/clang-format" --version 2>/dev/null | grep -q "$CLANG_FORMAT_VERSION" ||
   ! "$bin/ruff" --version 2>/dev/null | grep -q "$RUFF_VERSION"; then
  echo "lint.sh: installing clang-format==$CLANG_FORMAT_VERSION ruff==$RUFF_VERSION"
  "$PY" -m pip install --quiet "clang-format==$CLANG_FORMAT_VERSION" "ruff==$RUFF_VERSION"
fi
if [ -n "$changed" ]; then
  mapfile -t files < <({ git diff --name-only --diff-filter=d "$changed"; git ls-files --others --exclude-standard; } | sort -u)
else
  mapfile -t files < <(git ls-files)
fi
cxx=(); py=()
for f in "${files[@]}"; do
  case "$f" in
    python/mytorch/backend/include/*) ;;   # PyTorch's C shim headers, kept as upstream writes them
    csrc/*.h|csrc/*.cpp|kernels/*.h|kernels/*.cpp|kernels/*.cu|kernels/*.cuh|test/*.cu) [ -f "$f" ] && cxx+=("$f") ;;
    *.py) [ -f "$f" ] && py+=("$f") ;;
  esac
done
status=0
if [ ${#cxx[@]} -gt 0 ]; then
  if [ $fix = 1 ]; then "$bin/clang-format" -i "${cxx[@]}"
  else "$bin/clang-format" --dry-run --Werror "${cxx[@]}" || status=1; fi
fi
if [ ${#py[@]} -gt 0 ]; then
  if [ $fix = 1 ]; then "$bin/ruff" format --quiet "${py[@]}"; "$bin/ruff" check --fix --quiet "${py[@]}" || status=1
  else "$bin/ruff" format --check --quiet "${py[@]}" || status=1; "$bin/ruff" check --quiet "${py[@]}" || status=1; fi
fi
if [ $status != 0 ]; then
  echo "lint.sh: style differences above; bash scripts/lint.sh --fix rewrites them" >&2
else
  echo "lint.sh: ${#cxx[@]} C++/CUDA and ${#py[@]} Python files clean"
fi
exit $status
