#!/usr/bin/env bash
# Everything a run on a GPU must check, offline (the GPU machine has the CUDA build of torch, nvcc, pytest,
# CMake and ninja, but no package registry), in stages that each fit in 10 minutes (about 25 in all):
#
#   bash scripts/gpu_verify.sh OUT_DIR [STAGE ...]      (default: every stage, in this order)
#
#   probe      nvidia-smi, torch, nvcc, the packages the stages need
#   build      the extension against the installed torch (CUDA build on a GPU; the emulated build without one)
#   tests      the GPU-marked tests, one process per file (a sticky CUDA error must not hide the other files)
#   tests_mma  the same with the tensor-core attention (MYTORCH_ATTN_MMA=1)
#   ipc        torch.multiprocessing with mytorch tensors (test/test_ipc.py) through cudaIpc* (emulated without a GPU)
#   compile    torch.compile's Triton path (test/test_compile_triton.py): compiled Triton kernels launched on
#              mytorch streams on a GPU; without one, the same kernels in Triton's interpreter over sim memory
#   sanitizer  compute-sanitizer memcheck, racecheck and synccheck on the kernel batteries (on a GPU);
#              without one, the batteries on the AddressSanitizer emu build, in natural and fuzzed schedules
#   ptxas      registers, spills and shared memory of every sm_90 kernel against the device limits (nvcc)
#   align      the operator alignment suite against torch.cuda (needs a GPU and expecttest)
#   fuzz       the robustness fuzzer's full campaign on the cuda runtime against the CPU (docs/robustness.md);
#              without a GPU, its 600-case sample on the AddressSanitizer emu build
#   bench      the benchmarks, ratios to torch.cuda (needs a GPU)
#   summary    OUT_DIR/summary.json and summary.md from every stage's result
#
# Each stage writes OUT_DIR/<stage>.log and a line in OUT_DIR/stages.jsonl (status passed / failed / skipped,
# seconds, detail). A stage that needs hardware reports "skipped: no GPU" on a machine without one, so the
# script runs anywhere: on the emu runtime it checks what emulation can. The exit code is non-zero when a
# stage failed. Environment: PYTHON (interpreter), GPU_VERIFY_STAGE_TIMEOUT (seconds, default 570).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:?usage: bash scripts/gpu_verify.sh OUT_DIR [STAGE ...]}
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
LIMIT=${GPU_VERIFY_STAGE_TIMEOUT:-570}
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(probe build tests tests_mma ipc compile sanitizer ptxas align fuzz bench summary)
export TORCH_DEVICE_BACKEND_AUTOLOAD=0 PYTHONUNBUFFERED=1

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  GPU=1
  RUNTIME=cuda
else
  GPU=0
  RUNTIME=emu
fi
EMU_EXT_FILE="$OUT/.emu_extension"

record() {  # record STAGE STATUS SECONDS DETAIL
  "$PY" - "$OUT/stages.jsonl" "$1" "$2" "$3" "$4" <<'PYREC'
import json, sys
path, stage, status, seconds, detail = sys.argv[1:]
with open(path, "a") as f:
    f.write(json.dumps({"stage": stage, "status": status, "seconds": int(seconds), "detail": detail}) + "\n")
PYREC
  printf '%-10s %-8s %4ss  %s\n' "$1" "$2" "$3" "$4"
}

# run_stage NAME COMMAND: runs COMMAND (a bash string) with the stage's limit, its output in NAME.log.
run_stage() {
  local name=$1 cmd=$2 start rc
  start=$(date +%s)
  timeout --kill-after=20 "$LIMIT" bash -c "$cmd" >"$OUT/$name.log" 2>&1
  rc=$?
  local secs=$(( $(date +%s) - start ))
  local last
  last=$(grep -E "passed|failed|error|FAIL|ok |ok:" "$OUT/$name.log" | tail -n 1 | cut -c1-200)
  if [ $rc -eq 0 ]; then record "$name" passed "$secs" "$last"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then record "$name" failed "$secs" "timed out after ${LIMIT} s"
  else record "$name" failed "$secs" "exit $rc: $last"
  fi
  return 0
}

skip() { record "$1" skipped 0 "$2"; }

# The environment a test process of this run needs: the emu extension when there is no GPU.
test_env() {
  if [ $GPU -eq 1 ]; then echo "MYTORCH_RUNTIME=cuda"
  else echo "MYTORCH_RUNTIME=emu MYTORCH_EXTENSION=$(cat "$EMU_EXT_FILE" 2>/dev/null)"
  fi
}

gpu_test_files() { ls test/test_gpu*.py test/test_emu.py 2>/dev/null; }

stage_probe() {
  run_stage probe "
    echo '== machine'; uname -a; nproc; free -g | head -2
    echo '== nvidia-smi'; nvidia-smi || echo 'no nvidia-smi / no GPU'
    echo '== python and torch'; $PY -c 'import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available())'
    echo '== nvcc'; (command -v nvcc && nvcc --version) || echo 'no nvcc'
    echo '== compute-sanitizer'; command -v compute-sanitizer || echo 'no compute-sanitizer'
    echo '== packages'; for m in pytest cmake ninja setuptools expecttest numpy transformers triton; do
      $PY -c \"import importlib.util, sys; print('\$m', 'present' if importlib.util.find_spec('\$m') else 'MISSING')\"; done
    echo 'ok probe (gpu=$GPU)'"
}

stage_build() {
  if [ $GPU -eq 1 ]; then
    run_stage build "MYTORCH_CUDA=1 $PY -m pip install --no-build-isolation --no-deps --no-index -e . &&
      MYTORCH_CUDA=1 $PY scripts/build.py record &&
      MYTORCH_RUNTIME=cuda $PY -c 'import torch, mytorch; print(\"ok build:\", torch.mytorch.runtime(), torch.mytorch.get_device_name())'"
  else
    run_stage build "$PY scripts/build.py flavour emu | tail -n 1 > '$EMU_EXT_FILE' && cat '$EMU_EXT_FILE' &&
      MYTORCH_RUNTIME=emu MYTORCH_EXTENSION=\$(cat '$EMU_EXT_FILE') $PY -c 'import torch, mytorch; print(\"ok build:\", torch.mytorch.runtime(), torch.mytorch.get_device_name())'"
  fi
}

# One pytest process per file, so that a sticky error (a lost context) in one file cannot hide the others.
run_files() {  # run_files STAGE EXTRA_ENV
  local stage=$1 extra=$2 cmd=""
  for f in $(gpu_test_files); do
    local base
    base=$(basename "$f" .py)
    cmd+="echo '== $f'; env $(test_env) $extra $PY -m pytest -q -ra -p no:cacheprovider -m gpu $f --junitxml='$OUT/${stage}_$base.xml' || fail=1; "
  done
  run_stage "$stage" "fail=0; $cmd exit \$fail"
}

stage_tests() { run_files tests ""; }
stage_tests_mma() { run_files tests_mma "MYTORCH_ATTN_MMA=1"; }

stage_ipc() {
  run_stage ipc "env $(test_env) $PY -m pytest -q -ra -p no:cacheprovider test/test_ipc.py --junitxml='$OUT/ipc.xml'"
}

stage_compile() {
  if [ $GPU -eq 1 ]; then
    run_stage compile "MYTORCH_RUNTIME=cuda $PY -m pytest -q -ra -p no:cacheprovider test/test_compile_triton.py --junitxml='$OUT/compile.xml'"
  else
    run_stage compile "MYTORCH_INDUCTOR=triton TRITON_INTERPRET=1 TRITON_DEFAULT_FP_FUSION=1 $PY -m pytest -q -ra -p no:cacheprovider test/test_compile_triton.py --junitxml='$OUT/compile.xml'"
  fi
}

stage_sanitizer() {
  if [ $GPU -eq 1 ]; then
    if ! command -v compute-sanitizer >/dev/null 2>&1; then skip sanitizer "compute-sanitizer not found"; return; fi
    local cmd="fail=0; "
    for tool in memcheck racecheck synccheck; do
      cmd+="echo '== $tool'; compute-sanitizer --tool $tool --error-exitcode 86 --target-processes all $PY -m pytest -q -p no:cacheprovider -m gpu test/test_gpu.py test/test_gpu_nn.py -k 'twins or tensor_core' || fail=1; "
    done
    run_stage sanitizer "export MYTORCH_RUNTIME=cuda; $cmd exit \$fail"
  else
    run_stage sanitizer "MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh -m gpu test &&
      MYTORCH_EMU_SANITIZE=address MYTORCH_EMU_FUZZ=1 MYTORCH_EMU_STREAM_DELAY_US=50 bash scripts/emu.sh -m gpu test/test_gpu.py test/test_gpu_nn.py"
  fi
}

stage_ptxas() {
  if ! command -v nvcc >/dev/null 2>&1 && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    skip ptxas "no nvcc"; return
  fi
  run_stage ptxas "$PY scripts/ptxas_check.py --json '$OUT/ptxas.json'"
}

stage_align() {
  if [ $GPU -eq 0 ]; then skip align "skipped: no GPU (the reference is torch.cuda)"; return; fi
  if ! "$PY" -c "import expecttest" 2>/dev/null; then
    skip align "expecttest is missing: carry its wheel (docs/gpu.md)"; return
  fi
  run_stage align "MYTORCH_RUNTIME=cuda $PY -m mytorch.testing.align --no-write --json '$OUT/alignment_cuda.json' --jobs 4 --log '$OUT/align-workers.log'"
}

stage_fuzz() {
  if [ $GPU -eq 1 ]; then
    run_stage fuzz "MYTORCH_RUNTIME=cuda $PY -m mytorch.testing.fuzz --cases 0 --seed 0 --jobs 8 --json '$OUT/fuzz_cuda.json' --log '$OUT/fuzz-workers.log'"
  else
    run_stage fuzz "MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh --python -m mytorch.testing.fuzz --cases 600 --seed 20261124 --jobs 2 --json '$OUT/fuzz_emu.json' --log '$OUT/fuzz-workers.log'"
  fi
}

stage_bench() {
  if [ $GPU -eq 0 ]; then skip bench "skipped: no GPU (ratios are to torch.cuda)"; return; fi
  run_stage bench "export MYTORCH_RUNTIME=cuda; cd benchmarks &&
    echo '== core_ops' && $PY core_ops.py --repeat 5 &&
    echo '== layernorm' && $PY layernorm.py &&
    echo '== attention' && $PY attention.py --plot '$OUT/attention_benchmark.png' &&
    echo '== nn_ops' && $PY nn_ops.py &&
    echo '== copy_bandwidth' && $PY copy_bandwidth.py"
}

stage_summary() {
  "$PY" - "$OUT" "$GPU" <<'PYSUM'
import glob, json, os, sys
import xml.etree.ElementTree as ET
out, gpu = sys.argv[1], sys.argv[2] == "1"
stages = {}
for line in open(os.path.join(out, "stages.jsonl")):
    r = json.loads(line)
    stages[r["stage"]] = r  # the last run of a stage wins
tests = {}
for path in sorted(glob.glob(os.path.join(out, "*.xml"))):
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    tests[os.path.basename(path)[:-4]] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
summary = {"gpu": gpu, "stages": stages, "tests": tests,
           "ok": all(s["status"] != "failed" for s in stages.values())}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write(f"# gpu_verify: {'GPU' if gpu else 'no GPU (emulated CUDA build)'}\n\n| stage | status | s | detail |\n|---|---|---|---|\n")
    for s in stages.values():
        f.write(f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['detail']} |\n")
    f.write("\n| test file | tests | failures | errors | skipped |\n|---|---|---|---|---|\n")
    for k, v in tests.items():
        f.write(f"| {k} | {v['tests']} | {v['failures']} | {v['errors']} | {v['skipped']} |\n")
print(open(os.path.join(out, "summary.md")).read())
sys.exit(0 if summary["ok"] else 1)
PYSUM
}

for s in "${STAGES[@]}"; do
  case $s in
    probe|build|tests|tests_mma|ipc|compile|sanitizer|ptxas|align|bench|summary) "stage_$s" ;;
    *) echo "unknown stage '$s'"; exit 2 ;;
  esac
done
if [ -f "$OUT/stages.jsonl" ] && grep -q '"status": "failed"' "$OUT/stages.jsonl"; then exit 1; fi
exit 0
