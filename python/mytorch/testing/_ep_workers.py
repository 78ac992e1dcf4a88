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
    # capacity mode reads nothing to the host: a bad id is dropped and counted, never written anywhere
    bad = idx.clone()
    bad[0, 0], bad[1, 1] = experts + 3, -7
    rx, ri, rw, h, _ = buf.dispatch(x, bad, w, experts, mode="capacity")
    seen["capacity invalid"] = int(h.num_invalid)
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


# ---- a DeepSeek-V3-shaped MoE layer, scaled to this machine ----------------------------------------------------------
DSV3 = dict(hidden=512, experts=64, top_k=8, inter=64, shared_inter=128, n_group=8, topk_group=4, scaling=2.5)


def dsv3_params(seed: int = 11):
    """The layer's weights (CPU float32): router, expert bias, every routed expert, the shared expert."""
    import torch

    c = DSV3
    g = torch.Generator().manual_seed(seed)
    H, E, inter, S = c["hidden"], c["experts"], c["inter"], c["shared_inter"]
    return {
        "router": torch.randn(E, H, generator=g) / H**0.5,
        "bias": torch.randn(E, generator=g) * 0.1,
        "gate_up": torch.randn(E, H, 2 * inter, generator=g) / H**0.5,
        "down": torch.randn(E, inter, H, generator=g) / inter**0.5,
        "shared_gate_up": torch.randn(H, 2 * S, generator=g) / H**0.5,
        "shared_down": torch.randn(S, H, generator=g) / S**0.5,
    }


def _swiglu(a):
    import torch

    gate, up = a.chunk(2, -1)
    return torch.nn.functional.silu(gate) * up


def dsv3_reference(p, x, ids, dtype):
    """The single-process layer in plain torch ops on the CPU at `dtype` (every expert on one device), given the
    routing ids (the selection is discrete: the test shares it so that a last-bit difference in the router's
    scores cannot pick another expert): (out, the parameters' leaves)."""
    import torch

    from ..ops.moe import _topk_reference

    c = DSV3
    q = {k: v.detach().to(dtype).clone().requires_grad_(k != "bias") for k, v in p.items()}
    xr = x.detach().to(dtype).clone().requires_grad_()
    logits = xr @ q["router"].T
    scores = torch.sigmoid(logits.float()).to(dtype)
    w = scores.gather(1, ids)
    w = w / (w.sum(-1, keepdim=True) + 1e-20) * c["scaling"]
    assert (
        torch.equal(
            _topk_reference(
                logits.detach().double(),
                c["top_k"],
                "sigmoid",
                True,
                q["bias"].double(),
                c["n_group"],
                c["topk_group"],
                2,
                c["scaling"],
            )[1]
            .sort(1)
            .values,
            ids.sort(1).values,
        )
        or dtype != torch.float64
    ), "the shared routing is the router's choice"
    routed = torch.zeros_like(xr)
    for e in range(c["experts"]):
        hit = ids == e
        tok = hit.any(1).nonzero().flatten()
        if len(tok) == 0:
            continue
        we = (w * hit).sum(1)[tok].unsqueeze(1)
        h = _swiglu(xr[tok] @ q["gate_up"][e]) @ q["down"][e]
        routed = routed.index_add(0, tok, we * h)
    shared = _swiglu(xr @ q["shared_gate_up"]) @ q["shared_down"]
    return routed + shared, xr, q


def dsv3_worker(rank, world, out, port, tokens, transport, mode):
    """The layer with its 64 experts spread over the ranks (mytorch.distributed.ep.moe_experts), each rank's own
    tokens, against the single-process layer: outputs, input gradients, this rank's experts' gradients, and the
    replicated weights' gradients summed over the ranks."""
    import torch

    from ..distributed import ep
    from ..ops.glu import swiglu
    from ..ops.moe import moe_topk
    from ._compare import assert_aligned

    dist = _init(rank, world, port, timeout_s=120)
    c = DSV3
    p = dsv3_params()
    E, L = c["experts"], c["experts"] // world
    xs = [
        torch.randn(tokens + 5 * s, c["hidden"], generator=torch.Generator().manual_seed(100 + s)) for s in range(world)
    ]
    dev = {k: v.to("mytorch").requires_grad_(k != "bias") for k, v in p.items()}
    local_gu = dev["gate_up"].detach()[rank * L : (rank + 1) * L].clone().requires_grad_()
    local_dn = dev["down"].detach()[rank * L : (rank + 1) * L].clone().requires_grad_()
    buf = ep.Buffer(
        max_tokens_per_rank=tokens + 5 * world,
        hidden=c["hidden"],
        num_topk=c["top_k"],
        dtype=torch.float32,
        transport=transport,
    )
    x = xs[rank].to("mytorch").requires_grad_()
    logits = x @ dev["router"].T
    w, ids = moe_topk(
        logits,
        c["top_k"],
        score="sigmoid",
        expert_bias=dev["bias"],
        n_group=c["n_group"],
        topk_group=c["topk_group"],
        scaling=c["scaling"],
    )
    routed = ep.moe_experts(buf, x, ids, w, E, local_gu, local_dn, expert_alignment=4, mode=mode)
    shared = swiglu(x @ dev["shared_gate_up"]) @ dev["shared_down"]
    y = routed + shared
    gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(200 + rank))
    y.backward(gy.to("mytorch"))
    # every rank's routing ids, for the reference
    n_max = tokens + 5 * (world - 1)
    pad = torch.full((n_max, c["top_k"]), -1, dtype=torch.int64, device="mytorch")
    pad[: ids.shape[0]] = ids
    every = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(every, pad)
    all_ids = torch.cat([e.cpu()[: tokens + 5 * s] for s, e in enumerate(every)])
    all_x = torch.cat(xs)
    all_gy = torch.cat(
        [
            torch.randn(tokens + 5 * s, c["hidden"], generator=torch.Generator().manual_seed(200 + s))
            for s in range(world)
        ]
    )
    first = sum(tokens + 5 * s for s in range(rank))
    mine = slice(first, first + tokens + 5 * rank)
    refs = {}
    for dt in (torch.float32, torch.float64):
        o, xr, q = dsv3_reference(p, all_x, all_ids, dt)
        o.backward(all_gy.to(dt))
        refs[dt] = (o.detach(), xr.grad, q)
    (o32, gx32, q32), (o64, gx64, q64) = refs[torch.float32], refs[torch.float64]
    assert_aligned(y, o32[mine], o64[mine], what=f"DeepSeek-V3 layer output, rank {rank}")
    assert_aligned(x.grad, gx32[mine], gx64[mine], what="input gradient")
    # the experts' gradients gathered into the whole parameter's, compared as the single-process model's parameter
    # (the rule's scale is the reference's own error over the tensor compared: a rank's slice alone would hold the
    # gradient to a bound the one-process layer's own gradient is not held to)
    for name, local in (("gate_up", local_gu), ("down", local_dn)):
        parts = [torch.empty_like(local.grad) for _ in range(world)]
        dist.all_gather(parts, local.grad.contiguous())
        assert_aligned(torch.cat(parts), q32[name].grad, q64[name].grad, what=f"experts' {name} gradient")
    for name in ("router", "shared_gate_up", "shared_down"):
        g = dev[name].grad.clone()
        dist.all_reduce(g)
        assert_aligned(g, q32[name].grad, q64[name].grad, what=f"{name} gradient summed over the ranks")
    _write(out, rank, {"ok": True})
    dist.destroy_process_group()


# ---- the benchmark (benchmarks/ep.py) ------------------------------------------------------------------------------
def _stock(x, idx, w, experts, group):
    """The stock path a new user writes (TorchTitan's all-to-all token dispatcher): rows permuted by expert
    (moe_permute), the counts exchanged and read to the host, all_to_all_single of one row per (token, expert),
    the received rows regrouped by local expert; combine the way back and moe_unpermute."""
    import torch
    import torch.distributed as dist

    from ..ops.moe import moe_permute, moe_unpermute

    world = dist.get_world_size(group)
    L = experts // world
    rows, offsets, pos = moe_permute(x, idx, experts)
    counts = torch.diff(offsets, prepend=offsets.new_zeros(1)).long()
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    host = torch.cat([counts, recv_counts]).cpu()  # the host synchronisation split sizes need
    send = host[:experts].view(world, L).sum(1).tolist()
    recv_e = host[experts:]
    recv = recv_e.view(world, L).sum(1).tolist()
    got = rows.new_empty(sum(recv), rows.shape[1])
    dist.all_to_all_single(got, rows, recv, send, group=group)
    local = torch.arange(L, device=x.device).repeat(world).repeat_interleave(recv_e.to(x.device), output_size=sum(recv))
    perm = torch.sort(local, stable=True).indices
    grouped = got.index_select(0, perm)
    unperm = torch.empty_like(perm).scatter_(0, perm, torch.arange(perm.numel(), device=perm.device))

    def combine(y):
        back = y.index_select(0, unperm)  # (a gather: the sim's index_copy_ is far slower, issue 55)
        home = rows.new_empty(rows.shape)
        dist.all_to_all_single(home, back, send, recv, group=group)
        return moe_unpermute(home, pos, w)

    return grouped, combine, sum(send) * rows.shape[1] * rows.element_size()


def bench_worker(rank, world, out, port, tokens, hidden, experts, k, repeats):
    """Correctness against the stock path first (the combined output of dispatch -> identity experts -> combine),
    then the times of dispatch, combine and both, mytorch (exact and capacity mode) against the stock path in the
    same processes, the bytes each moves, and the host synchronisations each makes per layer."""
    import warnings

    import torch
    import torch.distributed as dist

    from ..distributed import ep
    from ._compare import assert_aligned
    from .bench import measure

    _init(rank, world, port, timeout_s=300)
    # as torchrun does for several processes a node (OMP_NUM_THREADS=1): the ranks' thread pools share the cores
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    group = dist.group.WORLD
    x, idx, w = routing(world, tokens, hidden, k, experts, torch.bfloat16, seed=21, masked=0.0)[rank]
    x, idx, w = x.to("mytorch"), idx.to("mytorch"), w.to("mytorch")
    buf = ep.Buffer(group, max_tokens_per_rank=tokens + 3 * world, hidden=hidden, num_topk=k, dtype=torch.bfloat16)
    sync = torch.mytorch.synchronize

    def ours(mode):
        rx, _, _, h, _ = buf.dispatch(x, idx, w, experts, mode=mode)
        return buf.combine(rx, h)[0]

    def stock():
        grouped, combine, _ = _stock(x, idx, w, experts, group)
        return combine(grouped)

    ref = stock()
    for mode in ("exact", "capacity"):
        assert_aligned(ours(mode), ref.cpu(), None, what=f"ep {mode} against the stock path")
    syncs = {}
    for label, fn in (("exact", lambda: ours("exact")), ("capacity", lambda: ours("capacity")), ("stock", stock)):
        torch.mytorch.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
        torch.mytorch.set_sync_debug_mode(0)
        syncs[label] = sum("synchronizing" in str(c.message) for c in caught)
    # the pieces: dispatch alone and combine alone (each repeats on a prepared layout)
    rx, _, _, h, _ = buf.dispatch(x, idx, w, experts)
    rxc, _, _, hc, _ = buf.dispatch(x, idx, w, experts, mode="capacity")
    grouped, stock_combine, stock_bytes = _stock(x, idx, w, experts, group)
    sent_rows = int(h.send_counts.sum())
    calls = {
        "exact": (lambda: ours("exact"), sync),
        "capacity": (lambda: ours("capacity"), sync),
        "stock": (stock, sync),
        "dispatch exact": (lambda: buf.dispatch(x, idx, w, experts), sync),
        "dispatch capacity": (lambda: buf.dispatch(x, idx, w, experts, mode="capacity"), sync),
        "dispatch stock": (lambda: _stock(x, idx, w, experts, group), sync),
        "combine exact": (lambda: buf.combine(rx, h), sync),
        "combine capacity": (lambda: buf.combine(rxc, hc), sync),
        "combine stock": (lambda: stock_combine(grouped), sync),
    }
    stats = measure(calls, repeats, warmup=2, inner=1)
    if rank == 0:
        _write(
            out,
            rank,
            {
                "times": {label: {"wall": s.wall, "cpu": s.cpu} for label, s in stats.items()},
                "syncs": syncs,
                "bytes": {"mytorch": sent_rows * (buf._widths["x"] + buf._widths["m"]), "stock": stock_bytes},
            },
        )
    dist.destroy_process_group()


# ---- transformers models trained with their experts spread over the ranks ----------------------------------------
def tiny_moe(family: str):
    """(model class, config) of a small Qwen3-MoE or DeepSeek-V3 (8 routed experts, top-2, 2 layers)."""
    import transformers

    if family == "qwen3_moe":
        cfg = transformers.Qwen3MoeConfig(
            vocab_size=128,
            hidden_size=64,
            intermediate_size=128,
            moe_intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_experts=8,
            num_experts_per_tok=2,
        )
        return transformers.Qwen3MoeForCausalLM, cfg
    cfg = transformers.DeepseekV3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        n_shared_experts=1,
        first_k_dense_replace=0,
        q_lora_rank=None,
        kv_lora_rank=32,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=16,
        routed_scaling_factor=2.5,
    )
    return transformers.DeepseekV3ForCausalLM, cfg


def hf_train_worker(rank, world, out, port, family, steps, sync_replicated=True):
    """The same model from the same seed trained `steps` AdamW steps two ways: in one process on the whole batch
    (rank 0: the reference) and with mytorch.optimize(model, ep_group=...) on each rank's share of the batch,
    the replicated parameters' gradients summed over the ranks and every rank's loss scaled by 1 / world (data
    parallelism across the expert-parallel group). The losses agree within the shared rule. sync_replicated=False
    is the negative control: the replicated parameters' gradients left per rank (each rank then steps on half
    the batch's gradient)."""
    import torch

    import mytorch

    from ._compare import misalignment

    dist = _init(rank, world, port, timeout_s=120)
    cls, cfg = tiny_moe(family)
    batch, seq = 2, 12
    # two batches in turn: the model learns them, so the losses fall
    data = [
        torch.randint(0, cfg.vocab_size, (world * batch, seq), generator=torch.Generator().manual_seed(50 + s % 2))
        for s in range(steps)
    ]

    def fresh(ep_group):
        torch.manual_seed(0)
        m = cls(cfg).to("mytorch")
        mytorch.optimize(m, verbose=False, ep_group=ep_group, ep_max_tokens=batch * seq * world)
        return m, torch.optim.AdamW(m.parameters(), lr=3e-3)

    def train(model, opt, rows, scale=1.0, after_backward=lambda: None):
        """The steps on each batch's `rows`; the losses (each scaled by `scale` before backward)."""
        out = []
        for ids in data:
            ids = ids[rows].to("mytorch")
            loss = model(ids, labels=ids).loss * scale
            loss.backward()
            after_backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.detach())
        return out

    ref = [float(v) for v in train(*fresh(None), slice(None))] if rank == 0 else []
    model, opt = fresh(dist.group.WORLD)
    experts = {id(p) for m in model.modules() if hasattr(m, "_mytorch_ep_buffer") for p in m.parameters(False)}
    assert experts, "no experts module was sharded"

    def sum_replicated():
        for p in model.parameters():
            if id(p) not in experts and sync_replicated:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad)

    losses = []
    for loss in train(model, opt, slice(rank * batch, (rank + 1) * batch), 1 / world, sum_replicated):
        dist.all_reduce(loss)
        losses.append(float(loss))
    problem = None
    if rank == 0:
        problem = misalignment(torch.tensor(losses), torch.tensor(ref), None, f"{family} losses, EP={world}") or None
    _write(out, rank, {"losses": losses, "reference": ref, "problem": problem})
    dist.destroy_process_group()


def fp8_worker(rank, world, out, port, transport):
    """FP8 dispatch (DeepEP's (x_fp8, scales) input): the received bytes and scales are the expected rows of the
    quantized tokens, exactly; a bfloat16 dispatch of the same tokens on the same buffer after it is still exact
    (the FP8 rows share the x plane's memory)."""
    import torch

    from ..distributed import ep

    dist = _init(rank, world, port, timeout_s=60)
    experts = 4 * world
    data = routing(world, 40, 256, K, experts, torch.bfloat16, seed=13)
    q = [ep.quantize_fp8(x) for x, _, _ in data]
    buf = ep.Buffer(max_tokens_per_rank=64, hidden=256, num_topk=K, dtype=torch.bfloat16, transport=transport)
    x, idx, w = data[rank]
    (r8, rs), ri, rw, h, _ = buf.dispatch(
        (q[rank][0].to("mytorch"), q[rank][1].to("mytorch")),
        idx.to("mytorch"),
        w.to("mytorch"),
        experts,
        expert_alignment=4,
    )
    as_bytes = [(qx.view(torch.uint8), i, ww) for (qx, _), (_, i, ww) in zip(q, data)]
    rows, expert, weight, counts = expected_dispatch(as_bytes, rank, world, experts, 4)
    scales, _, _, _ = expected_dispatch([(s, i, ww) for (_, s), (_, i, ww) in zip(q, data)], rank, world, experts, 4)
    assert torch.equal(r8.cpu().view(torch.uint8), rows), "FP8 rows"
    assert torch.equal(rs.cpu(), scales) and torch.equal(ri.cpu(), expert), "FP8 scales and experts"
    back = ep.dequantize_fp8(r8, rs).cpu()
    assert torch.equal(back, ep.dequantize_fp8(rows.view(torch.float8_e4m3fn), scales)), "dequantized on the device"
    ref = ep.dequantize_fp8(*ep.quantize_fp8(x))
    assert (ref.float() - x.float()).abs().max() <= x.float().abs().max() / 16, "e4m3 keeps 3 mantissa bits"
    bf, _, _, _, _ = buf.dispatch(x.to("mytorch"), idx.to("mytorch"), w.to("mytorch"), experts, expert_alignment=4)
    want, _, _, _ = expected_dispatch(data, rank, world, experts, 4)
    assert torch.equal(bf.cpu(), want), "a bfloat16 dispatch after the FP8 one"
    _write(out, rank, {"ok": True, "rows": int(sum(counts))})
    dist.destroy_process_group()


def overlap_worker(rank, world, out, port):
    """Two micro-batches: the second one's dispatch runs (dispatch_async) while the first one's experts compute.
    The profiler's timeline has the dispatch (on the communication thread) inside the experts' time (on the
    caller's), the first one's combine, called before the dispatch is waited for, runs after it, and the results
    equal the sequential run's."""
    import torch

    from ..distributed import ep

    dist = _init(rank, world, port, timeout_s=60)
    torch.set_num_threads(1)
    experts, hidden = 4 * world, 256
    buf = ep.Buffer(max_tokens_per_rank=128, hidden=hidden, num_topk=K, dtype=torch.float32)
    mbs = [
        tuple(t.to("mytorch") for t in routing(world, 96, hidden, K, experts, torch.float32, seed=s)[rank])
        for s in (31, 32)
    ]
    g = torch.Generator().manual_seed(3)
    w1 = torch.randn(experts // world, hidden, 4 * hidden, generator=g).to("mytorch") / 16

    def compute(rx, h):
        return torch._grouped_mm(
            torch.relu(torch._grouped_mm(rx, w1, offs=h.offsets)), w1.transpose(1, 2), offs=h.offsets
        )

    want = []
    for x, idx, w in mbs:
        rx, _, _, h, _ = buf.dispatch(x, idx, w, experts)
        want.append(buf.combine(compute(rx, h), h)[0])
    from torch._C._profiler import _ExperimentalConfig

    with torch.profiler.profile(experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
        rx1, _, _, h1, _ = buf.dispatch(*mbs[0], experts)
        work = buf.dispatch_async(*mbs[1], experts)
        with torch.profiler.record_function("experts of micro-batch 1"):
            # several passes (the same result): one took about 3 ms once the sim's transposing copies were tiled,
            # less than the communication thread can take to start on a loaded 2-core machine
            for _ in range(8):
                y1 = compute(rx1, h1)
        got = [buf.combine(y1, h1)[0]]  # made while the dispatch is in flight: queued behind it, on every rank
        rx2, _, _, h2, _ = work.wait()
        got.append(buf.combine(compute(rx2, h2), h2)[0])
    assert all(torch.equal(a, b) for a, b in zip(got, want)), "overlapped results equal the sequential ones"
    spans = {}
    for e in prof.events():
        if e.name in ("mytorch.ep.dispatch", "experts of micro-batch 1") and e.name not in spans:
            spans[e.name] = (e.time_range.start, e.time_range.end, e.thread)
    d, c = spans["mytorch.ep.dispatch"], spans["experts of micro-batch 1"]
    overlap = min(d[1], c[1]) - max(d[0], c[0])
    _write(
        out,
        rank,
        {"overlap_us": overlap, "dispatch_us": d[1] - d[0], "experts_us": c[1] - c[0], "threads": [d[2], c[2]]},
    )
    dist.destroy_process_group()


def compile_worker(rank, world, out, port, transport):
    """Capacity mode as custom operators inside torch.compile(fullgraph=True): dispatch, the experts, combine and
    the backward give the eager results, and the compiled step makes no host synchronisation."""
    import torch

    from ..distributed import ep

    dist = _init(rank, world, port, timeout_s=120)
    experts = 4 * world
    buf = ep.Buffer(max_tokens_per_rank=64, hidden=H, num_topk=K, dtype=torch.float32, transport=transport)
    x, idx, w = (t.to("mytorch") for t in routing(world, 40, H, K, experts, torch.float32, seed=17)[rank])
    scale = torch.linspace(0.5, 1.5, H, device="mytorch")

    def layer(x, idx, w):
        rx, ri, rw, lay = ep.dispatch_capacity(buf, x, idx, w, experts, expert_alignment=4, capacity=24)
        y = torch.nn.functional.silu(rx * scale) * (ri >= 0).unsqueeze(1)
        return ep.combine_capacity(buf, y, rw, lay)

    results = []
    for fn in (layer, torch.compile(layer, fullgraph=True)):
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        o = fn(xg, idx, wg)
        o.square().sum().backward()
        results.append((o.detach(), xg.grad, wg.grad))
    for a, b, what in zip(results[0], results[1], ("output", "grad x", "grad topk_weights")):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"compiled {what}"  # the same kernels, fused differently
    compiled = torch.compile(layer, fullgraph=True)
    compiled(x, idx, w)
    torch.mytorch.set_sync_debug_mode("error")
    try:
        compiled(x, idx, w)
    finally:
        torch.mytorch.set_sync_debug_mode(0)
    _write(out, rank, {"ok": True})
    dist.destroy_process_group()
