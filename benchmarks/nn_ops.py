"""NN training kernels of mytorch against the reference, in the same process (mytorch.testing.bench).

Each row gives both sides' per-call time, a rate (TFLOP/s, GB/s, tokens/s) and the ratio reference time /
mytorch time.

  - GEMM TFLOP/s at transformer shapes (fp32, bf16; TF32 per torch.set_float32_matmul_precision);
  - softmax and cross-entropy GB/s;
  - a fused AdamW step over a 124M-parameter model's tensors (GPT-2 small's parameter shapes);
  - a ResNet-style residual block, forward + backward;
  - an end-to-end training step of a GPT-2-small-shaped model in tokens/s.

    python benchmarks/nn_ops.py                   # reduced shapes on sim (2 cores), full shapes on a GPU
    python benchmarks/nn_ops.py --full            # the full shapes everywhere (slow on sim)
    python benchmarks/nn_ops.py --threads 2       # the CPU side (and mytorch's CPU BLAS on sim) at 2 threads
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from mytorch.testing.bench import Bench, add_args, parse_args

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from train_gpt import GPT  # noqa: E402


def gpt2_shapes(layers: int, d: int, vocab: int, ctx: int):
    shapes = [(vocab, d), (ctx, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return shapes + [(d,), (d,)]


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--full", action="store_true", help="full GPT-2-small shapes even on sim")
    args = parse_args(p)
    b = Bench("nn_ops", args, "GEMM, softmax, cross-entropy, fused AdamW, ResNet block, GPT step")
    full = args.full or b.gpu
    b.note(f"{'full' if full else 'reduced'} shapes")

    def both(name, make, flops=None, nbytes=None, per=None):
        work, unit = (
            (flops / 1e12, "TFLOP/s")
            if flops
            else (nbytes / 1e9, "GB/s")
            if nbytes
            else (per, "tok/s")
            if per
            else (None, "")
        )
        b.compare(name, make("mytorch"), make(b.ref), work=work, unit=unit)

    tokens = 8192 if full else 1024
    for dtype in (torch.float32, torch.bfloat16):
        for m, k, n, what in [
            (tokens, 768, 2304, "qkv"),
            (tokens, 768, 3072, "mlp up"),
            (tokens, 3072, 768, "mlp down"),
        ]:

            def make(dev, m=m, k=k, n=n, dtype=dtype):
                a = torch.randn(m, k, dtype=dtype).to(dev)
                b = torch.randn(k, n, dtype=dtype).to(dev)
                return lambda: a @ b

            both(f"gemm {what} {m}x{k}x{n} {str(dtype)[6:]}", make, flops=2 * m * k * n)

    rows, width = (4096, 50304) if full else (256, 8192)
    for name, fn in [("softmax", lambda x, t: F.softmax(x, -1)), ("cross_entropy fwd+bwd", None)]:

        def make(dev, fn=fn):
            x = torch.randn(rows, width).to(dev).requires_grad_(fn is None)
            t = torch.randint(0, width, (rows,)).to(dev)
            if fn is not None:
                return lambda: fn(x, t)
            return lambda: F.cross_entropy(x, t).backward()

        both(f"{name} {rows}x{width} fp32", make, nbytes=(2 if fn else 4) * rows * width * 4)

    layers = 12 if full else 2
    shapes = gpt2_shapes(layers, 768, 50257, 1024)
    nparams = sum(torch.Size(s).numel() for s in shapes)

    def make_adamw(dev):
        g = torch.Generator().manual_seed(0)
        ps = [torch.randn(s, generator=g).to(dev).requires_grad_() for s in shapes]
        for q in ps:
            q.grad = torch.randn_like(q)
        opt = torch.optim.AdamW(ps, lr=1e-4, fused=True)
        return opt.step

    both(f"fused AdamW step, {nparams / 1e6:.0f}M params", make_adamw, nbytes=nparams * 4 * 7)

    c, hw, batch = (64, 56, 32) if full else (32, 16, 8)

    def make_block(dev):
        torch.manual_seed(0)
        blk = nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
        ).to(dev)
        x = torch.randn(batch, c, hw, hw).to(dev).requires_grad_()
        return lambda: F.relu(blk(x) + x).sum().backward()

    both(f"ResNet block fwd+bwd {batch}x{c}x{hw}x{hw}", make_block)

    bsz, seq, gl, gd, gh = (8, 1024, 12, 768, 12) if full else (2, 128, 2, 192, 4)

    def make_gpt(dev):
        torch.manual_seed(0)
        model = GPT(vocab=50257 if full else 256, block_size=seq, n_layer=gl, n_head=gh, n_embd=gd).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        x = torch.randint(0, 256, (bsz, seq)).to(dev)
        y = torch.randint(0, 256, (bsz, seq)).to(dev)

        def step():
            loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    both(f"GPT step {gl}L d{gd} seq{seq} batch{bsz}", make_gpt, per=bsz * seq)
    stats = torch.mytorch.fallback_stats()
    b.note(f"fallbacks during the benchmark: {sorted(stats) if stats else 'none'}")
    b.finish()


if __name__ == "__main__":
    main()
