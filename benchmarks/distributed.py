"""Collective time of the mytorch c10d backend against plain Gloo, same ranks, same process layout.

On sim the mytorch backend hands the bytes to Gloo over views of device memory, so the ratio is its own
overhead: the agreement check (on by default, MYTORCH_DIST_CHECK), the Work and future wrapping. Sizes are
the largest buffer of the collective (nccl-tests' convention). Each rank is a process; on a 2-core machine 4
ranks oversubscribe it, which the printed core count makes visible.

    python benchmarks/distributed.py                       # 2 and 4 ranks, 1 KiB .. 256 MiB
    python benchmarks/distributed.py --ranks 2 --max-mib 16 --plot docs/distributed_benchmark.png
    python benchmarks/distributed.py --nccl          # GPU: against ProcessGroupNCCL, world size 1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch

import mytorch
from mytorch.testing import _dist_workers as W


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def per_call_overhead(calls: int = 3000) -> dict:
    """The backend's own cost per call, without the network: a world-size-1 group in this process, tiny
    all_reduce through plain Gloo (CPU tensor) and through the mytorch backend (device tensor), interleaved."""
    import time
    import torch.distributed as dist

    store = dist.HashStore()
    dist.init_process_group("cpu:gloo,mytorch:mytorch", store=store, rank=0, world_size=1)
    try:
        c, d = torch.ones(16), torch.ones(16, device="mytorch")
        samples = {"gloo": [], "mytorch": []}
        for i in range(calls):
            for label, t in (("gloo", c), ("mytorch", d)) if i % 2 else (("mytorch", d), ("gloo", c)):
                t0 = time.perf_counter()
                dist.all_reduce(t)
                samples[label].append(time.perf_counter() - t0)
        med = {k: statistics.median(v[calls // 10:]) for k, v in samples.items()}
        return {"gloo_us": med["gloo"] * 1e6, "mytorch_us": med["mytorch"] * 1e6}
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min-kib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--repeats", type=int, default=0, help="0: by size (more for small messages)")
    p.add_argument("--plot", default="docs/distributed_benchmark.png")
    p.add_argument("--json", default="")
    p.add_argument("--nccl", action="store_true",
                   help="GPU: compare with ProcessGroupNCCL on CUDA tensors at world size 1 (cuda runtime)")
    args = p.parse_args()

    ref = "nccl" if args.nccl else "gloo"
    if args.nccl:
        args.ranks = [1]
    sizes = []
    s = args.min_kib * 1024
    while s <= args.max_mib * 1024 * 1024:
        sizes.append(s)
        s *= 4
    print(f"torch {torch.__version__}, mytorch runtime {torch.mytorch.runtime() if hasattr(torch.mytorch, 'runtime') else mytorch._C._runtime()}, "
          f"{os.cpu_count()} cores; float32; median of repeats, interleaved")
    if not args.nccl:
        o = per_call_overhead()
        print(f"per call at world size 1 (16-element all_reduce, no network): plain Gloo {o['gloo_us']:.1f} us, "
              f"mytorch {o['mytorch_us']:.1f} us ({o['mytorch_us'] - o['gloo_us']:+.1f} us; the agreement check is "
              f"skipped at world size 1; with more ranks it adds one round of small point-to-point messages)")
    all_rows = {}
    for world in args.ranks:
        rows = []
        for size in sizes:
            repeats = args.repeats or (40 if size <= 1 << 20 else 15 if size <= 16 << 20 else 7)
            out = tempfile.mkdtemp()
            W.launch(W.bench_worker, world, out, W.free_port(), [size], repeats, ref)
            rows += json.load(open(os.path.join(out, "rank0.json")))["results"]
        all_rows[world] = rows
        print(f"\n{world} ranks")
        print(f"{'collective':<15}{'size':>10}{ref + ' ms':>11}{'mytorch ms':>12}{'ratio':>8}{'no-check ms':>13}{'ratio':>8}")
        for r in rows:
            print(f"{r['collective']:<15}{human(r['bytes']):>10}{r[ref] * 1e3:>11.3f}{r['mytorch'] * 1e3:>12.3f}"
                  f"{r['mytorch_ratio']:>8.3f}{r['mytorch_nocheck'] * 1e3:>13.3f}{r['mytorch_nocheck_ratio']:>8.3f}")
        big = [r for r in rows if r["bytes"] >= 1 << 20]
        if big:
            for key, label in (("mytorch_ratio", "checked"), ("mytorch_nocheck_ratio", "unchecked")):
                geo = torch.tensor([r[key] for r in big]).log().mean().exp().item()
                print(f"messages >= 1 MiB, {label}: geometric mean ratio {geo:.3f}, worst single point "
                      f"{max(r[key] for r in big):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(all_rows), figsize=(6 * len(all_rows), 4.2), squeeze=False)
        for ax, (world, rows) in zip(axes[0], all_rows.items()):
            for coll, style in (("all_reduce", "o-"), ("all_gather", "s-"), ("reduce_scatter", "^-")):
                rs = [r for r in rows if r["collective"] == coll]
                ax.plot([r["bytes"] for r in rs], [r["mytorch_ratio"] for r in rs], style, label=f"{coll}")
                ax.plot([r["bytes"] for r in rs], [r["mytorch_nocheck_ratio"] for r in rs], style,
                        alpha=0.35, label=f"{coll} (no check)")
            ax.axhline(1.0, color="k", lw=0.8)
            ax.axhline(1.05, color="r", lw=0.8, ls="--")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(f"time / {ref} time (median of paired ratios)")
            ax.set_title(f"mytorch backend vs {ref}, {world} ranks, {os.cpu_count()} cores")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
