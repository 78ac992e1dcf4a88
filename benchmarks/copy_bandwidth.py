"""Copy and fill bandwidth of the mytorch device against the reference, in the same process
(mytorch.testing.bench): host->device, device->host, device->device (contiguous, transposed, dtype cast) and
fill, in GB/s (bytes read + written). On sim, device memory is host memory and the reference's "host->device"
is a plain host copy of the same bytes.

    python benchmarks/copy_bandwidth.py [--mib 64] [--repeat 11] [--threads 1]
"""

from __future__ import annotations

import argparse

import torch

from mytorch.testing.bench import Bench, add_args, parse_args


def cases(dev: str, n: int, host: torch.Tensor, pinned: torch.Tensor) -> dict:
    side = int(n**0.5)
    d = host.to(dev)
    sq = d[: side * side].view(side, side)
    out = torch.empty_like(d)
    out_sq = torch.empty(side, side, device=dev)
    out_half = torch.empty(n, device=dev, dtype=torch.float16)
    back = torch.empty_like(pinned)
    nbytes = n * 4
    return {
        "host->device (pinned)": (
            (lambda: d.copy_(pinned, non_blocking=True)) if dev != "cpu" else (lambda: d.copy_(pinned)),
            2 * nbytes,
        ),
        "device->host (pinned)": (lambda: back.copy_(d), 2 * nbytes),
        "device->device": (lambda: out.copy_(d), 2 * nbytes),
        "device transpose": (lambda: out_sq.copy_(sq.t()), 2 * side * side * 4),
        "device cast f32->f16": (lambda: out_half.copy_(d), nbytes + n * 2),
        "fill": (lambda: out.fill_(1.5), nbytes),
    }


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--mib", type=int, default=64)
    args = parse_args(p)
    b = Bench("copy_bandwidth", args, f"{args.mib} MiB float32; rate = GB/s")
    n = args.mib * (1 << 20) // 4
    host = torch.randn(n)
    pinned = host.pin_memory()
    mine, ref = cases("mytorch", n, host, pinned), cases(b.ref, n, host, pinned)
    for name, (f, nbytes) in mine.items():
        b.compare(name, f, ref[name][0], work=nbytes / 1e9, unit="GB/s")
    b.finish()


if __name__ == "__main__":
    main()
