"""Core tensor kernels of mytorch against a reference in the same process.

Reference: stock torch.cuda on a GPU (cuda runtime), torch CPU otherwise (sim runtime). For each op and size
it prints the median time, achieved GB/s (bytes read + written, counted from the op's operands), the
fraction of the device's measured copy bandwidth, and the ratio reference_time / mytorch_time (above 1:
mytorch is faster). The last table is host overhead per call on tiny tensors (microseconds).

    python benchmarks/core_ops.py                       # sizes 1e3 .. 1e7 on sim, 1e3 .. 1e8 on a GPU
    python benchmarks/core_ops.py --sizes 1e4,1e6 --repeat 20
"""
from __future__ import annotations

import argparse

import torch

import mytorch  # noqa: F401
from _timing import timed


def cases(n: int, dev: str):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=g).to(dev)
    y = torch.randn(n, generator=g).to(dev)
    side = max(1, int(n ** 0.5))
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
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    torch.mytorch.set_fallback_mode("silent")
    rt = torch.mytorch.runtime()
    ref = "cuda" if rt == "cuda" and torch.cuda.is_available() else "cpu"
    sizes = [int(float(s)) for s in args.sizes.split(",") if s] or \
        ([10**3, 10**5, 10**7] if rt == "sim" else [10**3, 10**5, 10**6, 10**7, 10**8])
    syncs = {"mytorch": torch.mytorch.synchronize, "cuda": (torch.cuda.synchronize if ref == "cuda" else None),
             "cpu": lambda: None}
    # The device's copy bandwidth, measured here, is the roof for memory-bound ops.
    big = torch.empty(max(sizes), device="mytorch")
    copy_t = timed(lambda: big.clone(), syncs["mytorch"], args.repeat)
    copy_bw = 2 * big.numel() * 4 / copy_t / 1e9
    del big
    print(f"mytorch core ops: runtime={rt}, reference={ref}, torch {torch.__version__}, "
          f"device '{torch.mytorch.get_device_name()}', measured copy bandwidth {copy_bw:.1f} GB/s, float32")
    print(f"{'op':20s} {'size':>9s} {'mytorch ms':>11s} {'GB/s':>8s} {'of copy':>8s} {ref + ' ms':>10s} {'ratio':>7s}")
    for n in sizes:
        mine = cases(n, "mytorch")
        theirs = cases(n, ref)
        for (name, f, nbytes), (_, g, _) in zip(mine, theirs):
            tm = timed(f, syncs["mytorch"], args.repeat)
            tr = timed(g, syncs[ref], args.repeat)
            gbs = nbytes / tm / 1e9
            print(f"{name:20s} {n:9.0e} {tm * 1e3:11.3f} {gbs:8.2f} {100 * gbs / copy_bw:7.1f}% {tr * 1e3:10.3f} {tr / tm:7.2f}")
    print(f"\nhost overhead per call on tiny tensors (8 elements), microseconds:")
    print(f"{'op':12s} {'mytorch':>9s} {ref:>9s} {'ratio':>7s}")
    for name, make in (("add", lambda d: (lambda a=torch.ones(8, device=d): a + a)),
                       ("sum", lambda d: (lambda a=torch.ones(8, device=d): a.sum())),
                       ("index_select", lambda d: (lambda a=torch.ones(8, device=d), i=torch.zeros(2, dtype=torch.long, device=d): a.index_select(0, i)))):
        fm, fr = make("mytorch"), make(ref)
        tm = timed(lambda: [fm() for _ in range(200)], syncs["mytorch"], args.repeat) / 200
        tr = timed(lambda: [fr() for _ in range(200)], syncs[ref], args.repeat) / 200
        print(f"{name:12s} {tm * 1e6:9.1f} {tr * 1e6:9.1f} {tm / tr:7.2f}")


if __name__ == "__main__":
    main()
