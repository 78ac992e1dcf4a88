"""Collective time of the mytorch c10d backend against plain Gloo, same ranks, same process layout, through
the benchmark harness (mytorch.testing.bench).

On sim the mytorch backend hands the bytes to Gloo over views of device memory, so the ratio (Gloo time /
mytorch time, above 1: mytorch is faster) is its own overhead: the agreement check (on by default,
MYTORCH_DIST_CHECK), the Work and future wrapping. Sizes are the largest buffer of the collective
(nccl-tests' convention). Each rank is a process; on a 2-core machine 4 ranks oversubscribe it, which the
printed CPU count makes visible. A sample repeats the call a number of times fixed by the message size (the
ranks must make the same calls). With ranks sharing 2 cores, expect wide spreads below 1 MiB.

    python benchmarks/distributed.py                       # 2 and 4 ranks, 1 KiB .. 256 MiB
    python benchmarks/distributed.py --ranks 2 --max-mib 16 --docs
    python benchmarks/distributed.py --nccl                # GPU: against ProcessGroupNCCL, world size 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

from mytorch.testing import _dist_workers as W
from mytorch.testing.bench import Bench, Row, Stats, add_args, make_row, parse_args


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def per_call_overhead(b: Bench, calls: int = 200) -> None:
    """The backend's own cost per call, without the network: a world-size-1 group in this process, tiny
    all_reduce through plain Gloo (CPU tensor) and through the mytorch backend (device tensor)."""
    import torch.distributed as dist

    dist.init_process_group("cpu:gloo,mytorch:mytorch", store=dist.HashStore(), rank=0, world_size=1)
    try:
        c, d = torch.ones(16), torch.ones(16, device="mytorch")
        b.compare(
            "world size 1: 16-element all_reduce (no network)",
            lambda: dist.all_reduce(d),
            lambda: dist.all_reduce(c),
            repeat=args_repeat(b, 21),
        )
    finally:
        dist.destroy_process_group()


def args_repeat(b: Bench, default: int) -> int:
    return b.args.repeat or default


def row_of(r: dict, label: str, ref: str) -> Row:
    t = {k: Stats(v["wall"], v["cpu"]) for k, v in r["times"].items()}
    return make_row(
        f"{r['collective']} {human(r['bytes'])}{'' if label == 'mytorch' else ' (no check)'}",
        t[label],
        t[ref],
        ref,
        r["bytes"] / 2**20,
        "MiB/s",
        {"bytes": r["bytes"]},
    )


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=0)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min-kib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument(
        "--nccl",
        action="store_true",
        help="GPU: compare with ProcessGroupNCCL on CUDA tensors at world size 1 (cuda runtime)",
    )
    args = parse_args(p)
    ref = "nccl" if args.nccl else "gloo"
    if args.nccl:
        args.ranks = [1]
    b = Bench(
        "distributed", args, f"all_reduce / all_gather / reduce_scatter, float32, against {ref}; --repeat 0 = by size"
    )
    sizes = []
    s = args.min_kib * 1024
    while s <= args.max_mib * 1024 * 1024:
        sizes.append(s)
        s *= 4
    if not args.nccl:
        per_call_overhead(b)
    all_rows = {}
    for world in args.ranks:
        b.note(f"\n{world} ranks")
        rows = []
        for size in sizes:
            repeats = args.repeat or (40 if size <= 1 << 20 else 15 if size <= 16 << 20 else 7)
            out = tempfile.mkdtemp()
            W.launch(W.bench_worker, world, out, W.free_port(), [size], repeats, ref)
            for r in json.load(open(os.path.join(out, "rank0.json")))["results"]:
                for label in ("mytorch", "mytorch_nocheck"):
                    row = row_of(r, label, ref)
                    row.extra["world"] = world
                    b.add(row)
                    rows.append((r["collective"], label, row))
        all_rows[world] = rows
        for label, tag in (("mytorch", "checked"), ("mytorch_nocheck", "unchecked")):
            pts = [row.ratio for c, lab, row in rows if lab == label and row.extra["bytes"] >= 1 << 20]
            if pts:
                geo = torch.tensor(pts).log().mean().exp().item()
                b.note(f"messages >= 1 MiB, {tag}: geometric mean ratio {geo:.3f}, worst single point {min(pts):.3f}")
    plot(b, all_rows, ref)
    b.finish()


def plot(b: Bench, all_rows: dict, ref: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        b.note("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, len(all_rows), figsize=(6 * len(all_rows), 4.2), squeeze=False)
    for ax, (world, rows) in zip(axes[0], all_rows.items()):
        for coll, style in (("all_reduce", "o-"), ("all_gather", "s-"), ("reduce_scatter", "^-"), ("all_to_all", "d-")):
            for label, alpha, suffix in (("mytorch", 1.0, ""), ("mytorch_nocheck", 0.35, " (no check)")):
                pts = [row for c, lab, row in rows if c == coll and lab == label]
                ax.plot(
                    [r.extra["bytes"] for r in pts], [r.ratio for r in pts], style, alpha=alpha, label=coll + suffix
                )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1 / 1.05, color="r", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(f"{ref} time / mytorch time (median of paired rounds)")
        ax.set_title(f"mytorch backend vs {ref}, {world} ranks, {os.cpu_count()} CPUs")
        ax.legend(fontsize=7)
    fig.tight_layout()
    b.save_plot(fig, "distributed_benchmark.png")


if __name__ == "__main__":
    sys.exit(main())
