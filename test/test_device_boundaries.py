"""What the one GPU run crashed on, and host round trips torch.cuda does not make.

- mytorch:1 on a machine with one device: every per-device table is bounded, so each call raises naming the
  device and the process lives on (python/mytorch/testing/_dist_probe.py, also gpu_verify's distributed stage).
- fill_(Tensor) and index_fill_(Tensor) with the value in device memory read it on the device: they return while
  earlier work is still queued (negative control: the same fill with the value read to the host first)."""

import os
import subprocess
import sys

import pytest
import torch

DEV = "mytorch"


@pytest.mark.every_runtime
def test_a_second_device_index_on_one_device_raises_and_the_process_lives():
    env = dict(os.environ, MYTORCH_SIM_DEVICES="1", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    p = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "mytorch.testing._dist_probe", "device-index"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "ok device-index: 8 calls on mytorch:1 (1 device(s)) raised" in p.stdout, p.stdout


@pytest.fixture
def deferred():
    prev = torch.mytorch.launch_blocking()
    torch.mytorch.set_launch_blocking(False)
    yield
    torch.mytorch.set_launch_blocking(prev)


def _busy_after(fill):
    x = torch.randn(1 << 18, device=DEV)
    torch.mytorch.synchronize()
    s = torch.sort(x)  # seconds of emulated work queued on the stream
    sorted_ = torch.mytorch.Event()
    sorted_.record()
    fill()
    busy = not sorted_.query()  # the sort still runs: the fill did not wait for the stream
    del s
    torch.mytorch.synchronize()
    return busy


@pytest.mark.gpu
@pytest.mark.skipif(torch.mytorch.runtime() == "sim", reason="sim kernels run at submission: nothing stays queued")
@pytest.mark.parametrize("op", ["fill_", "index_fill_"])
def test_a_fill_with_a_device_value_does_not_read_it_to_the_host(op, deferred):
    t = torch.zeros(4, 3, device=DEV)
    value = torch.tensor(2.5, device=DEV)
    index = torch.tensor([0, 2], device=DEV)

    def on_device():
        if op == "fill_":
            t.fill_(value)
        else:
            t.index_fill_(0, index, value)

    def through_host():  # the negative control: what the fills did before
        if op == "fill_":
            t.fill_(value.item())
        else:
            t.index_fill_(0, index, value.item())

    assert _busy_after(on_device)
    want = torch.zeros(4, 3)
    if op == "fill_":
        want.fill_(2.5)
    else:
        want.index_fill_(0, torch.tensor([0, 2]), 2.5)
    assert torch.equal(t.cpu(), want)
    assert not _busy_after(through_host)


@pytest.mark.every_runtime
def test_fills_with_device_values_match_the_cpu():
    for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64, torch.float16):
        for vdtype in (torch.float64, torch.int32, torch.bool):
            v = torch.tensor(1, dtype=vdtype)
            a = torch.zeros(3, 2, dtype=dtype)
            b = a.to(DEV)
            a.fill_(v)
            b.fill_(v.to(DEV))
            assert torch.equal(b.cpu(), a), (dtype, vdtype)
            a.index_fill_(1, torch.tensor([1]), v * 0)
            b.index_fill_(1, torch.tensor([1], device=DEV), (v * 0).to(DEV))
            assert torch.equal(b.cpu(), a), (dtype, vdtype)
    # a value that is a view of the tensor filled
    a = torch.arange(6.0).reshape(2, 3)
    b = a.to(DEV)
    a.fill_(a[1, 2])
    b.fill_(b[1, 2])
    assert torch.equal(b.cpu(), a)
    a = torch.arange(6.0).reshape(2, 3)
    b = a.to(DEV)
    a.index_fill_(1, torch.tensor([0, 2]), a[0, 2])
    b.index_fill_(1, torch.tensor([0, 2], device=DEV), b[0, 2])
    assert torch.equal(b.cpu(), a)
