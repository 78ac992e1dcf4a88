"""torch.compile (Inductor) on mytorch: a training step of the examples' GPT, an MLP and a CNN, eager and
compiled, on mytorch and on the reference, in one process (mytorch.testing.bench).

Each case times one training step (forward, loss, backward, AdamW step) in four variants, interleaved:
compiled mytorch (what is measured), compiled reference (`torch.compile` on the CPU on sim, on torch.cuda on a
GPU), eager reference and eager mytorch. The row's ratio is against the fastest of the three; the others' ratios
follow it (reference time / compiled mytorch time: above 1, compiled mytorch is faster). The compile time is the
first step of each compiled variant, Inductor's caches off. The issue's targets on sim: compiled mytorch >= 0.9x
the compiled CPU and >= 1.5x eager mytorch on the GPT step.

    python benchmarks/compile.py                  # GPT (the main job's model), MLP, CNN
    python benchmarks/compile.py --cases gpt --docs
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from mytorch.testing.bench import Bench, add_args, parse_args

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))


def gpt_case(gpu: bool):
    from train_gpt import GPT

    batch, block = (16, 256) if gpu else (16, 128)  # on sim, the main job's configuration (scripts/demo.sh)
    model = GPT(vocab=256, block_size=block, n_layer=4, n_head=6, n_embd=192)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 256, (batch, block), generator=g), torch.randint(0, 256, (batch, block), generator=g)
    return model, (x, y), (lambda m, x, y: m(x, y)), batch * block


def mlp_case(gpu: bool):
    batch, width = (1024, 2048) if gpu else (256, 512)
    model = nn.Sequential(
        nn.Linear(width, 4 * width),
        nn.GELU(),
        nn.LayerNorm(4 * width),
        nn.Linear(4 * width, width),
        nn.GELU(),
        nn.Linear(width, 10),
    )
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, width, generator=g), torch.randint(0, 10, (batch,), generator=g)
    return model, (x, y), (lambda m, x, y: F.cross_entropy(m(x), y)), None


def cnn_case(gpu: bool):
    batch, size = (64, 64) if gpu else (16, 32)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, 3, size, size, generator=g), torch.randint(0, 10, (batch,), generator=g)
    return model, (x, y), (lambda m, x, y: F.cross_entropy(m(x), y)), None


CASES = {"gpt": gpt_case, "mlp": mlp_case, "cnn": cnn_case}


def train_step(model: nn.Module, loss_fn, device: str, compiled: bool):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(loss_fn) if compiled else loss_fn

    def step(x, y):
        loss = forward(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--cases", default="gpt,mlp,cnn", help="comma-separated: " + ",".join(CASES))
    args = parse_args(p)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mytorch-bench-inductor-"))
    torch._inductor.config.fx_graph_cache = False  # the compile time is a real compilation
    b = Bench(
        "compile",
        args,
        "a training step, compiled (Inductor) and eager; ratio = reference time / compiled mytorch time",
    )
    from mytorch.backend.inductor import path

    b.note(f"mytorch's Inductor path: {path()[0]}")
    for device in ("mytorch", b.ref):  # Inductor's one-time start-up (imports, headers) is no model's compile time
        torch.compile(lambda t: (t.sin() @ t).relu().sum())(torch.randn(8, 8, device=device)).item()
    for name in [c for c in args.cases.split(",") if c]:
        model, (x, y), loss_fn, tokens = CASES[name](b.gpu)
        steps, compile_s = {}, {}
        for label, device, compiled in (
            ("mytorch compiled", "mytorch", True),
            ("reference compiled", b.ref, True),
            ("reference eager", b.ref, False),
            ("mytorch eager", "mytorch", False),
        ):
            step = train_step(model, loss_fn, device, compiled)
            xd, yd = x.to(device), y.to(device)
            t0 = time.perf_counter()
            step(xd, yd).item()
            first = time.perf_counter() - t0
            if compiled:
                compile_s[label] = first
            steps[label] = lambda step=step, xd=xd, yd=yd: step(xd, yd)
        row = b.compare(
            f"{name} training step",
            steps["mytorch compiled"],
            {k: v for k, v in steps.items() if k != "mytorch compiled"},
            work=tokens,
            unit="tok/s" if tokens else "",
            compile_s_mytorch=compile_s["mytorch compiled"],
            compile_s_reference=compile_s["reference compiled"],
        )
        ratios = {row.reference_variant: row.ratio}
        ratios.update({k[:-6]: v for k, v in row.extra.items() if k.endswith("_ratio")})
        b.note(
            "  "
            + ", ".join(f"{k} time / compiled mytorch time {v:.2f}x" for k, v in ratios.items())
            + f"; first step with compilation: mytorch {compile_s['mytorch compiled']:.1f} s, reference "
            f"{compile_s['reference compiled']:.1f} s"
        )
    b.finish()


if __name__ == "__main__":
    main()
