"""Core tensor kernels of mytorch against the reference, in the same process (mytorch.testing.bench).

For each op and size: per-call time on both sides, achieved GB/s (bytes read + written, counted from the
operands) and the ratio reference time / mytorch time. The last block is the host overhead per call on
tiny tensors.

    python benchmarks/core_ops.py                         # sizes 1e3, 1e5, 1e6 on sim; up to 1e8 on a GPU
    python benchmarks/core_ops.py --sizes 1e4,1e6 --repeat 21 --threads 2
"""

from __future__ import annotations

import argparse

import torch

from mytorch.testing.bench import Bench, add_args, parse_args


def cases(n: int, dev: str):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=g).to(dev)
    y = torch.randn(n, generator=g).to(dev)
    side = max(1, int(n**0.5))
    sq = x[: side * side].view(side, side)
    idx = torch.randint(0, n, (n,), generator=g).to(dev)
    rows = torch.randint(0, side, (side,), generator=g).to(dev)
    out = torch.empty_like(x)
    f4 = 4
    return [
        ("add (contiguous)", lambda: torch.add(x, y, out=out), 3 * n * f4),
        ("mul scalar", lambda: torch.mul(x, 2.0, out=out), 2 * n * f4),
        ("exp", lambda: torch.exp(x, out=out), 2 * n * f4),
        ("add (transposed)", lambda: sq.t() + sq, 3 * side * side * f4),
        ("where", lambda: torch.where(x > 0, x, y), 3 * n * f4 + n),
        ("sum (full)", lambda: x.sum(), n * f4),
        ("sum (dim=1)", lambda: sq.sum(1), side * side * f4),
        ("amax (dim=0)", lambda: sq.amax(0), side * side * f4),
        ("var (full)", lambda: x.var(), n * f4),
        ("gather", lambda: x.gather(0, idx), 2 * n * f4 + n * 8),
        ("index_select rows", lambda: sq.index_select(0, rows), 2 * side * side * f4),
        ("scatter_add", lambda: torch.zeros_like(x).scatter_add_(0, idx, y), 3 * n * f4 + n * 8),
        ("cumsum", lambda: x.cumsum(0), 2 * n * f4),
    ]


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--sizes", default="")
    args = parse_args(p)
    b = Bench("core_ops", args, "elementwise, reductions, index ops, float32; rate = GB/s")
    sizes = [int(float(s)) for s in args.sizes.split(",") if s] or (
        [10**3, 10**5, 10**6] if not b.gpu else [10**3, 10**5, 10**6, 10**7, 10**8]
    )
    for n in sizes:
        for (name, f, nbytes), (_, g, _) in zip(cases(n, "mytorch"), cases(n, b.ref)):
            b.compare(f"{name} n={n:.0e}", f, g, work=nbytes / 1e9, unit="GB/s")
    b.note("\nhost overhead per call on tiny tensors (8 elements): the ms columns are per call")
    for name, make in (
        ("add", lambda d: lambda a=torch.ones(8, device=d): a + a),
        ("sum", lambda d: lambda a=torch.ones(8, device=d): a.sum()),
        (
            "index_select",
            lambda d: (
                lambda a=torch.ones(8, device=d), i=torch.zeros(2, dtype=torch.long, device=d): a.index_select(0, i)
            ),
        ),
    ):
        b.compare(f"tiny {name}", make("mytorch"), make(b.ref))
    b.finish()


if __name__ == "__main__":
    main()
