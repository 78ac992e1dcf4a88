"""Main job: train a small GPT-style language model on the mytorch device.

The model is plain torch.nn (token and position embeddings, causal self-attention, LayerNorm, MLP,
cross-entropy, AdamW). The corpus is the Python source of the installed torch package, read byte by byte,
so it exists offline on every machine. The same model is trained on the CPU from the same seed with the
same batches, and the two loss curves are compared step by step.

    python examples/train_gpt.py                # defaults (300 steps): README, "How long things take"
    python examples/train_gpt.py --steps 30     # a short run (a tenth of the time), still checked
    python examples/train_gpt.py --compile      # the model compiled with torch.compile (Inductor) on mytorch
    python examples/train_gpt.py --optimize     # mytorch.optimize(model) on mytorch: the fused ops where they fit
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch  # registers the device


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=256, block_size=128, n_layer=4, n_head=6, n_embd=192):
        super().__init__()
        self.block_size = block_size
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        return self.loss(self.ln_f(x), targets)

    def loss(self, h, targets):
        """Cross-entropy of the head's logits (mytorch.optimize swaps it for linear_cross_entropy)."""
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def load_corpus(max_bytes: int) -> torch.Tensor:
    root = Path(torch.__file__).parent
    chunks, total = [], 0
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    raw = b"".join(chunks)[:max_bytes]
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()


def batches(data: torch.Tensor, steps: int, batch: int, block: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ix = torch.randint(len(data) - block - 1, (batch,), generator=g)
        x = torch.stack([data[i : i + block] for i in ix.tolist()])
        y = torch.stack([data[i + 1 : i + 1 + block] for i in ix.tolist()])
        yield x, y


def fmt_time(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def progress(step: int, total: int, loss: float, tok_s: float, label: str, elapsed: float, after: float) -> None:
    """One progress line: bar, loss, throughput, and the time left (this phase from its own pace, plus `after`
    seconds estimated for the phases still to come)."""
    width = 30
    done = int(width * step / total)
    bar = "#" * done + "-" * (width - done)
    left = elapsed / step * (total - step) + after
    line = (
        f"{label:>8} [{bar}] {step:4d}/{total} loss {loss:.4f} {tok_s:8.0f} tok/s  "
        f"{fmt_time(elapsed)} elapsed, ETA {fmt_time(left)}"
    )
    if sys.stdout.isatty():
        print("\r" + line, end="\n" if step == total else "", flush=True)
    elif step == total or step % max(1, total // 10) == 0:  # a log gets ten lines, not a carriage-return smear
        print(line, flush=True)


def step_fn(model: nn.Module, opt: torch.optim.Optimizer, compiled: bool = False):
    forward = torch.compile(model) if compiled else model

    def step(x, y):
        loss = forward(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def seconds_per_step(model: nn.Module, device: str, args, data: torch.Tensor, steps: int = 3) -> float:
    """The pace of training on `device`, measured on a throwaway copy of the model (the runs that count are
    untouched): one warm-up step, then the median of `steps` timed ones."""
    model = prepare(copy.deepcopy(model), device, args)
    step = step_fn(model, torch.optim.AdamW(model.parameters(), lr=args.lr))
    times = []
    for i, (x, y) in enumerate(batches(data, steps + 1, args.batch, args.block, args.seed + 1)):
        t0 = time.perf_counter()
        step(x.to(device), y.to(device)).item()
        if i:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def prepare(model: nn.Module, device: str, args) -> nn.Module:
    """The model on `device`; with --optimize, mytorch's fused ops put in on mytorch (the CPU stays stock)."""
    model = model.to(device)
    if getattr(args, "optimize", False) and device == "mytorch":
        model = mytorch.optimize(model, verbose=not getattr(args, "_optimize_reported", False))
        args._optimize_reported = True
    return model


def train(model: nn.Module, device: str, args, data: torch.Tensor, after: float = 0.0) -> tuple[list[float], float]:
    model = prepare(model, device, args)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    compiled = args.compile and device == "mytorch"
    step = step_fn(model, opt, compiled)
    losses = []
    tokens = 0
    start = time.perf_counter()
    for i, (x, y) in enumerate(batches(data, args.steps, args.batch, args.block, args.seed), 1):
        x, y = x.to(device), y.to(device)
        if compiled and i == 1:  # the first step compiles the graphs: reported apart, not in tokens/s
            from torch._inductor.utils import run_and_get_code
            from mytorch.backend.inductor import kernel_counts, path

            loss, codes = run_and_get_code(lambda: step(x, y).item())
            losses.append(loss)
            args.compile_seconds = time.perf_counter() - start
            counts = kernel_counts(codes)
            print(
                f"torch.compile (Inductor, {path()[0]} path): the first step, with compilation, took "
                f"{args.compile_seconds:.1f} s; the graphs run {counts['generated']} generated kernels and "
                f"{sum(counts['extern'].values())} calls to mytorch's kernels ("
                + ", ".join(f"{k} {v}" for k, v in sorted(counts["extern"].items()))
                + ")",
                flush=True,
            )
            start = time.perf_counter()
            continue
        losses.append(step(x, y).item())
        tokens += x.numel()
        elapsed = time.perf_counter() - start
        progress(i, args.steps, losses[-1], tokens / elapsed, device, elapsed, after)
    return losses, tokens / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--embd", type=int, default=192)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--corpus-bytes", type=int, default=4 << 20)
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest allowed relative loss difference")
    p.add_argument("--skip-cpu", action="store_true", help="train on mytorch only (no agreement check)")
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile the model with torch.compile (Inductor) on mytorch; the CPU reference stays eager",
    )
    p.add_argument(
        "--optimize",
        action="store_true",
        help="mytorch.optimize(model) on mytorch (the fused ops; here the loss); the CPU reference stays stock",
    )
    args = p.parse_args(argv)

    os.environ.setdefault("MYTORCH_FALLBACK", "silent")
    torch.mytorch.set_fallback_mode(os.environ["MYTORCH_FALLBACK"])
    data = load_corpus(args.corpus_bytes)
    torch.manual_seed(args.seed)
    model = GPT(block_size=args.block, n_layer=args.layers, n_head=args.heads, n_embd=args.embd)
    nparams = sum(p.numel() for p in model.parameters())
    print(
        f"mytorch main job: GPT with {nparams / 1e6:.2f}M parameters, {len(data) / 1e6:.1f}M bytes of torch's own "
        f"source as corpus; runtime={torch.mytorch.runtime()}, device={torch.mytorch.get_device_name()}, "
        f"torch {torch.__version__}"
    )

    pace = {
        dev: seconds_per_step(model, dev, args, data) for dev in (["mytorch"] if args.skip_cpu else ["mytorch", "cpu"])
    }
    expected = {dev: pace[dev] * args.steps for dev in pace}
    print(
        f"expected duration: about {fmt_time(sum(expected.values()))} ("
        + ", then ".join(f"{dev} {fmt_time(t)}" for dev, t in expected.items())
        + f", from {pace['mytorch'] * 1e3:.0f} ms per step on mytorch"
        + (f" and {pace['cpu'] * 1e3:.0f} ms on the CPU" if "cpu" in pace else "")
        + "); --steps N shortens it in proportion"
        + ("; --compile adds the compilation of the first step" if args.compile else ""),
        flush=True,
    )

    torch.mytorch.reset_fallback_stats()
    torch.mytorch.reset_peak_memory_stats()
    dev_losses, dev_tok_s = train(copy.deepcopy(model), "mytorch", args, data, after=expected.get("cpu", 0.0))
    peak = torch.mytorch.max_memory_allocated()
    stats = torch.mytorch.fallback_stats()

    mode = f" (compiled: Inductor, first step with compilation {args.compile_seconds:.1f} s)" if args.compile else ""
    print(
        f"\nmytorch{mode}: final loss {dev_losses[-1]:.4f}, {dev_tok_s:.0f} tokens/s, peak device memory "
        f"{peak / 2**20:.1f} MiB (reserved peak {torch.mytorch.max_memory_reserved() / 2**20:.1f} MiB)"
    )
    calls = sum(s["calls"] for s in stats.values())
    moved = sum(s["bytes_to_cpu"] + s["bytes_to_device"] for s in stats.values())
    print(
        f"fallback summary: {len(stats)} operators ran on the CPU fallback, {calls} calls, "
        f"{moved / 2**20:.1f} MiB moved (top 10 by calls):"
    )
    for name, s in sorted(stats.items(), key=lambda kv: -kv[1]["calls"])[:10]:
        print(f"  {name:45s} {s['calls']:7d} calls {(s['bytes_to_cpu'] + s['bytes_to_device']) / 2**20:9.1f} MiB")

    if args.skip_cpu:
        return 0
    cpu_losses, cpu_tok_s = train(copy.deepcopy(model), "cpu", args, data)
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(dev_losses, cpu_losses))
    print(f"\ncpu:     final loss {cpu_losses[-1]:.4f}, {cpu_tok_s:.0f} tokens/s")
    print(
        f"loss agreement over {args.steps} steps: max relative difference {rel:.3e} (tolerance {args.tolerance:g}); "
        f"mytorch/cpu throughput ratio {dev_tok_s / cpu_tok_s:.2f}"
    )
    if not rel <= args.tolerance:
        print("FAILED: the mytorch and CPU loss curves disagree", file=sys.stderr)
        return 1
    print("OK: mytorch and CPU training agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
