"""Rank bodies of test/test_graphs.py's DTensor random check (issue 53): sharded random DTensors against the
replicated one and the single-device draw, from the same seed (Note [Philox layout])."""

from __future__ import annotations

import torch

from mytorch.testing._dist_workers import _init, _write


def dtensor_random_worker(rank: int, world: int, out: str, port: int) -> None:
    dist = _init(rank, world, port, backend="mytorch")
    import mytorch  # noqa: F401
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, rand, randn

    mesh = init_device_mesh("mytorch", (world,))
    result = {}
    for name, fn in (("randn", randn), ("rand", rand)):
        torch.manual_seed(1234)
        single = (torch.rand if name == "rand" else torch.randn)(8, 6, device="mytorch").cpu()
        torch.manual_seed(1234)
        replicated = fn(8, 6, device_mesh=mesh, placements=[Replicate()]).full_tensor().cpu()
        torch.manual_seed(1234)
        sharded = fn(8, 6, device_mesh=mesh, placements=[Shard(0)]).full_tensor().cpu()
        after_sharded = torch.rand(3, device="mytorch").cpu()
        torch.manual_seed(1234)
        fn(8, 6, device_mesh=mesh, placements=[Replicate()])
        after_replicated = torch.rand(3, device="mytorch").cpu()
        result[name] = {
            "replicated_is_single": torch.equal(replicated, single),
            "sharded_is_replicated": torch.equal(sharded, replicated),
            "max_difference": (sharded - replicated).abs().max().item(),
            "same_state_after": torch.equal(after_sharded, after_replicated),
        }
    _write(out, rank, result)
    dist.destroy_process_group()
