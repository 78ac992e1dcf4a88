"""Device discovery, selection, properties, torch.accelerator, lazy init and bad device indices."""

import pytest
import torch

import mytorch

from conftest import run_python


def test_registration_and_basic_transfer():
    x = torch.randn(4, 4)
    y = x.to("mytorch")
    assert y.device.type == "mytorch"
    assert y.is_mytorch and not x.is_mytorch
    assert torch.equal(y.cpu(), x)
    assert torch.equal(x.mytorch().cpu(), x)


def test_runtime_and_availability():
    assert torch.mytorch.runtime() in ("sim", "cuda", "emu")
    assert torch.mytorch.is_available()
    assert torch.mytorch.device_count() >= 1
    assert torch.mytorch.is_initialized()


def test_current_device_and_context(two_devices):
    assert torch.mytorch.current_device() == 0
    with torch.mytorch.device(1):
        assert torch.mytorch.current_device() == 1
        assert torch.empty(3, device="mytorch").device == torch.device("mytorch", 1)
    assert torch.mytorch.current_device() == 0
    torch.mytorch.set_device(1)
    try:
        assert torch.ones(2, device="mytorch").device.index == 1
    finally:
        torch.mytorch.set_device(0)
    t = torch.ones(2, device="mytorch:1")
    with torch.mytorch.device_of(t):
        assert torch.mytorch.current_device() == 1


def test_properties():
    p = torch.mytorch.get_device_properties(0)
    assert p.total_memory > 0
    assert isinstance(torch.mytorch.get_device_name(), str) and torch.mytorch.get_device_name()
    assert torch.mytorch.get_device_capability(0) == (p.major, p.minor)
    free, total = torch.mytorch.mem_get_info(0)
    assert 0 <= free <= total == p.total_memory


def test_accelerator_api():
    assert torch.accelerator.current_accelerator().type == "mytorch"
    assert torch.accelerator.device_count() == torch.mytorch.device_count()
    x = torch.ones(1000, device="mytorch")
    torch.accelerator.synchronize()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] >= 4000
    assert torch.accelerator.memory_allocated() == torch.mytorch.memory_allocated()
    del x


def test_device_capability_is_what_the_device_allocates_and_copies():
    """torch.accelerator.get_device_capability: every dtype mytorch allocates and copies both ways (as the CPU
    does), quantized ones excepted, which are refused with a message that says so."""
    supported = torch.accelerator.get_device_capability("mytorch:0")["supported_dtypes"]
    assert supported == torch.accelerator.get_device_capability(torch.mytorch.device_count() - 1)["supported_dtypes"]
    quantized = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
    assert not supported & quantized
    for dtype in supported:
        host = torch.zeros(4, dtype=torch.uint8).view(dtype) if dtype.itemsize == 1 else torch.empty(4, dtype=dtype)
        dev = host.to("mytorch")
        assert dev.dtype == dtype and torch.equal(dev.cpu().view(torch.uint8), host.view(torch.uint8)), dtype
    for dtype in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int64,
        torch.bool,
        torch.complex64,
        torch.float8_e4m3fn,
        torch.uint32,
    ):
        assert dtype in supported
    with pytest.raises(NotImplementedError, match="mytorch does not support quantized tensors"):
        torch.quantize_per_tensor(torch.ones(3, device="mytorch"), 0.1, 10, torch.qint8)


def test_module_methods():
    m = torch.nn.Linear(3, 2).mytorch()
    assert all(p.device.type == "mytorch" for p in m.parameters())
    s = torch.ones(3).untyped_storage().mytorch()
    assert s.device.type == "mytorch"


@pytest.mark.parametrize("bad", ["mytorch:7", "mytorch:-2"])
def test_bad_device_index_raises(bad):
    with pytest.raises((RuntimeError, ValueError)) as info:
        torch.empty(2, device=bad)
    assert "mytorch" in str(info.value) or "index" in str(info.value)


def test_bad_device_index_in_api():
    n = torch.mytorch.device_count()
    with pytest.raises((RuntimeError, ValueError), match=r"\[0, %d\)" % n):
        torch.mytorch.set_device(n + 3)
    with pytest.raises(RuntimeError, match=r"The device index is out of range. It must be in \[0, %d\)" % n):
        torch.accelerator.set_device_index(n)
    with pytest.raises(ValueError):
        torch.mytorch.get_device_properties(n)
    with pytest.raises(ValueError, match="expected a mytorch device"):
        torch.mytorch.synchronize("cpu")
    assert torch.mytorch.current_device() == 0


def test_unsupported_layout_and_pinned_device_tensor():
    # Sparse COO tensors are supported (test_sparse.py); the compressed layouts dispatch to SparseCsrPrivateUse1,
    # where mytorch registers nothing: PyTorch's own error.
    assert torch.empty(2, 2, device="mytorch", layout=torch.sparse_coo).layout == torch.sparse_coo
    with pytest.raises(NotImplementedError, match="SparseCsrmytorch|SparseCsrPrivateUse1"):
        torch.empty(2, 2, device="mytorch", layout=torch.sparse_csr)
    with pytest.raises(RuntimeError, match="pin"):
        torch.empty(2, device="mytorch", pin_memory=True)


def test_lazy_init_in_fresh_process():
    r = run_python("""
        import torch, mytorch
        assert not torch.mytorch.is_initialized()
        n = torch.mytorch.device_count()        # counting does not initialise
        assert not torch.mytorch.is_initialized()
        torch.ones(1, device="mytorch")
        assert torch.mytorch.is_initialized()
        print("ok", n)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"MYTORCH_RUNTIME": "sim", "MYTORCH_SIM_MEMORY": "lots"}, "MYTORCH_SIM_MEMORY"),
        ({"MYTORCH_RUNTIME": "sim", "MYTORCH_SIM_DEVICES": "zero"}, "MYTORCH_SIM_DEVICES must be an integer"),
        ({"MYTORCH_RUNTIME": "tpu"}, "MYTORCH_RUNTIME must be one of"),
    ],
)
def test_configuration_errors(env, expected):
    r = run_python(
        """
        import torch, mytorch
        try:
            torch.ones(1, device="mytorch")
        except RuntimeError as e:
            print("ERR", e)
    """,
        env=env,
    )
    assert "ERR" in r.stdout and expected in r.stdout, r.stdout + r.stderr


def test_runtime_selection_without_gpu():
    r = run_python(
        """
        import torch, mytorch
        print(torch.mytorch.runtime())
    """,
        env={"MYTORCH_RUNTIME": "sim", "MYTORCH_SIM_DEVICES": "3"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sim"
    r = run_python(
        "import torch, mytorch; print(torch.mytorch.device_count())",
        env={"MYTORCH_RUNTIME": "sim", "MYTORCH_SIM_DEVICES": "3"},
    )
    assert r.stdout.strip() == "3"


def test_invalid_fallback_env_rejected():
    r = run_python("import mytorch", env={"MYTORCH_FALLBACK": "sometimes", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode != 0
    assert "MYTORCH_FALLBACK must be one of warn, silent, error" in r.stderr


def test_autoload_entry_point():
    r = run_python(
        "import torch; print(hasattr(torch, 'mytorch'), torch._C._get_privateuse1_backend_name())",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "mytorch"]


def test_fork_after_init_raises():
    r = run_python("""
        import os, torch, mytorch
        torch.ones(2, device="mytorch")          # the parent initialises the device
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(2, device="mytorch")
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "forked subprocess" in str(e) and "spawn" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent still works", torch.ones(2, device="mytorch").sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout and "parent still works 2.0" in r.stdout


def test_fork_before_init_is_fine():
    r = run_python("""
        import os, torch, mytorch
        pid = os.fork()
        if pid == 0:
            os._exit(0 if torch.ones(2, device="mytorch").sum().item() == 2 else 5)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert "child 0" in r.stdout, r.stdout + r.stderr


def test_cuda_runtime_requested_without_gpu():
    if torch.mytorch.runtime() == "cuda":
        pytest.skip("a GPU is present")
    r = run_python(
        """
        import torch, mytorch
        print("count", torch.mytorch.device_count())
        try:
            torch.ones(1, device="mytorch")
        except RuntimeError as e:
            print("ERR", e)
    """,
        env={"MYTORCH_RUNTIME": "cuda"},
    )
    assert r.returncode == 0, r.stderr
    assert "count 0" in r.stdout
    assert "MYTORCH_RUNTIME=cuda" in r.stdout and "sim runtime" not in r.stdout, r.stdout


# Note [Backward on the calling thread] (python/mytorch/__init__.py): without a GPU runtime built in, the importing
# thread runs mytorch backwards itself; set_multithreading_enabled(True) gives them back to the device threads.
# Either way the gradients, the forward's stream and the node's device are the same.
@pytest.mark.skipif(mytorch._C._built_with_cuda(), reason="a GPU build keeps the device threads")
@pytest.mark.parametrize("device_threads", [False, True])
def test_backward_thread_stream_and_device(two_devices, device_threads):
    import threading

    assert not torch.autograd.is_multithreading_enabled()  # set at import, on this (the importing) thread
    side = torch.mytorch.Stream(device=1)
    with torch.autograd.set_multithreading_enabled(device_threads):
        seen = {}

        def hook(g):
            seen.update(
                thread=threading.get_ident(),
                stream=torch.mytorch.current_stream(1),
                device=torch.mytorch.current_device(),
            )
            return g

        x_cpu = torch.randn(5, 7, requires_grad=True)
        x = x_cpu.detach().to("mytorch:0").requires_grad_()
        with torch.mytorch.stream(side):
            y = x.to("mytorch:1").sin()
        y.register_hook(hook)
        (y * y.cos()).sum().backward()
        (x_cpu.sin() * x_cpu.sin().cos()).sum().backward()
        assert x.grad.device == torch.device("mytorch", 0)
        torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
        assert (seen["thread"] == threading.get_ident()) == (not device_threads)
        assert seen["stream"] == side and seen["device"] == 1
    assert not torch.autograd.is_multithreading_enabled()


def test_backward_thread_of_another_python_thread():
    # A thread that did not import mytorch keeps torch's default (the device threads), and its backward is right.
    import threading

    out = {}

    def work():
        out["mt"] = torch.autograd.is_multithreading_enabled()
        w = torch.randn(16, 16, device="mytorch", requires_grad=True)
        (w @ w).sum().backward()
        out["grad"] = w.grad.cpu()
        out["w"] = w.detach().cpu()

    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=60)
    assert out["mt"] is True
    w = out["w"].requires_grad_()
    (w @ w).sum().backward()
    torch.testing.assert_close(out["grad"], w.grad)
