"""The fused LLM ops (mytorch.ops) against their unfused aten compositions, and training steps with and without
mytorch.optimize, on the shared harness (mytorch.testing.bench): docs/fused_ops.md.

Each op case is a forward and backward: the fused op on mytorch against the unfused composition on the reference
(torch CPU on sim, torch.cuda on a GPU; the harness's ratio) and on mytorch (the `unfused mytorch` ratio), with the
peak device memory of the fused and unfused forward + backward on mytorch (bytes the step allocated beyond its
inputs). The model cases are whole AdamW training steps of a small Llama and a small Qwen3-MoE built from configs:
optimized on mytorch against eager torch on the reference, and against the unoptimized model on mytorch.

    python benchmarks/fused_llm.py                       # every case at this machine's sizes
    python benchmarks/fused_llm.py --only lce,llama --docs
"""

from __future__ import annotations

import argparse
import copy
import gc

import torch
import torch.nn.functional as F

import mytorch
from mytorch.testing.bench import Bench, add_args, parse_args

DEV = "mytorch"


def peak_bytes(fn) -> int:
    """Device memory fn allocated at its peak beyond what was allocated before it (mytorch's allocator)."""
    gc.collect()
    torch.mytorch.synchronize()
    base = torch.mytorch.memory_allocated()
    torch.mytorch.reset_peak_memory_stats()
    fn()
    torch.mytorch.synchronize()
    return torch.mytorch.max_memory_allocated() - base


def step_of(fwd, leaves, dev):
    """A forward + backward of fwd() (a scalar or a tensor, summed), the leaves' grads reset first."""

    def step():
        for t in leaves:
            t.grad = None
        out = fwd()
        (out if out.dim() == 0 else out.float().sum()).backward()
        if dev == DEV:
            torch.mytorch.synchronize()

    return step


def op_case(b: Bench, name: str, make, work_bytes: float | None = None) -> None:
    """make(device, fused) -> (fwd, leaves). Times fused mytorch against unfused reference and unfused mytorch;
    records the peak memory of both on mytorch."""
    fused_fwd, fused_leaves = make(DEV, True)
    plain_fwd, plain_leaves = make(DEV, False)
    ref_fwd, ref_leaves = make(b.ref, False)
    fused = step_of(fused_fwd, fused_leaves, DEV)
    plain = step_of(plain_fwd, plain_leaves, DEV)
    ref = step_of(ref_fwd, ref_leaves, b.ref)
    fused()  # (the allocator's first blocks, a GEMM library's workspace)
    plain()
    mem_fused, mem_plain = peak_bytes(fused), peak_bytes(plain)
    row = b.compare(
        name,
        fused,
        {"": ref, "unfused mytorch": plain},
        work=work_bytes / 1e9 if work_bytes else None,
        unit="GB/s" if work_bytes else "",
        peak_fused_mib=mem_fused / 2**20,
        peak_unfused_mib=mem_plain / 2**20,
        memory_ratio=mem_fused / max(1, mem_plain),
    )
    b.note(
        f"  {name}: peak device memory of forward + backward: fused {mem_fused / 2**20:.1f} MiB, unfused "
        f"{mem_plain / 2**20:.1f} MiB ({row.extra['memory_ratio']:.2f}x)"
    )


# ---- the ops --------------------------------------------------------------------------------------------------
def swiglu_case(rows, inter, dtype):
    def make(dev, fused):
        g = torch.Generator().manual_seed(0)
        gu = torch.randn(rows, 2 * inter, generator=g).to(dev, dtype).requires_grad_()
        if fused:
            return (lambda: mytorch.ops.swiglu(gu)), [gu]
        return (lambda: F.silu(gu[:, :inter]) * gu[:, inter:]), [gu]

    return make


def rope_case(batch, heads, kv_heads, seq, dim, dtype):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    def make(dev, fused):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(batch, heads, seq, dim, generator=g).to(dev, dtype).requires_grad_()
        k = torch.randn(batch, kv_heads, seq, dim, generator=g).to(dev, dtype).requires_grad_()
        ang = torch.rand(batch, seq, dim // 2, generator=g) * 6.28
        cos = torch.cat([ang.cos()] * 2, -1).to(dev, dtype)
        sin = torch.cat([ang.sin()] * 2, -1).to(dev, dtype)
        rope = mytorch.ops.rotary_embedding if fused else apply_rotary_pos_emb

        def fwd():
            qe, ke = rope(q, k, cos, sin)
            return qe.float().sum() + ke.float().sum()

        return fwd, [q, k]

    return make


def lce_case(rows, hidden, vocab, dtype):
    def make(dev, fused):
        g = torch.Generator().manual_seed(0)
        h = torch.randn(rows, hidden, generator=g).to(dev, dtype).requires_grad_()
        w = (torch.randn(vocab, hidden, generator=g) * 0.02).to(dev, dtype).requires_grad_()
        t = torch.randint(0, vocab, (rows,), generator=g).to(dev)
        if fused:
            return (lambda: mytorch.ops.linear_cross_entropy(h, w, t)), [h, w]
        return (lambda: F.cross_entropy(F.linear(h, w).float(), t)), [h, w]  # transformers' loss over logits.float()

    return make


def rms_norm_case(rows, width, dtype):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    def make(dev, fused):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(rows, width, generator=g).to(dev, dtype).requires_grad_()
        norm = LlamaRMSNorm(width).to(dev, dtype)
        if fused:
            return (lambda: F.rms_norm(x, (width,), norm.weight, norm.variance_epsilon)), [x, norm.weight]
        return (lambda: norm(x)), [x, norm.weight]

    return make


def moe_case(tokens, hidden, experts, k, dtype):
    """The router's top-k, the permutation and the weighted combine (the experts' GEMMs aside)."""

    def make(dev, fused):
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(tokens, experts, generator=g).to(dev, dtype).requires_grad_()
        x = torch.randn(tokens, hidden, generator=g).to(dev, dtype).requires_grad_()

        def fused_fwd():
            w, ids = mytorch.ops.moe_topk(logits, k)
            rows, _, pos = mytorch.ops.moe_permute(x, ids, experts)
            return mytorch.ops.moe_unpermute(rows * 2, pos, w.to(dtype))

        def plain_fwd():  # transformers' router and grouped_mm path around the experts
            probs = torch.softmax(logits.float(), -1)
            w, ids = torch.topk(probs, k, -1)
            w = (w / w.sum(-1, keepdim=True)).to(dtype)
            flat = ids.reshape(-1)
            ids_g, perm = torch.sort(flat)
            rows = x[perm // k] * 2
            inv = torch.empty_like(perm)
            inv[perm] = torch.arange(perm.numel(), device=perm.device)
            weighted = (rows * w.reshape(-1)[perm].unsqueeze(-1))[inv]
            return weighted.view(tokens, k, hidden).sum(1)

        return (fused_fwd if fused else plain_fwd), [logits, x]

    return make


# ---- the models -----------------------------------------------------------------------------------------------
def model_case(b: Bench, name: str, config, batch: int, seq: int, repeat: int) -> None:
    import transformers

    torch.manual_seed(0)
    base = transformers.AutoModelForCausalLM.from_config(config)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (batch, seq), generator=g)
    steps = {}
    for label, dev, opt in (("optimized", DEV, True), ("plain", DEV, False), ("reference", b.ref, False)):
        m = copy.deepcopy(base).to(dev).train()
        if opt:
            m = mytorch.optimize(m)
        o = torch.optim.AdamW(m.parameters(), lr=1e-4)
        x = ids.to(dev)

        def step(m=m, o=o, x=x, dev=dev):
            loss = m(input_ids=x, labels=x).loss
            o.zero_grad(set_to_none=True)
            loss.backward()
            o.step()
            if dev == DEV:
                torch.mytorch.synchronize()

        step()  # optimizer state and first allocations
        steps[label] = step
    mem = {k: peak_bytes(steps[k]) for k in ("optimized", "plain")}
    tokens = batch * seq
    row = b.compare(
        f"{name} train step {batch}x{seq}",
        steps["optimized"],
        {"": steps["reference"], "unfused mytorch": steps["plain"]},
        work=tokens,
        unit="tok/s",
        repeat=repeat,
        peak_fused_mib=mem["optimized"] / 2**20,
        peak_unfused_mib=mem["plain"] / 2**20,
        memory_ratio=mem["optimized"] / max(1, mem["plain"]),
    )
    b.note(
        f"  {name}: peak device memory of a step: optimized {mem['optimized'] / 2**20:.1f} MiB, unoptimized "
        f"{mem['plain'] / 2**20:.1f} MiB ({row.extra['memory_ratio']:.2f}x)"
    )


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=5)
    p.add_argument("--only", default="", help="comma-separated: swiglu, rope, lce, rms_norm, moe, llama, qwen3_moe")
    args = parse_args(p)
    import transformers

    b = Bench("fused_llm", args, "fused ops vs unfused compositions (forward + backward), training steps")
    only = set(filter(None, args.only.split(",")))
    big = b.gpu

    def want(k):
        return not only or k in only

    for dtype in (torch.float32, torch.bfloat16):
        d = str(dtype)[6:]
        if want("swiglu"):
            rows, inter = (16384, 8192) if big else (2048, 2048)
            op_case(b, f"swiglu {d} {rows}x{inter}", swiglu_case(rows, inter, dtype), 5 * rows * inter * dtype.itemsize)
        if want("rope"):
            shape = (8, 32, 2048, 128, 8) if big else (4, 16, 512, 64, 4)
            bt, hq, s, hd, hk = shape
            op_case(b, f"rope {d} q {bt}x{hq}x{s}x{hd}, k x{hk}", rope_case(bt, hq, hk, s, hd, dtype))
        if want("lce"):
            rows, hidden, vocab = (16384, 4096, 128256) if big else (2048, 512, 32768)
            op_case(b, f"linear_cross_entropy {d} {rows}x{hidden} V={vocab}", lce_case(rows, hidden, vocab, dtype))
        if want("rms_norm"):
            rows, width = (16384, 4096) if big else (4096, 1024)
            op_case(b, f"rms_norm {d} {rows}x{width}", rms_norm_case(rows, width, dtype))
        if want("moe"):
            tokens, hidden, experts, k = (16384, 4096, 128, 8) if big else (4096, 512, 64, 8)
            op_case(
                b,
                f"moe route+permute+combine {d} {tokens}x{hidden} E={experts} k={k}",
                moe_case(tokens, hidden, experts, k, dtype),
            )
    small = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, head_dim=32)
    if want("llama"):
        cfg = transformers.LlamaConfig(vocab_size=32000, intermediate_size=768, **small)
        model_case(b, "llama", cfg, 4, 256, args.repeat)
    if want("qwen3_moe"):
        cfg = transformers.Qwen3MoeConfig(
            vocab_size=32000,
            intermediate_size=768,
            moe_intermediate_size=128,
            num_experts=16,
            num_experts_per_tok=4,
            **small,
        )
        model_case(b, "qwen3_moe", cfg, 4, 256, args.repeat)
    table(b)
    plot(b)
    b.finish()


def _vs(row, variant: str) -> float:
    """The row's ratio against a reference variant ("": the reference device; the harness keeps the fastest)."""
    return row.ratio if row.reference_variant == variant else row.extra.get(f"{variant}_ratio", float("nan"))


def table(b: Bench) -> None:
    """The figures as docs/fused_ops.md's table."""
    b.note(
        f"\n| case | fused on mytorch | vs unfused on {b.ref} | vs unfused on mytorch | peak memory fused / unfused "
        "| memory ratio |\n|---|---|---|---|---|---|"
    )
    for r in b.rows:
        ms = r.mytorch_ms
        t = f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1000:.3g} s"
        ex = r.extra
        b.note(
            f"| {r.case} | {t} | {_vs(r, ''):.2f}x | {_vs(r, 'unfused mytorch'):.2f}x | "
            f"{ex['peak_fused_mib']:.1f} / {ex['peak_unfused_mib']:.1f} MiB | {ex['memory_ratio']:.2f}x |"
        )


def plot(b: Bench) -> None:
    """Per case: the fused op's speed against the unfused one on the reference and on mytorch, and its peak
    memory against the unfused one's on mytorch (docs/fused_ops.png with --docs)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        b.note("matplotlib is not installed: no plot")
        return
    rows = b.rows
    if not rows:
        return

    names = [r.case.split(" q ")[0].replace("linear_cross_entropy", "lin+CE") for r in rows]
    ys = range(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.45 * len(rows) + 1.5), sharey=True)
    h = 0.38
    axes[0].barh([y - h / 2 for y in ys], [_vs(r, "") for r in rows], h, label=f"vs unfused on {b.ref}")
    axes[0].barh([y + h / 2 for y in ys], [_vs(r, "unfused mytorch") for r in rows], h, label="vs unfused on mytorch")
    axes[0].axvline(1, color="k", lw=0.8)
    axes[0].set_xlabel("speed ratio (above 1: the fused op is faster)")
    axes[0].legend(fontsize=7)
    axes[1].barh(list(ys), [r.extra["memory_ratio"] for r in rows], 0.6, color="tab:green")
    axes[1].axvline(1, color="k", lw=0.8)
    axes[1].set_xlabel("peak device memory, fused / unfused (mytorch)")
    axes[0].set_yticks(list(ys), names, fontsize=7)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"mytorch.ops and mytorch.optimize on {b.runtime} (forward + backward; training steps)", fontsize=9)
    fig.tight_layout()
    b.save_plot(fig, "fused_ops.png")


if __name__ == "__main__":
    main()
