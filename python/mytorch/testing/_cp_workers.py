"""Rank bodies of test/test_context_parallel.py (issue 54): torch's context parallelism (ring attention,
torch.distributed.tensor.experimental.context_parallel) on mytorch, against one process's attention on the device
and an fp64 reference on the CPU, forward and backward, by the shared rule."""

from __future__ import annotations

import torch

from mytorch.testing._dist_workers import _init, _write


def _attention(q, k, v, causal, grad):
    import torch.nn.functional as F

    ts = [t.detach().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*ts, is_causal=causal)
    out.backward(grad.to(out.device, out.dtype))
    return [out.detach().cpu()] + [t.grad.cpu() for t in ts]


def context_parallel_worker(rank: int, world: int, out: str, port: int, causal: bool) -> None:
    dist = _init(rank, world, port, backend="mytorch")
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import (
        _cp_options,
        _RotateMethod,
        context_parallel_unshard,
    )

    import mytorch
    from mytorch.testing._compare import misalignment

    mesh = init_device_mesh("mytorch", (world,))
    # As torch's own CP tests: head-tail load balancing for causal attention only; both ways of rotating the keys.
    _cp_options.enable_load_balance = causal
    _cp_options.rotate_method = _RotateMethod.ALL_GATHER if causal else _RotateMethod.ALL_TO_ALL
    result = {}
    for dtype in (torch.float32, torch.bfloat16):
        g = torch.Generator().manual_seed(7)
        # 64 queries a rank: with causal load balancing each rank holds two chunks of 32, a multiple of the
        # memory-efficient kernel's logsumexp padding (as on CUDA).
        q, k, v, grad = (torch.randn(2, 4, 64 * world, 32, generator=g) for _ in range(4))
        gold = _attention(q.double(), k.double(), v.double(), causal, grad.double())
        single = _attention(*(t.to(dtype).to("mytorch") for t in (q, k, v)), causal, grad)
        cq, ck, cv, cg = (t.to(dtype).to("mytorch") for t in (q, k, v, grad))
        with context_parallel(mesh, buffers=[cq, ck, cv, cg], buffer_seq_dims=[2, 2, 2, 2]):
            for t in (cq, ck, cv):
                t.requires_grad_()
            try:
                with mytorch.audit() as report:
                    cp_out = F.scaled_dot_product_attention(cq, ck, cv, is_causal=causal)
                    cp_out.backward(cg)
                grads = [t.grad for t in (cq, ck, cv)]
            finally:  # the context restores the buffers by resizing them, which a leaf requiring grad refuses
                for t in (cq, ck, cv):
                    t.requires_grad_(False)
        full = [t.cpu() for t in context_parallel_unshard(mesh, [cp_out.detach(), *grads], [2, 2, 2, 2])]
        name = str(dtype).removeprefix("torch.")
        result[name] = {
            "problems": [
                misalignment(a, s, o, f"{name} {w}")
                for a, s, o, w in zip(full, single, gold, ["out", "dq", "dk", "dv"])
            ],
            "local_shape": list(cp_out.shape),
            "efficient": "aten::_scaled_dot_product_efficient_attention" in report.ops,
            "fallback": sorted(op for op, status in report.ops.items() if status != "native"),
        }
    _write(out, rank, result)
    dist.destroy_process_group()
