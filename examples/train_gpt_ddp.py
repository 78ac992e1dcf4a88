"""The main job's GPT trained data-parallel on mytorch devices with stock DistributedDataParallel.

Launch with torchrun; every rank trains on its slice of each batch through the ``mytorch`` c10d backend
(NCCL on GPUs, Gloo over device memory on sim). Rank 0 then trains the same model in one process on the
whole batches and checks that the two loss curves agree.

    torchrun --nproc-per-node 2 examples/train_gpt_ddp.py --steps 50
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import mytorch  # noqa: F401  (the device and the "mytorch" backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt import GPT, batches, load_corpus  # noqa: E402


def run(model, args, data, rank: int, world: int, ddp: bool):
    model = model.to("mytorch")
    wrapped = DDP(model) if ddp else model
    # SGD, not Adam: see python/mytorch/testing/_dist_workers.py (_optimizer) for why parity needs it.
    opt = torch.optim.SGD(wrapped.parameters(), lr=args.lr, momentum=0.9)
    losses, tokens, start = [], 0, time.perf_counter()
    for x, y in batches(data, args.steps, args.batch, args.block, args.seed):
        if ddp:
            per = args.batch // world
            x, y = x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]
        x, y = x.to("mytorch"), y.to("mytorch")
        loss = wrapped(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if ddp:  # the global batch's loss: the mean of the ranks' means
            loss = loss.detach().clone()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        losses.append(loss.item())
        tokens += x.numel() * (world if ddp else 1)
    return losses, tokens / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=16, help="global batch, split across the ranks")
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args(argv)

    dist.init_process_group("mytorch")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must divide by the world size {world}")
    torch.mytorch.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.mytorch.device_count())
    data = load_corpus(1 << 20)
    torch.manual_seed(args.seed)
    model = GPT(block_size=args.block, n_layer=2, n_head=4, n_embd=128)
    ddp_losses, ddp_tok_s = run(copy.deepcopy(model), args, data, rank, world, ddp=True)
    status = 0
    if rank == 0:
        print(
            f"DDP on {world} ranks ({torch.mytorch.runtime()} runtime): final loss {ddp_losses[-1]:.4f}, "
            f"{ddp_tok_s:.0f} tokens/s"
        )
        one_losses, one_tok_s = run(copy.deepcopy(model), args, data, 0, 1, ddp=False)
        rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ddp_losses, one_losses))
        print(f"one process, whole batches: final loss {one_losses[-1]:.4f}, {one_tok_s:.0f} tokens/s")
        print(
            f"loss agreement over {args.steps} steps: max relative difference {rel:.3e} (tolerance {args.tolerance:g})"
        )
        status = 0 if rel <= args.tolerance else 1
        print("OK: data-parallel and single-process training agree" if status == 0 else "FAILED: the curves disagree")
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
