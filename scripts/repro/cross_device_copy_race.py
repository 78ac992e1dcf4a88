"""Reproducer of a fixed race (docs/robustness.md; test_emu.py runs it): a peer copy to mytorch:1 made while
mytorch:0 was current ran on mytorch:0's default stream (the destination's stream was the null handle, which
means the current device's), unordered with mytorch:1's work. A tensor moved to mytorch:1 storage by storage, as
the fuzzer moves its samples, was then read by a kernel there before its bytes arrived. Counts the wrong results
out of 300: 150 on the emulated build with delayed streams before the fix, 0 after, and 0 on sim.

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
