"""memory_summary, memory history and snapshots, the snapshot plot, MYTORCH_ALLOC_CONF, and pinned memory
under stream changes."""

import gc
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, run_python

MiB = 1 << 20


def test_memory_summary_shape():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="mytorch")
    text = torch.mytorch.memory_summary()
    lines = text.splitlines()
    assert {len(line) for line in lines} == {77}  # torch.cuda.memory_summary's width
    assert "| Allocated memory      |" in text and "Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed" in text
    assert "      from large pool" in text and "  3.00 MiB" in text
    assert "from small pool" not in torch.mytorch.memory_summary(abbreviated=True)
    del x


def test_memory_summary_sizes_keep_the_column_width():
    """Every size the counters reach fits the table's ten-character columns (1010 MiB, 1023.999 GiB: values between
    1000 and 1024 of a unit were eleven characters wide, a row of 79)."""
    from mytorch.backend.memory import _fmt_bytes

    for base in (1, 1024, 1024**2, 1024**3):
        for v in (0, 999, 1000, 1010, 1023, 1023.999, 1024, 999_999):
            assert len(_fmt_bytes(v * base)) == 10, (v, base, _fmt_bytes(v * base))
    assert _fmt_bytes(1010 * 1024**2) == "  0.99 GiB" and _fmt_bytes(3 * 1024**2) == "  3.00 MiB"


def test_history_snapshot_and_plot(tmp_path):
    # Earlier tests' tensors held in reference cycles (tracebacks of pytest.raises, say) must be freed before the
    # snapshot: a collection between it and the totals read below would change memory_allocated().
    gc.collect()
    torch.mytorch.empty_cache()
    torch.mytorch.memory._record_memory_history(max_entries=1000)
    try:
        keep = [torch.empty(n * 100_000, device="mytorch") for n in range(1, 6)]
        del keep[1]
        snap = torch.mytorch.memory._snapshot()
        path = tmp_path / "snap.pickle"
        torch.mytorch.memory._dump_snapshot(str(path))
    finally:
        torch.mytorch.memory._record_memory_history(enabled=None)
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions.count("alloc") >= 5 and "free_completed" in actions and "segment_alloc" in actions
    seg = snap["segments"]
    assert sum(s["allocated_size"] for s in seg) == torch.mytorch.memory_allocated()
    assert sum(s["total_size"] for s in seg) == torch.mytorch.memory_reserved()
    assert {b["state"] for s in seg for b in s["blocks"]} <= {"active_allocated", "inactive", "active_pending_free"}
    png = tmp_path / "memory.png"
    r = subprocess.run(
        [sys.executable, "-m", "mytorch.tools.memory_plot", str(path), str(png)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle")
    r = subprocess.run(
        [sys.executable, "-m", "mytorch.tools.memory_plot", str(bad), str(png)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "cannot read snapshot" in r.stderr
    del keep


def test_max_split_size_keeps_oversize_blocks_whole():
    r = run_python(
        """
        import torch, mytorch
        MiB = 1 << 20
        big = torch.empty(64 * MiB, dtype=torch.uint8, device="mytorch"); del big     # cached, 64 MiB
        small = torch.empty(8 * MiB, dtype=torch.uint8, device="mytorch")             # must not split it
        s = torch.mytorch.memory_stats()
        print(s["max_split_size"], s["segment.all.current"], s["oversize_segments.current"],
              s["reserved_bytes.all.current"] // MiB)
    """,
        env={"MYTORCH_ALLOC_CONF": "max_split_size_mb:32", "MYTORCH_RUNTIME": "sim"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(32 * MiB), "2", "1", str(64 + 20)]


def test_garbage_collection_threshold_releases_cache_early():
    r = run_python(
        """
        import torch, mytorch
        MiB = 1 << 20
        for n in (30, 31, 32, 33):           # each a new segment; old ones are cached, not in use
            t = torch.empty(n * MiB, dtype=torch.uint8, device="mytorch"); del t
        s = torch.mytorch.memory_stats()
        print(s["num_device_free"], s["num_alloc_retries"], torch.mytorch.memory_reserved() // MiB <= 0.5 * 128)
    """,
        env={
            "MYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.5",
            "MYTORCH_SIM_MEMORY": "128MiB",
            "MYTORCH_RUNTIME": "sim",
        },
    )
    assert r.returncode == 0, r.stderr
    freed, retries, bounded = r.stdout.split()
    assert int(freed) >= 2 and retries == "0" and bounded == "True"


@pytest.mark.parametrize(
    "conf, message",
    [
        ("max_split_size_mb:abc", "expects a number"),
        ("garbage_collection_threshold:1.5", "must be in \\(0, 1\\)"),
        ("expandable:True", "unknown key 'expandable'"),
    ],
)
def test_bad_alloc_conf(conf, message):
    r = run_python(
        """
        import torch, mytorch
        try:
            torch.empty(1, device="mytorch")
        except RuntimeError as e:
            print("ERR", e)
    """,
        env={"MYTORCH_ALLOC_CONF": conf},
    )
    import re

    assert "ERR" in r.stdout and re.search(message, r.stdout), r.stdout + r.stderr


def test_pinned_non_blocking_under_stream_changes():
    src = torch.randn(256, 1024)
    pinned = src.pin_memory()
    s1, s2 = torch.mytorch.Stream(), torch.mytorch.Stream()
    with torch.mytorch.stream(s1):
        dev = pinned.to("mytorch", non_blocking=True)
    s2.wait_stream(s1)
    with torch.mytorch.stream(s2):
        out = dev * 3
        dev.record_stream(s2)
        back = torch.empty_like(src).pin_memory()
        back.copy_(out, non_blocking=True)
    s2.synchronize()
    assert torch.equal(back, src * 3)
    before = torch.mytorch.host_memory_stats()["num_host_alloc"]
    del back
    again = torch.empty_like(src).pin_memory()  # served from the host cache
    assert torch.mytorch.host_memory_stats()["num_host_alloc"] == before
    assert again.is_pinned()
