"""Plot allocated and reserved device memory over time from a memory snapshot.

    torch.mytorch.memory._record_memory_history()
    ...  # the workload
    torch.mytorch.memory._dump_snapshot("snap.pickle")

    python -m mytorch.tools.memory_plot snap.pickle memory.png [--device 0]

Allocated memory follows alloc / free_completed events, reserved memory follows segment_alloc /
segment_free events; both start from the memory held when recording began (the snapshot's segments minus
what the events account for).
"""

from __future__ import annotations

import argparse
import pickle
import sys


def curves(snapshot: dict, device: int = 0):
    events = snapshot["device_traces"][device] if device < len(snapshot["device_traces"]) else []
    seg_now = sum(s["total_size"] for s in snapshot["segments"] if s["device"] == device)
    alloc_now = sum(s["allocated_size"] for s in snapshot["segments"] if s["device"] == device)
    # Work back from the state at snapshot time to the state when recording began.
    alloc0, reserved0 = alloc_now, seg_now
    for e in events:
        if e["action"] == "alloc":
            alloc0 -= e["size"]
        elif e["action"] == "free_completed":
            alloc0 += e["size"]
        elif e["action"] == "segment_alloc":
            reserved0 -= e["size"]
        elif e["action"] == "segment_free":
            reserved0 += e["size"]
    t, alloc, reserved = [], [], []
    a, r = alloc0, reserved0
    start = events[0]["time_us"] if events else 0
    for e in events:
        if e["action"] == "alloc":
            a += e["size"]
        elif e["action"] == "free_completed":
            a -= e["size"]
        elif e["action"] == "segment_alloc":
            r += e["size"]
        elif e["action"] == "segment_free":
            r -= e["size"]
        else:
            continue
        t.append((e["time_us"] - start) / 1e6)
        alloc.append(a)
        reserved.append(r)
    if t:  # hold the final levels for a moment so the last step is visible
        t.append(t[-1] + max(t[-1] * 0.03, 1e-6))
        alloc.append(alloc[-1])
        reserved.append(reserved[-1])
    return t, alloc, reserved


def plot(snapshot: dict, out: str, device: int = 0) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, alloc, reserved = curves(snapshot, device)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    ax.step(t, [r / 2**20 for r in reserved], where="post", label="reserved", color="tab:orange")
    ax.step(t, [a / 2**20 for a in alloc], where="post", label="allocated", color="tab:blue")
    ax.set_xlabel("time since recording began (s)")
    ax.set_ylabel("MiB")
    ax.set_title(f"mytorch:{device} memory ({len(t)} allocator events)")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mytorch.tools.memory_plot", description=__doc__.split("\n")[0])
    p.add_argument("snapshot", help="a pickle written by torch.mytorch.memory._dump_snapshot")
    p.add_argument("out", help="PNG file to write")
    p.add_argument("--device", type=int, default=0)
    args = p.parse_args(argv)
    try:
        with open(args.snapshot, "rb") as f:
            snap = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        print(f"cannot read snapshot {args.snapshot}: {e}", file=sys.stderr)
        return 2
    if not isinstance(snap, dict) or "device_traces" not in snap or "segments" not in snap:
        print(f"{args.snapshot} is not a memory snapshot (expected the dict _snapshot() returns)", file=sys.stderr)
        return 2
    plot(snap, args.out, args.device)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
