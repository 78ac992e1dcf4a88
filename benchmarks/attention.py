"""Fused attention of mytorch against the reference, in the same process (mytorch.testing.bench), and a plot.

TFLOP/s of F.scaled_dot_product_attention forward and forward+backward (FLOPs = 4 b h s^2 d forward, 2.5x
that for the backward, halved when causal) at b*s tokens and h*d = 2048 on a GPU (256 on sim), against the
reference's fastest backend for each case, measured here: flash, cuDNN or memory-efficient attention on
torch.cuda, the CPU's flash-attention kernel or MATH on sim. MATH is also reported as its own column
("math" ratio). Then decoding latency: one query against a long KV cache.

    python benchmarks/attention.py                 # a reduced grid on sim, the full grid on a GPU
    python benchmarks/attention.py --seqs 1024,4096 --dims 128 --dtypes bfloat16 --docs
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from mytorch.testing.bench import Bench, add_args, parse_args


def variants(gpu: bool) -> dict:
    fast = (
        {
            "flash": SDPBackend.FLASH_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION,
        }
        if gpu
        else {"flash": SDPBackend.FLASH_ATTENTION}
    )
    return {**fast, "math": SDPBackend.MATH}


def runnable(fn) -> bool:
    try:
        fn()
        return True
    except RuntimeError:
        return False  # that backend does not take these inputs


def with_backend(backend, fn):
    def call():
        with sdpa_kernel([backend]):
            return fn()

    return call


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--seqs", default="")
    p.add_argument("--dims", default="")
    p.add_argument("--dtypes", default="")
    p.add_argument("--tokens", type=int, default=0)
    args = parse_args(p)
    b = Bench("attention", args, "SDPA forward and forward+backward; rate = TFLOP/s")
    gpu = b.gpu
    seqs = [int(s) for s in args.seqs.split(",") if s] or ([512, 1024, 2048, 4096, 8192, 16384] if gpu else [128, 256])
    dims = [int(d) for d in args.dims.split(",") if d] or [64, 128]
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d] or [torch.bfloat16, torch.float16]
    tokens = args.tokens or (16384 if gpu else 256)
    hd = 2048 if gpu else 256
    b.note(f"b*s = {tokens} tokens, h*d = {hd}; reference variants: {', '.join(variants(gpu))}")
    rows = []
    for dtype in dtypes:
        for d in dims:
            for s in seqs:
                bsz, h = max(1, tokens // s), max(1, hd // d)
                for causal in (False, True):
                    flops = 4 * bsz * h * s * s * d / (2 if causal else 1)
                    fns = {}
                    for dev in ("mytorch", b.ref):
                        q, k, v = (
                            torch.randn(bsz, h, s, d, dtype=dtype, device=dev, requires_grad=True) for _ in range(3)
                        )
                        g = torch.randn(bsz, h, s, d, dtype=dtype, device=dev)
                        fwd = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                        fb = lambda q=q, k=k, v=v, g=g, fwd=fwd: torch.autograd.grad(fwd(), (q, k, v), g)  # noqa: E731
                        fns[dev] = (fwd, fb)
                    label = f"{str(dtype)[6:]} d={d} s={s}{' causal' if causal else ''}"
                    out = {}
                    for i, what in enumerate(("fwd", "fwd+bwd")):
                        refs = {name: with_backend(be, fns[b.ref][i]) for name, be in variants(gpu).items()}
                        refs = {name: fn for name, fn in refs.items() if runnable(fn)}
                        out[what] = b.compare(
                            f"{what} {label}",
                            fns["mytorch"][i],
                            refs,
                            work=flops * (1 if i == 0 else 3.5) / 1e12,
                            unit="TFLOP/s",
                        )
                    rows.append((dtype, d, s, causal, out))
    cache = [8192, 32768, 131072] if gpu else [2048]
    for n in cache:
        fns = {}
        for dev in ("mytorch", b.ref):
            q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device=dev)
            k, v = (torch.randn(1, 32, n, 128, dtype=torch.bfloat16, device=dev) for _ in range(2))
            fns[dev] = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v)
        refs = {name: with_backend(be, fns[b.ref]) for name, be in variants(gpu).items()}
        b.compare(
            f"decode: 1 query, KV cache {n}, 32x128 bf16",
            fns["mytorch"],
            {name: fn for name, fn in refs.items() if runnable(fn)},
        )
    plot(b, rows, dtypes, dims)
    b.finish()


def plot(b: Bench, rows, dtypes, dims) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        b.note("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, what in zip(axes, ("fwd", "fwd+bwd")):
        for dtype in dtypes:
            for d in dims:
                for causal in (False, True):
                    pts = [r for r in rows if r[0] == dtype and r[1] == d and r[3] == causal]
                    lab = f"{str(dtype)[6:]} d={d}{' causal' if causal else ''}"
                    ax.plot(
                        [r[2] for r in pts], [r[4][what].mytorch_rate for r in pts], marker="o", label=f"mytorch {lab}"
                    )
                    ax.plot(
                        [r[2] for r in pts],
                        [r[4][what].reference_rate for r in pts],
                        linestyle="--",
                        label=f"{b.ref} fastest {lab}",
                    )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"SDPA {what} ({b.runtime}, reference at {torch.get_num_threads()} thread(s))")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=5)
    fig.tight_layout()
    b.save_plot(fig, "attention_benchmark.png")


if __name__ == "__main__":
    main()
