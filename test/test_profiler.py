"""The profiler records mytorch device time per op and device events in the Chrome trace; CPU-fallback work
shows as mytorch::fallback::* ranges."""

import json

import torch
from torch.profiler import ProfilerActivity, profile


def workload():
    a = torch.randn(64, 64, device="mytorch")
    for _ in range(3):
        b = (a @ a).relu()
        c = b.clone()
        c.fill_(1.0)
    torch.histogram(a, bins=4)  # no device kernel in PyTorch: the fallback's work shows under its own name
    torch.mytorch.synchronize()


def test_torch_profiler_records_device_time_and_trace(tmp_path):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        workload()
    averages = prof.key_averages()
    # Device rows (as CUDA kernel rows) carry each op's mytorch device time.
    device_time = {e.key: e.self_device_time_total for e in averages if e.self_device_time_total > 0}
    assert {"aten::matmul", "aten::relu", "aten::clone", "aten::fill_"} <= set(device_time), device_time
    assert any(e.key.startswith("mytorch::fallback::aten::histogram") for e in averages)  # fallback work is named
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    device = [e for e in events if e.get("cat") == "kernel" and e.get("args", {}).get("device") == "mytorch:0"]
    assert {e["name"] for e in device} >= {"aten::matmul", "aten::relu", "aten::clone", "aten::fill_"}
    assert all(e["dur"] >= 0 for e in device)
    # Device events carry flow links to the CPU ops that issued them.
    assert any(e.get("cat") == "ac2g" for e in events)


def test_legacy_profiler_with_use_device():
    with torch.autograd.profiler.profile(use_device="mytorch", use_kineto=False) as prof:
        workload()
    assert any(e.key == "aten::matmul" and e.device_time_total > 0 for e in prof.key_averages())
