"""The set-up and the build: the up-to-date check, the flavour choice, header fan-out, the environment report."""

import glob
import os
import subprocess
import sys
from collections import defaultdict

import pytest
import torch

from conftest import ROOT, installed_build_dir, ninja_deps, run_python

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import build  # noqa: E402  (scripts/build.py)

# Headers every family may include (the shared vocabulary); every other header under kernels/include/mytorch
# belongs to one family and must reach only that family's files and the glue that launches them.
VOCABULARY = {
    "launch.h",
    "dtype.h",
    "macros.h",
    "strided.h",
    "ew_ops.h",
    "ops_math.h",
    "ops_nn.h",
    "ops_special.h",  # the Special group's functors, included by ops_math.h as ops_nn.h is
    "special_float.h",  # and what ops_special.h includes: the float forms, their Chebyshev tables
    "special_cheb.h",
    "window.h",
    "pointwise.def",
    # where a kernel records an error in its data (Note [Device-side errors]): every family that indexes by data
    "device_error.h",
    # the sim runtime's execution model, shared by its kernel families (Note [Sim parallelism], [Sim ISA variants],
    # [Sim row loops], [Sim vector math], [Sim GEMM])
    "parallel.h",
    "sim_isa.h",
    "sim_vec.h",
    "sim_vmath.h",
    "sim_vmath_double.h",  # included by ops_math.h: the double math of its float forms
    "sim_blas.h",
    # Welford's accumulator, shared by the reductions and the normalisations (which need no reduction table)
    "welford.h",
}
MAX_FAMILY_FANOUT = 8


def header_fanout(build_dir: str) -> dict[str, set[str]]:
    """Header name under kernels/include/mytorch -> the objects that include it."""
    users: dict[str, set[str]] = defaultdict(set)
    family_root = os.path.realpath(os.path.join(ROOT, "kernels", "include", "mytorch"))
    for obj, headers in ninja_deps(build_dir).items():
        for h in headers:
            if h.startswith(family_root + os.sep):
                users[os.path.basename(h)].add(obj)
    return users


def test_touching_a_family_header_rebuilds_that_family_only():
    users = header_fanout(installed_build_dir())
    assert users, "ninja recorded no header dependencies"
    # The sim build's generated cuda_absent.cpp includes every family header by design (Note [One glue for every
    # flavour], launch.h): one small file, not a family's fan-out.
    family = {
        h: {o for o in objs if not o.endswith("cuda_absent.cpp.o")}
        for h, objs in users.items()
        if h not in VOCABULARY and h != "runtime.h"
    }
    assert len(family) >= 15, sorted(users)
    wide = {h: sorted(objs) for h, objs in family.items() if len(objs) > MAX_FAMILY_FANOUT}
    assert not wide, f"family headers compiled into more than {MAX_FAMILY_FANOUT} files: {wide}"
    # The device API reaches its callers, not the kernel families (they see launch.h).
    sim_kernels = [o for o in users["runtime.h"] if "/kernels/sim/" in o]
    assert not sim_kernels, sim_kernels


def test_setup_recorded_an_up_to_date_build():
    ok, why = build.status()
    assert ok, why
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup.sh")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "nothing to do" in r.stdout, r.stdout


def test_status_notices_an_edit_and_a_configuration_change(tmp_path, monkeypatch):
    ok, _ = build.status()
    if not ok:
        pytest.skip("the build is not current")
    newest, which = build._newest_input(build.plan()[0])
    target = os.path.join(ROOT, which)
    before = os.stat(target)
    try:
        os.utime(target, (before.st_atime, newest + 10))
        ok, why = build.status()
        assert not ok and which in why
    finally:
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setenv("MYTORCH_CUDA_ARCHS", "80;90")
    ok, why = build.status()
    assert not ok and "configuration changed" in why


def test_auto_builds_cuda_only_with_a_gpu(monkeypatch):
    monkeypatch.setattr(build, "find_nvcc", lambda: "/opt/cuda/bin/nvcc")
    monkeypatch.setenv("MYTORCH_CUDA", "auto")
    monkeypatch.setattr(build, "gpu_visible", lambda: False)
    flavour, why = build.plan()
    assert flavour == "sim" and "no GPU" in why and "MYTORCH_CUDA=1" in why
    monkeypatch.setattr(build, "gpu_visible", lambda: True)
    assert build.plan()[0] == "cuda"
    monkeypatch.setenv("MYTORCH_CUDA", "0")
    assert build.plan()[0] == "sim"
    monkeypatch.setenv("MYTORCH_CUDA", "1")
    monkeypatch.setattr(build, "gpu_visible", lambda: False)
    assert build.plan()[0] == "cuda"
    monkeypatch.setattr(build, "find_nvcc", lambda: None)
    with pytest.raises(SystemExit, match="nvcc was not found"):
        build.plan()


def test_environment_report_names_the_runtime_and_why():
    r = subprocess.run([sys.executable, "-m", "mytorch"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    runtime = torch.mytorch.runtime()
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("runtime"))
    assert f"runtime       {runtime} — " in line, r.stdout
    assert "python" in r.stdout and torch.__version__ in r.stdout and "extension" in r.stdout


def test_unbuilt_extension_gives_an_actionable_error(tmp_path):
    """A copy of the package without its native extension, as in a fresh clone that was never built."""
    import shutil

    pkg = tmp_path / "mytorch"
    shutil.copytree(
        os.path.join(ROOT, "python", "mytorch"), pkg, ignore=shutil.ignore_patterns("_C*.so", "__pycache__")
    )
    assert not glob.glob(str(pkg / "_C*.so"))
    r = run_python(
        "import mytorch",
        env={"PYTHONPATH": str(tmp_path), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "MYTORCH_EXTENSION": ""},
    )
    assert r.returncode != 0
    assert "native extension could not be loaded" in r.stderr and "scripts/setup.sh" in r.stderr, r.stderr[-800:]


def test_ptxas_check_finds_host_calls_of_device_functions(tmp_path):
    """nvcc compiles a host call of a __device__-only function into exit(1) (a scan launcher sized its shared
    memory with one: the process ended with status 1 and no message on the H100). scripts/ptxas_check.py reads every
    kernel object's host side for those stubs; this is its negative control."""
    nvcc = build.find_nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc (the CUDA toolkit): the cuda flavour's checks run where it is installed")
    import ptxas_check  # noqa: E402  (scripts/ptxas_check.py)

    src = tmp_path / "stub.cu"
    src.write_text(
        "__device__ inline int slot(int i) { return i + i / 32; }\n"
        "__global__ void k(int* p) { p[slot(threadIdx.x)] = 1; }\n"
        # in a generic lambda's `if constexpr` (the launchers' dtype dispatch) nvcc does not object
        "template <typename F> void visit(F&& f) { f(0.0f); }\n"
        "void run(int* p) {\n"
        "  visit([&](auto tag) {\n"
        "    if constexpr (sizeof(decltype(tag)) == 4) k<<<1, 32, slot(64) * sizeof(decltype(tag))>>>(p);\n"
        "  });\n"
        "}\n"
    )
    good = tmp_path / "good.cu"
    good.write_text(src.read_text().replace("__device__ inline int slot", "__host__ __device__ constexpr int slot"))
    objs = []
    for s in (src, good):
        o = tmp_path / (s.stem + ".o")
        r = subprocess.run([nvcc, "-c", "-O2", "-arch=sm_90", str(s), "-o", str(o)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        objs.append(str(o))
    assert ptxas_check.host_exit_calls(objs[:1]), "the exit(1) stub was not found"
    assert ptxas_check.host_exit_calls(objs[1:]) == []
