"""Copy and fill bandwidth of the mytorch device against a reference in the same process.

Reference: torch.cuda on a GPU (cuda runtime), the CPU otherwise (sim runtime, where device memory is host
memory). Reports GB/s (bytes read + written) and the ratio mytorch / reference for host->device,
device->host, device->device (contiguous, transposed, dtype cast) and fill.

    python benchmarks/copy_bandwidth.py [--mib 64] [--repeat 10]
"""
from __future__ import annotations

import argparse

import torch

import mytorch  # noqa: F401
from _timing import timed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    torch.mytorch.set_fallback_mode("silent")
    rt = torch.mytorch.runtime()
    ref_dev = "cuda" if rt == "cuda" and torch.cuda.is_available() else "cpu"
    n = args.mib * (1 << 20) // 4
    side = int(n ** 0.5)
    host = torch.randn(n)
    pinned = host.pin_memory()
    print(f"mytorch copy bandwidth: runtime={rt}, reference={ref_dev}, {args.mib} MiB float32, "
          f"torch {torch.__version__}, device '{torch.mytorch.get_device_name()}'")

    def run(dev):
        sync = (lambda: torch.mytorch.synchronize()) if dev == "mytorch" else (
            (lambda: torch.cuda.synchronize()) if dev == "cuda" else (lambda: None))
        d = host.to(dev)
        sq = d[: side * side].view(side, side)
        out = torch.empty_like(d)
        out_sq = torch.empty(side, side, device=dev)
        out_half = torch.empty(n, device=dev, dtype=torch.float16)
        nbytes = n * 4
        cases = {
            "host->device (pinned)": (lambda: d.copy_(pinned, non_blocking=True), 2 * nbytes),
            "device->host": (lambda: pinned.copy_(d), 2 * nbytes),
            "device->device": (lambda: out.copy_(d), 2 * nbytes),
            "device transpose": (lambda: out_sq.copy_(sq.t()), 2 * side * side * 4),
            "device cast f32->f16": (lambda: out_half.copy_(d), nbytes + n * 2),
            "fill": (lambda: out.fill_(1.5), nbytes),
        }
        if dev == "cpu":  # host<->host on the reference side: a plain copy of the same bytes
            cases["host->device (pinned)"] = (lambda: d.copy_(pinned), 2 * nbytes)
        return {k: b / timed(f, sync, args.repeat) / 1e9 for k, (f, b) in cases.items()}

    mine, ref = run("mytorch"), run(ref_dev)
    print(f"{'case':26s} {'mytorch GB/s':>13s} {ref_dev + ' GB/s':>13s} {'ratio':>7s}")
    for k in mine:
        print(f"{k:26s} {mine[k]:13.2f} {ref[k]:13.2f} {mine[k] / ref[k]:7.2f}")


if __name__ == "__main__":
    main()
