"""Reproducer of an open bug (docs/robustness.md, "Not done yet"): on the emulated CUDA build with two devices, a
copy from mytorch:1 to mytorch:0 of a tensor that was itself moved to mytorch:1 storage by storage (as the fuzzer
moves its samples) sometimes holds wrong values, most often after a kernel on mytorch:1 produced it. Counts the
wrong results out of 300; 0 is the expected answer, and what sim and one device give.

    MYTORCH_SIM_DEVICES=2 MYTORCH_EMU_STREAM_DELAY_US=100 bash scripts/emu.sh --python scripts/repro/cross_device_copy_race.py
"""
import torch

import mytorch  # noqa: F401


def moved(t, device):
    """t on `device`, its storage moved as raw bytes and the tensor rebuilt over it (the fuzzer's _to)."""
    raw = torch.empty(t.untyped_storage().nbytes(), dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    storage = raw.to(device).untyped_storage()
    return torch.empty(0, dtype=t.dtype, device=device).set_(storage, t.storage_offset(), t.size(), t.stride())


index = torch.arange(10).reshape(10, 1) % 7 - 2
bad = 0
for trial in range(300):
    junk = [torch.randn(1000 + trial, device=f"mytorch:{trial % 2}") for _ in range(3)]
    a = moved(moved(index, "mytorch:0"), "mytorch:1")
    r = a.clamp(-5, 4).to("mytorch:0")
    del junk
    junk = [torch.full((257,), 7, dtype=torch.long, device="mytorch:1") for _ in range(5)]
    bad += not torch.equal(r.cpu(), index.clamp(-5, 4))
print(f"wrong results: {bad} of 300")
