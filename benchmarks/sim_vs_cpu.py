"""The sim runtime against PyTorch's CPU backend, op by op, in one process (mytorch.testing.bench).

Every op of issue 27's table, mytorch sim (its kernels on torch's intra-op pool, Note [Sim parallelism]) against
torch CPU, same shapes and dtypes, interleaved rounds; at the thread count given (both sides the same:
torch.set_num_threads). Run it twice for the two columns of docs/sim_performance.md:

    python benchmarks/sim_vs_cpu.py --threads 2 --docs      # the machine's default (2 cores here)
    python benchmarks/sim_vs_cpu.py --threads 1 --docs
    python benchmarks/sim_vs_cpu.py --only add,sum --repeat 5   # a subset

The ratio is the harness's: CPU time / mytorch time, so 1.0 or more means mytorch is as fast or faster (the
issue's "mytorch / CPU <= 1.0" target is "ratio >= 1.0" here).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from mytorch.testing.bench import Bench, add_args, parse_args


def _t(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def cases():
    """(name, make(device) -> callable). Inputs are made once per side from the same CPU values."""
    M = 10**6

    def unary(fn, n=M, dtype=torch.float32):
        return lambda d: lambda x=_t(n, dtype).to(d): fn(x)

    def binary(fn, n=M, dtype=torch.float32):
        return lambda d: lambda x=_t(n, dtype).to(d), y=_t(n, dtype, 1).to(d): fn(x, y)

    def sdpa(dtype):
        def make(d):
            q, k, v = (_t((4, 8, 512, 64), dtype, s).to(d) for s in range(3))
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return make

    def adamw(d):
        ps = [torch.nn.Parameter(_t((512, 512), seed=i).to(d)) for i in range(8)]
        for i, p in enumerate(ps):
            p.grad = _t((512, 512), seed=100 + i).to(d)
        opt = torch.optim.AdamW(ps, lr=1e-3, fused=True)
        return opt.step

    def layer(d):
        torch.manual_seed(0)
        m = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).to(d)
        x = _t((8, 128, 256)).to(d)

        def step():
            m(x).sum().backward()

        return step

    def emb(d):
        w = _t((32000, 512)).to(d)
        i = torch.randint(0, 32000, (32000,), generator=torch.Generator().manual_seed(0)).to(d)
        return lambda: F.embedding(i, w)

    def xent(d):
        x = _t((4096, 32000)).to(d)
        t = torch.randint(0, 32000, (4096,), generator=torch.Generator().manual_seed(0)).to(d)
        return lambda: F.cross_entropy(x, t)

    def index_select(d):
        x = _t((100000, 256)).to(d)
        i = torch.randint(0, 100000, (100000,), generator=torch.Generator().manual_seed(0)).to(d)
        return lambda: x.index_select(0, i)

    def max_pool(d):  # a ResNet stem's pooling, forward and backward
        x = _t((16, 64, 56, 56)).to(d).requires_grad_()

        def step():
            F.max_pool2d(x, 3, 2, 1).sum().backward()

        return step

    def grid_sample(d):  # a spatial transformer's sampling, forward and both gradients
        x = _t((8, 32, 64, 64)).to(d).requires_grad_()
        grid = (torch.rand(8, 64, 64, 2, generator=torch.Generator().manual_seed(2)) * 2.2 - 1.1).to(d)
        grid.requires_grad_()

        def step():
            F.grid_sample(x, grid, align_corners=False).sum().backward()

        return step

    def max_pool3d(d):  # a video model's pooling, forward and backward
        x = _t((4, 32, 16, 32, 32)).to(d).requires_grad_()

        def step():
            F.max_pool3d(x, 3, 2, 1).sum().backward()

        return step

    def index_add_half(d):
        x = _t((4096, 256), torch.float16).to(d)
        i = torch.randint(0, 4096, (32768,), generator=torch.Generator().manual_seed(0)).to(d)
        src = _t((32768, 256), torch.float16, seed=1).to(d)
        return lambda: x.index_add(0, i, src)

    def conv(d):
        x, w = _t((16, 64, 32, 32)).to(d), _t((64, 64, 3, 3), seed=1).to(d)
        return lambda: F.conv2d(x, w, padding=1)

    def conv3d(d):
        x, w = _t((4, 16, 16, 16, 16)).to(d), _t((32, 16, 3, 3, 3), seed=1).to(d)
        return lambda: F.conv3d(x, w, padding=1)

    def embedding_bag(d):
        w = _t((50000, 64)).to(d)
        i = torch.randint(0, 50000, (65536,), generator=torch.Generator().manual_seed(0)).to(d)
        off = torch.arange(0, 65536, 16).to(d)
        return lambda: F.embedding_bag(i, w, off, mode="mean")

    def complex_mm(d):
        a, b = _t((256, 256), torch.complex64).to(d), _t((256, 256), torch.complex64, seed=1).to(d)
        return lambda: a @ b

    def gpt_step(d):
        """The main job's training step (examples/train_gpt.py: its model and batch, AdamW)."""
        import os
        import sys

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
        from train_gpt import GPT

        torch.manual_seed(0)
        m = GPT().to(d)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(0)
        x, y = (torch.randint(0, 256, (16, 128), generator=g).to(d) for _ in range(2))

        def step():
            loss = m(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    def adamw_half(d):
        ps = [torch.nn.Parameter(_t((512, 512), torch.bfloat16, seed=i).to(d)) for i in range(8)]
        for i, p in enumerate(ps):
            p.grad = _t((512, 512), torch.bfloat16, seed=100 + i).to(d)
        return torch.optim.AdamW(ps, lr=1e-3, fused=True).step

    def xent_bf16(d):
        x = _t((4096, 32000), torch.bfloat16).to(d)
        t = torch.randint(0, 32000, (4096,), generator=torch.Generator().manual_seed(0)).to(d)
        return lambda: F.cross_entropy(x, t)

    def conv_bf16(d):
        x, w = _t((16, 64, 32, 32), torch.bfloat16).to(d), _t((64, 64, 3, 3), torch.bfloat16, seed=1).to(d)
        return lambda: F.conv2d(x, w, padding=1)

    def tiny(d):
        x = torch.ones(1, device=d)
        return lambda: x.add_(1)

    def tiny_sum(d):
        x = torch.ones(8, device=d)
        return lambda: x.sum()

    bf16, f16 = torch.bfloat16, torch.float16
    return [
        ("add 1e6 f32", binary(torch.add)),
        ("add 1e6 bf16", binary(torch.add, dtype=bf16)),
        ("add 1e6 f16", binary(torch.add, dtype=f16)),
        ("mul 1e6 bf16", binary(torch.mul, dtype=torch.bfloat16)),
        ("mul 1e6 f16", binary(torch.mul, dtype=torch.float16)),
        ("gelu 1e6", unary(F.gelu)),
        ("gelu 1e6 bf16", unary(F.gelu, dtype=bf16)),
        ("gelu tanh 1e6", unary(lambda x: F.gelu(x, approximate="tanh"))),
        ("silu 1e6", unary(F.silu)),
        ("exp 1e6", unary(torch.exp)),
        ("exp 1e6 f16", unary(torch.exp, dtype=f16)),
        ("softmax 512x1024", unary(lambda x: torch.softmax(x, -1), (512, 1024))),
        ("softmax 512x1024 bf16", unary(lambda x: torch.softmax(x, -1), (512, 1024), bf16)),
        ("softmax dim0 1024x512", unary(lambda x: torch.softmax(x, 0), (1024, 512))),
        ("sum all 4e6", unary(torch.sum, (4 * M,))),
        ("sum all 4e6 bf16", unary(torch.sum, (4 * M,), bf16)),
        ("sum dim0 2000x2000", unary(lambda x: x.sum(0), (2000, 2000))),
        ("sum dim1 2000x2000", unary(lambda x: x.sum(1), (2000, 2000))),
        ("cumsum 1e6", unary(lambda x: x.cumsum(0))),
        ("layer_norm 4096x768", unary(lambda x: F.layer_norm(x, (768,)), (4096, 768))),
        ("layer_norm 4096x768 bf16", unary(lambda x: F.layer_norm(x, (768,)), (4096, 768), bf16)),
        ("rms_norm bf16 4096x2048", unary(lambda x: F.rms_norm(x, (2048,)), (4096, 2048), torch.bfloat16)),
        ("matmul 1024^3", binary(torch.matmul, (1024, 1024))),
        ("matmul bf16 1024^3", binary(torch.matmul, (1024, 1024), torch.bfloat16)),
        ("topk 64 of 1e5 x 16", unary(lambda x: x.topk(64, -1), (16, 100000))),
        ("sort 1e6", unary(lambda x: x.sort())),
        ("index_select 1e5 rows of 256", index_select),
        ("embedding fwd 32k x 512", emb),
        ("cross_entropy 4096x32000", xent),
        ("cross_entropy 4096x32000 bf16", xent_bf16),
        ("sdpa causal f32 4x8x512x64", sdpa(torch.float32)),
        ("sdpa causal bf16 4x8x512x64", sdpa(torch.bfloat16)),
        ("sdpa causal f16 4x8x512x64", sdpa(torch.float16)),
        ("max_pool2d 3x3/2 f+b 16x64x56x56", max_pool),
        ("index_add f16 32k rows of 256", index_add_half),
        ("grid_sample bilinear f+b 8x32x64x64", grid_sample),
        ("max_pool3d 3x3x3/2 f+b 4x32x16x32x32", max_pool3d),
        ("conv2d 16x64x32x32 k3", conv),
        ("conv2d 16x64x32x32 k3 bf16", conv_bf16),
        ("conv3d 4x16x16^3 k3", conv3d),
        ("embedding_bag mean 4096 bags of 16", embedding_bag),
        ("mm complex64 256", complex_mm),
        ("fused AdamW 8x512x512", adamw),
        ("fused AdamW 8x512x512 bf16", adamw_half),
        ("transformer layer f+b 8x128x256", layer),
        ("main job step (GPT 16x128, AdamW)", gpt_step),
        ("tiny add_ (1 elem)", tiny),
        ("tiny sum (8 elem)", tiny_sum),
    ]


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--only", default="", help="comma-separated substrings of case names")
    args = parse_args(p)
    b = Bench(f"sim_vs_cpu_t{args.threads}", args, "mytorch sim vs torch CPU, issue 27's ops")
    only = [s for s in args.only.split(",") if s]
    for name, make in cases():
        if only and not any(s in name for s in only):
            continue
        b.compare(name, make("mytorch"), make(b.ref))
    plot(b, args.threads)
    b.finish()


def plot(b: Bench, threads: int) -> None:
    """The ratios as bars on a log scale, the targets as lines (docs/sim_performance.md)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        b.note("matplotlib not installed: no plot")
        return
    rows = b.rows
    fig, ax = plt.subplots(figsize=(8, 0.24 * len(rows) + 1.2))
    y = range(len(rows))
    ax.barh(list(y), [r.ratio for r in rows], color=["tab:green" if r.ratio >= 1 else "tab:orange" for r in rows])
    ax.set_yticks(list(y), [r.case for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 0.8, 1, 2, 4, 8, 16) if t <= 1.3 * max(r.ratio for r in rows)]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlim(min(0.8 * min(r.ratio for r in rows), 0.5), 1.3 * max(r.ratio for r in rows))
    ax.axvline(1.0, color="k", lw=0.8)
    ax.axvline(0.8, color="k", lw=0.6, ls="--")
    ax.set_xlabel("CPU time / mytorch time (above 1: mytorch sim is faster; dashed: 1/1.25)")
    ax.set_title(f"mytorch sim vs torch CPU, {threads} thread(s) each, {torch.__version__}", fontsize=9)
    fig.tight_layout()
    b.save_plot(fig, f"sim_vs_cpu_t{threads}.png")


if __name__ == "__main__":
    main()
