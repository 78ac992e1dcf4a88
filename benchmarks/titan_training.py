"""TorchTitan's llama3 debug model (6 layers, dim 256, 16 heads, vocab 2048; varlen attention over packed documents)
training steps (forward, backward, AdamW) in one process, mytorch against torch's CPU backend, with and without
mytorch's TorchTitan converter (mytorch.torchtitan), issue 54. The CPU lacks the varlen flash operator TorchTitan's
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


def stepper(model, device, tokens, labels, pos):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens, labels, pos = tokens.to(device), labels.to(device), pos.to(device)
    masks = model.get_attention_masks(positions=pos)

    def step():
        loss = F.cross_entropy(model(tokens, positions=pos, attention_masks=masks).flatten(0, 1), labels.flatten())
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
    b = Bench("torchtitan", args, "TorchTitan llama3 debug model training steps; ratio = torch CPU / mytorch")
    state = T.initial_weights()

    def built(device, converter=False):
        m = T._model(converter)
        m.to_empty(device=device)
        m.init_weights(buffer_device=torch.device(device))
        m.load_state_dict({k: v.to(device) for k, v in state.items()})
        return m

    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, T.VOCAB, (args.batch, args.seq + 1), generator=g)
    pos = torch.arange(args.seq).repeat(args.batch, 1)
    pos[:, args.seq // 3 :] -= args.seq // 3  # two documents a row
    x, y = tokens[:, :-1], tokens[:, 1:]
    cpu = built("cpu")
    import torchtitan.models.common.attention as attention

    original = attention.varlen_attn

    def varlen(*a, **k):  # the CPU stand-in for CPU tensors, TorchTitan's varlen_attn (mytorch's kernels) otherwise
        return T._cpu_varlen_attn(*a, **k) if a[0].device.type == "cpu" else original(*a, **k)

    attention.varlen_attn = varlen
    ref = stepper(cpu, "cpu", x, y, pos)
    tokens_per_step = args.batch * args.seq
    for name, converter in (("plain", False), ("with mytorch's converter", True)):
        mine = stepper(built("mytorch", converter), "mytorch", x, y, pos)
        b.compare(
            f"train step, {name} ({args.batch}x{args.seq} tokens)",
            mine,
            {"torch CPU": ref},
            work=tokens_per_step,
            unit="tokens/s",
        )
    b.finish()


if __name__ == "__main__":
    main()
