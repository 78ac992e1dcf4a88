"""TorchTitan's llama3 debug model (6 layers, dim 256, 16 heads, vocab 2048; varlen attention over packed documents)
and its qwen3 MoE debug model (its first 2 layers: 64 experts, top-8, TorchTitan's balanced debug routing so that
every run does the same work) training steps (forward, backward, AdamW) in one process, mytorch against torch's CPU
backend, with and without mytorch's TorchTitan converter and fused loss (mytorch.torchtitan), issue 54. The CPU lacks the varlen flash operator TorchTitan's
varlen attention calls; its run uses the per-document causal math the TorchTitan test compares with
(mytorch.testing._titan_workers._cpu_varlen_attn), so the CPU side's attention is a Python loop over documents.
Tokens per second = batch x sequence / step time; ratio = CPU time / mytorch time (above 1: mytorch is faster).

    python benchmarks/titan_training.py
    python benchmarks/titan_training.py --seq 512 --batch 4
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from mytorch.testing import _titan_workers as T
from mytorch.testing.bench import Bench, add_args, parse_args


def stepper(model, device, tokens, labels, pos, loss_fn=None):
    """loss_fn: mytorch's fused LM head + cross-entropy, fed hidden states as TorchTitan's trainer feeds it."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens, labels, pos = tokens.to(device), labels.to(device), pos.to(device)
    masks = model.get_attention_masks(positions=pos)
    if loss_fn is not None:
        loss_fn.set_lm_head(model.lm_head)
        model._skip_lm_head = True

    def step():
        out = model(tokens, positions=pos, attention_masks=masks)
        if loss_fn is not None:
            loss = loss_fn(out, labels, labels.numel())[0]
        else:
            loss = F.cross_entropy(out.flatten(0, 1), labels.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    args = parse_args(p)
    b = Bench("torchtitan", args, "TorchTitan debug models' training steps; ratio = torch CPU / mytorch")
    from mytorch.torchtitan import MytorchFusedOpsConverter, MytorchLinearCrossEntropyLoss

    def built(device, moe, converter=False):
        m = T._model(MytorchFusedOpsConverter.Config() if converter else None, moe)
        m.to_empty(device=device)
        m.init_weights(buffer_device=torch.device(device))
        m.load_state_dict({k: v.to(device) for k, v in T.initial_weights(moe).items()})
        return m

    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, T.VOCAB, (args.batch, args.seq + 1), generator=g)
    pos = torch.arange(args.seq).repeat(args.batch, 1)
    pos[:, args.seq // 3 :] -= args.seq // 3  # two documents a row
    x, y = tokens[:, :-1], tokens[:, 1:]
    import torchtitan.models.common.attention as attention

    original = attention.varlen_attn

    def varlen(*a, **k):  # the CPU stand-in for CPU tensors, TorchTitan's varlen_attn (mytorch's kernels) otherwise
        return T._cpu_varlen_attn(*a, **k) if a[0].device.type == "cpu" else original(*a, **k)

    attention.varlen_attn = varlen
    tokens_per_step = args.batch * args.seq
    for model, moe in (("llama3", False), ("qwen3-MoE", True)):
        ref = stepper(built("cpu", moe), "cpu", x, y, pos)
        for name, converter in (("plain", False), ("with mytorch's converter and loss", True)):
            loss = MytorchLinearCrossEntropyLoss.Config().build() if converter else None
            mine = stepper(built("mytorch", moe, converter), "mytorch", x, y, pos, loss)
            b.compare(
                f"{model} train step, {name} ({args.batch}x{args.seq} tokens)",
                mine,
                {"torch CPU": ref},
                work=tokens_per_step,
                unit="tokens/s",
            )
    b.finish()


if __name__ == "__main__":
    main()
