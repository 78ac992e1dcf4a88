"""Test set-up: two sim devices (the guard and cross-device tests need them), quiet fallback by default.

The environment is set before mytorch is imported; on the cuda runtime the sim settings have no effect
and the multi-device tests skip unless two GPUs are visible.
"""

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("MYTORCH_SIM_DEVICES", "2")
os.environ.setdefault("MYTORCH_FALLBACK", "silent")

import pytest  # noqa: E402
import torch  # noqa: E402

import mytorch  # noqa: E402,F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    """`gpu` tests run the CUDA kernels: on a GPU (cuda runtime) and on the emulated CUDA build (emu runtime,
    scripts/emu.sh). `hardware` tests need what only a real GPU has (cuDNN, NCCL, the device's own properties).
    `tensor_cores` tests check the tensor-core attention itself: skipped where MYTORCH_ATTN_MMA=0 turns it off
    (gpu_verify's CUDA-core stage, which runs the attention tests again on the other kernels)."""
    runtime = torch.mytorch.runtime()
    skip_gpu = pytest.mark.skip(reason="needs the CUDA kernels: the cuda runtime on a GPU, or the emu build")
    skip_hw = pytest.mark.skip(reason="needs a real GPU (cuDNN, NCCL or the device itself)")
    skip_tc = pytest.mark.skip(reason="the tensor-core attention is off (MYTORCH_ATTN_MMA=0)")
    mma_off = os.environ.get("MYTORCH_ATTN_MMA") == "0"
    for item in items:
        if "tensor_cores" in item.keywords and mma_off:
            item.add_marker(skip_tc)
        elif "gpu" in item.keywords and runtime not in ("cuda", "emu"):
            item.add_marker(skip_gpu)
        elif "hardware" in item.keywords and runtime != "cuda":
            item.add_marker(skip_hw)


@pytest.fixture(autouse=True)
def _fallback_mode(request):
    """Quiet fallback by default; a test marked `native` (or a module with pytestmark = pytest.mark.native) runs
    with the fallback forbidden (MYTORCH_FALLBACK=error) and its counters reset, so an op that leaves mytorch's
    kernels fails it."""
    if request.node.get_closest_marker("native"):
        torch.mytorch.reset_fallback_stats()
        torch.mytorch.set_fallback_mode("error")
    else:
        torch.mytorch.set_fallback_mode("silent")
    yield
    torch.mytorch.set_fallback_mode("silent")


@pytest.fixture
def keep_torch_threads():
    """For tests that set torch's thread count: the rest of the suite gets its own back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def two_devices():
    if torch.mytorch.device_count() < 2:
        pytest.skip("needs two mytorch devices")
    return [torch.device("mytorch", 0), torch.device("mytorch", 1)]


def installed_build_dir() -> str:
    """The CMake build folder of the installed flavour (skips when the extension was installed some other way)."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import build  # scripts/build.py

    flavour, _ = build.plan()
    path = os.path.join(ROOT, "build", f"cmake-{sys.implementation.cache_tag}-{flavour}")
    if not os.path.exists(os.path.join(path, "build.ninja")):
        pytest.skip(f"no ninja build of the {flavour} flavour here (installed some other way)")
    return path


def ninja_deps(build_dir: str) -> dict[str, list[str]]:
    """Object file -> the headers ninja recorded for it (`ninja -t deps`), as real paths."""
    text = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    deps: dict[str, list[str]] = {}
    obj = None
    for line in text.splitlines():
        if not line.startswith(" ") and ": #deps" in line:
            obj = line.split(":")[0]
            deps[obj] = []
        elif line.strip() and obj is not None:
            deps[obj].append(os.path.realpath(os.path.join(build_dir, line.strip())))
    return deps


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for process-wide settings: capacity, runtime choice, fork)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
    )


def run_in_threads(work, n: int) -> None:
    """Runs work(0) .. work(n - 1) on n threads at once and waits for them all."""
    import threading

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def at_sim_thread_counts(work, counts=(1, 2, 4)) -> dict:
    """{k: work()} with the sim on k threads for each k (Note [Sim parallelism]), the thread count restored after.
    The control: at each k a parallel loop does run on k threads, so comparing the results is not vacuous."""

    before = torch.get_num_threads()
    runs = {}
    try:
        for k in counts:
            torch.set_num_threads(k)
            assert mytorch._C._sim_parallel_probe(1 << 20) == k
            runs[k] = work()
    finally:
        torch.set_num_threads(before)
    return runs


def grouped_mm_cases(dtype: torch.dtype) -> dict:
    """torch._grouped_mm inputs on the CPU for every mode (2-D x 3-D, 3-D x 2-D, 2-D x 2-D, 3-D x 3-D), with an
    empty group, a transposed operand and offsets that cover the grouped dimension (rows no group reaches are
    left unwritten, by CUDA and the CPU alike)."""
    g = torch.Generator().manual_seed(5)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    offs = torch.tensor([8, 8, 24, 40], dtype=torch.int32)
    return {
        "rows": (r(40, 32), r(4, 32, 24), offs),
        "rows_bt": (r(40, 32), r(4, 24, 32).transpose(-2, -1), offs),
        "cols": (r(4, 16, 32), r(32, 40), offs),
        "depth": (r(16, 40), r(40, 24), offs),
        "depth_at": (r(40, 16).t(), r(40, 24), offs),
        "batched": (r(4, 16, 32), r(4, 32, 24), None),
    }


def grouped_mm_kernel_cases(dtype: torch.dtype) -> dict:
    """grouped_mm_cases and the cases of the tensor-core kernel's edges: group boundaries off multiples of 8 (partial
    chunks, tiles not 16-byte aligned) in every mode and operand layout, and three contraction slices with partial
    tiles. (Not in test_core_native's bit-equality with the CPU: at these sizes the CPU's own float32 result depends
    on its thread count.)"""
    g = torch.Generator().manual_seed(6)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    odd = torch.tensor([5, 5, 37, 72], dtype=torch.int32)
    big = torch.tensor([64, 128, 200, 256], dtype=torch.int32)
    return {
        **grouped_mm_cases(dtype),
        "rows_odd": (r(72, 80), r(4, 80, 40), odd),
        "rows_odd_bt": (r(72, 80), r(4, 40, 80).transpose(-2, -1), odd),
        "rows_odd_at": (r(80, 72).t(), r(4, 80, 40), odd),
        "cols_odd": (r(4, 24, 80), r(80, 72), odd),
        "depth_odd": (r(24, 72), r(72, 40), odd),
        "depth_odd_at": (r(72, 24).t(), r(72, 40), odd),
        "rows_big_bt": (r(256, 136), r(4, 136, 136).transpose(-2, -1), big),  # 3 slices, partial n and k tiles
    }


def grouped_mm_golden(a: torch.Tensor, b: torch.Tensor, offs) -> torch.Tensor:
    """torch._grouped_mm in float64, group by group (the CPU implementation refuses float64)."""
    a, b = a.double(), b.double()
    if offs is None:
        return a @ b
    ends = offs.tolist()
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        return torch.cat([a[s:e] @ b[i] for i, (s, e) in enumerate(zip(starts, ends))])
    if a.dim() == 3:
        return torch.cat([a[i] @ b[:, s:e] for i, (s, e) in enumerate(zip(starts, ends))], 1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])
