"""The CUDA code paths on the emulated CUDA build (marked `gpu`: they run on emu and on a GPU, and skip on sim).

Each test is a finding of the review of kernels/cuda and runtime/cuda.cpp, written so that it fails without
its fix. Faults are sticky (they lose the context, as on a GPU), so every case runs in its own process.
"""

import pytest
import torch

from conftest import run_python

pytestmark = pytest.mark.gpu


def run_ok(code: str, **env) -> str:
    r = run_python(code, env={k: str(v) for k, v in env.items()}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_sort_of_short_slices_keeps_shared_memory_aligned():
    """Bitonic sort placed its int64 indices after `padded` values: misaligned for slices of length 1 (4-byte
    types), <= 2 (int16) and <= 4 (1-byte types). A misaligned shared store is a fault on the GPU."""
    run_ok("""
        import torch, mytorch
        for dt in (torch.float32, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float16, torch.bfloat16):
            for n in (1, 2, 3, 4, 5):
                x = (torch.randn(7, n) * 50).to(dt)
                v, i = x.to("mytorch").sort(1)
                ev, ei = torch.sort(x, dim=1, stable=True)
                assert torch.equal(v.cpu(), ev) and torch.equal(i.cpu(), ei), (dt, n)
        x = torch.randn(6, 1)
        assert torch.equal(x.to("mytorch").topk(1, 1).values.cpu(), x.topk(1, 1).values)
        assert torch.equal(torch.tensor([3], dtype=torch.int8).to("mytorch").unique().cpu(), torch.tensor([3], dtype=torch.int8))
    """)


def test_not_ready_from_queries_does_not_fail_the_next_launch():
    """cudaErrorNotReady from an event or stream query is also the thread's last error: left there, the next
    launch check reported it as the launch's failure."""
    out = run_ok(
        """
        import torch, mytorch
        x = torch.randn(512, 512, device="mytorch")
        e = torch.mytorch.Event()
        y = x * 2
        e.record()
        pending = not e.query() and not torch.mytorch.current_stream().query()
        z = x + 1                      # a launch right after the queries
        torch.mytorch.synchronize()
        assert torch.equal(z.cpu(), x.cpu() + 1)
        print("pending", pending)
    """,
        MYTORCH_EMU_STREAM_DELAY_US=20000,
    )
    if torch.mytorch.runtime() == "emu":
        assert "pending True" in out  # the queries really saw unfinished work


def test_matmul_of_sliced_and_offset_operands():
    """cuBLASLt assumes 256-byte aligned operands unless told otherwise: sliced operands, odd leading
    dimensions, offset out= views and batch strides need the alignment preferences set from the pointers."""
    run_ok("""
        import torch, mytorch
        torch.manual_seed(0)
        from mytorch.testing._compare import assert_aligned
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            x = torch.randn(67, 45, dtype=dt); w = torch.randn(45, 33, dtype=dt); b = torch.randn(37, dtype=dt)
            X, W, B = x.to("mytorch"), w.to("mytorch"), b.to("mytorch")
            ref, gold = x[1:, 1:] @ w[1:, 3:], x[1:, 1:].double() @ w[1:, 3:].double()
            assert_aligned(X[1:, 1:] @ W[1:, 3:], ref, gold, f"mm {dt}")
            out = torch.zeros(69, 31, dtype=dt, device="mytorch")
            torch.mm(X[1:, 1:], W[1:, 3:], out=out[3:, 1:])
            assert_aligned(out[3:, 1:], ref, gold, f"mm into an offset out= {dt}")
            assert_aligned(torch.addmm(B[7:], X[1:, 1:], W[1:, 3:]), torch.addmm(b[7:], x[1:, 1:], w[1:, 3:]),
                           torch.addmm(b[7:].double(), x[1:, 1:].double(), w[1:, 3:].double()), f"addmm {dt}")
            xb = torch.randn(5, 9, 7, dtype=dt); wb = torch.randn(5, 7, 3, dtype=dt)
            got = torch.bmm(xb.to("mytorch")[:, 1:, 1:], wb.to("mytorch")[:, 1:, :])
            assert_aligned(got, torch.bmm(xb[:, 1:, 1:], wb[:, 1:, :]), xb[:, 1:, 1:].double() @ wb[:, 1:, :].double(),
                           f"bmm {dt}")
    """)


def test_matmul_on_the_second_device_with_the_first_current():
    """Blas had no device guard: a matmul on mytorch:1 with device 0 current used device 0's cuBLASLt handle
    on device 1's stream."""
    run_ok(
        """
        import torch, mytorch
        if torch.mytorch.device_count() < 2:
            raise SystemExit(0)
        torch.mytorch.set_device(0)
        x = torch.randn(33, 17)
        a, b = x.to("mytorch:1"), x.t().contiguous().to("mytorch:1")
        # torch.ops calls the dispatcher directly (Python's tensor methods put a device guard around ops;
        # C++ callers, torch.compile's generated code and torch.ops do not)
        # (the out= overloads are what mytorch registers; the functional ones guard in torch's wrappers)
        y = torch.empty(33, 33, device="mytorch:1")
        from mytorch.testing._compare import assert_aligned
        torch.ops.aten.mm.out(a, b, out=y)
        assert_aligned(y, x @ x.t(), x.double() @ x.double().t(), "mm")
        z = torch.empty(33, 17, device="mytorch:1")
        torch.ops.aten.addmm.out(a[0, :17], a, a[:17].t().contiguous(), out=z)
        x64 = x.double()
        assert_aligned(z, torch.addmm(x[0, :17], x, x[:17].t()), torch.addmm(x64[0, :17], x64, x64[:17].t()), "addmm")
    """,
        MYTORCH_SIM_DEVICES=2,
    )


def test_tensor_core_backward_opts_in_on_every_device():
    """The > 48 KiB dynamic shared memory opt-in of the attention backward was done once per process: on a
    second device the launch failed. Its status was ignored as well."""
    run_ok(
        """
        import torch, torch.nn.functional as F, mytorch
        if torch.mytorch.device_count() < 2:
            raise SystemExit(0)
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 2, 70, 128, generator=g).bfloat16() for _ in range(3))
        grads = []
        for dev in ("mytorch:0", "mytorch:1"):
            qs, ks, vs = (t.to(dev).requires_grad_() for t in (q, k, v))
            y = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
            grads.append([t.cpu() for t in torch.autograd.grad(y.float().sum(), (qs, ks, vs))])
        for a, b in zip(*grads):
            assert torch.equal(a, b)
    """,
        MYTORCH_SIM_DEVICES=2,
    )


def test_guard_restore_creates_no_context_on_device_zero():
    """Restoring device 0 in a thread that never used it created a CUDA context there (CUDA >= 12): every
    rank's side threads would hold memory on GPU 0. Restores follow torch.cuda's MaybeSetDevice."""
    out = run_ok(
        """
        import threading, torch, mytorch
        if torch.mytorch.device_count() < 2 or torch.mytorch.runtime() != "emu":
            raise SystemExit(0)
        torch.mytorch.set_device(1)          # this thread works on device 1 only
        def work():
            x = torch.ones(8, device="mytorch:1")
            with torch.mytorch.device(1):
                y = x * 3
            torch.mytorch.synchronize(1)
            assert y.cpu().eq(3).all()
        t = threading.Thread(target=work); t.start(); t.join()
        x = torch.arange(4.0, device="mytorch:1") + 1
        assert x.cpu().tolist() == [1, 2, 3, 4]
        print("ctx0", mytorch._C._emu_primary_context_active(0), "ctx1", mytorch._C._emu_primary_context_active(1))
    """,
        MYTORCH_SIM_DEVICES=2,
    )
    if torch.mytorch.runtime() == "emu":
        assert "ctx0 False ctx1 True" in out, out


# ---- the emulator itself (test/emu_selftest.cu): it must compute right and catch what a GPU punishes ----------


def selftest(case: str, **env):
    if torch.mytorch.runtime() != "emu":
        pytest.skip("the emulator's own self-test (emu build)")
    import os
    import subprocess

    exe = os.path.join(os.path.dirname(os.environ["MYTORCH_EXTENSION"]), "mytorch_emu_selftest")
    full = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # the executable links its sanitizer itself
    full.update({k: str(v) for k, v in env.items()})
    return subprocess.run([exe, case], capture_output=True, text=True, env=full, timeout=120)


def asan_build() -> bool:
    import os

    return "-address" in os.environ.get("MYTORCH_EXTENSION", "")


@pytest.mark.emulator
@pytest.mark.parametrize("case", ["barrier", "shuffle"])
def test_emulator_runs_barriers_and_shuffles(case):
    r = selftest(case)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr


@pytest.mark.parametrize(
    "case,what",
    [
        (
            "partial_barrier",
            "__syncthreads reached by part of the block in early_exit_then_barrier (launched at emu_selftest.cu:",
        ),
        ("partial_shuffle", "__shfl_xor_sync reached by part of the warp in shuffle_after_divergence (launched at"),
        ("misaligned", "cudaErrorMisalignedAddress: misaligned_store"),
    ],
)
@pytest.mark.emulator
def test_emulator_reports_kernel_faults_with_their_place(case, what):
    r = selftest(case)
    assert r.returncode == 1 and what in r.stdout, r.stdout + r.stderr


@pytest.mark.emulator
def test_emulator_enforces_launch_limits_and_error_semantics():
    r = selftest("launch_limits")
    assert (
        "block=cudaErrorInvalidConfiguration grid=cudaErrorInvalidConfiguration smem=cudaErrorInvalidValue "
        "cleared=cudaSuccess optin=cudaSuccess after=cudaSuccess too_big=cudaErrorInvalidValue "
        "sync=cudaSuccess"
    ) in r.stdout, r.stdout + r.stderr
    r = selftest("sticky")  # a fault inside a kernel is sticky: not cleared, and every later call returns it
    assert (
        "first=cudaErrorMisalignedAddress second=cudaErrorMisalignedAddress malloc=cudaErrorMisalignedAddress"
    ) in r.stdout, r.stdout + r.stderr


@pytest.mark.emulator
def test_schedule_fuzzing_exposes_a_shared_memory_race():
    """A read of another thread's shared-memory write without a barrier: the result changes with the order in
    which the fuzzer resumes threads; with the barrier it does not."""
    racy = {selftest("racy", MYTORCH_EMU_FUZZ=seed).stdout for seed in range(0, 6)}
    synced = {selftest("synced", MYTORCH_EMU_FUZZ=seed).stdout for seed in range(0, 6)}
    assert len(racy) > 1 and len(synced) == 1, (racy, synced)


@pytest.mark.emulator
def test_address_sanitizer_catches_a_shared_memory_overrun():
    if not asan_build():
        pytest.skip("needs the AddressSanitizer emu build (MYTORCH_EMU_SANITIZE=address)")
    r = selftest("shared_overrun")
    assert r.returncode != 0 and "heap-buffer-overflow" in r.stderr, r.stderr[-2000:]


@pytest.mark.emulator
def test_missing_record_stream_gives_a_wrong_result_on_emu():
    """Streams run asynchronously on emu and freed blocks are poisoned in stream order, so a block freed while
    another stream still reads it (no record_stream) corrupts that stream's result instead of passing."""
    if torch.mytorch.runtime() != "emu":
        pytest.skip("the emulator's stream checks")
    code = """
        import torch, mytorch
        s = torch.mytorch.Stream()
        x = torch.ones(1 << 14, device="mytorch")
        s.wait_stream(torch.mytorch.current_stream())
        with torch.mytorch.stream(s):
            a = x + 0
            b = a + 0            # keeps s busy, so the read below comes after the free
            y = x * 2
        if RECORD:
            x.record_stream(s)
        del x
        torch.mytorch.synchronize()
        print("bad", int(y.cpu().isnan().sum()))
    """
    import textwrap

    bad = run_ok("RECORD = False\n" + textwrap.dedent(code), MYTORCH_EMU_STREAM_DELAY_US=20000)
    good = run_ok("RECORD = True\n" + textwrap.dedent(code), MYTORCH_EMU_STREAM_DELAY_US=20000)
    assert "bad 16384" in bad and "bad 0" in good, (bad, good)


@pytest.mark.emulator
@pytest.mark.tensor_cores
def test_wrong_tensor_core_emulation_is_caught(monkeypatch):
    """The negative controls of the tensor-core emulation: with a deliberately wrong mma.sync fragment layout, a
    wrong ldmatrix (.trans swapped), or cp.async copies that never land, the tensor-core attention no longer matches
    its sim twin, so the passing comparison (test_gpu_nn.py) means something: the kernels really take those paths
    and their results depend on the emulated layouts and on the copies landing at the waits."""
    if torch.mytorch.runtime() != "emu":
        pytest.skip("the emulator's mma.sync, ldmatrix and cp.async")
    import os
    import tempfile
    from test_gpu_nn import MMA_BATTERY, battery
    from mytorch.testing._compare import compare_tensor

    controls = {
        "mma": {"MYTORCH_EMU_MMA_LAYOUT": "wrong"},  # mma.sync's A fragment registers swapped
        "ldmatrix": {"MYTORCH_EMU_MMA_LAYOUT": "ldmatrix"},  # ldmatrix with and without .trans swapped
        "cp_async": {"MYTORCH_EMU_CP_ASYNC": "never"},  # cp.async copies never land
    }
    # Both head dims, both half types, ragged causal tiles and GQA, without the battery's 257x257 case (85% of its
    # emulated work, and no kernel path the others miss): the controls ran 255 s under ASan with it.
    cases = {"MMA_CASES": "0,1,3"}
    with tempfile.TemporaryDirectory() as d:
        results = {}
        for name, env in {**controls, "sim": {"MYTORCH_RUNTIME": "sim"}}.items():
            path = os.path.join(d, name + ".pt")
            run_ok(MMA_BATTERY + f"\ntorch.save(run('mytorch'), {path!r})\n", **env, **cases)
            results[name] = torch.load(path)
    sim = results.pop("sim")
    monkeypatch.setenv("MMA_CASES", cases["MMA_CASES"])  # the CPU run happens in this process
    cpu = battery(MMA_BATTERY, "cpu")  # the rule test_gpu_nn's positive comparison applies
    assert len(sim) == 12, sorted(sim)  # three cases, each an output and three gradients
    for name, wrong in results.items():
        off = [k for k, v in sim.items() if not compare_tensor(wrong[k], v, None, (cpu[k],)).ok]
        assert len(off) >= len(sim) // 2, (name, off)  # forward and gradients alike


def test_peer_copy_runs_on_the_destination_stream_whatever_the_current_device():
    """A peer copy was handed the destination's default stream as a null handle while another device was
    current, so it ran on that device's default stream: unordered with the destination's work, and not covered
    by the copy's own synchronization. A kernel on mytorch:1 then read bytes still being copied (found by the
    fuzzer's emu campaign; 150 of 300 results were wrong with delayed streams)."""
    if torch.mytorch.runtime() == "cuda" and torch.mytorch.device_count() < 2:
        pytest.skip("needs two devices (MYTORCH_SIM_DEVICES gives the emulated build two; this GPU machine has one)")
    out = run_ok(
        open("scripts/repro/cross_device_copy_race.py").read(), MYTORCH_SIM_DEVICES=2, MYTORCH_EMU_STREAM_DELAY_US=100
    )
    assert "wrong results: 0 of 300" in out, out
