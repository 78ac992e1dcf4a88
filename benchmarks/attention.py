"""Fused attention of mytorch against the reference in the same process, and a PNG plot.

TFLOP/s of F.scaled_dot_product_attention forward and forward+backward (FLOPs = 4 b h s^2 d forward, 2.5x
that for the backward, halved when causal) at b*s = 16k tokens and h*d = 2048, for s = 512..16k, d = 64 and
128, causal and not, bf16 and fp16, against the reference: stock torch.cuda SDPA's fastest backend
(flash or cuDNN, whichever is faster, measured here) on a GPU, torch CPU on sim. Then decoding latency:
one query against a long KV cache. Ratios are reference_time / mytorch_time (above 1: mytorch is faster).

    python benchmarks/attention.py                 # reduced grid on sim (2 cores), the issue's grid on a GPU
    python benchmarks/attention.py --seqs 1024,4096 --dims 128 --dtypes bfloat16
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mytorch  # noqa: F401
from _timing import timed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", default="")
    p.add_argument("--dims", default="")
    p.add_argument("--dtypes", default="")
    p.add_argument("--tokens", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--plot", default="docs/attention_benchmark.png")
    args = p.parse_args()
    torch.mytorch.set_fallback_mode("silent")
    rt = torch.mytorch.runtime()
    gpu = rt == "cuda" and torch.cuda.is_available()
    ref = "cuda" if gpu else "cpu"
    seqs = [int(s) for s in args.seqs.split(",") if s] or ([512, 1024, 2048, 4096, 8192, 16384] if gpu else [128, 256])
    dims = [int(d) for d in args.dims.split(",") if d] or [64, 128]
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d] or [torch.bfloat16, torch.float16]
    tokens = args.tokens or (16384 if gpu else 256)
    hd = 2048 if gpu else 256
    syncs = {"mytorch": torch.mytorch.synchronize, "cuda": getattr(torch.cuda, "synchronize", None), "cpu": lambda: None}
    ref_backends = [[SDPBackend.FLASH_ATTENTION], [SDPBackend.CUDNN_ATTENTION]] if gpu else [[SDPBackend.MATH]]
    print(f"mytorch fused attention: runtime={rt}, device={torch.mytorch.get_device_name()}, reference={ref}, "
          f"torch {torch.__version__}; b*s = {tokens} tokens, h*d = {hd}")
    print(f"{'dtype':9s} {'d':>4s} {'s':>6s} {'causal':6s} | {'fwd TFLOP/s':>11s} {'ref':>7s} {'ratio':>6s} | "
          f"{'f+b TFLOP/s':>11s} {'ref':>7s} {'ratio':>6s}")
    rows = []
    for dtype in dtypes:
        for d in dims:
            for s in seqs:
                b, h = max(1, tokens // s), max(1, hd // d)
                for causal in (False, True):
                    flops = 4 * b * h * s * s * d / (2 if causal else 1)
                    t = {}
                    for dev in ("mytorch", ref):
                        q, k, v = (torch.randn(b, h, s, d, dtype=dtype, device=dev, requires_grad=True) for _ in range(3))
                        g = torch.randn(b, h, s, d, dtype=dtype, device=dev)
                        best_f = best_fb = float("inf")
                        for backends in ([None] if dev == "mytorch" else ref_backends):
                            try:
                                ctx = sdpa_kernel(backends) if backends else _null()
                                with ctx:
                                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                                    fb = lambda: torch.autograd.grad(fwd(), (q, k, v), g)  # noqa: E731
                                    best_f = min(best_f, timed(fwd, syncs[dev], args.repeat, warmup=1))
                                    best_fb = min(best_fb, timed(fb, syncs[dev], args.repeat, warmup=1))
                            except RuntimeError:
                                continue  # that backend does not take these inputs
                        t[dev] = (best_f, best_fb)
                    (mf, mfb), (rf, rfb) = t["mytorch"], t[ref]
                    row = (dtype, d, s, causal, flops / mf / 1e12, flops / rf / 1e12, rf / mf,
                           3.5 * flops / mfb / 1e12, 3.5 * flops / rfb / 1e12, rfb / mfb)
                    rows.append(row)
                    print(f"{str(dtype)[6:]:9s} {d:4d} {s:6d} {str(causal):6s} | {row[4]:11.3f} {row[5]:7.3f} {row[6]:5.2f}x | "
                          f"{row[7]:11.3f} {row[8]:7.3f} {row[9]:5.2f}x", flush=True)
    # decoding: one new query against a long KV cache
    cache = [8192, 32768, 131072] if gpu else [2048]
    for n in cache:
        t = {}
        for dev in ("mytorch", ref):
            q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device=dev)
            k, v = (torch.randn(1, 32, n, 128, dtype=torch.bfloat16, device=dev) for _ in range(2))
            t[dev] = timed(lambda: F.scaled_dot_product_attention(q, k, v), syncs[dev], args.repeat, warmup=1)
        print(f"decode: 1 query, KV cache {n:6d}, 32 heads x 128, bf16: mytorch {t['mytorch'] * 1e6:9.1f} us, "
              f"reference {t[ref] * 1e6:9.1f} us, ratio {t[ref] / t['mytorch']:.2f}x")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, col, title in ((axes[0], 4, "forward"), (axes[1], 7, "forward + backward")):
        for dtype in dtypes:
            for d in dims:
                for causal in (False, True):
                    pts = [r for r in rows if r[0] == dtype and r[1] == d and r[3] == causal]
                    lab = f"{str(dtype)[6:]} d={d}{' causal' if causal else ''}"
                    ax.plot([r[2] for r in pts], [r[col] for r in pts], marker="o", label=f"mytorch {lab}")
                    ax.plot([r[2] for r in pts], [r[col + 1] for r in pts], linestyle="--", label=f"{ref} {lab}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"SDPA {title} ({rt})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot: {args.plot}")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    main()
