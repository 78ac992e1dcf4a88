"""Two devices under the guard: placement, cross-device copies, and errors on mixing devices."""

import pytest
import torch


def test_tensors_land_on_requested_device(two_devices):
    a = torch.ones(4, device="mytorch:1")
    assert a.device == torch.device("mytorch", 1)
    b = a * 2  # results stay on the input's device
    assert b.device.index == 1
    with torch.mytorch.device(1):
        c = torch.zeros(3, device="mytorch")
    assert c.device.index == 1
    assert torch.mytorch.memory_allocated(1) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
def test_cross_device_copies(two_devices, dtype):
    x = (torch.arange(60) - 30).to(dtype).view(3, 4, 5)
    a = x.to("mytorch:0")
    b = a.to("mytorch:1")
    assert b.device.index == 1 and torch.equal(b.cpu(), x)
    c = a.transpose(0, 2).to("mytorch:1")  # strided source
    assert torch.equal(c.cpu(), x.transpose(0, 2))
    d = torch.empty(5, 4, 3, device="mytorch:1", dtype=torch.float64).transpose(0, 2)
    d.copy_(a)  # strided destination with conversion
    assert torch.equal(d.cpu(), x.double())
    e = torch.empty(4, 5, device="mytorch:1", dtype=dtype)
    e.copy_(a[1])
    assert torch.equal(e.cpu(), x[1])


def test_allocator_stats_are_per_device(two_devices):
    torch.mytorch.empty_cache()
    base0 = torch.mytorch.memory_allocated(0)
    t = torch.empty(1 << 20, device="mytorch:1")
    assert torch.mytorch.memory_allocated(1) >= 4 << 20
    assert torch.mytorch.memory_allocated(0) == base0
    del t


def test_mixing_devices_raises(two_devices):
    a = torch.ones(3, device="mytorch:0")
    b = torch.ones(3, device="mytorch:1")
    with pytest.raises(RuntimeError, match="same device|device"):
        torch.add(a, b)
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(3, device="mytorch:0").set_(b.untyped_storage())
