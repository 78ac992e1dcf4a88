"""Expert-parallel dispatch and combine (mytorch.distributed.ep) against the stock path, DeepEP's protocol.

Unbalanced routing (a skewed expert popularity, uneven token counts); correctness against the stock path
(all_to_all_single + moe_permute, TorchTitan's all-to-all token dispatcher) first; then the times of dispatch,
combine and both, in the same processes through the benchmark harness (ratio = stock time / mytorch time, above 1:
mytorch faster), the bytes each sends, and the host synchronisations each makes in a layer (counted with
torch.mytorch.set_sync_debug_mode("warn")). DeepSeek-V3's shapes scaled to this machine: hidden 7168, 256
experts, top-8, bfloat16, fewer tokens.

    python benchmarks/ep.py                    # 2 and 4 ranks, 256 tokens a rank
    python benchmarks/ep.py --ranks 2 --tokens 512 --docs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from mytorch.testing import _dist_workers as W
from mytorch.testing import _ep_workers as E
from mytorch.testing.bench import Bench, Stats, add_args, make_row, parse_args


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=15)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--topk", type=int, default=8)
    args = parse_args(p)
    b = Bench(
        "ep",
        args,
        f"dispatch/combine, hidden {args.hidden}, {args.experts} experts, top-{args.topk}, bfloat16, "
        f"{args.tokens} tokens a rank, against all_to_all_single + moe_permute",
    )
    plotted = {}
    for world in args.ranks:
        out = tempfile.mkdtemp()
        W.launch(
            E.bench_worker,
            world,
            out,
            W.free_port(),
            args.tokens,
            args.hidden,
            args.experts,
            args.topk,
            args.repeat,
            timeout_s=1800,
        )
        r = json.load(open(os.path.join(out, "rank0.json")))
        t = {k: Stats(v["wall"], v["cpu"]) for k, v in r["times"].items()}
        b.note(
            f"\n{world} ranks: host synchronisations a layer: exact {r['syncs']['exact']}, capacity "
            f"{r['syncs']['capacity']}, stock {r['syncs']['stock']}; bytes a rank sends in dispatch: mytorch "
            f"{r['bytes']['mytorch'] / 2**20:.1f} MiB, stock {r['bytes']['stock'] / 2**20:.1f} MiB"
        )
        for piece, ref in (("", "stock"), ("dispatch ", "dispatch stock"), ("combine ", "combine stock")):
            for mode in ("exact", "capacity"):
                mb = r["bytes"]["mytorch"] / 2**20 if piece != "combine " else None
                plotted[(world, piece or "dispatch + combine ", mode)] = make_row("", t[f"{piece}{mode}"], t[ref]).ratio
                b.add(
                    make_row(
                        f"{world} ranks {piece or 'dispatch + combine '}{mode}",
                        t[f"{piece}{mode}"],
                        t[ref],
                        "stock",
                        mb if piece == "dispatch " else None,
                        "MiB/s" if piece == "dispatch " else "",
                        {"world": world, "syncs": r["syncs"], "bytes": r["bytes"]},
                    )
                )
    plot(b, plotted, args.ranks)
    b.finish()


def plot(b: Bench, ratios: dict, ranks: list) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        b.note("matplotlib is not installed: no plot")
        return
    pieces = ("dispatch + combine ", "dispatch ", "combine ")
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / (2 * len(ranks))
    for j, (world, mode) in enumerate((w, m) for w in ranks for m in ("exact", "capacity")):
        xs = [i + (j - len(ranks) + 0.5) * width for i in range(len(pieces))]
        ax.bar(xs, [ratios[(world, p, mode)] for p in pieces], width, label=f"{world} ranks, {mode}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(2.0, color="r", lw=0.8, ls="--")
    ax.set_xticks(range(len(pieces)), [p.strip() for p in pieces])
    ax.set_ylabel("stock time / mytorch time")
    ax.set_title("mytorch.distributed.ep against all_to_all_single + moe_permute (sim)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    b.save_plot(fig, "ep_benchmark.png")


if __name__ == "__main__":
    main()
