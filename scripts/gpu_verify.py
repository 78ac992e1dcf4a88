"""Everything a run on a GPU must check, offline, in one call of a borrowed GPU machine (docs/gpu.md).

    bash scripts/gpu_verify.sh OUT_DIR [STAGE ...]      (default: every stage of STAGES, in that order)

A borrowed machine gives one command at most 10 minutes and returns at most 8 files from one folder. So:

- every stage runs under the stage's own limit and an overall deadline (GPU_VERIFY_DEADLINE seconds, default 570
  on a GPU, none without one); a stage that would start after the deadline is recorded "skipped: deadline" and
  the summary is still written. Each test file runs in its own process under GPU_VERIFY_FILE_TIMEOUT (default
  240 s), so one hung file cannot eat the call;
- the stages' logs, JUnit XML and JSON are written to a private work folder; OUT_DIR receives exactly
  summary.json, summary.md, bench.json (when the bench stage ran) and logs.tar.gz (everything else);
- SIGTERM (the machine's own limit) still packs what was done.

On a machine without a GPU the same stages check what the emulated CUDA build can (the emu flavour; the bench
stage then reports the GPU performance model's estimates instead of ratios to torch.cuda). The exit code is
non-zero when a stage failed. Environment: PYTHON (interpreter of the stages), GPU_VERIFY_DEADLINE,
GPU_VERIFY_FILE_TIMEOUT, GPU_VERIFY_TEST_FILES (the test files of the tests stages, space-separated; default every
test/test_gpu*.py and test/test_emu.py), GPU_VERIFY_MARKER (the tests stages' pytest marker expression, default
"gpu"; "gpu or every_runtime" for the files that run on every runtime), GPU_VERIFY_BENCH_ONLY (families of the
bench, comma-separated), GPU_VERIFY_JOBS (worker processes of the align and fuzz stages, default 8).
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.environ.get("PYTHON", sys.executable)
STAGE_LIMIT = 570
FILE_TIMEOUT = int(os.environ.get("GPU_VERIFY_FILE_TIMEOUT", "240"))
JOBS = int(os.environ.get("GPU_VERIFY_JOBS", "8"))  # the align and fuzz stages' worker processes
OUT_FILES = ("summary.json", "summary.md", "bench.json", "logs.tar.gz")
CARRY_DIR = ".gpu"  # a carried build (scripts/build.py carry .gpu; the call names .gpu in its carry)


def have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        return subprocess.run([PY, "-c", code], env=env, capture_output=True, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class Run:
    """One verification: the work folder, the deadline, the stages' records."""

    def __init__(self, out: str, gpu: bool):
        self.out, self.gpu = out, gpu
        self.work = tempfile.mkdtemp(prefix="gpu_verify-")
        self.start = time.monotonic()
        default = "570" if gpu else "0"
        limit = float(os.environ.get("GPU_VERIFY_DEADLINE", default))
        self.deadline = self.start + limit if limit > 0 else None
        self.records: list[dict] = []
        self.env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PYTHONUNBUFFERED="1")
        if gpu:
            self.env["MYTORCH_RUNTIME"] = "cuda"

    def path(self, name: str) -> str:
        return os.path.join(self.work, name)

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def record(self, stage: str, status: str, seconds: float, detail: str) -> None:
        r = {"stage": stage, "status": status, "seconds": round(seconds), "detail": detail[:300]}
        self.records.append(r)
        print(f"{stage:10s} {status:8s} {r['seconds']:4d}s  {detail[:160]}", flush=True)

    def emu_env(self) -> dict:
        """The environment of a test process: the emu extension the build stage made when there is no GPU."""
        env = dict(self.env)
        if not self.gpu:
            ext_file = self.path("emu_extension")
            env["MYTORCH_RUNTIME"] = "emu"
            if os.path.exists(ext_file):
                env["MYTORCH_EXTENSION"] = open(ext_file).read().strip()
        return env

    def sh(self, log, cmd: str, env: dict, limit: float) -> int:
        """Runs cmd (bash) in its own process group under limit seconds; 124 when it timed out."""
        log.write(f"$ {cmd}\n")
        log.flush()
        p = subprocess.Popen(
            ["bash", "-c", cmd], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return p.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.write(f"\n** timed out after {limit:.0f} s\n")
            return 124

    def stage(self, name: str, cmds: list[tuple[str, str, dict, float]]) -> None:
        """Runs the stage's commands (label, bash command, env, limit) in order, one log; every command runs even
        when an earlier one failed, within the stage limit and the deadline."""
        t0 = time.monotonic()
        failed, last = [], ""
        with open(self.path(f"{name}.log"), "w") as log:
            for label, cmd, env, limit in cmds:
                budget = min(limit, STAGE_LIMIT - (time.monotonic() - t0), self.left() - 20)
                if budget < 5:
                    failed.append(f"{label}: no time left")
                    continue
                log.write(f"== {label}\n")
                rc = self.sh(log, cmd, env, budget)
                if rc != 0:
                    failed.append(f"{label}: " + ("timed out" if rc in (124, 137) else f"exit {rc}"))
        text = open(self.path(f"{name}.log"), errors="replace").read().splitlines()
        for line in reversed(text):
            if any(w in line for w in ("passed", "failed", "error", "ok ", "ok:")):
                last = line.strip()
                break
        secs = time.monotonic() - t0
        if failed:
            self.record(name, "failed", secs, "; ".join(failed) + (f" | {last}" if last else ""))
        else:
            self.record(name, "passed", secs, last)


# ---- the stages ------------------------------------------------------------------------------------------------
def stage_probe(r: Run) -> None:
    pkgs = " ".join(["pytest", "cmake", "ninja", "setuptools", "expecttest", "numpy", "transformers", "triton"])
    probe = (
        "import importlib.util, sys, torch; print(sys.version); "
        "print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); "
        f"[print(m, 'present' if importlib.util.find_spec(m) else 'MISSING') for m in {pkgs.split()!r}]"
    )
    cmd = (
        "uname -a; nproc; free -g | head -2; (nvidia-smi || echo 'no nvidia-smi / no GPU'); "
        f"{PY} -c {shlex.quote(probe)}; (command -v nvcc && nvcc --version) || echo 'no nvcc'; "
        "command -v compute-sanitizer || echo 'no compute-sanitizer'; "
        f"{PY} -c 'import triton; print(\"triton\", triton.__version__)' || echo 'no triton'; echo 'ok probe (gpu={int(r.gpu)})'"
    )
    r.stage("probe", [("probe", cmd, r.env, 60)])


def use_carried_build(r: Run) -> str:
    """Note [A carried GPU build] (scripts/build.py): the extension built on the developer's machine for this
    machine's torch and Python, carried in CARRY_DIR, when it fits this tree; the later stages then load it through
    MYTORCH_EXTENSION with the tree's python/ on PYTHONPATH. Returns what was decided, for the log."""
    p = subprocess.run(
        [PY, "scripts/build.py", "carried", CARRY_DIR], cwd=ROOT, env=r.env, capture_output=True, text=True
    )
    said = (p.stdout.strip().splitlines() or [p.stderr.strip()[-300:]])[-1]
    if p.returncode != 0:
        return said
    r.env["MYTORCH_EXTENSION"] = said
    r.env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"), r.env.get("PYTHONPATH", "")]))
    return "ok"


def stage_build(r: Run) -> None:
    carried = use_carried_build(r) if r.gpu else ""
    if carried == "ok":
        cmd = (
            f"echo 'the carried build: {r.env['MYTORCH_EXTENSION']}' && "
            f"{PY} -c 'import torch, mytorch; print(\"ok build:\", torch.mytorch.runtime(), torch.mytorch.get_device_name())'"
        )
    elif r.gpu:
        cmd = (
            f"echo {shlex.quote('not the carried build: ' + carried)}; "
            f"MYTORCH_CUDA=1 {PY} -m pip install --no-build-isolation --no-deps --no-index -e . && "
            f"MYTORCH_CUDA=1 {PY} scripts/build.py record && "
            f"{PY} -c 'import torch, mytorch; print(\"ok build:\", torch.mytorch.runtime(), torch.mytorch.get_device_name())'"
        )
    else:  # the emulated build, and its ASan flavour for the sanitizer stage (which then only runs tests)
        ext = r.path("emu_extension")
        cmd = (
            f"{PY} scripts/build.py flavour emu | tail -n 1 > {ext} && cat {ext} && "
            f"{PY} scripts/build.py flavour emu-address | tail -n 1 && MYTORCH_RUNTIME=emu "
            f"MYTORCH_EXTENSION=$(cat {ext}) {PY} -c 'import torch, mytorch; "
            'print("ok build:", torch.mytorch.runtime(), torch.mytorch.get_device_name())\''
        )
    # ninja's log of the build: the slowest steps and the total, also when the build timed out (the lent H200's
    # first build took about 760 s, far above the H100's 149 s, with no record of where the time went)
    times = (
        'for f in build/cmake-*/.ninja_log; do echo "== $f"; '
        'awk \'NR>1{print ($2-$1)/1000 " s", $4}\' "$f" | sort -rn | head -25; '
        'awk \'NR>1{s+=($2-$1)/1000} END{print NR-1, "steps,", s, "compile seconds in all"}\' "$f"; done'
    )
    r.stage("build", [("build", cmd, r.env, STAGE_LIMIT), ("build times", times, r.env, 30)])


def stage_distributed(r: Run) -> None:
    """What the one GPU run's segfaults were: torch's own NCCL all_reduce first (so a crash of NCCL itself is told
    apart from ours), then mytorch's NCCL path on 1 and 2 ranks (2 share the GPU where the machine has one: NCCL
    refuses that with an error, not a crash), then mytorch:1 on a machine with one device; each step in its own
    process under faulthandler with NCCL_DEBUG=INFO (python/mytorch/testing/_dist_probe.py). Without a GPU the same
    steps run on the emulated build (its NCCL is the emulated NCCL; torch's own NCCL step is skipped)."""
    env = dict(r.emu_env(), NCCL_DEBUG="INFO", PYTHONFAULTHANDLER="1")
    probe = f"{PY} -X faulthandler -m mytorch.testing._dist_probe"
    by_path = f"{PY} -X faulthandler {os.path.join('python', 'mytorch', 'testing', '_dist_probe.py')}"
    cmds = [("torch_nccl_1", f"{by_path} torch-nccl 1", env, 120)] if r.gpu else []  # never imports mytorch
    cmds += [
        ("mytorch_nccl_1", f"{probe} mytorch-nccl 1", env, 120),
        ("mytorch_nccl_2", f"{probe} mytorch-nccl 2", env, 120),
        ("device_index", f"MYTORCH_SIM_DEVICES=1 {probe} device-index", env, 120),
    ]
    r.stage("distributed", cmds)


def gpu_test_files() -> list[str]:
    picked = os.environ.get("GPU_VERIFY_TEST_FILES", "").split()
    if picked:
        return picked
    # test_gpu_verify.py tests this driver (no gpu-marked tests: pytest would exit 5, "nothing collected")
    files = [f for f in sorted(glob.glob(os.path.join("test", "test_gpu*.py"))) if not f.endswith("test_gpu_verify.py")]
    return files + ["test/test_emu.py"]


def pytest_cmd(r: Run, name: str, files: list[str], marker: str | None = None) -> str:
    if marker is None:
        marker = os.environ.get("GPU_VERIFY_MARKER", "gpu")
    base = "_".join(os.path.basename(f)[:-3] for f in files)[:60]
    xml = r.path(f"{name}_{base}.xml")
    mark = f"-m {shlex.quote(marker)} " if marker else ""
    return f"{PY} -m pytest -q -ra -p no:cacheprovider {mark}{' '.join(files)} --junitxml={xml}"


def run_files(r: Run, name: str, extra: dict) -> None:
    env = dict(r.emu_env(), **extra)
    r.stage(name, [(f, pytest_cmd(r, name, [f]), env, FILE_TIMEOUT) for f in gpu_test_files()])


def stage_tests(r: Run) -> None:
    run_files(r, "tests", {})


# The test files that run the fused attention (its batteries, model checks and sim-twin comparisons).
ATTENTION_TEST_FILES = ["test/test_gpu_attention.py", "test/test_gpu_nn.py"]


def stage_tests_cuda_core(r: Run) -> None:
    """The attention tests again with the tensor-core attention off (MYTORCH_ATTN_MMA=0): the CUDA-core attention
    kernels, which the default run takes only for the shapes the tensor-core kernels do not (the tests of the
    tensor-core kernels themselves, marked tensor_cores, skip)."""
    env = dict(r.emu_env(), MYTORCH_ATTN_MMA="0")
    r.stage(
        "tests_cuda_core", [(f, pytest_cmd(r, "tests_cuda_core", [f]), env, FILE_TIMEOUT) for f in ATTENTION_TEST_FILES]
    )


def stage_ipc(r: Run) -> None:
    r.stage("ipc", [("test_ipc", pytest_cmd(r, "ipc", ["test/test_ipc.py"], ""), r.emu_env(), FILE_TIMEOUT)])


def stage_compile(r: Run) -> None:
    env = dict(r.env)
    if not r.gpu:
        env.update(MYTORCH_INDUCTOR="triton", TRITON_INTERPRET="1", TRITON_DEFAULT_FP_FUSION="1")
    cmd = pytest_cmd(r, "compile", ["test/test_compile_triton.py"], "")
    r.stage("compile", [("test_compile_triton", cmd, env, STAGE_LIMIT)])


def stage_sanitizer(r: Run) -> None:
    if r.gpu:
        if shutil.which("compute-sanitizer") is None:
            r.record("sanitizer", "skipped", 0, "compute-sanitizer not found")
            return
        files = "test/test_gpu.py test/test_gpu_nn.py -k 'twins or tensor_core'"
        cmds = [
            (
                tool,
                f"compute-sanitizer --tool {tool} --error-exitcode 86 --target-processes all "
                f"{PY} -m pytest -q -p no:cacheprovider -m gpu {files}",
                r.env,
                FILE_TIMEOUT,
            )
            for tool in ("memcheck", "racecheck", "synccheck")
        ]
    else:
        fuzz = "MYTORCH_EMU_FUZZ=20261123 MYTORCH_EMU_STREAM_DELAY_US=50"
        cmds = [
            (
                "asan",
                "MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh -m gpu test/test_gpu.py test/test_gpu_nn.py",
                r.env,
                STAGE_LIMIT,
            ),
            (
                "asan fuzzed",
                f"MYTORCH_EMU_SANITIZE=address {fuzz} bash scripts/emu.sh -m gpu test/test_gpu.py test/test_gpu_nn.py",
                r.env,
                STAGE_LIMIT,
            ),
        ]
    r.stage("sanitizer", cmds)


def stage_ptxas(r: Run) -> None:
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        r.record("ptxas", "skipped", 0, "no nvcc")
        return
    prep = (
        ""
        if glob.glob(os.path.join(ROOT, "build", "cmake-*-cuda"))
        else f"{PY} scripts/build.py flavour cuda >/dev/null && "
    )
    cmd = f"{prep}{PY} scripts/ptxas_check.py --json {r.path('ptxas.json')}"
    r.stage("ptxas", [("ptxas_check", cmd, r.env, STAGE_LIMIT)])


def stage_align(r: Run) -> None:
    if not r.gpu:
        r.record("align", "skipped", 0, "no GPU (the reference is torch.cuda)")
        return
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('expecttest') else 1)"
    if subprocess.run([PY, "-c", code]).returncode != 0:
        r.record("align", "skipped", 0, "expecttest is missing: carry its wheel (docs/gpu.md)")
        return
    cmd = (
        f"{PY} -m mytorch.testing.align --no-write --json {r.path('alignment_cuda.json')} --jobs {JOBS} "
        f"--log {r.path('align-workers.log')}"
    )
    r.stage("align", [("align", cmd, r.env, STAGE_LIMIT)])


def stage_fuzz(r: Run) -> None:
    if r.gpu:
        cmd = (
            f"{PY} -m mytorch.testing.fuzz --cases 0 --seed 0 --jobs {JOBS} --json {r.path('fuzz_cuda.json')} "
            f"--log {r.path('fuzz-workers.log')}"
        )
    else:
        cmd = (
            f"MYTORCH_EMU_SANITIZE=address bash scripts/emu.sh --python -m mytorch.testing.fuzz --cases 600 "
            f"--seed 20261124 --jobs 2 --json {r.path('fuzz_emu.json')} --log {r.path('fuzz-workers.log')}"
        )
    r.stage("fuzz", [("fuzz", cmd, r.env, STAGE_LIMIT)])


def stage_bench(r: Run) -> None:
    """benchmarks/gpu_families.py: a case per kernel family of issue 28, ratios to torch.cuda on a GPU (the
    tensor-core attention by default, then its cases on the CUDA-core kernels), the performance model's estimates
    on the emulated build."""
    out = r.path("bench")
    env = r.emu_env()
    cuda_core = dict(env, MYTORCH_ATTN_MMA="0")
    only = os.environ.get("GPU_VERIFY_BENCH_ONLY", "")
    sel = f" --only {shlex.quote(only)}" if only else ""
    cmds = [
        (
            "gpu_families",
            f"{PY} benchmarks/gpu_families.py --out {out} --name gpu_families --repeat 3 --warmup 1{sel}",
            env,
            STAGE_LIMIT,
        ),
        (
            "gpu_families cuda-core attention",
            f"{PY} benchmarks/gpu_families.py --out {out} --name gpu_families_cuda_core --only attention --repeat 3 "
            "--warmup 1",
            cuda_core,
            150 if r.gpu else 300,  # the emulated kernels' CUDA-core attention: ~2 minutes on 2 cores
        ),
    ]
    if only and "attention" not in only.split(","):
        cmds = cmds[:1]
    r.stage("bench", cmds)
    merged = {}
    for f in sorted(glob.glob(os.path.join(out, "*.json"))):
        merged[os.path.basename(f)[:-5]] = json.load(open(f))
    if merged:
        json.dump(merged, open(os.path.join(r.out, "bench.json"), "w"), indent=1)


# The 2-rank symmetric-memory cases of test/test_ep.py: the ones the test command runs on the emulated build.
EP_CASES = (
    "(dispatch_combine and 2-symmetric) or (sync and symmetric) or (fp8 and symmetric) or (deepseek and 2-symmetric)"
)


def stage_ep(r: Run) -> None:
    """Symmetric memory and expert parallelism across 2 rank processes sharing the GPU (CUDA IPC between them, the
    symm_mem and moe kernels on the device), then benchmarks/ep.py at 2 ranks against the stock all-to-all path
    in the same processes. Without a GPU the tests run on the emulated build under ASan (the benchmark is the
    sim's, in docs/expert_parallel.md). Last: it runs when the deadline leaves time, or when named."""
    if r.gpu:
        env = r.env
    else:
        env = dict(r.env, MYTORCH_EMU_SANITIZE="address")
    run = f"{PY} -m pytest" if r.gpu else "bash scripts/emu.sh"
    symm = pytest_cmd(r, "ep", ["test/test_symm_mem.py"], "").replace(f"{PY} -m pytest", run, 1)
    ep = pytest_cmd(r, "ep", ["test/test_ep.py"], "").replace(f"{PY} -m pytest", run, 1)
    cmds = [
        ("test_symm_mem", f"{symm} -k 'not intra_host'", env, FILE_TIMEOUT),
        ("test_ep", f"{ep} -k {shlex.quote(EP_CASES)}", env, FILE_TIMEOUT),
    ]
    if r.gpu:
        cmds.append(("bench_ep", f"{PY} benchmarks/ep.py --ranks 2 --repeat 5 --out {r.path('bench')}", env, 300))
    r.stage("ep", cmds)


def stage_graphs(r: Run) -> None:
    """Graph capture and replay (test/test_graphs.py, docs/graphs.md): CUDA's stream capture, instantiate and
    launch on the device, graph pools, the refused calls, random numbers per replay. Without a GPU the emulated
    runtime's capture under ASan."""
    env = r.env if r.gpu else dict(r.env, MYTORCH_EMU_SANITIZE="address")
    cmd = pytest_cmd(r, "graphs", ["test/test_graphs.py"], "")
    if not r.gpu:
        cmd = cmd.replace(f"{PY} -m pytest", "bash scripts/emu.sh", 1)
    r.stage("graphs", [("test_graphs", cmd, env, FILE_TIMEOUT)])


STAGES = {
    "probe": stage_probe,
    "build": stage_build,
    "distributed": stage_distributed,
    "tests": stage_tests,
    "bench": stage_bench,
    "tests_cuda_core": stage_tests_cuda_core,
    "ptxas": stage_ptxas,
    "ipc": stage_ipc,
    "compile": stage_compile,
    "sanitizer": stage_sanitizer,
    "align": stage_align,
    "fuzz": stage_fuzz,
    "ep": stage_ep,
    "graphs": stage_graphs,
}


def summarize(r: Run) -> bool:
    tests = {}
    for path in sorted(glob.glob(os.path.join(r.work, "*.xml"))):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            continue
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        tests[os.path.basename(path)[:-4]] = {
            k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")
        }
    ok = all(s["status"] != "failed" for s in r.records)
    summary = {
        "gpu": r.gpu,
        "ok": ok,
        "seconds": round(time.monotonic() - r.start),
        "stages": r.records,
        "tests": tests,
    }
    json.dump(summary, open(os.path.join(r.out, "summary.json"), "w"), indent=1)
    lines = [
        f"# gpu_verify: {'GPU' if r.gpu else 'no GPU (emulated CUDA build)'}, {summary['seconds']} s",
        "",
        "| stage | status | s | detail |",
        "|---|---|---|---|",
    ]
    lines += [f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['detail']} |" for s in r.records]
    lines += ["", "| test file | tests | failures | errors | skipped |", "|---|---|---|---|---|"]
    lines += [f"| {k} | {v['tests']} | {v['failures']} | {v['errors']} | {v['skipped']} |" for k, v in tests.items()]
    open(os.path.join(r.out, "summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return ok


def pack(r: Run) -> None:
    with tarfile.open(os.path.join(r.out, "logs.tar.gz"), "w:gz") as tar:
        tar.add(r.work, arcname="gpu_verify")
    shutil.rmtree(r.work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("stages:", " ".join(STAGES))
        return 0 if argv else 2
    names = argv[1:] or list(STAGES)
    unknown = [s for s in names if s not in STAGES and s != "summary"]
    if unknown:
        print(f"unknown stage(s) {unknown}: the stages are {' '.join(STAGES)}", file=sys.stderr)
        return 2
    out = os.path.abspath(argv[0])
    os.makedirs(out, exist_ok=True)
    for f in OUT_FILES:
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))
    r = Run(out, have_gpu())
    print(
        f"gpu_verify: {'GPU' if r.gpu else 'no GPU: the emulated CUDA build'}; stages {' '.join(names)}; "
        f"deadline {'none' if r.deadline is None else f'{r.deadline - r.start:.0f} s'}; work folder {r.work}",
        flush=True,
    )

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        for s in names:
            if s == "summary":
                continue
            if r.left() < 30:
                r.record(s, "skipped", 0, "deadline: not started (run it in another call)")
                continue
            STAGES[s](r)
    except KeyboardInterrupt:
        r.record("interrupted", "failed", 0, "terminated: the results so far are packed")
    finally:
        ok = summarize(r)
        pack(r)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
