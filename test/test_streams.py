"""Streams, events, elapsed time, stream contexts and non_blocking copies with pinned memory."""

import time

import pytest
import torch


def test_stream_basics():
    s = torch.mytorch.Stream()
    assert s.device == torch.device("mytorch", 0)
    assert s != torch.mytorch.default_stream()
    assert torch.mytorch.current_stream() == torch.mytorch.default_stream()
    with torch.mytorch.stream(s):
        assert torch.mytorch.current_stream() == s
        x = torch.ones(100, device="mytorch") * 2
    assert torch.mytorch.current_stream() == torch.mytorch.default_stream()
    s.synchronize()
    assert s.query()
    assert x.sum().item() == 200
    hi = torch.mytorch.Stream(priority=-1)
    assert hi.stream_id != s.stream_id


def test_generic_torch_stream_and_accelerator():
    s = torch.Stream("mytorch")
    assert s.device.type == "mytorch"
    prev = torch.accelerator.current_stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.accelerator.current_stream() == s
        assert torch.mytorch.current_stream().stream_id == s.stream_id
    finally:
        torch.accelerator.set_stream(prev)


def test_events_and_elapsed_time():
    start = torch.mytorch.Event(enable_timing=True)
    end = torch.mytorch.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device="mytorch")
    time.sleep(0.02)
    y = x @ x
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert isinstance(start, torch.mytorch.Event) and not isinstance(torch.Event("cpu"), torch.mytorch.Event)
    ms = start.elapsed_time(end)
    assert ms >= 15.0  # the sleep happened between the two records
    assert y.shape == (256, 256)
    plain = torch.mytorch.Event()
    plain.record()
    with pytest.raises((RuntimeError, ValueError), match="timing"):
        start.elapsed_time(plain)


def test_wait_event_and_wait_stream():
    s1, s2 = torch.mytorch.Stream(), torch.mytorch.Stream()
    with torch.mytorch.stream(s1):
        a = torch.full((1000,), 3.0, device="mytorch")
        e = torch.mytorch.Event()
        e.record(s1)
    s2.wait_event(e)
    s2.wait_stream(s1)
    with torch.mytorch.stream(s2):
        b = a + 1
    torch.mytorch.synchronize()
    assert b.sum().item() == 4000


def test_stream_on_other_device(two_devices):
    s = torch.mytorch.Stream(device=1)
    assert s.device_index == 1
    with torch.mytorch.stream(s):
        assert torch.mytorch.current_device() == 1
        t = torch.ones(3, device="mytorch")
    assert t.device.index == 1
    assert torch.mytorch.current_device() == 0


def test_pinned_memory_and_non_blocking_copies():
    x = torch.randn(1000, 100)
    p = x.pin_memory("mytorch") if torch.__version__ < "2.11" else x.pin_memory()
    assert p.is_pinned()
    assert not x.is_pinned()
    s = torch.mytorch.Stream()
    with torch.mytorch.stream(s):
        d = p.to("mytorch", non_blocking=True)
        back = torch.empty_like(p).pin_memory()
        back.copy_(d, non_blocking=True)
    s.synchronize()
    assert torch.equal(back, x)
    stats = torch.mytorch.host_memory_stats()
    assert stats["allocations.current"] >= 2
    del p, back
    torch.mytorch.empty_host_cache()
    assert torch.mytorch.host_memory_stats()["allocated_bytes.current"] == 0


def test_dataloader_pin_memory():
    ds = torch.utils.data.TensorDataset(torch.arange(32.0).view(16, 2))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True, pin_memory_device="mytorch")
    batches = [b[0] for b in dl]
    assert all(b.is_pinned() for b in batches)
    assert torch.equal(
        torch.cat([b.to("mytorch", non_blocking=True) for b in batches]).cpu(), torch.arange(32.0).view(16, 2)
    )
