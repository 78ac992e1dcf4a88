"""Rank programs for the expert-parallel tests (test/test_ep.py) and benchmark (benchmarks/ep.py).

Every rank makes every rank's tokens and routing from the same seeds (deliberately unbalanced: a skewed expert
popularity, uneven token counts, masked slots), so each can build its own expected result on the CPU: the rows
its experts receive, grouped and padded, and its tokens' combined outputs and gradients. The bodies assert with
the shared tolerance rule; the parent test asserts on what they wrote.
"""

from __future__ import annotations

import os

from ._dist_workers import _init, _write

H, K = 48, 4  # hidden, top-k of the small cases


def routing(world: int, tokens: int, hidden: int, k: int, experts: int, dtype, seed: int = 0, masked: float = 0.1):
    """[(x, topk_idx, topk_weights)] of every rank, CPU tensors: token counts uneven across ranks, expert
    popularity skewed (the first experts take most tokens), a fraction of the slots masked (-1)."""
    import torch

    data = []
    popularity = torch.linspace(3.0, 0.2, experts) ** 2
    for s in range(world):
        g = torch.Generator().manual_seed(seed * 1000 + s)
        t = tokens + 3 * s
        x = torch.randn(t, hidden, generator=g).to(dtype)
        idx = torch.multinomial(popularity.expand(t, experts), k, replacement=False, generator=g)
        idx[torch.rand(t, k, generator=g) < masked] = -1
        w = torch.rand(t, k, generator=g)
        data.append((x, idx, w))
    return data


def kept_mask(idx, world: int, experts: int, capacity: int | None):
    """[t, world] bool: token t reaches rank r (a slot there, within the pair's capacity in token order)."""
    import torch

    L = experts // world
    reach = torch.zeros(idx.shape[0], world, dtype=torch.bool)
    for r in range(world):
        reach[:, r] = ((idx >= r * L) & (idx < (r + 1) * L)).any(1)
    if capacity is not None:
        reach &= (torch.cumsum(reach.long(), 0) - reach.long()) < capacity
    return reach


def expected_dispatch(data, me: int, world: int, experts: int, align: int, capacity=None):
    """(rows [R, H], local expert of each row (-1 padding), weight of each row, padded count per local expert)."""
    import torch

    L = experts // world
    rows, expert, weight, counts = [], [], [], []
    hidden, dtype = data[0][0].shape[1], data[0][0].dtype
    for e in range(L):
        g, n = me * L + e, 0
        for x, idx, w in data:
            hit = (idx == g) & kept_mask(idx, world, experts, capacity)[:, me : me + 1]
            tok = hit.any(1).nonzero().flatten()
            k = hit.long().argmax(1)[tok]
            rows.append(x[tok])
            weight.append(w[tok, k])
            n += len(tok)
        pad = (-n) % align
        rows.append(torch.zeros(pad, hidden, dtype=dtype))
        weight.append(torch.zeros(pad))
        expert += [e] * n + [-1] * pad
        counts.append(n + pad)
    return torch.cat(rows), torch.tensor(expert, dtype=torch.int64), torch.cat(weight), counts


def scale_of(experts: int):
    """The toy experts: expert g multiplies its rows by 1 + g / 64."""
    import torch

    return 1 + torch.arange(experts, dtype=torch.float64) / 64


def expected_combine(data, me: int, world: int, experts: int, capacity=None):
    """For y = expert scale * x rows, out = sum_k w y and loss = out.float().sum(), rank me's tokens: (out, grad x,
    grad w), each as (reference at x's dtype, rounding where the device rounds; float64 gold)."""
    import torch

    x, idx, w = data[me]
    dtype = x.dtype
    scale = scale_of(experts)
    L = experts // world
    keep = (idx >= 0) & kept_mask(idx, world, experts, capacity).gather(1, idx.clamp(min=0) // L)
    s = torch.where(keep, scale[idx.clamp(min=0)], 0.0)  # [T, K]
    x64 = x.double()
    y = (x.float().unsqueeze(1) * s.float().unsqueeze(2)).to(dtype)  # each expert's row at the dtype
    out = ((w.float().unsqueeze(2) * y.float()).sum(1).to(dtype), (w.double() * s).sum(1, keepdim=True) * x64)
    g_rows = (w.to(dtype).float() * s.float()).to(dtype).float()  # the rows' gradients, rounded as on the device
    gx = (g_rows.sum(1, keepdim=True).expand_as(x64).to(dtype), (w.double() * s).sum(1, keepdim=True).expand_as(x64))
    gw = ((y.float().sum(2) * keep).float(), torch.where(keep, s * x64.sum(1, keepdim=True), 0.0))
    return out, gx, gw


_SCALES: dict = {}


def _experts(recv_x, recv_idx, me: int, world: int, experts: int):
    import torch

    L = experts // world
    key = (me, world, experts, str(recv_x.device))
    if key not in _SCALES:  # uploaded once: the sync-free test's layer makes no host copy
        _SCALES[key] = scale_of(experts)[me * L : (me + 1) * L].to(torch.float32).to(recv_x.device)
    scale = _SCALES[key]
    s = torch.where(recv_idx >= 0, scale[recv_idx.clamp(min=0)], 0.0)
    return (recv_x.float() * s.unsqueeze(1)).to(recv_x.dtype)


def correctness_worker(rank, world, out, port, transport, mode, dtype_name, align, capacity, experts):
    """dispatch against the expected rows/experts/weights/counts; combine and both backward passes against the
    single-process formula; a second dispatch through the cached handle."""
    import torch

    from ..distributed import ep
    from ._compare import assert_aligned

    dist = _init(rank, world, port, timeout_s=60)
    dtype = getattr(torch, dtype_name)
    data = routing(world, 40, H, K, experts, dtype, seed=3)
    buf = ep.Buffer(dist.group.WORLD, max_tokens_per_rank=64, hidden=H, num_topk=K, dtype=dtype, transport=transport)
    assert buf.transport == transport
    x, idx, w = data[rank]
    xd = x.to("mytorch").requires_grad_()
    wd = w.to("mytorch").requires_grad_()
    recv_x, recv_idx, recv_w, h, ev = buf.dispatch(
        xd, idx.to("mytorch"), wd, experts, expert_alignment=align, mode=mode, capacity=capacity
    )
    ev.synchronize()
    rows, expert, weight, counts = expected_dispatch(data, rank, world, experts, align, capacity)
    used = sum(counts)
    assert h.offsets.cpu().tolist() == torch.cumsum(torch.tensor(counts), 0).tolist(), "offsets"
    assert h.num_recv_tokens_per_expert.cpu().tolist() == counts, "counts per expert"
    if mode == "exact":
        assert recv_x.shape[0] == used and h.num_recv_tokens_per_expert_list == counts
    assert torch.equal(recv_x[:used].detach().cpu(), rows), "dispatched rows"
    assert torch.equal(recv_idx[:used].cpu(), expert), "dispatched experts"
    assert torch.equal(recv_w[:used].detach().cpu(), weight), "dispatched weights"
    if mode == "capacity":
        assert bool((recv_idx[used:] == -1).all()) and bool((recv_x[used:] == 0).all()), "rows past the last group"
        dropped = (kept_mask(idx, world, experts, None) & ~kept_mask(idx, world, experts, capacity)).sum(0)
        assert h.num_dropped.cpu().tolist() == dropped.tolist(), "dropped tokens"
    y = _experts(recv_x, recv_idx, rank, world, experts)
    combined, _ = buf.combine(y, h)
    (ref, gold), gx, gw = expected_combine(data, rank, world, experts, capacity)
    assert_aligned(combined, ref, gold, what=f"combine {mode} {transport} {dtype_name}")
    combined.float().sum().backward()
    assert_aligned(xd.grad, *gx, what="dispatch backward: grad x")
    assert_aligned(wd.grad, *gw, what="dispatch backward: grad topk_weights")
    # the cached layout: same rows, no count exchange
    recv2, idx2, w2, h2, _ = buf.dispatch(x.to("mytorch") * 2, idx.to("mytorch"), w.to("mytorch"), handle=h)
    assert torch.equal(recv2[:used].cpu(), (rows * 2)) and torch.equal(idx2.cpu(), recv_idx.cpu())
    _write(out, rank, {"ok": True, "rows": used})
    dist.destroy_process_group()


def sync_free_worker(rank, world, out, port, transport):
    """capacity mode under set_sync_debug_mode("error"): dispatch, experts, combine and backward make no host
    synchronisation (after the first call, which agrees on the expert count)."""
    import torch

    from ..distributed import ep

    dist = _init(rank, world, port, timeout_s=60)
    experts = 4 * world
    data = routing(world, 24, H, K, experts, torch.float32, seed=5)
    buf = ep.Buffer(max_tokens_per_rank=32, hidden=H, num_topk=K, dtype=torch.float32, transport=transport)
    x, idx, w = (t.to("mytorch") for t in data[rank])
    x.requires_grad_()

    def layer():
        rx, ri, rw, h, _ = buf.dispatch(x, idx, w, experts, expert_alignment=4, mode="capacity", capacity=16)
        y = _experts(rx, ri, rank, world, experts)
        o, _ = buf.combine(y, h)
        o.sum().backward()
        return o

    first = layer().detach().clone()
    x.grad = None
    torch.mytorch.set_sync_debug_mode("error")
    try:
        second = layer().detach()
    finally:
        torch.mytorch.set_sync_debug_mode(0)
    grad = x.grad.clone()
    x.grad = None
    layer()
    assert torch.equal(first, second) and torch.equal(grad, x.grad), "the sync-free call gives the same results"
    _write(out, rank, {"ok": True})
    dist.destroy_process_group()


def bad_input_worker(rank, world, out, port, transport):
    """One rank's bad argument makes every rank raise the same error (exact mode), and the buffer still works."""
    import torch

    from ..distributed import ep

    dist = _init(rank, world, port, timeout_s=60)
    experts = 2 * world
    data = routing(world, 8, H, K, experts, torch.float32, seed=9)
    buf = ep.Buffer(max_tokens_per_rank=16, hidden=H, num_topk=K, dtype=torch.float32, transport=transport)
    x, idx, w = (t.to("mytorch") for t in data[rank])
    cases = {
        "id": lambda: (x, torch.full_like(idx, experts), w, experts),
        "shape": lambda: (x, idx, w[:, :2], experts),
        "tokens": lambda: (torch.cat([x, x, x]), torch.cat([idx, idx, idx]), torch.cat([w, w, w]), experts),
        "experts": lambda: (x, idx, w, experts * 2),
    }
    seen = {}
    for name, make in cases.items():
        args = make() if rank == world - 1 else (x, idx, w, experts)
        try:
            buf.dispatch(*args)
            seen[name] = "no error"
        except ValueError as e:
            seen[name] = str(e)
    # afterwards a good call works on every rank
    rx, ri, rw, h, _ = buf.dispatch(x, idx, w, experts)
    o, _ = buf.combine(_experts(rx, ri, rank, world, experts), h)
    (ref, gold), _, _ = expected_combine(data, rank, world, experts)
    from ._compare import assert_aligned

    assert_aligned(o, ref, gold, what="after the errors")
    _write(out, rank, {"seen": seen})
    dist.destroy_process_group()


def dead_rank_worker(rank, world, out, port, transport):
    """The last rank exits before dispatching: the others raise within the group's timeout."""
    import time

    import torch

    from ..distributed import ep

    _init(rank, world, port, timeout_s=5)
    experts = 2 * world
    buf = ep.Buffer(max_tokens_per_rank=16, hidden=H, num_topk=K, dtype=torch.float32, transport=transport)
    if rank == world - 1:
        os._exit(0)
    x, idx, w = (t.to("mytorch") for t in routing(world, 8, H, K, experts, torch.float32)[rank])
    start = time.monotonic()
    try:
        buf.dispatch(x, idx, w, experts)
        err = "no error"
    except Exception as e:  # noqa: BLE001  (whatever the transport raises)
        err = f"{type(e).__name__}: {e}"
    _write(out, rank, {"error": err, "seconds": time.monotonic() - start})
    os._exit(0)
