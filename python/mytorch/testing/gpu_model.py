"""The GPU performance model of the emulated CUDA build, from Python (Note [GPU performance model] in
kernels/emu/trace.cpp; docs/gpu.md, "The GPU performance model").

    records = trace(fn)        # every kernel launch fn makes, one dict each (the trace file's lines)

Each record has the trace's keys: kernel, site, grid, block, smem, regs, bytes_read, bytes_written, sectors,
requests, sectors_per_request, ideal_sectors_per_request, shared_requests, bank_conflicts, mma, blocks_per_sm,
waves, est_us, bound, device (whose constants: DEVICES). Only the emulated build (MYTORCH_RUNTIME=emu) has the model.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Callable

import torch

# The devices the model has constants for (MYTORCH_EMU_GPU=h100, the default, or h200; each record names its
# "device"): SMs, DRAM bytes/s and the dense bf16 tensor-core FLOP/s the fractions of peak are taken against. The
# H200 is the H100's chip (the same SMs, clocks and tensor cores) with 141 GB of HBM3e at 4.8 TB/s.
DEVICES = {
    "H100 SXM": {"sms": 132, "bytes_s": 3.35e12, "flops_s": 990e12, "memory_gb": 80},
    "H200 SXM": {"sms": 132, "bytes_s": 4.8e12, "flops_s": 990e12, "memory_gb": 141},
}
H100_SMS = DEVICES["H100 SXM"]["sms"]
H100_BYTES_S = DEVICES["H100 SXM"]["bytes_s"]
H100_FLOPS_S = DEVICES["H100 SXM"]["flops_s"]


def device_of(records: list[dict]) -> str:
    """The device whose constants the records' estimates use (records of older builds name none: the H100's)."""
    names = {r.get("device", "H100 SXM") for r in records} or {"H100 SXM"}
    if len(names) > 1:
        raise ValueError(f"records of several modelled devices: {sorted(names)}")
    return names.pop()


def available() -> bool:
    from mytorch import _C

    return hasattr(_C, "_emu_trace")


def trace(fn: Callable[[], object]) -> list[dict]:
    """Runs fn once with every launch traced; returns the launches' records in completion order."""
    from mytorch import _C

    if not available():
        raise RuntimeError("the GPU performance model needs the emulated CUDA build (scripts/emu.sh)")
    torch.mytorch.synchronize()
    fd, path = tempfile.mkstemp(prefix="mytorch-trace-", suffix=".jsonl")
    os.close(fd)
    try:
        _C._emu_trace(path)
        try:
            fn()
            torch.mytorch.synchronize()
        finally:
            _C._emu_trace("")
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    finally:
        os.unlink(path)


def total_us(records: list[dict]) -> float:
    """The launches' estimated time; a launch whose block does not fit an SM (too many registers or too much
    shared memory for its threads: it would fail on the hardware) is an error."""
    unfit = [r["kernel"] for r in records if r["bound"] == "does not fit"]
    if unfit:
        raise ValueError(f"launches that cannot run on an {device_of(records)} (registers or shared memory): {unfit}")
    return sum(r["est_us"] for r in records)


def traffic(records: list[dict]) -> int:
    """Global-memory bytes the launches asked for (reads + writes)."""
    return sum(r["bytes_read"] + r["bytes_written"] for r in records)


def dram_bytes(records: list[dict]) -> int:
    """The distinct 32-byte sectors each launch reads plus those it writes, in bytes, summed over launches (the
    DRAM traffic without caching across launches)."""
    return sum(32 * r["sectors"] for r in records)


def coalescing(record: dict) -> float:
    """Ideal over actual sectors per request: 1.0 when every warp request touches only the sectors its bytes
    need."""
    spr = record["sectors_per_request"]
    return record["ideal_sectors_per_request"] / spr if spr else 1.0


def fraction_of_peak(records: list[dict], min_bytes: float = 0.0, flops: float = 0.0, at_scale: bool = True) -> float:
    """The estimated time's fraction of the peak of the records' device (DEVICES; the H100 SXM's 990 TFLOP/s and
    3.35 TB/s by default) for the work: FLOPs at its tensor-core peak when given, else the minimum bytes at its DRAM
    bandwidth. at_scale: without the fixed launch cost of each launch (the model's launch_us), i.e. the fraction the
    kernels reach on inputs large enough that launches do not count; the emulated inputs are small."""
    device = DEVICES[device_of(records)]
    ideal = flops / device["flops_s"] if flops else min_bytes / device["bytes_s"]
    t = total_us(records) - (sum(r["launch_us"] for r in records) if at_scale else 0.0)
    return ideal / (t * 1e-6) if t > 0 else 0.0


def summarize(records: list[dict]) -> list[dict]:
    """A compact line per launch (for benchmark JSON)."""
    keys = (
        "kernel",
        "site",
        "grid",
        "block",
        "smem",
        "bytes_read",
        "bytes_written",
        "sectors",
        "sectors_per_request",
        "ideal_sectors_per_request",
        "bank_conflicts",
        "mma",
        "waves",
        "est_us",
        "launch_us",
        "bound",
    )
    return [{k: r[k] for k in keys} for r in records]
